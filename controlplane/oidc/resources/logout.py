"""RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0), by GET or POST."""
from __future__ import annotations

import falcon

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.errors import InvalidRequest
from controlplane.oidc.hosted import COOKIE_PREFIX, session_cookie_name
from controlplane.oidc.resources.common import HTML, protocol_params, wants_html
from controlplane.oidc.resources.hosted import error_page
from controlplane.openapi import op
from controlplane.resource import Resource
from shared.http import no_store


class Logout(Resource):
    access = {"GET": PUBLIC, "POST": PUBLIC}
    accepted_media_types = (wire.FORM,)
    _description = (
        "id_token_hint is verified (an expired hint is accepted; alg none and HS256 are refused); a client_id "
        "beside it must be the hint's aud. Revokes the OIDC refresh tokens of the hinted session (their access "
        "tokens stop working at userinfo and introspection) and ends the hosted login's browser session (of the "
        "hinted application; of every application the browser is signed in to without a hint). Redirects to "
        "post_logout_redirect_uri (with state when given) only when it is registered on the hinted client (its "
        "post_logout_redirect_uris, or its redirect_uris when that list is empty); otherwise the logged-out page "
        "(HTML).")
    _pages = {200: (HTML, "The signed-out page", "text/html"),
              400: (HTML, "With Accept: text/html, a refused hint: the error page", "text/html")}
    docs = {
        "GET": op(
            "RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0)", description=_description,
            query={name: ({"type": "string"}, desc) for name, desc in {
                "id_token_hint": "an ID token issued to the client", "client_id": "the hint's aud, when sent",
                "post_logout_redirect_uri": "registered on the client", "state": "passed back"}.items()},
            errors=[InvalidRequest], also=_pages),
        "POST": op(
            "RP-initiated logout by POST (OpenID Connect RP-Initiated Logout 1.0, section 2)",
            description="The parameters of GET /oidc/logout, form-encoded in the body; the answers are GET's.",
            errors=[InvalidRequest], also=_pages),
    }

    def __init__(self, logout, applications, hosted, pages):
        self.logout = logout
        self.applications = applications
        self.hosted = hosted
        self.pages = pages

    def on_get(self, req, resp):
        params = wire.query_params(req)
        self._end_session(req, resp, params)

    def on_post(self, req, resp):
        self._end_session(req, resp, protocol_params(req))

    def _end_session(self, req, resp, params: dict) -> None:
        no_store(resp)
        try:
            if any(isinstance(value, list) for value in params.values()):
                raise InvalidRequest("A parameter must not be repeated.")
            result = self.logout.end_session(params)
        except InvalidRequest as exc:
            if not wants_html(req):
                raise
            # A browser sent here with a bad id_token_hint gets a page, not the JSON body.
            client_id = params.get("client_id") if isinstance(params.get("client_id"), str) else None
            return error_page(self.pages, resp, exc, app=self.hosted.branding_app(client_id=client_id),
                              title="Sign-out link is not valid")
        app_ids = self._end_browser_sessions(req, resp, result.app_id)
        if result.redirect_uri is not None:
            resp.status = falcon.HTTP_302
            resp.location = wire.add_params(result.redirect_uri, {"state": result.state})
            return
        # Without a hint, the page wears the colours of the one application the browser
        # was signed in to, when there was exactly one.
        app_id = result.app_id or (app_ids[0] if len(app_ids) == 1 else None)
        app = self.applications.get(app_id) if app_id else None
        self.pages.render(resp, "oidc_logged_out.html", app=app)

    def _end_browser_sessions(self, req, resp, app_id: str | None) -> list[str]:
        """End the browser sessions (of ``app_id``, else every one); their application ids."""
        names = [session_cookie_name(app_id)] if app_id else \
            [name for name in req.cookies if name.startswith(COOKIE_PREFIX)]
        ended = []
        for name in names:
            if name in req.cookies:
                self.hosted.end_browser_session(req.cookies[name])
                resp.unset_cookie(name, path="/oidc")
                ended.append(name[len(COOKIE_PREFIX):])
        return ended
