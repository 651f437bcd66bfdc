"""Signing in to the hosted login through a connection (an upstream identity provider,
docs/connections.md "Hosted pages").

The hosted login shows a button per active connection of the application; an email
whose domain a connection claims goes to that connection instead of asking for a
password; and ``GET /oidc/authorize`` skips the page when it names a ``connection`` or
when its ``login_hint``'s domain is claimed (what Logto calls ``direct_sign_in``).

Each way starts the connection's sign-in (``ConnectionFlow.start``) for the pending
authorization request, which stays at its login stage: the browser goes to the provider
with a fresh binding in its own cookie, and the provider sends it back to the
connection's redirect URI (``redirect_uri``): the application's callback,
``/oidc/connections/{applicationId}/callback``, for a provider that sends RFC 9207's
``iss``, and the connection's own,
``/oidc/connections/{applicationId}/{connectionId}/callback``, for one that does not (the
mix-up defence, RFC 9700 4.4.2).  None is below another: GitHub accepts any redirect URI
below the registered one, so an own callback below the application's (where it was,
``RETIRED_CALLBACK_PATH``) or below another connection's would let a provider registered
there send its code back to another connection, which would post it to its own token
endpoint.  The callback finishes the sign-in
(``ConnectionFlow.finish``: state, binding, the mix-up checks and the id_token) and the
request goes on as after a password: the MFA step when the application requires it,
consent, then the code for the client.  The pending request is still bound to the
browser's CSRF cookie, so a callback opened in another browser continues nothing.

A request that demands a fresh authentication (``prompt=login``, ``max_age``: OIDC Core
3.1.2.1) passes it on: the provider is asked to sign the user in again (or within
``max_age``), its ID Token's ``auth_time`` must show it did, and that ``auth_time``,
not the moment iamgate's session began, is the sign-in's ``auth_time`` for the client.
Dropping iamgate's browser session is not enough: the provider's own session would
answer at once, and the client would be told the user had just authenticated.  An
``oauth2`` connection (GitHub) cannot show when the user signed in, so it is not offered
for such a request, and naming it is ``login_required`` on the client's redirect URI
(3.1.2.1: an OP that cannot reauthenticate the End-User MUST return an error).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from controlplane.connections.flow import LINK_REQUIRED, MFA_REQUIRED, REFUSED, Arrival, ConnectionFlow
from controlplane.connections.model import Connection
from controlplane.connections.service import UpstreamConnectionService
from controlplane.oidc.errors import InvalidRequest, LoginRequired
from controlplane.oidc.hosted import HostedLogin, Pending, Step
from controlplane.users.sessions import SessionService
from shared.ids import random_token

CONNECTIONS_PATH = "/oidc/connections"
CALLBACK_PATH = CONNECTIONS_PATH + "/{applicationId}/callback"
# Beside the application's callback, not below it nor below another connection's own: a
# provider that accepts redirect URIs below the registered one (GitHub) accepts no other's.
OWN_CALLBACK_PATH = CONNECTIONS_PATH + "/{applicationId}/{connectionId}/callback"
# Where a connection's own was, below the application's callback: it answers a page that
# says it moved and reads nothing of the answer (docs/connections.md, "Upgrading").
RETIRED_CALLBACK_PATH = CALLBACK_PATH + "/{connectionId}"
LINK_PATH = CONNECTIONS_PATH + "/link"
BINDING_COOKIE = "iamgate_connection"  # the browser binding of a sign-in through a connection
LINK = "link"  # the pending request's stage (and page) while a verify-mode link waits for proof


def callback_url(public_url: str, app_id: str, connection_id: str | None = None) -> str:
    """The application's callback, or with ``connection_id`` that connection's own."""
    path = CALLBACK_PATH if connection_id is None else OWN_CALLBACK_PATH.replace("{connectionId}", connection_id)
    return public_url.rstrip("/") + path.replace("{applicationId}", app_id)


def redirect_uri(public_url: str, app_id: str, connection: Connection) -> str:
    """Where the connection's provider sends the browser back, the redirect URI to
    register there: the application's callback when the provider sends ``iss``, which
    tells its answers apart; otherwise the connection's own."""
    return callback_url(public_url, app_id, None if connection.endpoints.iss_parameter_supported else connection.id)


def demands_authentication(request) -> bool:
    """OIDC Core 3.1.2.1: the request asks for a new authentication (``prompt=login``,
    ``max_age=0``) or one no older than ``max_age`` seconds."""
    return request.reauthentication_requested or request.max_age is not None


def can_answer(connection: Connection, request) -> bool:
    """Whether a sign-in through ``connection`` can meet the request's demand: an
    ``oidc`` provider's ID Token says when the user authenticated (``auth_time``), an
    ``oauth2`` provider's answer does not."""
    return connection.type == "oidc" or not demands_authentication(request)


def email_domain(email: str | None) -> str | None:
    """The domain of ``email`` in lower case, or None when it has none."""
    if not email or "@" not in email:
        return None
    domain = email.rsplit("@", 1)[1].strip().lower()
    return domain or None


@dataclass(eq=False)
class HostedConnections:
    hosted: HostedLogin
    connections: UpstreamConnectionService
    flow: ConnectionFlow
    sessions: SessionService
    public_url: str

    def buttons(self, app_id: str) -> list[Connection]:
        """The active connections, in order: the login page has a "Continue with ..."
        button for each that ``can_answer`` its request."""
        return self.connections.list(app_id, active_only=True)

    def for_email(self, app_id: str, email: str | None) -> Connection | None:
        """The active connection that claims the domain of ``email``."""
        domain = email_domain(email)
        return self.connections.store.for_email_domain(app_id, domain) if domain else None

    def named(self, app_id: str, name_or_id: str) -> Connection | None:
        """The active connection with this name or id."""
        wanted = name_or_id.strip().lower()
        return next((connection for connection in self.buttons(app_id)
                     if wanted in (connection.name, connection.id)), None)

    def direct(self, step: Step, app: dict, params: dict) -> Step:
        """``GET /oidc/authorize`` about to show the login page: straight to the provider
        when the request names a ``connection`` (an unknown or inactive one is an
        ``invalid_request`` back to the client) or its ``login_hint``'s domain is a
        connection's; otherwise the login page as it was."""
        request = step.request
        name = params.get("connection")
        if isinstance(name, str) and name:
            connection = self.named(app["_id"], name)
            if connection is None:
                raise request.error(InvalidRequest, "The application has no active connection of that name.")
        else:
            connection = self.for_email(app["_id"], request.login_hint)
            if connection is None:
                return step
        return self.start(app, request, step.handle, connection, login_hint=request.login_hint)

    def from_login_page(self, pending: Pending, *, connection_id: str | None, email: str | None) -> Step | None:
        """The login page's post: a "Continue with ..." button (``connection_id``), or an
        email whose domain a connection claims; None when it is neither (a password
        sign-in)."""
        app_id = pending.app["_id"]
        if connection_id:
            connection = self.named(app_id, connection_id)
            if connection is None:  # deactivated since the page was shown
                return self.hosted.page_again(pending, "login")
            return self.start(pending.app, pending.request, pending.handle, connection,
                              login_hint=pending.request.login_hint)
        connection = self.for_email(app_id, email)
        if connection is None:
            return None
        return self.start(pending.app, pending.request, pending.handle, connection, login_hint=email)

    def start(self, app: dict, request, handle: str, connection: Connection, *, login_hint: str | None) -> Step:
        """The provider's authorization URL for this pending request, with a new binding
        for the browser's cookie and the request's demand of a fresh authentication
        (``prompt=login``, ``max_age``); the pending request is handed back at the
        callback.  A connection that cannot meet the demand (``can_answer``) ends the
        request with ``login_required`` on the client's redirect URI."""
        if not can_answer(connection, request):
            raise self.hosted.end(handle, "login", request.error(
                LoginRequired, f"The request asks for a fresh sign-in (prompt=login or max_age), which the connection "
                               f"{connection.name!r} cannot prove: its provider does not say when the user signed "
                               "in."))
        binding = random_token()
        url = self.flow.start(app, connection.id, redirect_uri=redirect_uri(self.public_url, app["_id"], connection),
                              binding=binding, login_hint=login_hint, return_to=handle,
                              prompt_login=request.reauthentication_requested, max_age=request.max_age)
        return Step(request, handle=handle, upstream=url, connection_binding=binding)

    # ------------------------------------------------------------ the callback

    def finish(self, app: dict, *, params: dict, binding: str | None, browser: str | None, device_info: dict,
               connection_id: str | None = None) -> Step:
        """The provider's answer at the application's callback, or at the connection's own
        (``connection_id``): ``ConnectionFlow.finish`` (a refusal raises its domain error,
        in words), then the pending request it started from, resumed for this browser,
        goes on: signed in, the MFA step, or the link page (linking ``verify``: the person
        proves the existing account first).  The provider's ``auth_time`` goes along
        (kept with the link while the link page waits) as the sign-in's."""
        arrival = Arrival(callback_url(self.public_url, app["_id"], connection_id), distinct=connection_id is not None)
        result = self.flow.finish(app, params=params, binding=binding or "", arrival=arrival,
                                  device_info=device_info)
        if result.outcome == REFUSED:
            raise result.error
        pending = self.hosted.resume(result.return_to, browser or "", "login", ip=device_info.get("ip") or "unknown")
        if result.outcome == LINK_REQUIRED:
            connection = self.connections.get(app["_id"], result.connection_id)
            link = {"id": self.hosted.box.encrypt(result.link_id.encode("ascii")), "email": result.email,
                    "connection": connection.display_name, "code_sent": False, "auth_time": result.auth_time}
            self.hosted.move(pending, "login", {"stage": LINK, "link": link})
            return self.link_page(replace(pending, doc={**pending.doc, "link": link}), binding)
        return self._signed_in(pending, "login", result, device_info, auth_time=result.auth_time)

    # ------------------------------------------------------------ the link page (linking "verify")

    def link_page(self, pending: Pending, binding: str | None) -> Step:
        """The page once more, with a fresh passkey challenge when the account has a
        passkey the application accepts ("Use a passkey") and the request's unit of the
        client IP's login page budget allows (``Pending.page_unit``)."""
        link = pending.doc["link"]
        passkey = self.flow.link_passkey_offer(pending.app, link_id=self._link_id(pending), binding=binding or "",
                                               unit=pending.page_unit)
        return Step(pending.request, page=LINK, handle=pending.handle, passkey=passkey,
                    link={"email": link["email"], "connection": link["connection"], "code_sent": link["code_sent"]})

    def send_link_code(self, pending: Pending, binding: str | None) -> Step:
        """"Email me a code": the code goes to the existing account's own address."""
        self.flow.send_link_code(pending.app, link_id=self._link_id(pending), binding=binding or "")
        self.hosted.move(pending, LINK, {"stage": LINK, "link.code_sent": True})
        link = {**pending.doc["link"], "code_sent": True}
        return self.link_page(replace(pending, doc={**pending.doc, "link": link}), binding)

    def complete_link(self, pending: Pending, binding: str | None, *, password: str | None = None,
                      code: str | None = None, passkey: dict | None = None, device_info: dict) -> Step:
        """The proof (the account's password, the mailed code, or one of its passkeys:
        ``passkey`` {challenge_id, credential} answering the page's challenge): the
        identity is linked and the sign-in goes on as from the callback.  A wrong answer
        raises InvalidCredentials and the page stays."""
        result = self.flow.complete_link(pending.app, link_id=self._link_id(pending), binding=binding or "",
                                         password=password, code=code, passkey=passkey, device_info=device_info)
        return self._signed_in(pending, LINK, result, device_info, auth_time=pending.doc["link"].get("auth_time"))

    def _link_id(self, pending: Pending) -> str:
        return self.hosted.box.decrypt(pending.doc["link"]["id"]).decode("ascii")

    def _signed_in(self, pending: Pending, stage: str, result, device_info: dict, *, auth_time: int | None) -> Step:
        """The sign-in goes on, with ``auth_time`` (the provider's, None when it did not
        say) as when the user authenticated, through the MFA step when there is one."""
        if result.outcome == MFA_REQUIRED:
            return self.hosted.second_factor(pending, result.challenge["challenge_token"], stage=stage,
                                             first_factor=tuple(result.amr), auth_time=auth_time)
        pair = self.sessions.issue(pending.app, result.user, remember_me=False, device_info=device_info,
                                   login_data=result.login_data, auth_time=auth_time,
                                   auth_proven=auth_time is not None)
        return self.hosted.signed_in(pending, stage, pair, amr=list(result.amr), auth_time=auth_time)
