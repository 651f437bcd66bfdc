"""End users' passwords: the spec's "User authentication" change-password,
forgot-password and reset-password, and the password check other areas confirm an
action with.

Every check of a user's password goes through the ``PasswordGuard`` (the login lock,
``controlplane/lockout.py``): login, change-password and the MFA area's confirmations
draw on one budget per account.  A reset link proves the mailbox, so a reset lifts the
lock and marks the email verified, handing an unverified account to the mailbox's owner
(``claim.py``).

Reset requests and failed resets are audit records (docs/audit.md): the tenant's
administrators read them, never the requester, so a request for an unknown email is
recorded (a failure ``unknown_email``, the typed email as its target's display) without
the API's answer telling anything.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from controlplane.audit.changes import typed
from controlplane.audit.context import actor, failure, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.lockout import PasswordGuard
from controlplane.mail import Mailer
from controlplane.oidc.connections import ConnectionService
from controlplane.passwords import PasswordHasher, WrongPassword, require_strong
from controlplane.ratelimit import RateLimiter
from controlplane.users import emails
from controlplane.users.claim import AccountClaim
from controlplane.users.errors import InvalidResetToken, ResetRequestsLimited, ResetTokenExpired, UserNotFound
from controlplane.users.one_time import RESET, issue_one_time_token
from controlplane.users.sessions import SessionService
from controlplane.users.store import OneTimeTokenStore, UserStore
from shared.config import Rate
from shared.ids import digest
from shared.stamps import next_stamp
from shared.timeutil import Clock, aware


@dataclass(eq=False)
class PasswordService:
    users: UserStore
    one_time_tokens: OneTimeTokenStore
    sessions: SessionService
    oauth_connections: ConnectionService
    events: EventLog
    clock: Clock
    hasher: PasswordHasher
    password_guard: PasswordGuard
    rate_limiter: RateLimiter
    mailer: Mailer
    audit: AuditLog
    claim: AccountClaim
    _: KW_ONLY
    public_url: str
    reset_token_ttl: int
    rate_limit_forgot: Rate

    def check(self, app_id: str, user: dict, password: str) -> bool:
        """Check the user's password under the same brute-force guard as login: every
        check (login, change-password, MFA management) draws on one budget per account,
        so a stolen access token buys no extra guesses.  429 AUTH_ACCOUNT_LOCKED past it."""
        return self.password_guard.check(app_id, user["email"], password, user.get("password_hash"),
                                         audit_target=_target(user))

    def change(self, app_id: str, user_id: str, *, current_password: str, new_password: str,
               current_session_id: str | None) -> None:
        """404 USER_NOT_FOUND, 422 VALIDATION_PASSWORD_TOO_WEAK, 422 INVALID_PASSWORD
        (the check counts toward the login lock), 429 AUTH_ACCOUNT_LOCKED.  What the old
        password let someone else obtain ends: every other session of the user, every
        OIDC grant not made in the calling session, the reset links mailed before, and
        the sign-ins still under way with it (an MFA challenge it opened gets no
        session); the calling session stays."""
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        require_strong(new_password, email=user["email"], field="new_password")
        if not self.password_guard.check(app_id, user["email"], current_password, user["password_hash"],
                                         audit_target=_target(user)):
            raise WrongPassword("The current password is not correct.", details={"field": "current_password"})
        password_hash = self.hasher.hash(new_password)
        now = self.clock()
        # Only over the password just checked: one a reset or a hand-over (claim.py)
        # replaced or removed meanwhile is not put back.  ``password_changed_at`` moves in
        # the same write.  A sign-in keeps the value it read before checking the old
        # password (an MFA challenge keeps its login's), and ``SessionService.issue``
        # refuses the session if the account holds another once the session is stored: a
        # sign-in with the old password either stored it before this write (revoked
        # below) or sees the change.  Deleting the open MFA challenges instead would miss
        # one a login opens just after, having checked the old password just before.
        changes = {"password_hash": password_hash, "updated_at": now,
                   "password_changed_at": next_stamp(user.get("password_changed_at"), now)}
        if self.users.update(app_id, user_id, changes,
                             when={"status": {"$ne": "deleted"}, "password_hash": user["password_hash"]}) is None:
            current = self.users.get(app_id, user_id)
            if current is None or current.get("status") == "deleted":
                raise UserNotFound(user_id)
            raise WrongPassword("The password was changed or reset meanwhile; sign in again.",
                                details={"field": "current_password"})
        # A reset link mailed before (forwarded, read in a mailbox someone held a while)
        # would undo the change: spent now, as a reset spends the others.
        self.one_time_tokens.invalidate_for_user(app_id, user_id, RESET, now)
        self.sessions.revoke_user(app_id, user_id, reason="password_changed", keep=current_session_id, now=now)
        self.oauth_connections.revoke_user(app_id, user_id, reason="password_changed",
                                           keep_session=current_session_id)
        self.events.emit(app_id, "user.password_changed", {"user_id": user_id}, subject={"user_id": user_id})

    def forgot(self, app: dict, email: str) -> None:
        """Send a reset link if an active account has this email.  Every request for the
        email counts toward IAMGATE_RATE_LIMIT_FORGOT (429
        AUTH_PASSWORD_RESET_RATE_LIMITED), known or not; the answer never tells."""
        self.rate_limiter.hit(f"forgot:{app['_id']}:{email}", self.rate_limit_forgot, error=ResetRequestsLimited)
        user = self.users.by_email(app["_id"], email)
        if user is None or user.get("status") != "active":
            reason = "unknown_email" if user is None or user.get("status") == "deleted" else "user_inactive"
            target = _target(user) if reason == "user_inactive" else actor("user", None, typed(email))
            self.audit.record("user.password_reset_requested", result=failure(reason), actor=target, target=target,
                              application_id=app["_id"])
            return
        self.audit.record("user.password_reset_requested", result=success(), actor=_target(user),
                          target=_target(user), application_id=app["_id"])
        ttl = self.reset_token_ttl
        token = issue_one_time_token(self.one_time_tokens, user, RESET, ttl, self.clock())
        url = emails.link(self.public_url, app["_id"], "reset-password", token)
        subject, body = emails.password_reset(app, user, url, ttl)
        self.mailer.send(user["email"], subject, body)

    def reset(self, app: dict, *, token: str, email: str, password: str) -> None:
        """Set a new password with a reset token.  400 AUTH_INVALID_RESET_TOKEN (unknown,
        used, or another email's), 410 AUTH_RESET_TOKEN_EXPIRED, 422
        VALIDATION_PASSWORD_TOO_WEAK.  Revokes every session and every OIDC grant (a
        reset is how an account is taken back: nothing the old password let someone
        obtain keeps working, its access tokens included, by the account's new stamp),
        lifts a login lock and marks the email verified (the link proved the mailbox).  An
        unverified account is first handed to the mailbox's owner
        (``claim.AccountClaim``): its linked identities, passkeys and TOTP go too."""
        app_id, now = app["_id"], self.clock()
        token_digest = digest(token)
        record = self.one_time_tokens.get(app_id, token_digest, RESET)
        if record is None or record["email"] != email:
            raise self._reset_failed(app_id, actor("user", None, typed(email)), "invalid_token", InvalidResetToken())
        user_target = actor("user", record["user_id"], record["email"])
        if record.get("used_at") is not None:
            raise self._reset_failed(app_id, user_target, "token_used", InvalidResetToken())
        if aware(record["expires_at"]) <= now:
            raise self._reset_failed(app_id, user_target, "token_expired", ResetTokenExpired())
        user = self.users.get(app_id, record["user_id"])
        if user is None or user.get("status") != "active" or user["email"] != email:
            raise self._reset_failed(app_id, user_target, "user_inactive", InvalidResetToken())
        require_strong(password, email=email)
        password_hash = self.hasher.hash(password)
        # Consume only now, so a weak password does not burn the token; the atomic
        # consume also decides between two racing resets with one token.
        if self.one_time_tokens.consume(app_id, token_digest, RESET, self.clock()) is None:
            raise self._reset_failed(app_id, user_target, "token_used", InvalidResetToken())
        user = self.claim.hand_over(app_id, user, via="password_reset", reason="password_reset")
        # Stamped before the sessions end, as a hand-over is: a sign-in with the old
        # password that lands after the stamp is refused by its own check, and every
        # session begun before it is revoked below.
        now = self.clock()
        stamp = next_stamp(user.get("tokens_not_before"), now)
        self.users.update(app_id, user["_id"], {
            "password_hash": password_hash, "email_verified": True, "tokens_not_before": stamp,
            "password_changed_at": next_stamp(user.get("password_changed_at"), now), "updated_at": now})
        self.sessions.revoke_user(app_id, user["_id"], reason="password_reset", now=now)
        self.oauth_connections.revoke_user(app_id, user["_id"], reason="password_reset")
        self.one_time_tokens.invalidate_for_user(app_id, user["_id"], RESET, now)
        self.password_guard.lift(app_id, email)  # the mailbox owner lifts a lock
        self.events.emit(app_id, "user.password_reset", {"user_id": user["_id"]}, subject={"user_id": user["_id"]})

    def _reset_failed(self, app_id: str, target: dict, reason: str, error: Exception) -> Exception:
        """Record a reset that failed; the error to raise."""
        self.audit.record("user.password_reset", result=failure(reason), actor=target, target=target,
                          application_id=app_id)
        return error


def _target(user: dict) -> dict:
    """An end user as an audit record's actor or target."""
    return actor("user", user["_id"], user["email"])
