"""RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0), by GET or POST, and the
confirmation a browser is asked for when the request carries no id_token_hint."""
from __future__ import annotations

from urllib.parse import urlencode

import falcon

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.errors import InvalidRequest
from controlplane.oidc.hosted import COOKIE_PREFIX, session_cookie_name
from controlplane.oidc.logout import LogoutResult
from controlplane.oidc.resources.common import HTML, wants_html
from controlplane.oidc.resources.hosted import error_page
from controlplane.openapi import op
from controlplane.pages import CsrfTokenInvalid, MalformedForm, read_form
from controlplane.resource import Resource
from shared.errors import PayloadTooLarge
from shared.http import no_store

CONFIRM_PATH = "/oidc/logout/confirm"
# What the confirmation form carries on to its post: the request's own parameters,
# checked again there (the redirect only to a URI registered on the client).
_CONFIRMED_FIELDS = ("client_id", "post_logout_redirect_uri", "state")
# A person reads this, not the reason the hint was refused (that is the error code's line).
REFUSED_HINT = ("This sign-out link could not be checked, so you have not been signed out here. Go back to the app "
                "and sign out again, or close this window.")


class _SignOut(Resource):
    """What both logout resources do once the request is accepted: end the browser
    sessions and answer the redirect or the signed-out page."""

    def __init__(self, logout, applications, hosted, pages):
        self.logout = logout
        self.applications = applications
        self.hosted = hosted
        self.pages = pages

    def _signed_out(self, req, resp, result: LogoutResult) -> None:
        app_ids = self._end_browser_sessions(req, resp, result.app_id, result.user_id)
        if result.redirect_uri is not None:
            resp.status = falcon.HTTP_302
            resp.location = wire.add_params(result.redirect_uri, {"state": result.state})
            return
        # Without a client, the page wears the colours of the one application the browser
        # was signed in to, when there was exactly one.
        app_id = result.app_id or (app_ids[0] if len(app_ids) == 1 else None)
        self.pages.render(resp, "oidc_logged_out.html", app=self.applications.get(app_id) if app_id else None)

    def _end_browser_sessions(self, req, resp, app_id: str | None, user_id: str | None = None) -> list[str]:
        """End the browser sessions (of ``app_id``, else every one); their application ids.
        With ``user_id`` (a hint's sub) only a session of that user: a hint is any ID token
        of the application, anyone's, and must not sign another person's browser out."""
        names = [session_cookie_name(app_id)] if app_id else self._session_cookies(req)
        ended = []
        for name in names:
            if name in req.cookies and self.hosted.end_browser_session(req.cookies[name], user_id=user_id):
                resp.unset_cookie(name, path="/oidc")
                ended.append(name[len(COOKIE_PREFIX):])
        return ended

    @staticmethod
    def _session_cookies(req) -> list[str]:
        return [name for name in req.cookies if name.startswith(COOKIE_PREFIX)]

    def _signed_in(self, req) -> str | None:
        """The application of the browser's one hosted-login session, if it has exactly one."""
        names = self._session_cookies(req)
        return names[0][len(COOKIE_PREFIX):] if len(names) == 1 else None


def _fetched_by_a_page(req) -> bool:
    """A browser's request made by a page rather than by the person (Fetch Metadata: an
    ``<img>``, a ``fetch()``; a navigation says ``document``).  Same-site pages send the
    ``SameSite=Lax`` session cookie with it, so without a hint it must not sign out."""
    return req.get_header("Sec-Fetch-Dest") not in (None, "document")


class Logout(_SignOut):
    access = {"GET": PUBLIC, "POST": PUBLIC}
    accepted_media_types = (wire.FORM,)
    _pages = {200: (HTML, "The signed-out page; without id_token_hint, to a browser, the confirmation page",
                    "text/html"),
              400: (HTML, "With Accept: text/html, a refused hint: the error page", "text/html")}
    docs = {
        "GET": op(
            query={name: ({"type": "string"}, desc) for name, desc in {
                "id_token_hint": "an ID token issued to the client", "client_id": "the hint's aud, when sent",
                "post_logout_redirect_uri": "registered on the client", "state": "passed back"}.items()},
            errors=[InvalidRequest], also=_pages),
        "POST": op(errors=[InvalidRequest], also=_pages),
    }

    def on_get(self, req, resp):
        """RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0)

        id_token_hint is verified (an expired hint is accepted; alg none and HS256 are refused, and so is a
        token of ours of another type: header typ other than JWT, or an events claim, as a back-channel
        logout token has); a client_id beside it must be the hint's aud.
        Revokes the OIDC refresh tokens of the hinted session (their access
        tokens stop working at userinfo and introspection) and ends the hosted login's browser session (of the
        hinted application; of every application the browser is signed in to without a hint). Redirects to
        post_logout_redirect_uri (with state when given) only when it is registered on the hinted client (its
        post_logout_redirect_uris, or its redirect_uris when that list is empty); otherwise the logged-out
        page (HTML). Without id_token_hint a browser (Accept: text/html) is asked first: the confirmation
        page, whose form posts to /oidc/logout/confirm, and so is a page's own request for it (an image, a
        script's fetch: Sec-Fetch-Dest other than document), which would otherwise sign the browser out
        behind the person's back; a program is signed out at once, without a redirect."""
        self._end_session(req, resp)

    def on_post(self, req, resp):
        """RP-initiated logout by POST (OpenID Connect RP-Initiated Logout 1.0, section 2)

        The parameters of GET /oidc/logout, form-encoded in the body; the answers are GET's."""
        self._end_session(req, resp)

    def _end_session(self, req, resp) -> None:
        no_store(resp)
        params = {}
        try:
            params = wire.user_agent_params(req)
            repeated = [name for name, value in params.items() if isinstance(value, list)]
            if repeated:  # RFC 6749 3.1, as at authorize
                raise InvalidRequest(f"The parameter {repeated[0]} must not be repeated.")
            if not params.get("id_token_hint") and (wants_html(req) or _fetched_by_a_page(req)):
                return self._confirmation(req, resp, params)
            result = self.logout.end_session(params)
        except InvalidRequest as exc:
            if not wants_html(req):
                raise
            # A browser sent here with a bad id_token_hint gets a page, not the JSON body, in
            # the colours of the client it names or else of the one it is signed in to.
            client_id = params.get("client_id") if isinstance(params.get("client_id"), str) else None
            app = self.hosted.branding_app(client_id=client_id) if client_id else None
            return error_page(self.pages, resp, exc, app=app or self.hosted.branding_app(app_id=self._signed_in(req)),
                              title="Sign-out link is not valid", description=REFUSED_HINT)
        self._signed_out(req, resp, result)

    def _confirmation(self, req, resp, params: dict) -> None:
        """RP-Initiated Logout 2: nothing verifies a request without a hint, so the person
        is asked; the form is CSRF-protected, so another site cannot post it for them."""
        client = self.logout.client(params.get("client_id"))
        if client is not None:  # named, not proven: its application's name only when its pages are public
            app = self.hosted.branding_app(app_id=client["app_id"])
        else:
            app = self.hosted.branding_app(app_id=self._signed_in(req))
        fields = {name: params[name] for name in _CONFIRMED_FIELDS if params.get(name)}
        action = CONFIRM_PATH + (f"?{urlencode({'application': app['_id']})}" if app else "")
        # The post may answer with the redirect, and browsers hold it to form-action.
        redirect_uri = self.logout.end_confirmed(params).redirect_uri
        self.pages.render(resp, "oidc_logout_confirm.html", app=app, action=action,
                          csrf_token=self.pages.csrf_token(req, resp), fields=fields,
                          form_action=[redirect_uri] if redirect_uri else ())


class LogoutConfirm(_SignOut):
    """The confirmation page's post: sign out, then follow a post_logout_redirect_uri
    registered on the client its client_id names, or show the signed-out page."""

    access = {"POST": PUBLIC}
    accepted_media_types = (wire.FORM,)
    docs = {"POST": op(
        errors=[CsrfTokenInvalid, MalformedForm],
        also={200: (HTML, "The signed-out page", "text/html"), 400: (HTML, "A malformed form: the error page",
                                                                     "text/html"),
              403: (HTML, "No or a wrong CSRF token: the error page", "text/html")},
    )}

    def on_post(self, req, resp):
        """Confirm an RP-initiated logout that had no id_token_hint (form post of the confirmation page)

        HTML. Form fields csrf_token and, as the logout request had them, client_id, post_logout_redirect_uri
        and state. Ends the browser session (of the client's application when client_id names an active
        client, else every one the browser has); nothing is revoked. Redirects to post_logout_redirect_uri
        (with state) only when it is registered on that client; otherwise the signed-out page. A post without
        its CSRF token changes nothing (403 page)."""
        no_store(resp)
        try:
            form = read_form(req)
            self.pages.check_csrf(req, form.get("csrf_token"))
        except (CsrfTokenInvalid, MalformedForm, PayloadTooLarge) as exc:
            return error_page(self.pages, resp, exc, app=self.hosted.branding_app(app_id=req.get_param("application")))
        self._signed_out(req, resp, self.logout.end_confirmed(form))
