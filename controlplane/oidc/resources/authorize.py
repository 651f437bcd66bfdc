"""GET and POST /oidc/authorize (RFC 6749 4.1.1, OIDC Core 3.1.2.1): the JSON answer to a
bearer, the hosted browser flow's first page otherwise."""
from __future__ import annotations

from controlplane.applications.service import branding
from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.errors import (
    ConsentRequired,
    InvalidClient,
    InvalidRequest,
    InvalidScope,
    InvalidToken,
    LoginRequired,
    OAuthError,
    RequestNotSupported,
    RequestUriNotSupported,
    UnauthorizedClient,
    UnsupportedResponseType,
)
from controlplane.oidc.hosted import session_cookie_name
from controlplane.oidc.resources.common import HTML, wants_html
from controlplane.oidc.resources.hosted import HostedFlowResource, error_page, form_post_errors, render_step
from controlplane.openapi import op
from shared.errors import DomainError, Unauthorized
from shared.http import client_ip, no_store

_AUTHORIZE_QUERY = {
    name: ({"type": "string"}, desc) for name, desc in {
        "response_type": "code", "client_id": "the client", "redirect_uri": "registered for the client",
        "scope": "space-separated, must include openid", "state": "passed back", "nonce": "put in the ID token",
        "code_challenge": "base64url SHA-256 of the verifier (43 to 128 characters)",
        "code_challenge_method": "S256", "prompt": "none, login or consent (hosted mode)",
        "response_mode": "query (default) or form_post",
        "max_age": "seconds since the last sign-in (hosted mode: passed on to a connection's provider, whose "
                   "auth_time must meet it)",
        "login_hint": "pre-fills the hosted login's email; in hosted mode, an email whose domain a connection "
                      "claims goes straight to that connection (and the hint on to the provider)",
        "connection": "hosted mode: the name or id of an active connection of the application; the browser goes "
                      "straight to its provider instead of the login page (an unknown one: invalid_request)",
    }.items()
}
AUTHORIZE_RESPONSE = {"type": "object", "properties": {
    "code": {"type": "string"}, "state": {"type": ["string", "null"]}, "redirect_uri": {"type": "string"},
    "branding": {"type": "object"}}}


class Authorize(HostedFlowResource):
    """GET /oidc/authorize (RFC 6749 4.1.1).  With a bearer user JWT of the client's
    application: the spec's JSON answer, never a redirect (its errors are 400 bodies).
    Without one, when the application has ``oauth_hosted_login_enabled``: the hosted
    browser flow (``controlplane.oidc.hosted``)."""

    access = {"GET": PUBLIC, "POST": PUBLIC}
    accepted_media_types = (wire.FORM,)
    _errors = [InvalidRequest, InvalidClient, InvalidScope, UnsupportedResponseType, UnauthorizedClient, InvalidToken,
               LoginRequired, ConsentRequired, RequestNotSupported, RequestUriNotSupported]
    _pages = {200: (HTML, "Without a bearer, hosted login: the login, MFA or consent page, or the form_post "
                          "page that posts the answer to the redirect URI", "text/html"),
              400: (HTML, "Without a bearer: the error page of a request that must not redirect", "text/html")}
    docs = {
        "GET": op(query=_AUTHORIZE_QUERY, response=AUTHORIZE_RESPONSE, wrapped=False, errors=_errors, also=_pages),
        "POST": op(response=AUTHORIZE_RESPONSE, wrapped=False, errors=_errors, also=_pages),
    }

    def __init__(self, authorize, authenticator, hosted, upstream, pages, *, cookie_secure: bool, trusted_proxies=()):
        super().__init__(hosted, upstream, pages, cookie_secure=cookie_secure, trusted_proxies=trusted_proxies)
        self.authorize = authorize
        self.authenticator = authenticator

    def on_get(self, req, resp):
        """Authorization endpoint (code flow with PKCE S256)

        Bearer: a user access token of the client's application. The answer is JSON {code, state,
        redirect_uri, branding}; the code lives 60 s. Consent for (user, client) is recorded on first use
        (consent.granted); max_age refuses a token issued longer ago, and prompt=login and max_age=0 any token
        (login_required: this mode cannot sign the user in again). Errors are RFC 6749
        bodies {error, error_description}. Without a bearer, when the application has
        oauth_hosted_login_enabled: the hosted browser flow (HTML). A login page (then the MFA step when the
        user has MFA, and a consent page the first time the user meets the client) or, with a live browser
        session (cookie iamgate_oidc_<applicationId>), a 302 to redirect_uri?code=...&state=... at once.
        prompt=login forces the login; prompt=none never shows a page and answers login_required or
        consent_required on the redirect URI. The login page has a "Continue with ..." button per active
        connection; connection=<name or id>, or a login_hint whose email domain a connection claims, sends the
        browser to that connection's provider at once (302; the cookie iamgate_connection binds the sign-in to
        the browser), whose answer comes back to /oidc/connections/{applicationId}/callback. prompt=login and
        max_age go on to the provider (prompt=login with max_age=0, or max_age), whose id_token auth_time must
        show the fresh sign-in and becomes the client's auth_time; an oauth2 connection cannot show one, so for
        such a request it has no button and naming it is login_required on the redirect URI. Without a bearer,
        errors found before the client and redirect_uri are validated are an HTML error page (400), never a
        redirect; later errors redirect with error and state (RFC 6749 4.1.2.1). Without a bearer and without
        hosted login: 401 invalid_token."""
        self._authorize(req, resp)

    def on_post(self, req, resp):
        """Authorization endpoint by POST (OIDC Core 3.1.2.1)

        The parameters of GET /oidc/authorize, form-encoded in the body; the answers are GET's."""
        self._authorize(req, resp)

    @form_post_errors
    def _authorize(self, req, resp) -> None:
        no_store(resp)
        browser = req.get_header("Authorization") is None
        params = {}
        try:
            params = wire.user_agent_params(req)
            request = self.authorize.validate(params)
        except OAuthError as exc:
            if exc.redirect_uri is None and browser:
                # RFC 6749 4.1.2.1: the client or its redirect URI is not known good; tell the user, never redirect.
                app = self.hosted.branding_app(client_id=params.get("client_id"))
                return error_page(self.pages, resp, exc, app=app)
            if not browser or not self._hosted(self.authorize.client(params.get("client_id"))):
                if browser and wants_html(req):
                    return error_page(self.pages, resp, exc.not_redirected(), app=None)
                raise exc.not_redirected() from None
            raise
        try:
            app = self.authenticator.application(request.app_id)
        except DomainError:
            raise InvalidClient() from None
        if browser and app.get("oauth_hosted_login_enabled"):
            binding = self.pages.csrf_token(req, resp)
            step = self.hosted.begin(request, params, binding=binding,
                                     session_token=req.cookies.get(session_cookie_name(app["_id"])),
                                     ip=client_ip(req, self.trusted_proxies))
            if step.page == "login":
                step = self.upstream.direct(step, app, params)
            return render_step(self, req, resp, step, app, binding)
        try:
            self._json_mode(req, resp, request, app)
        except OAuthError as exc:
            if browser and wants_html(req):  # a browser on an application without hosted login
                return error_page(self.pages, resp, exc.not_redirected(), app=None)
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
        # The application's sign-in is the authentication; iamgate cannot repeat it here, so
        # a request for a new one is login_required (OIDC Core 3.1.2.1: an OP that cannot
        # reauthenticate the End-User MUST return an error).
        if request.reauthentication_requested:
            raise LoginRequired("The request asks to sign the user in again (prompt=login or max_age=0), which "
                                "only the application's own sign-in can do.")
        # When the user signed in: the session's start, not the token's iat, which a refresh
        # renews without anyone signing in (OIDC Core 2, auth_time).
        auth_time = int(principal.claims["iat"])
        if principal.session_id is not None:
            sign_in = self.hosted.sessions.sign_in_time(request.app_id, principal.session_id)
            if sign_in is None:
                raise LoginRequired("The user's session has ended.")
            auth_time, proven = sign_in
            if request.max_age is not None and not proven:
                raise LoginRequired("The user signed in through a connection whose provider did not say when the "
                                    "user authenticated, so no max_age can be met.")
        if request.authentication_too_old(auth_time, int(self.authorize.clock().timestamp())):
            raise LoginRequired("The user signed in longer ago than max_age allows.")
        if self.authorize.needs_consent(request, principal.user_id):
            self.authorize.grant_consent(request, principal.user_id)
        code = self.authorize.issue_code(request.app_id, principal.user_id, request,
                                         auth_time=auth_time, session_id=principal.session_id)
        resp.media = {"code": code, "state": request.state, "redirect_uri": request.redirect_uri,
                      "branding": branding(app)}
