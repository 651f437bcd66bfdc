"""Password login: the spec's "User authentication" login (POST V1/users/login).

Brute force (spec "Limits"): every password check goes through the ``PasswordGuard``
(``controlplane/lockout.py``, shared with the dashboard) with the application's id as
its scope: counted per email per application *before* bcrypt runs, so parallel guesses
cannot get past the threshold; unknown emails are counted and hashed the same way as
known ones.

Once the password and the account status are checked, the login asks its
``second_factor`` (the MFA area's service) whether the user must answer a challenge
before a session starts.

Every attempt that does not end in a session is an audit record ``user.login`` with its
reason (docs/audit.md); the success is the session's ``user.login`` change-log event.
Each is one insert, after the password check.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from controlplane.audit.changes import typed
from controlplane.audit.context import actor, failure
from controlplane.audit.service import AuditLog
from controlplane.lockout import AccountLocked, PasswordGuard
from controlplane.ratelimit import RateLimiter, Unit
from controlplane.users.errors import AccountSuspended, InvalidCredentials, LoginsLimited
from controlplane.users.sessions import SessionService
from controlplane.users.store import UserStore
from shared.config import Rate


class SecondFactor(Protocol):
    def login_challenge(self, app: dict, user: dict, *, remember_me: bool, device_info: dict) -> dict | None:
        """The challenge the login answers instead of tokens, or None when the user has
        no second factor."""


@dataclass(eq=False)
class LoginService:
    users: UserStore
    sessions: SessionService
    password_guard: PasswordGuard
    rate_limiter: RateLimiter
    second_factor: SecondFactor
    audit: AuditLog
    _: KW_ONLY
    rate_limit_login: Rate

    def throttle(self, app: dict, ip: str) -> None:
        """Login requests per client IP (IAMGATE_RATE_LIMIT_LOGIN, default 10/60)."""
        self.unit(app, ip).take()

    def unit(self, app: dict, ip: str) -> Unit:
        """One request's unit of the client IP's login budget (``throttle``'s), not drawn
        yet: for a request that both signs in and shows a page storing a passkey
        challenge, which draw on the same budget and together cost one unit."""
        return self.rate_limiter.unit(_budget_key(app, ip), self.rate_limit_login, error=LoginsLimited)

    def page_unit(self, app: dict, ip: str) -> Unit:
        """One showing's unit of the client IP's login page budget
        (``login-page:<app>:<ip>``, at IAMGATE_RATE_LIMIT_LOGIN; ``RateLimiter.page_unit``):
        what a hosted page storing a passkey challenge draws when no sign-in attempt of
        the request pays for it, so a third party that makes a browser load the page
        never spends the budget of its sign-ins."""
        return self.rate_limiter.page_unit(_budget_key(app, ip), self.rate_limit_login, error=LoginsLimited)

    def login(self, app: dict, *, email: str, password: str, remember_me: bool, device_info: dict) -> dict:
        """A token pair, or the challenge of the ``second_factor``.

        401 AUTH_INVALID_CREDENTIALS for a wrong password or an unknown (or deleted)
        email, in the same time; 429 AUTH_ACCOUNT_LOCKED while locked, even with the
        right password; 403 AUTH_ACCOUNT_SUSPENDED only once the password is right."""
        user = self.users.by_email(app["_id"], email)
        if user is not None and user.get("status") == "deleted":
            user = None
        # Who tried: the account of the email, or (unknown email) the email as typed.
        claimed = actor("user", user["_id"], user["email"]) if user else actor("user", None, typed(email))
        try:
            checked = self.password_guard.check(app["_id"], email, password, user["password_hash"] if user else None,
                                                audit_target=claimed)
        except AccountLocked as exc:
            self._refused(app, claimed, exc.details.get("reason", "locked"))
            raise
        if not checked:
            self._refused(app, claimed, "invalid_credentials")
            raise InvalidCredentials()
        if user["status"] == "suspended":
            self._refused(app, claimed, "suspended")
            raise AccountSuspended()
        challenge = self.second_factor.login_challenge(app, user, remember_me=remember_me, device_info=device_info)
        if challenge is not None:
            self._refused(app, claimed, "mfa_required")  # the password was right; a code is still owed
            return challenge
        return self.sessions.issue(app, user, remember_me=remember_me, device_info=device_info)

    def _refused(self, app: dict, claimed: dict, reason: str) -> None:
        self.audit.record("user.login", result=failure(reason), actor=claimed, target=claimed,
                          data={"method": "password"}, application_id=app["_id"])


def _budget_key(app: dict, ip: str) -> str:
    return f"login:{app['_id']}:{ip}"
