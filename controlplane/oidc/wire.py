"""HTTP details of the OAuth endpoints: parameters, client credentials in the
Authorization header, bearer tokens, and the RFC 6749 error responses.

``oauth_error_handler`` is the Falcon error handler for ``OAuthError`` (registered in
``controlplane/app.py``; Falcon picks it over the envelope's handler because it is the
more specific type).  It answers ``{"error", "error_description"}`` with
``Cache-Control: no-store`` (RFC 6749 5.1-5.2), a 302 to the client with ``error`` and
``state`` when the error carries a safe redirect URI (4.1.2.1), and
``WWW-Authenticate: Bearer`` on 401 ``invalid_token`` (RFC 6750 3), and ``Retry-After`` on
503 ``temporarily_unavailable``.  ``OAUTH_PATHS`` is where these bodies replace the envelope.
"""
from __future__ import annotations

import base64
import binascii
from urllib.parse import parse_qsl, unquote_plus, urlencode

import falcon

from controlplane.oidc.errors import InvalidRequest, InvalidToken, OAuthError, UnauthenticatedClient
from shared.http import MAX_BODY_BYTES, bearer_token, dumps, error_headers, no_store, read_json, status_of

OAUTH_PATHS = "/oidc/"  # the OAuth endpoints' prefix: errors there are RFC 6749 bodies
FORM = falcon.MEDIA_URLENCODED
# The token, revocation and introspection endpoints take RFC 6749's form encoding (and
# JSON); userinfo's POST may come without any body.
FORM_OR_JSON = (FORM, falcon.MEDIA_JSON)
FORM_JSON_OR_EMPTY = (FORM, falcon.MEDIA_JSON, "")


def add_params(uri: str, params: dict) -> str:
    """``uri`` with ``params`` added to its query (RFC 6749 4.1.2: retaining any query);
    ``uri`` itself when every value is None (no empty ``?``)."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    if not query:
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}{query}"


def answer_client(resp, pages, redirect_uri: str, params: dict, response_mode: str) -> None:
    """The authorization response on the client's redirect URI (RFC 6749 4.1.2 and
    4.1.2.1) in its response mode: ``query``, a 302 with ``params`` in the query; or
    ``form_post`` (OAuth 2.0 Form Post Response Mode 2), a page whose form, submitted by
    a script that runs only with the page's CSP nonce, posts ``params`` to the URI.
    ``oauth_error_handler`` answers the query mode's errors; the hosted flow's resources
    answer a form_post request's errors (``resources.hosted.form_post_errors``)."""
    if response_mode == "form_post":
        pages.render(resp, "oidc_form_post.html", app=None, form_action=[redirect_uri], redirect_uri=redirect_uri,
                     fields={k: v for k, v in params.items() if v is not None})
        return
    resp.status = falcon.HTTP_302
    resp.location = add_params(redirect_uri, params)


def query_params(req) -> dict:
    """The query string; a repeated parameter is kept as a list (callers refuse it)."""
    return dict(req.params)


def user_agent_params(req) -> dict:
    """The parameters of a request the user agent sends to the authorization or the
    end-session endpoint: the query of a GET, the form-encoded body of a POST (OIDC Core
    3.1.2.1, RP-Initiated Logout 1.0 section 2), read alike so that both methods get the
    same answers.  RFC 6749 3.1: a parameter sent without a value is omitted; a repeated
    one (a name sent more than once, whatever its values) is kept as the list of its
    values, for the endpoint to refuse as it refuses its other errors: on the redirect
    URI once that is known good, else with a page to a browser.  A body that cannot be
    read is ``InvalidRequest``."""
    if req.method == "POST":
        pairs = _form_pairs(req)
    else:
        pairs = [(name, value) for name, values in req.params.items()
                 for value in (values if isinstance(values, list) else [values])]
    values: dict[str, list[str]] = {}
    for name, value in pairs:
        values.setdefault(name, []).append(value)
    return {name: given if len(given) > 1 else given[0] for name, given in values.items() if given != [""]}


def body_params(req) -> dict:
    """A form-encoded or JSON body as {name: string}.  RFC 6749 3.1: a parameter must
    not be repeated, and a parameter sent without a value is omitted."""
    media = (req.content_type or "").split(";")[0].strip().lower()
    if media == falcon.MEDIA_JSON:
        body = read_json(req)
        if any(not isinstance(value, str) for value in body.values() if value is not None):
            raise InvalidRequest("Every parameter must be a string.")
        return {name: value for name, value in body.items() if value}
    pairs = _form_pairs(req) if media == FORM else []
    params = {}
    for name, value in pairs:
        if name in params:
            raise InvalidRequest(f"The parameter {name} must not be repeated.")
        params[name] = value
    return {name: value for name, value in params.items() if value}


def _form_pairs(req) -> list[tuple[str, str]]:
    """The (name, value) pairs of a form-encoded body, in order, blank values kept."""
    raw = req.bounded_stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidRequest("The request body is too large.")
    try:
        return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise InvalidRequest("The request body must be UTF-8.") from None


def basic_credentials(req) -> tuple[str, str] | None:
    """RFC 6749 2.3.1 client_secret_basic: ``Authorization: Basic`` of the
    form-urlencoded client_id and secret; None without such a header."""
    header = req.get_header("Authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise UnauthenticatedClient("The Basic credentials are malformed.") from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise UnauthenticatedClient("The Basic credentials are malformed.")
    return unquote_plus(client_id), unquote_plus(secret)


def bearer(req) -> str | None:
    """RFC 6750 2.1: the token of ``Authorization: Bearer``; None without the header."""
    return bearer_token(req.get_header("Authorization"), error=InvalidToken)


def oauth_error_handler(_req, resp, ex: OAuthError, _params) -> None:
    no_store(resp)
    resp.data = None
    if ex.redirect_uri is not None:
        resp.status = falcon.HTTP_302
        resp.location = add_params(ex.redirect_uri, ex.authorization_response())
        resp.text = None
        return
    resp.status = status_of(type(ex))
    resp.content_type = falcon.MEDIA_JSON
    resp.text = dumps({"error": ex.error, "error_description": ex.message})
    resp.set_headers(error_headers(ex))  # Retry-After of temporarily_unavailable
    if isinstance(ex, InvalidToken):
        challenge = 'Bearer realm="iamgate"'
        if not ex.missing:
            challenge += f', error="{ex.error}", error_description="{ex.message}"'
        resp.set_header("WWW-Authenticate", challenge)
    elif isinstance(ex, UnauthenticatedClient):
        resp.set_header("WWW-Authenticate", 'Basic realm="iamgate"')
