"""The hosted browser mode of ``GET /oidc/authorize`` (RFC 6749 4.1.1-4.1.2, OIDC Core
3.1.2): a login page, the MFA step when the user has MFA, a consent page the first time
the user meets the client, then ``302 redirect_uri?code=...&state=...``.

The sign-in is the API login's, not a copy of it: ``LoginService.login`` (its password
guard and lockout, and the MFA second factor answering a challenge) and
``MfaService.verify`` for the code.  The token pair they return starts a V1 session; the
browser session and every code issued under it name that session (``sid``), so a
logout through an ``id_token_hint`` or a revocation of the V1 session ends both.

Two kinds of state, both in MongoDB so any replica serves any page:

- the **pending request** (``oidc_pending_requests``, 10 minutes): the authorization
  request as the client sent it, referred to from the pages by an opaque handle (the
  ``request`` form field), stored as its digest.  Pages never carry redirect_uri, scope
  or state in hidden fields; every step re-validates the stored query, so a client
  deactivated meanwhile stops the flow.  The handle is bound to the browser's CSRF
  cookie (stored as its digest) and moves through the stages login -> mfa ->
  passkey_offer (after a password, to a user without a passkey) -> consent -> done with
  conditional writes, so it yields at most one code;
- the **browser session** (``oidc_browser_sessions``, at most 12 hours and never longer
  than its V1 session): the cookie ``iamgate_oidc_<app_id>`` holds an opaque token,
  stored as its digest, that lets a later authorize of the same application skip the
  login (``prompt=login`` forces it).
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from controlplane.applications.service import ApplicationService
from controlplane.auth import Authenticator
from controlplane.mfa.factor import TOTP
from controlplane.mfa.service import MfaService
from controlplane.oidc.authorize import AuthorizeRequest, AuthorizeService
from controlplane.oidc.errors import (
    AccessDenied,
    AuthorizationRequestExpired,
    ConsentRequired,
    LoginRequired,
    OAuthError,
    SignInsLimited,
)
from controlplane.oidc.store import BrowserSessionStore, PendingRequestStore
from controlplane.passkeys.service import PASSWORDLESS, WEBAUTHN, PasskeyService
from controlplane.ratelimit import RateLimiter, Unit
from controlplane.users.directory import UserDirectory
from controlplane.users.login import LoginService
from controlplane.users.passwords import PasswordService
from controlplane.users.registration import RegistrationService
from controlplane.users.sessions import SessionService
from shared.config import Rate
from shared.crypto import SecretBox
from shared.errors import RateLimited
from shared.ids import digest, random_token
from shared.timeutil import Clock, aware, seconds

PENDING_TTL = 600
BROWSER_SESSION_TTL = 12 * 3600
COOKIE_PREFIX = "iamgate_oidc_"
# How the user signed in, as the ID token's ``amr`` (OIDC Core 2), in the registered
# values of RFC 8176 section 2: ``pwd`` a password, ``otp`` a one-time code (TOTP or a
# backup code), ``hwk`` proof of possession of an authenticator-held key (a passkey),
# ``user`` the authenticator verified the user (required of a passkey alone), ``mfa``
# more than one factor.
PWD, OTP, HWK, USER, MFA = "pwd", "otp", "hwk", "user", "mfa"
LOCAL_FACTORS = (PWD, OTP, HWK)  # a factor checked here, now: the sign-in's own time is proven
OFFER = "passkey_offer"  # the stage (and page) that offers a passkey after a password sign-in


def _decline_key(app_id: str, user_id: str) -> str:
    return digest(f"{app_id}:{user_id}")[:22]


def session_cookie_name(app_id: str) -> str:
    """One browser-session cookie per application, so signing in to one application
    does not sign the browser out of another."""
    return f"{COOKIE_PREFIX}{app_id}"


@dataclass(frozen=True)
class Step:
    """What the browser gets next: a ``page`` (login, mfa, consent) for the pending
    request ``handle``, or ``redirect``: the authorization response (code and state) to
    send to the client in the request's response mode.
    ``session_token``/``session_ttl``: a new browser session to set as the cookie."""

    request: AuthorizeRequest
    page: str | None = None
    handle: str | None = None
    redirect: dict | None = None
    session_token: str | None = None
    session_ttl: int = 0
    signed_in_as: str | None = None  # the consent page's user (its email), for "Not you?"
    passkey: dict | None = None  # {challenge_id, options}: the page's WebAuthn ceremony, when it offers one
    offers_code: bool = True  # the MFA page: the user has TOTP (and so backup codes) to answer with
    # A sign-in through a connection: the upstream provider's authorization URL to send the
    # browser to, and the binding to keep in its cookie for the callback.
    upstream: str | None = None
    connection_binding: str | None = None
    link: dict | None = None  # the link page: {email, connection (its display name), code_sent}


@dataclass(frozen=True)
class Pending:
    """A pending request resumed by a page's post: its document, the request validated
    again, the application, the handle the page posted, the post's ``unit`` of the
    client IP's login budget (``LoginService.unit``), which its sign-in attempt draws
    (and the MFA page the attempt leads to, at no further cost), and its ``page_unit``
    of the IP's login page budget (``LoginService.page_unit``), which a page shown again
    draws for its new passkey challenge."""

    doc: dict
    request: AuthorizeRequest
    app: dict
    handle: str
    unit: Unit
    page_unit: Unit
    declined: frozenset = frozenset()  # the browser's "Not now" to a passkey (``decline_key``s)


@dataclass(eq=False)
class HostedLogin:
    authorize: AuthorizeService
    pending: PendingRequestStore
    browser_sessions: BrowserSessionStore
    _: KW_ONLY
    applications: ApplicationService
    login: LoginService
    mfa: MfaService
    authenticator: Authenticator
    sessions: SessionService
    users: UserDirectory
    passwords: PasswordService
    registration: RegistrationService
    passkeys: PasskeyService
    box: SecretBox
    clock: Clock
    rate_limiter: RateLimiter
    rate_limit_authorize: Rate  # IAMGATE_RATE_LIMIT_AUTHORIZE: requests stored per client IP (``_budget``)

    # ------------------------------------------------------------ GET /oidc/authorize

    def begin(self, request: AuthorizeRequest, params: dict, *, binding: str, session_token: str | None,
              ip: str) -> Step:
        """The first answer to a browser: the login page, unless the browser session is
        live and neither ``prompt=login`` nor ``max_age`` asks for a login (OIDC Core
        3.1.2.1); then the consent page or, when consent covers the scopes, the code.
        ``prompt=none`` never shows a page: ``login_required`` or ``consent_required``
        on the redirect.  A login page with a passkey challenge draws a unit of the
        client IP's (``ip``) login page budget (``passkey_options``), never of its login
        budget: any web page can make a browser send this GET.  A page stores the request
        first, on the client IP's budget of stored requests (``_budget``).

        A ``max_age`` is never met by a browser session whose sign-in proved no time
        (``auth_proven`` False: through a connection whose provider did not say when the
        user authenticated, with no factor checked here): that sign-in's ``auth_time``
        is only when iamgate's session began, and the provider may have answered from a
        session months old."""
        session = self.browser_session(request.app_id, session_token)
        if session is not None and (request.needs_login(session["auth_time"], int(self.clock().timestamp()))
                                    or request.max_age is not None and session.get("auth_proven") is False):
            session = None
        if session is None:
            if "none" in request.prompt:
                raise request.error(LoginRequired)
            self._budget(request, ip)
            app = self.applications.get(request.app_id)
            return Step(request, page="login", handle=self._start(request, params, binding, "login"),
                        passkey=self.passkey_options(app, unit=self.login.page_unit(app, ip)) if app else None)
        if self.authorize.needs_consent(request, session["user_id"]):
            if "none" in request.prompt:
                raise request.error(ConsentRequired)
            self._budget(request, ip)
            signed_in = {"user_id": session["user_id"], "session_id": session["session_id"],
                         "auth_time": session["auth_time"], "amr": session.get("amr")}
            return Step(request, page="consent", handle=self._start(request, params, binding, "consent", signed_in),
                        signed_in_as=self._email(request.app_id, session["user_id"]))
        return Step(request, redirect=self._code_redirect(request, session))

    def _budget(self, request: AuthorizeRequest, ip: str) -> None:
        """Draw one unit of the client IP's budget of stored authorization requests
        (``authorize-ip:<ip>``, IAMGATE_RATE_LIMIT_AUTHORIZE, across all applications)
        before a page stores one: every GET that shows a page writes a pending request
        for ten minutes, so without a bound one address could fill the store.  Spent:
        ``temporarily_unavailable`` on the redirect URI (RFC 6749 4.1.2.1), so the
        application gets its user back.  A redirect with a code (a live browser session
        and consent) and ``prompt=none`` store no request and draw nothing."""
        try:
            self.rate_limiter.hit(f"authorize-ip:{ip}", self.rate_limit_authorize)
        except RateLimited:
            raise request.error(SignInsLimited) from None

    def browser_session(self, app_id: str, token: str | None) -> dict | None:
        """The live browser session of this cookie value for ``app_id``: not expired, its
        user still active, its V1 session neither revoked nor expired."""
        if not token:
            return None
        session = self.browser_sessions.get(digest(token))
        if session is None or session["app_id"] != app_id or aware(session["expires_at"]) <= self.clock():
            return None
        return session if self._sign_in_live(app_id, session["user_id"], session["session_id"]) else None

    def _sign_in_live(self, app_id: str, user_id: str, session_id: str) -> bool:
        """The user still active and the V1 session the sign-in started neither revoked nor expired."""
        return self.users.status(app_id, user_id) == "active" and self.sessions.is_active(app_id, session_id)

    def branding_app(self, *, app_id=None, client_id=None) -> dict | None:
        """The application whose branding a page shows when the flow cannot say (an
        expired form, an invalid sign-in link, a refused logout): ``app_id``'s, or
        ``client_id``'s, when it has hosted login, whose pages are public anyway; None
        otherwise.  Used for branding only, never to decide anything."""
        if app_id is None:
            client = self.authorize.client(client_id)
            app_id = client["app_id"] if client else None
        app = self.applications.get(app_id) if isinstance(app_id, str) and app_id else None
        return app if app and app.get("oauth_hosted_login_enabled") else None

    def end_browser_session(self, token: str | None, *, user_id: str | None = None) -> bool:
        """End the browser session of this cookie value, or with ``user_id`` only when it is
        that user's (or is gone already); whether the cookie should go."""
        if not token:
            return False
        if user_id is not None:
            session = self.browser_sessions.get(digest(token))
            if session is not None and session["user_id"] != user_id:
                return False
        self.browser_sessions.delete(digest(token))
        return True

    # ------------------------------------------------------------ the pages' posts

    def resume(self, handle: str | None, binding: str, stage: str, *, ip: str,
               declined: frozenset = frozenset()) -> Pending:
        """The pending request of ``handle`` at ``stage``, posted by the browser that
        started it (``binding``: its CSRF cookie) from ``ip``, with its query validated
        again (an OAuthError of that validation is answered as at the authorize request)."""
        pending = self.pending.get(digest(handle)) if handle else None
        if (pending is None or pending["stage"] != stage or pending["binding"] != digest(binding)
                or aware(pending["expires_at"]) <= self.clock()):
            raise AuthorizationRequestExpired()
        request = self.authorize.validate(pending["params"])
        app = self.applications.get(request.app_id)
        if app is None or not app.get("oauth_hosted_login_enabled"):
            raise AuthorizationRequestExpired()
        return Pending(pending, request, app, handle, self.login.unit(app, ip), self.login.page_unit(app, ip),
                       declined)

    def sign_in(self, pending: Pending, *, email: str, password: str, device_info: dict) -> Step:
        """The login page's post: the API login's IP throttle (the post's unit) and
        ``LoginService.login``; their errors (wrong credentials, lockout, suspension,
        throttle) propagate for the page to show, and the request stays at the login step."""
        pending.unit.take()
        result = self.login.login(pending.app, email=email, password=password, remember_me=False,
                                   device_info=device_info)
        if result.get("mfa_required"):
            return self.second_factor(pending, result["challenge_token"])
        return self.signed_in(pending, "login", result, amr=[PWD])

    def second_factor(self, pending: Pending, challenge_token: str, *, stage: str = "login",
                      first_factor: tuple[str, ...] = (PWD,), auth_time: int | None = None) -> Step:
        """The MFA page for the login's challenge, kept sealed in the request: after a
        password, or after a sign-in through a connection (``first_factor``: its ``amr``;
        ``auth_time``: when the user authenticated at its provider, kept for ``signed_in``)
        when the user has a second factor.  Its passkey challenge is the sign-in's, on
        the post's ``unit`` (drawn already by a password), so no third party spending the
        page budget can take away the passkey of a user whose only second factor it is."""
        sealed = self.box.encrypt(challenge_token.encode("ascii"))
        self.move(pending, stage, {"stage": "mfa", "mfa_challenge": sealed, "first_factor": list(first_factor),
                                   "first_factor_auth_time": auth_time})
        return self.page_again(pending, "mfa", challenge_token=challenge_token, unit=pending.unit)

    def move(self, pending: Pending, stage: str, changes: dict) -> None:
        """The request leaves ``stage`` with ``changes``; AuthorizationRequestExpired when
        another post moved it first (or it expired)."""
        if self.pending.advance(pending.doc["_id"], stage, changes, self.clock()) is None:
            raise AuthorizationRequestExpired()

    def passkey_options(self, app: dict, *, unit: Unit, challenge_token: str | None = None) -> dict | None:
        """The WebAuthn options a page offers, or None when it offers none: the login
        page's sign-in by passkey alone (the application's ``passkeys`` is
        ``passwordless``), the MFA page's second factor (the login's challenge has
        ``webauthn`` among its methods).  Each answer is a fresh single-use challenge
        of ``PasskeyService``, the API's, stored each time a page is shown; so it takes
        ``unit`` first: of the client IP's login page budget (``LoginService.page_unit``),
        or of its login budget for the MFA page a sign-in leads to (``second_factor``).
        Once that budget is spent it offers none: the page still takes a password or a
        code."""
        if challenge_token is None and app.get("passkeys") != PASSWORDLESS:
            return None
        if self.passkeys.relying_party is None:
            return None
        if challenge_token is not None and self.mfa.pending_challenge(app["_id"], challenge_token, WEBAUTHN) is None:
            return None
        if not unit.allows():
            return None
        return self.passkeys.authentication_options(app, challenge_token=challenge_token)

    def passkey_sign_in(self, pending: Pending, *, challenge_id: str, credential: dict, device_info: dict) -> Step:
        """The login page's "Sign in with a passkey" (or the email field's autofill):
        ``PasskeyService.authenticate``, the API's sign-in by passkey alone, under the
        login's per-IP throttle; then the sign-in continues as after a password.  Its
        errors (PASSKEY_*, suspension, throttle) propagate for the page to show."""
        pending.unit.take()
        pair = self.passkeys.authenticate(pending.app, challenge_id=challenge_id, credential=credential,
                                          remember_me=False, device_info=device_info, alone_only=True)
        return self.signed_in(pending, "login", pair, amr=[HWK, USER])

    def verify_mfa(self, pending: Pending, *, code: str) -> Step:
        """The MFA page's post: ``MfaService.verify`` with the login's challenge; a wrong
        code propagates and the request stays at the MFA step."""
        pair, _ = self.mfa.verify(pending.app, challenge_token=self.mfa_challenge(pending), code=code)
        return self.signed_in(pending, "mfa", pair, amr=[*self._first_factor(pending), OTP, MFA],
                              auth_time=pending.doc.get("first_factor_auth_time"))

    def verify_mfa_passkey(self, pending: Pending, *, challenge_id: str, credential: dict, device_info: dict) -> Step:
        """The MFA page's "Use a passkey": ``PasskeyService.authenticate`` answering the
        login's MFA challenge, as the API's second factor does, and only that challenge
        (not a sign-in by passkey alone, not another login's), under the login's per-IP
        throttle (the post's unit)."""
        pending.unit.take()
        pair = self.passkeys.authenticate(pending.app, challenge_id=challenge_id, credential=credential,
                                          remember_me=False, device_info=device_info,
                                          answering=self.mfa_challenge(pending))
        return self.signed_in(pending, "mfa", pair, amr=[*self._first_factor(pending), HWK, MFA],
                              auth_time=pending.doc.get("first_factor_auth_time"))

    @staticmethod
    def _first_factor(pending: Pending) -> list[str]:
        return list(pending.doc.get("first_factor") or (PWD,))

    def mfa_challenge(self, pending: Pending) -> str:
        """The login's MFA challenge token, kept sealed in the pending request."""
        return self.box.decrypt(pending.doc["mfa_challenge"]).decode("ascii")

    def decide(self, pending: Pending, *, allow: bool) -> Step:
        """The consent page's post: Allow records the consent (consent.granted) and
        issues the code; Deny answers ``access_denied`` on the redirect URI.  A sign-in
        that no longer holds (``_sign_in_holds``) sends the request back to the login page."""
        request = pending.request
        if allow and not self._sign_in_holds(pending):
            return self._sign_in_again(pending, "consent")
        if self.pending.advance(pending.doc["_id"], "consent", {"stage": "done"}, self.clock()) is None:
            raise AuthorizationRequestExpired()
        self.pending.delete(pending.doc["_id"])
        if not allow:
            raise request.error(AccessDenied)
        self.authorize.grant_consent(request, pending.doc["user_id"])
        return Step(request, redirect=self._code_redirect(request, pending.doc))

    def cancel(self, pending: Pending, stage: str) -> Step:
        """The user gives up at the login or MFA step: ``access_denied`` on the redirect
        URI with ``state`` (RFC 6749 4.1.2.1), so the application gets its user back."""
        raise self.end(pending.handle, stage, pending.request.error(AccessDenied, "The user cancelled the sign-in."))

    def end(self, handle: str, stage: str, error: OAuthError) -> OAuthError:
        """The request of ``handle`` ends at ``stage``, spent (no later post continues
        it); ``error`` (its ``request.error``) is for the caller to raise, the answer on
        the client's redirect URI."""
        if self.pending.advance(digest(handle), stage, {"stage": "done"}, self.clock()) is None:
            raise AuthorizationRequestExpired()
        self.pending.delete(digest(handle))
        return error

    def forgot_password(self, pending: Pending, email: str) -> None:
        """The hosted "Forgot password?": ``PasswordService.forgot``, the API's flow and
        limit (its ``ResetRequestsLimited`` propagates).  Known email or not, the answer
        is the same and the request stays at the login step."""
        self.passwords.forgot(pending.app, email)

    def register(self, pending: Pending, *, email: str, password: str, name: str, device_info: dict) -> Step:
        """"Create account": the API's registration (its per-IP throttle, password
        rules, unique email, user limit, verification email and ``user.created``), then
        the sign-in continues as from the login page.  Errors propagate for the page to
        show; the request stays at the login step."""
        self.registration.throttle(pending.app, device_info.get("ip") or "unknown")
        self.registration.register(pending.app, email=email, password=password, name=name)
        return self.sign_in(pending, email=email, password=password, device_info=device_info)

    def switch_user(self, pending: Pending, session_token: str | None) -> Step:
        """"Not you?" on the consent page: the browser session ends and the same
        request goes back to the login page, for whoever signs in next."""
        step = self._sign_in_again(pending, "consent")
        self.end_browser_session(session_token)
        return step

    def _sign_in_again(self, pending: Pending, stage: str) -> Step:
        """The request leaves ``stage`` for the login page, forgetting who signed in."""
        cleared = {"stage": "login", "user_id": None, "session_id": None, "auth_time": None, "amr": None}
        if self.pending.advance(pending.doc["_id"], stage, cleared, self.clock()) is None:
            raise AuthorizationRequestExpired()
        return self.page_again(pending, "login")

    def _sign_in_holds(self, pending: Pending) -> bool:
        """Whether the sign-in a consent or offer page was shown for still holds when it
        is posted, which may be much later: a browser session of it is live (a sign-out
        or "Not you?" in another tab ended it), its user is active, its V1 session
        neither revoked nor expired, and a ``max_age`` of seconds (OIDC Core 3.1.2.1)
        still allows its ``auth_time``.  ``prompt=login`` and ``max_age=0`` asked for a
        sign-in before the page, which this request's own login was."""
        doc, request = pending.doc, pending.request
        now = self.clock()
        return (self.browser_sessions.live_for_session(request.app_id, doc["user_id"], doc["session_id"], now)
                and self._sign_in_live(request.app_id, doc["user_id"], doc["session_id"])
                and not (request.max_age and request.authentication_too_old(doc["auth_time"], int(now.timestamp()))))

    def passkey_offer(self, pending: Pending, *, answer: dict | None) -> Step:
        """The offer's post: ``answer`` ({challenge_id, credential}) registers the passkey
        through ``PasskeyService.register`` (its errors propagate and the offer stays);
        None is "Not now".  Either way the sign-in then goes on: consent or the code."""
        if answer is not None:
            if not self._sign_in_holds(pending):
                return self._sign_in_again(pending, OFFER)
            self.passkeys.register(pending.app, pending.doc["user_id"], session_id=pending.doc["session_id"],
                                   name=None, **answer)
        request, now = pending.request, self.clock()
        signed_in = {name: pending.doc.get(name) for name in ("user_id", "session_id", "auth_time", "amr")}
        if self.authorize.needs_consent(request, signed_in["user_id"]):
            if self.pending.advance(pending.doc["_id"], OFFER, {"stage": "consent"}, now) is None:
                raise AuthorizationRequestExpired()
            return Step(request, page="consent", handle=pending.handle,
                        signed_in_as=self._email(request.app_id, signed_in["user_id"]))
        if not self._sign_in_holds(pending):
            return self._sign_in_again(pending, OFFER)
        if self.pending.advance(pending.doc["_id"], OFFER, {"stage": "done"}, now) is None:
            raise AuthorizationRequestExpired()
        self.pending.delete(pending.doc["_id"])
        return Step(request, redirect=self._code_redirect(request, signed_in))

    def decline_key(self, pending: Pending) -> str:
        """What the browser keeps of a "Not now" (in its cookie): a digest of the
        application and the user, not the user id itself."""
        return _decline_key(pending.request.app_id, pending.doc["user_id"])

    def _offers_passkey(self, pending: Pending, user_id: str, amr: list[str]) -> bool:
        """After a password sign-in, to a user without a passkey, when the application
        uses them and this browser has not said "Not now" for this user."""
        return (PWD in amr and pending.app.get("passkeys", "off") != "off" and self.passkeys.relying_party is not None
                and _decline_key(pending.request.app_id, user_id) not in pending.declined
                and not self.passkeys.list(pending.request.app_id, user_id))

    def page_again(self, pending: Pending, stage: str, *, challenge_token: str | None = None,
                   unit: Unit | None = None) -> Step:
        """The page of ``stage`` once more, for the same request (and, on the consent
        page, the same user), with a fresh passkey challenge where the page offers one
        (the login and MFA pages' ceremony, the offer's registration) while ``unit``
        allows: the post's ``page_unit`` unless a sign-in pays (``second_factor``).  A
        spent page budget leaves the passkey out; the page takes its other answers."""
        unit = unit or pending.page_unit
        user_id = pending.doc.get("user_id") if stage == "consent" else None
        passkey, offers_code = None, True
        if stage == "login":
            passkey = self.passkey_options(pending.app, unit=unit)
        elif stage == OFFER:
            if unit.allows():
                passkey = self.passkeys.registration_options(pending.app, pending.doc["user_id"])
        elif stage == "mfa":
            challenge_token = challenge_token or self.mfa_challenge(pending)
            passkey = self.passkey_options(pending.app, unit=unit, challenge_token=challenge_token)
            offers_code = passkey is None or self.mfa.pending_challenge(pending.app["_id"], challenge_token,
                                                                        TOTP) is not None
        return Step(pending.request, page=stage, handle=pending.handle, passkey=passkey, offers_code=offers_code,
                    signed_in_as=self._email(pending.request.app_id, user_id) if user_id else None)

    # ------------------------------------------------------------ internals

    def _start(self, request: AuthorizeRequest, params: dict, binding: str, stage: str,
               signed_in: dict | None = None) -> str:
        handle, now = random_token(), self.clock()
        self.pending.insert({
            "_id": digest(handle), "app_id": request.app_id, "client_id": request.client_id,
            "params": {name: value for name, value in params.items() if isinstance(value, str)},
            "binding": digest(binding), "stage": stage, "user_id": None, "session_id": None, "auth_time": None,
            "mfa_challenge": None, **(signed_in or {}),
            "created_at": now, "expires_at": now + seconds(PENDING_TTL),
        })
        return handle

    def signed_in(self, pending: Pending, stage: str, pair: dict, *, amr: list[str],
                  auth_time: int | None = None) -> Step:
        """The request moves on from ``stage`` for the user of the token pair ``pair`` (a
        V1 sign-in): a browser session, then the passkey offer, consent or the code.

        ``auth_time`` (OIDC Core 2: when the End-User authentication occurred) is the V1
        sign-in's, its token's ``iat``, unless the authentication happened elsewhere
        first: a connection's provider (its ID Token's ``auth_time``, passed here), whose
        session may be days old while iamgate's begins now.  Never later than ``iat``.
        A sign-in through a connection whose provider gave no ``auth_time``, with no factor
        checked here, proved no time at all: its browser session says so (``auth_proven``
        False) and meets no later ``max_age`` (``begin``)."""
        request, handle = pending.request, pending.handle
        principal = self.authenticator.user_token(pair["access_token"], request.app_id)
        iat = int(principal.claims["iat"])
        signed_in = {"user_id": principal.user_id, "session_id": principal.session_id,
                     "auth_time": iat if auth_time is None else min(int(auth_time), iat), "amr": amr}
        needs_consent, now = self.authorize.needs_consent(request, principal.user_id), self.clock()
        offer = self._offers_passkey(pending, principal.user_id, amr)
        # The step first: of two racing posts only one goes on; a crash before the session
        # is stored leaves a request whose consent post still works, without a cookie.
        following = OFFER if offer else "consent" if needs_consent else "done"
        advanced = self.pending.advance(pending.doc["_id"], stage, {"stage": following, **signed_in}, now)
        if advanced is None:
            raise AuthorizationRequestExpired()
        token = random_token()
        proven = auth_time is not None or any(factor in amr for factor in LOCAL_FACTORS)
        self.browser_sessions.insert({"_id": digest(token), "app_id": request.app_id, **signed_in,
                                       "auth_proven": proven,
                                       "created_at": now, "expires_at": now + seconds(BROWSER_SESSION_TTL)})
        if offer:  # the sign-in's own offer, one per sign-in; shown again, it draws the page budget
            return Step(request, page=OFFER, handle=handle, session_token=token, session_ttl=BROWSER_SESSION_TTL,
                        passkey=self.passkeys.registration_options(pending.app, principal.user_id))
        if needs_consent:
            return Step(request, page="consent", handle=handle, session_token=token, session_ttl=BROWSER_SESSION_TTL,
                        signed_in_as=self._email(request.app_id, principal.user_id))
        self.pending.delete(pending.doc["_id"])
        return Step(request, redirect=self._code_redirect(request, signed_in), session_token=token,
                    session_ttl=BROWSER_SESSION_TTL)

    def _email(self, app_id: str, user_id: str) -> str | None:
        user = self.users.get(app_id, user_id)
        return user["email"] if user else None

    def _code_redirect(self, request: AuthorizeRequest, signed_in: dict) -> str:
        code = self.authorize.issue_code(request.app_id, signed_in["user_id"], request,
                                          auth_time=signed_in["auth_time"], session_id=signed_in["session_id"],
                                          amr=signed_in.get("amr"))
        return {"code": code, "state": request.state}
