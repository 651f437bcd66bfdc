"""The hosted login's side of a sign-in through a connection (``controlplane.oidc.upstream``):
the provider's answer at ``/oidc/connections/{applicationId}/callback`` or at a
connection's own ``/oidc/connections/{applicationId}/{connectionId}/callback``, and the
link page's posts at ``/oidc/connections/link``.  All sit under ``/oidc/connections``, the
only path the binding cookie is sent to."""
from __future__ import annotations

from controlplane.auth import PUBLIC
from controlplane.connections.errors import (
    ConnectionCallbackInvalid,
    ConnectionEmailExists,
    ConnectionInactive,
    ConnectionNotFound,
    ConnectionProviderError,
    ConnectionStateInvalid,
)
from controlplane.lockout import AccountLocked
from controlplane.oidc import wire
from controlplane.oidc.errors import AuthorizationRequestExpired, OAuthError
from controlplane.oidc.resources.common import HTML
from controlplane.oidc.resources.hosted import (
    PAGE_ERRORS,
    HostedFlowResource,
    HostedPage,
    error_page,
    form_post_errors,
    page_answers,
    passkey_answer,
    render_step,
)
from controlplane.oidc.upstream import BINDING_COOKIE, CONNECTIONS_PATH, LINK
from controlplane.openapi import op
from controlplane.pages import CSRF_COOKIE
from controlplane.passkeys.errors import PasskeysDisabled, PasskeysUnavailable
from controlplane.users.errors import AccountSuspended, InvalidCredentials, LoginsLimited
from shared.errors import DomainError, NotFound, ValidationFailed
from shared.http import client_ip, no_store, status_of

# What a provider's answer can come to besides the next page: the error page, in words.
_REFUSALS = [ConnectionStateInvalid, ConnectionCallbackInvalid, ConnectionProviderError, ConnectionEmailExists,
             ConnectionInactive, ConnectionNotFound, AuthorizationRequestExpired, AccountSuspended]
_TITLES = {ConnectionEmailExists: "This email already has an account",
           ConnectionProviderError: "The sign-in provider did not answer",
           ConnectionCallbackInvalid: "The sign-in provider's answer was refused",
           ConnectionStateInvalid: "This sign-in has expired"}
_MOVED = ("The sign-in provider sent you back to an address this service no longer uses. Its administrator must "
          "register the connection's new redirect URI, shown on the connection's page in the console, at the "
          "provider. Go back to the application and sign in again once that is done.")


class ConnectionCallback(HostedFlowResource):
    """GET /oidc/connections/{applicationId}/callback: the redirect URI of the application's
    connections whose providers send RFC 9207's ``iss``; ``ConnectionOwnCallback`` is the
    others'."""

    access = {"GET": PUBLIC}
    docs = {"GET": op(
        errors=_REFUSALS, also={status: (HTML, "an HTML page", "text/html") for status in (200, 400, 409, 410, 502)},
    )}

    def __init__(self, upstream, pages, *, cookie_secure: bool, trusted_proxies=()):
        super().__init__(upstream.hosted, upstream, pages, cookie_secure=cookie_secure, trusted_proxies=trusted_proxies)

    @form_post_errors
    def on_get(self, req, resp, applicationId, connectionId=None):
        """Hosted login: the provider's answer for a sign-in through a connection

        The redirect URI to register at a provider that sends iss (RFC 9207), per application; a connection
        whose provider does not has its own (/oidc/connections/{applicationId}/{connectionId}/callback,
        beside this one: GitHub accepts redirect URIs below the registered one). The authorization response (code,
        state, iss; or error) is checked (the state is single use and bound to this browser by the cookie
        iamgate_connection; iss per RFC 9207; the id_token, and its auth_time when the request asked for
        prompt=login or max_age), then the authorization request that started it goes on: the MFA page when
        the user has a second factor, the consent page, or 302 to the client with the code. Linking verify:
        the link page, where the person proves the existing account. A refusal is an
        HTML error page saying why."""
        no_store(resp)
        app = self.hosted.branding_app(app_id=applicationId)
        if app is None:
            return error_page(self.pages, resp, ConnectionStateInvalid(), app=None)
        device_info = {"ip": client_ip(req, self.trusted_proxies), "user_agent": (req.user_agent or "")[:512] or None}
        try:
            step = self.upstream.finish(app, params=wire.query_params(req), binding=req.cookies.get(BINDING_COOKIE),
                                        browser=req.cookies.get(CSRF_COOKIE), device_info=device_info,
                                        connection_id=connectionId)
        except OAuthError as exc:
            if exc.redirect_uri is not None:
                raise
            return error_page(self.pages, resp, exc, app=app)
        except DomainError as exc:
            resp.unset_cookie(BINDING_COOKIE, path=CONNECTIONS_PATH)
            return error_page(self.pages, resp, exc, app=app, title=_TITLES.get(type(exc)))
        if step.page != LINK:  # the link page's posts still need the binding
            resp.unset_cookie(BINDING_COOKIE, path=CONNECTIONS_PATH)
        render_step(self, req, resp, step, app, self.pages.csrf_token(req, resp))


class ConnectionOwnCallback(ConnectionCallback):
    """GET /oidc/connections/{applicationId}/{connectionId}/callback: the redirect URI of a
    connection whose provider does not send ``iss``; an answer here must belong to a
    sign-in through that connection (RFC 9700 4.4.2).  It sits beside the application's
    callback, not below it: a provider that accepts redirect URIs below the registered one
    (GitHub) would otherwise accept every connection's where the application's is
    registered."""

    docs = {"GET": op(
        "Hosted login: the provider's answer for a sign-in through a connection that has its own redirect URI",
        description="HTML. As GET /oidc/connections/{applicationId}/callback, for a connection whose provider "
                    "does not send iss (RFC 9207): the redirect URI to register, exactly, at that provider. An "
                    "answer to a sign-in that sent the browser elsewhere is refused (CONNECTION_CALLBACK_INVALID, "
                    "reason redirect_uri_mismatch: the mix-up defence, RFC 9700 4.4.2).",
        errors=_REFUSALS, also={status: (HTML, "an HTML page", "text/html") for status in (200, 400, 409, 410, 502)},
    )}


class RetiredConnectionCallback(HostedFlowResource):
    """GET /oidc/connections/{applicationId}/callback/{connectionId}: where a connection's
    own redirect URI was, below the application's callback.  GitHub accepts any redirect
    URI below the registered one, so an OAuth App registered with the application's
    callback also accepted a connection's own there, another's included: an attacker's
    provider sent the victim to GitHub with its connection's redirect URI and GitHub's code
    came back to it (the mix-up, RFC 9700 4.4.1).  The path answers 404 with a page saying
    the address moved, to the person an old registration at the provider sends here, and
    reads nothing of the answer: no state taken, no code sent anywhere."""

    access = {"GET": PUBLIC}
    # Never a success: the 404 page is its only answer (beside the store being down).
    docs = {"GET": op(ok=404, errors=[NotFound], also={404: (HTML, "an HTML page", "text/html")})}

    def __init__(self, upstream, pages, *, cookie_secure: bool, trusted_proxies=()):
        super().__init__(upstream.hosted, upstream, pages, cookie_secure=cookie_secure, trusted_proxies=trusted_proxies)

    def on_get(self, req, resp, applicationId, connectionId):
        """Hosted login: a connection's former redirect URI, retired

        HTML, always 404. A connection's own redirect URI is now
        /oidc/connections/{applicationId}/{connectionId}/callback, beside the application's callback rather than
        below it (a provider that accepts redirect URIs below the registered one, as GitHub does, accepted another
        connection's: the mix-up, RFC 9700 4.4.1). The provider's answer is not read: nothing is signed in and
        no code is exchanged; the page says the administrator must register the new redirect URI there."""
        no_store(resp)
        error_page(self.pages, resp, NotFound(), app=self.hosted.branding_app(app_id=applicationId),
                   title="This sign-in address has moved", description=_MOVED)


class HostedLink(HostedPage):
    """The link page (linking ``verify``): the person proves the existing account with its
    password, a code mailed to it, or one of its passkeys before the identity is linked."""

    stage = LINK
    password_work = ("POST",)  # the account's password check
    docs = {"POST": op(
        "Hosted login: link a connection's identity to the existing account (form post)",
        description="HTML. Form fields csrf_token, request, and password, or decision=send_code (mails a 6-digit "
                    "code to the account's own address) then code, or decision=passkey with challenge_id and "
                    "credential (PublicKeyCredential.toJSON(); the page offers it when the account has a passkey "
                    "the application accepts); decision=cancel answers 302 "
                    "redirect_uri?error=access_denied&state=.... A wrong password, code or passkey shows the page "
                    "again (401; after 5 wrong answers the link is spent and the error page says so). Then the "
                    "sign-in goes on as from the callback: the MFA page, consent, or the code.",
        errors=[*PAGE_ERRORS, InvalidCredentials, AccountLocked, LoginsLimited, AccountSuspended,
                ConnectionStateInvalid, ValidationFailed, PasskeysDisabled, PasskeysUnavailable],
        also=page_answers(401, 429, 503),
    )}

    def step(self, req, resp, form, pending, binding):
        decision = form.get("decision")
        if decision == "cancel":
            return self.cancel(req, resp, pending, binding)
        link_binding = req.cookies.get(BINDING_COOKIE)
        try:
            if decision == "send_code":
                step = self.upstream.send_link_code(pending, link_binding)
            elif decision == "passkey":
                step = self.upstream.complete_link(pending, link_binding, passkey=passkey_answer(form),
                                                   device_info=self.device_info(req))
            else:
                password, code = form.get("password") or None, form.get("code", "").strip() or None
                if password is None and code is None:
                    return self.again(req, resp, pending, binding)
                step = self.upstream.complete_link(pending, link_binding, password=password, code=code,
                                                   device_info=self.device_info(req))
        except (InvalidCredentials, AccountLocked, LoginsLimited, ValidationFailed, PasskeysDisabled,
                PasskeysUnavailable) as exc:
            return self.again(req, resp, pending, binding, exc)
        except (ConnectionStateInvalid, AccountSuspended) as exc:
            resp.unset_cookie(BINDING_COOKIE, path=CONNECTIONS_PATH)
            return error_page(self.pages, resp, exc, app=pending.app)
        if step.page != LINK:
            resp.unset_cookie(BINDING_COOKIE, path=CONNECTIONS_PATH)
        render_step(self, req, resp, step, pending.app, binding)

    def again(self, req, resp, pending, binding, exc: DomainError | None = None, **page_context) -> None:
        render_step(self, req, resp, self.upstream.link_page(pending, req.cookies.get(BINDING_COOKIE)), pending.app,
                    binding,
                    error=exc.message if exc else None, status=status_of(type(exc)) if exc else 400,
                    **page_context)
