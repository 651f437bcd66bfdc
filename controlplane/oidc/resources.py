"""HTTP resources of the OIDC provider.

Client management (V1/oidc/clients, permission oidc:manage) answers in the spec's
envelope.  The protocol endpoints (/.well-known/*, /oidc/*) are public to the
authentication middleware and authenticate their callers themselves, as their RFCs
say (a user JWT at authorize, client credentials at token, revoke and introspect, the
OIDC access token at userinfo); their errors are RFC 6749 bodies (``wire``) and every
answer carries ``Cache-Control: no-store``.
"""
from __future__ import annotations

import falcon

from shared.errors import DomainError, PermissionMissing, Unauthorized, ValidationFailed
from shared.http import client_ip, no_store, status_of

from controlplane.applications.service import branding
from controlplane.auth import PUBLIC, permission
from controlplane.oidc import schemas, wire
from controlplane.oidc.clients import serialize_client
from controlplane.oidc.discovery import provider_metadata
from controlplane.lockout import AccountLocked
from controlplane.mfa.errors import MfaChallengeExpired, MfaCodeInvalid, MfaLocked
from controlplane.oidc.errors import (AccessDenied, AuthorizationRequestExpired, ClientNotFound, ConsentRequired,
                                      InvalidClient, InvalidGrant, InvalidRequest, InvalidScope, InvalidToken,
                                      LoginRequired, OAuthError, UnauthenticatedClient, UnsupportedGrantType,
                                      UnsupportedResponseType)
from controlplane.oidc.hosted import COOKIE_PREFIX, Step, session_cookie_name
from controlplane.pages import CSRF_COOKIE, CsrfTokenInvalid, MalformedForm, read_form
from controlplane.users.errors import AccountSuspended, InvalidCredentials, LoginsLimited
from controlplane.openapi import op
from controlplane.resource import ManagedCollection, ManagedItem, Resource

MANAGE = permission("oidc:manage")
_OBJECT = {"type": "object"}


# ---------------------------------------------------------------- client management (V1)


class Clients(ManagedCollection):
    access = {"GET": MANAGE, "POST": MANAGE}
    docs = {
        "GET": op("List the application's OIDC clients", response=schemas.CLIENT_LIST, errors=[PermissionMissing]),
        "POST": op("Register an OIDC client", body=schemas.CREATE_CLIENT, ok=201, response=schemas.CLIENT_WITH_SECRET,
                   description="client_secret is returned only here (sent with Cache-Control: no-store) and stored "
                               "hashed. Redirect URIs are absolute https URLs without fragment; http is allowed for "
                               "localhost and 127.0.0.1.",
                   errors=[ValidationFailed, PermissionMissing]),
    }

    create_schema = schemas.CREATE_CLIENT
    serialize = staticmethod(serialize_client)


class ClientItem(ManagedItem):
    access = {"GET": MANAGE, "PUT": MANAGE, "DELETE": MANAGE}
    _ref = "{clientId} is the client's id, or its client_id."
    docs = {
        "GET": op("Get an OIDC client (never its secret)", response=schemas.CLIENT, description=_ref,
                  errors=[PermissionMissing, ClientNotFound]),
        "PUT": op("Update an OIDC client", body=schemas.UPDATE_CLIENT, response=schemas.CLIENT,
                  description=f"{_ref} Lists given replace the stored ones; is_active false makes authorize answer "
                              "invalid_client.",
                  errors=[ValidationFailed, PermissionMissing, ClientNotFound]),
        "DELETE": op("Delete an OIDC client", ok=204,
                     description=f"{_ref} Access and ID tokens already issued stay valid until they expire.",
                     errors=[PermissionMissing, ClientNotFound]),
    }

    update_schema = schemas.UPDATE_CLIENT
    serialize = staticmethod(serialize_client)


# ---------------------------------------------------------------- discovery and keys


class Discovery(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("OpenID Provider metadata (OpenID Connect Discovery 1.0)", response=_OBJECT, wrapped=False,
                      store=False)}

    def __init__(self, issuer: str):
        self.metadata = provider_metadata(issuer)

    def on_get(self, req, resp):
        resp.media = self.metadata
        resp.cache_control = ["public", "max-age=300"]


JWKS_RESPONSE = {
    "type": "object",
    "properties": {"keys": {"type": "array", "items": {"type": "object", "properties": {
        k: {"type": "string"} for k in ("kty", "use", "alg", "kid", "n", "e")}}}},
}


class Jwks(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Public signing keys (JWKS) for access and ID tokens", response=JWKS_RESPONSE, wrapped=False)}

    def __init__(self, keys):
        self.keys = keys

    def on_get(self, req, resp):
        resp.media = self.keys.jwks()
        resp.cache_control = ["public", "max-age=300"]


# ---------------------------------------------------------------- the protocol endpoints

_AUTHORIZE_QUERY = {
    name: ({"type": "string"}, desc) for name, desc in {
        "response_type": "code", "client_id": "the client", "redirect_uri": "registered for the client",
        "scope": "space-separated, must include openid", "state": "passed back", "nonce": "put in the ID token",
        "code_challenge": "base64url SHA-256 of the verifier (43 to 128 characters)",
        "code_challenge_method": "S256", "prompt": "none, login or consent (hosted mode)",
    }.items()
}
AUTHORIZE_RESPONSE = {"type": "object", "properties": {
    "code": {"type": "string"}, "state": {"type": ["string", "null"]}, "redirect_uri": {"type": "string"},
    "branding": {"type": "object"}}}
TOKEN_RESPONSE = {"type": "object", "properties": {
    "access_token": {"type": "string"}, "token_type": {"type": "string"}, "expires_in": {"type": "integer"},
    "refresh_token": {"type": "string"}, "id_token": {"type": "string"}, "scope": {"type": "string"}}}


_HOSTED_DESCRIPTION = (
    "Without a bearer, when the application has oauth_hosted_login_enabled: the hosted browser flow (HTML). "
    "A login page (then the MFA step when the user has MFA, and a consent page the first time the user meets "
    "the client) or, with a live browser session (cookie iamgate_oidc_<applicationId>), a 302 to "
    "redirect_uri?code=...&state=... at once. prompt=login forces the login; prompt=none never shows a page and "
    "answers login_required or consent_required on the redirect URI. Without a bearer, errors found before the "
    "client and redirect_uri are validated are an HTML error page (400), never a redirect; later errors redirect "
    "with error and state (RFC 6749 4.1.2.1). Without a bearer and without hosted login: 401 invalid_token.")


_HTML = {"type": "string"}


class Authorize(Resource):
    """GET /oidc/authorize (RFC 6749 4.1.1).  With a bearer user JWT of the client's
    application: the spec's JSON answer, never a redirect (its errors are 400 bodies).
    Without one, when the application has ``oauth_hosted_login_enabled``: the hosted
    browser flow (``controlplane.oidc.hosted``)."""

    access = {"GET": PUBLIC}
    docs = {"GET": op(
        "Authorization endpoint (code flow with PKCE S256)",
        description="Bearer: a user access token of the client's application. The answer is JSON {code, state, "
                    "redirect_uri, branding}; the code lives 60 s. Consent for (user, client) is recorded on first "
                    "use (consent.granted). Errors are RFC 6749 bodies {error, error_description}. "
                    + _HOSTED_DESCRIPTION,
        query=_AUTHORIZE_QUERY, response=AUTHORIZE_RESPONSE, wrapped=False,
        errors=[InvalidRequest, InvalidClient, InvalidScope, UnsupportedResponseType, InvalidToken, LoginRequired,
                ConsentRequired],
        also={200: (_HTML, "Without a bearer, hosted login: the login, MFA or consent page", "text/html"),
              400: (_HTML, "Without a bearer: the error page of a request that must not redirect", "text/html")},
    )}

    def __init__(self, authorize, authenticator, hosted, pages, *, cookie_secure: bool):
        self.authorize = authorize
        self.authenticator = authenticator
        self.hosted = hosted
        self.pages = pages
        self.cookie_secure = cookie_secure

    def on_get(self, req, resp):
        no_store(resp)
        params = wire.query_params(req)
        browser = req.get_header("Authorization") is None
        try:
            request = self.authorize.validate(params)
        except OAuthError as exc:
            if exc.redirect_uri is None and browser:
                # RFC 6749 4.1.2.1: the client or its redirect URI is not known good; tell the user, never redirect.
                return error_page(self.pages, resp, exc, app=None)
            if not browser or not self._hosted(self.authorize.client(params.get("client_id"))):
                raise exc.not_redirected() from None
            raise
        try:
            app = self.authenticator.application(request.app_id)
        except DomainError:
            raise InvalidClient() from None
        if browser and app.get("oauth_hosted_login_enabled"):
            binding = self.pages.csrf_token(req, resp)
            step = self.hosted.begin(request, params, binding=binding,
                                     session_token=req.cookies.get(session_cookie_name(app["_id"])))
            return render_step(self, req, resp, step, app, binding)
        try:
            self._json_mode(req, resp, request, app)
        except OAuthError as exc:
            raise exc.not_redirected() from None

    def _hosted(self, client: dict | None) -> bool:
        if client is None:
            return False
        try:
            return bool(self.authenticator.application(client["app_id"]).get("oauth_hosted_login_enabled"))
        except DomainError:
            return False

    def _json_mode(self, req, resp, request, app):
        token = wire.bearer(req)
        if token is None:
            raise InvalidToken("A user access token of the application is required.", missing=True)
        try:
            principal = self.authenticator.user_token(token, request.app_id)
        except Unauthorized as exc:
            raise InvalidToken(exc.message) from None
        if self.authorize.needs_consent(request, principal.user_id):
            self.authorize.grant_consent(request, principal.user_id)
        code = self.authorize.issue_code(request.app_id, principal.user_id, request,
                                         auth_time=principal.claims["iat"], session_id=principal.session_id)
        resp.media = {"code": code, "state": request.state, "redirect_uri": request.redirect_uri,
                      "branding": branding(app)}


# ---------------------------------------------------------------- the hosted pages

_ACTIONS = {"login": "/oidc/authorize/login", "mfa": "/oidc/authorize/mfa", "consent": "/oidc/authorize/consent"}
_TEMPLATES = {"login": "oidc_login.html", "mfa": "oidc_mfa.html", "consent": "oidc_consent.html"}
_ERROR_TITLES = {
    400: "This sign-in link is not valid",
    403: "This form has expired",
    410: "This sign-in has expired",
    429: "Too many attempts",
}


def error_page(pages, resp, exc: DomainError, *, app: dict | None) -> None:
    """``oidc_error.html`` with the error's status: the hosted flow's answer when there
    is nowhere safe (or nothing left) to redirect to."""
    status = status_of(type(exc))
    error = exc.error if isinstance(exc, OAuthError) else exc.code
    pages.render(resp, "oidc_error.html", app=app, status=status,
                 error_title=_ERROR_TITLES.get(status, "Sign-in failed"), error_description=exc.message, error=error)


def render_step(resource, req, resp, step, app: dict, csrf: str, *, error: str | None = None,
                status: int = 200) -> None:
    """Answer a hosted-flow ``Step``: set the new browser-session cookie (ending the one
    it replaces), then render the step's page or redirect to the client with the code."""
    if step.session_token is not None:
        name = session_cookie_name(app["_id"])
        resource.hosted.end_browser_session(req.cookies.get(name))
        resp.set_cookie(name, step.session_token, path="/oidc", max_age=step.session_ttl,
                        secure=resource.cookie_secure, http_only=True, same_site="Lax")
    if step.redirect is not None:
        resp.status = falcon.HTTP_302
        resp.location = step.redirect
        return
    request = step.request
    context = {"action": _ACTIONS[step.page], "csrf_token": csrf, "request_handle": step.handle}
    if step.page == "consent":
        context.update(client_name=request.client.get("name") or request.client_id,
                       client_logo_url=request.client.get("logo_url"), scopes=list(request.scopes))
    else:
        context["error"] = error
    # The post may answer with a redirect to the client, and browsers hold it to form-action.
    resource.pages.render(resp, _TEMPLATES[step.page], app=app, status=status, form_action=[request.redirect_uri],
                          **context)


class _HostedPage(Resource):
    """A post of a hosted-login page: CSRF-checked, form-encoded, naming its pending
    authorization request by the opaque handle of the ``request`` field."""

    access = {"POST": PUBLIC}
    accepted_media_types = (wire.FORM,)
    stage = ""

    def __init__(self, hosted, pages, *, cookie_secure: bool, trusted_proxies=()):
        self.hosted = hosted
        self.pages = pages
        self.cookie_secure = cookie_secure
        self.trusted_proxies = trusted_proxies

    def on_post(self, req, resp):
        no_store(resp)
        form = read_form(req)
        try:
            self.pages.check_csrf(req, form.get("csrf_token"))
            binding = req.cookies[CSRF_COOKIE]
            pending = self.hosted.resume(form.get("request"), binding, self.stage)
        except OAuthError as exc:
            if exc.redirect_uri is None:
                return error_page(self.pages, resp, exc, app=None)
            raise
        except (CsrfTokenInvalid, AuthorizationRequestExpired) as exc:
            return error_page(self.pages, resp, exc, app=None)
        self.step(req, resp, form, pending, binding)

    def step(self, req, resp, form, pending, binding):
        raise NotImplementedError

    def again(self, req, resp, pending, binding, exc: DomainError | None = None) -> None:
        """This page once more: with why the post failed and its status, or 400 for a
        post that is not one of the page's answers."""
        render_step(self, req, resp, Step(pending.request, page=self.stage, handle=pending.handle), pending.app,
                    binding, error=exc.message if exc else None, status=status_of(type(exc)) if exc else 400)


_PAGE_ERRORS = [CsrfTokenInvalid, MalformedForm, AuthorizationRequestExpired]
# The hosted pages answer every outcome as HTML: the next page, or the page again with the
# error, or the error page.
def _page_answers(*statuses) -> dict:
    return {status: (_HTML, "an HTML page", "text/html") for status in (200, 400, 403, 410, 413, *statuses)}


class HostedLogin(_HostedPage):
    stage = "login"
    password_work = ("POST",)  # a bcrypt check: the per-IP password budget (IAMGATE_RATE_LIMIT_IP)
    docs = {"POST": op(
        "Hosted login page: sign in (form post)",
        description="HTML. Form fields email, password, csrf_token, request (the page's handle). The API login's "
                    "rate limit, password guard and lockout apply. Answers the MFA page, the consent page or a 302 "
                    "to the client with the code; wrong credentials show the login page again (401, 429 when "
                    "locked or throttled, 403 suspended).",
        errors=[*_PAGE_ERRORS, InvalidCredentials, AccountLocked, LoginsLimited, AccountSuspended],
        also=_page_answers(401, 429),
    )}

    def step(self, req, resp, form, pending, binding):
        device_info = {"ip": client_ip(req, self.trusted_proxies), "user_agent": (req.user_agent or "")[:512] or None}
        try:
            step = self.hosted.sign_in(pending, email=form.get("email", "").strip(), password=form.get("password", ""),
                                       device_info=device_info)
        except (InvalidCredentials, AccountLocked, LoginsLimited, AccountSuspended) as exc:
            return self.again(req, resp, pending, binding, exc)
        render_step(self, req, resp, step, pending.app, binding)


class HostedMfa(_HostedPage):
    stage = "mfa"
    docs = {"POST": op(
        "Hosted login page: the MFA code (form post)",
        description="HTML. Form fields code (TOTP or backup code), csrf_token, request. A wrong code shows the page "
                    "again (401); an expired or locked challenge shows the error page.",
        errors=[*_PAGE_ERRORS, MfaCodeInvalid, MfaChallengeExpired, MfaLocked, AccountSuspended],
        also=_page_answers(401, 429),
    )}

    def step(self, req, resp, form, pending, binding):
        try:
            step = self.hosted.verify_mfa(pending, code=form.get("code", "").strip())
        except MfaCodeInvalid as exc:
            return self.again(req, resp, pending, binding, exc)
        except (MfaChallengeExpired, MfaLocked, AccountSuspended) as exc:
            return error_page(self.pages, resp, exc, app=pending.app)
        render_step(self, req, resp, step, pending.app, binding)


class HostedConsent(_HostedPage):
    stage = "consent"
    docs = {"POST": op(
        "Hosted consent page: Allow or Deny (form post)",
        description="HTML form fields decision (allow or deny), csrf_token, request. Allow records the consent "
                    "(consent.granted) and answers 302 redirect_uri?code=...&state=...; Deny answers 302 "
                    "redirect_uri?error=access_denied&state=....",
        errors=[*_PAGE_ERRORS, AccessDenied], also=_page_answers(),
    )}

    def step(self, req, resp, form, pending, binding):
        decision = form.get("decision")
        if decision not in ("allow", "deny"):
            return self.again(req, resp, pending, binding)
        render_step(self, req, resp, self.hosted.decide(pending, allow=decision == "allow"), pending.app, binding)


def _params(req) -> dict:
    try:
        return wire.body_params(req)
    except InvalidRequest:
        raise
    except DomainError as exc:
        raise InvalidRequest(exc.message) from None


class Token(Resource):
    access = {"POST": PUBLIC}
    accepted_media_types = wire.FORM_OR_JSON
    docs = {"POST": op(
        "Token endpoint: authorization_code and refresh_token grants",
        description="Form-encoded (RFC 6749) or JSON. Client authentication: client_secret_post or "
                    "client_secret_basic. A code is single use: presenting it twice revokes what the first "
                    "exchange issued. Refresh tokens rotate; reusing a rotated one revokes the grant.",
        response=TOKEN_RESPONSE, wrapped=False,
        errors=[InvalidRequest, InvalidGrant, InvalidScope, UnsupportedGrantType],
    )}

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def on_post(self, req, resp):
        no_store(resp)
        params = _params(req)
        resp.media = self.endpoint.create_token_response(params, wire.basic_credentials(req))


class UserInfo(Resource):
    access = {"GET": PUBLIC, "POST": PUBLIC}
    accepted_media_types = wire.FORM_JSON_OR_EMPTY
    _doc = op("UserInfo endpoint (OIDC Core 5.3)",
              description="Bearer: an OIDC access token. Claims by scope: sub; email, email_verified (email); "
                          "name, picture (profile). 401 answers carry WWW-Authenticate (RFC 6750).",
              response=_OBJECT, wrapped=False, errors=[InvalidRequest, InvalidToken])
    docs = {"GET": _doc, "POST": _doc}

    def __init__(self, userinfo):
        self.userinfo = userinfo

    def on_get(self, req, resp):
        no_store(resp)
        resp.media = self.userinfo.claims(wire.bearer(req))

    def on_post(self, req, resp):
        no_store(resp)
        resp.media = self.userinfo.claims(wire.bearer(req), _params(req).get("access_token"))


class _ClientAuthenticated(Resource):
    access = {"POST": PUBLIC}
    accepted_media_types = wire.FORM_OR_JSON

    def __init__(self, clients, flow):
        self.clients = clients
        self.flow = flow

    def _client(self, req, params) -> dict:
        return self.clients.authenticate_request(params, wire.basic_credentials(req), failure=UnauthenticatedClient)


class Revoke(_ClientAuthenticated):
    docs = {"POST": op(
        "Token revocation (RFC 7009)",
        description="Client-authenticated. A refresh token revokes its grant; unknown tokens, access tokens and "
                    "other clients' tokens are answered 200 and change nothing.",
        errors=[InvalidRequest, UnauthenticatedClient],
    )}

    def on_post(self, req, resp):
        no_store(resp)
        params = _params(req)
        self.flow.revoke(self._client(req, params), params)
        resp.status = falcon.HTTP_200
        resp.media = {}


class Introspect(_ClientAuthenticated):
    docs = {"POST": op(
        "Token introspection (RFC 7662)",
        description="Client-authenticated. Tokens are reported active only to the client they were issued to.",
        response=_OBJECT, wrapped=False, errors=[InvalidRequest, UnauthenticatedClient],
    )}

    def on_post(self, req, resp):
        no_store(resp)
        params = _params(req)
        resp.media = self.flow.introspect(self._client(req, params), params)


class Logout(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op(
        "RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0)",
        description="id_token_hint is verified (an expired hint is accepted; alg none and HS256 are refused). "
                    "Revokes the OIDC refresh tokens of the hinted session and ends the hosted login's browser "
                    "session (of the hinted application; of every application the browser is signed in to "
                    "without a hint). Redirects to post_logout_redirect_uri (with state) only when it is "
                    "registered on the hinted client; otherwise the logged-out page (HTML).",
        query={name: ({"type": "string"}, desc) for name, desc in {
            "id_token_hint": "an ID token issued to the client", "post_logout_redirect_uri": "registered on the client",
            "state": "passed back"}.items()},
        errors=[InvalidRequest],
    )}

    def __init__(self, logout, applications, hosted, pages):
        self.logout = logout
        self.applications = applications
        self.hosted = hosted
        self.pages = pages

    def on_get(self, req, resp):
        no_store(resp)
        params = wire.query_params(req)
        if any(isinstance(value, list) for value in params.values()):
            raise InvalidRequest("A parameter must not be repeated.")
        result = self.logout.end_session(params)
        self._end_browser_sessions(req, resp, result.app_id)
        if result.redirect_uri is not None:
            resp.status = falcon.HTTP_302
            resp.location = wire.add_params(result.redirect_uri, {"state": result.state})
            return
        app = self.applications.get(result.app_id) if result.app_id else None
        self.pages.render(resp, "oidc_logged_out.html", app=app)

    def _end_browser_sessions(self, req, resp, app_id: str | None) -> None:
        names = [session_cookie_name(app_id)] if app_id else \
            [name for name in req.cookies if name.startswith(COOKIE_PREFIX)]
        for name in names:
            if name in req.cookies:
                self.hosted.end_browser_session(req.cookies[name])
                resp.unset_cookie(name, path="/oidc")
