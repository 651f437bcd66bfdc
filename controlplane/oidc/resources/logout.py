"""RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0), by GET or POST."""
from __future__ import annotations

import falcon

from shared.http import no_store

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.errors import InvalidRequest
from controlplane.oidc.hosted import COOKIE_PREFIX, session_cookie_name
from controlplane.oidc.resources.common import HTML, protocol_params
from controlplane.openapi import op
from controlplane.resource import Resource


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
    _pages = {200: (HTML, "The logged-out page", "text/html")}
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
        if any(isinstance(value, list) for value in params.values()):
            raise InvalidRequest("A parameter must not be repeated.")
        self._end_session(req, resp, params)

    def on_post(self, req, resp):
        self._end_session(req, resp, protocol_params(req))

    def _end_session(self, req, resp, params: dict) -> None:
        no_store(resp)
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
