"""Email verification: the spec's "User authentication" verify-email and
resend-verification, and the verification email registration sends.

The link opens a hosted page (``pages.py``) whose button posts the token, so mail
scanners that prefetch links do not consume it.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from controlplane.mail import Mailer
from controlplane.ratelimit import RateLimiter
from controlplane.users import emails
from controlplane.users.errors import InvalidVerificationToken, VerificationRequestsLimited, VerificationTokenExpired
from controlplane.users.one_time import VERIFICATION, issue_one_time_token
from controlplane.users.store import OneTimeTokenStore, UserStore
from shared.config import Rate
from shared.ids import digest
from shared.timeutil import Clock, aware


@dataclass(eq=False)
class EmailVerificationService:
    users: UserStore
    one_time_tokens: OneTimeTokenStore
    clock: Clock
    rate_limiter: RateLimiter
    mailer: Mailer
    _: KW_ONLY
    public_url: str
    verification_token_ttl: int
    rate_limit_resend: Rate

    def verify(self, app_id: str, token: str) -> None:
        """400 AUTH_INVALID_VERIFICATION_TOKEN (unknown or used), 410
        AUTH_VERIFICATION_TOKEN_EXPIRED."""
        now = self.clock()
        token_digest = digest(token)
        record = self.one_time_tokens.get(app_id, token_digest, VERIFICATION)
        if record is None or record.get("used_at") is not None:
            raise InvalidVerificationToken()
        if aware(record["expires_at"]) <= now:
            raise VerificationTokenExpired()
        user = self.users.get(app_id, record["user_id"])
        if user is None or user.get("status") == "deleted" or user["email"] != record["email"]:
            raise InvalidVerificationToken()
        if self.one_time_tokens.consume(app_id, token_digest, VERIFICATION, now) is None:
            raise InvalidVerificationToken()
        self.users.update(app_id, user["_id"], {"email_verified": True, "updated_at": now})
        self.one_time_tokens.invalidate_for_user(app_id, user["_id"], VERIFICATION, now)

    def resend(self, app: dict, email: str) -> None:
        """Send a new verification link if an active, unverified account registered with
        a password has this email.  An account without one was made by a sign-in provider
        that did not vouch for the address, or handed over (``claim.py``): confirming the
        email would vouch for ways in its mailbox's owner never chose, so it proves the
        mailbox by a password reset instead, which hands the account over.
        Only resend requests count toward IAMGATE_RATE_LIMIT_RESEND (429
        AUTH_VERIFICATION_RATE_LIMITED); the answer never tells whether it was sent."""
        self.rate_limiter.hit(f"resend:{app['_id']}:{email}", self.rate_limit_resend,
                              error=VerificationRequestsLimited)
        user = self.users.by_email(app["_id"], email)
        if user is not None and user.get("status") == "active" and not user.get("email_verified") \
                and user.get("password_hash"):
            self.send(app, user)

    def send(self, app: dict, user: dict) -> None:
        """Email ``user`` a new verification link (valid IAMGATE_VERIFICATION_TOKEN_TTL)."""
        ttl = self.verification_token_ttl
        token = issue_one_time_token(self.one_time_tokens, user, VERIFICATION, ttl, self.clock())
        url = emails.link(self.public_url, app["_id"], "verify-email", token)
        subject, body = emails.verification(app, user, url, ttl)
        self.mailer.send(user["email"], subject, body)
