"""End-user authentication: the rules of the spec's "User authentication" section.

``UserService`` is put on the context as ``ctx.users``; the MFA and self-service areas
use ``issue_session``, ``serialize_user``, ``revoke_sessions``, ``get`` and
``release_user_slot``.

Token model (ARCHITECTURE.md, docs/authentication.md):
- the access token is an RS256 JWT from ``ctx.tokens`` (claims iss, sub, aud, iat, exp,
  jti, sid; header kid), valid ``IAMGATE_ACCESS_TOKEN_TTL`` seconds;
- the refresh token is opaque and stored only as its SHA-256 digest, one ``sessions``
  document per token family.  Refreshing swaps the family's live digest in one atomic
  update.  The successor of a token is derived from it with an HMAC under the server
  secret, so the token rotated last can be presented again within
  IAMGATE_REFRESH_REUSE_GRACE seconds and yields the *same* successor (two tabs
  refreshing at once both stay signed in) without any plaintext token being stored.
  Any later or older reuse revokes the family.

Brute force (spec "Limits"): every password check goes through ``ctx.password_guard``
(``controlplane/lockout.py``, shared with the dashboard) with the application's id as
its scope: counted per email per application *before* bcrypt runs, so parallel guesses
cannot get past the threshold; unknown emails are counted and hashed the same way as
known ones.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging

from pymongo.errors import DuplicateKeyError

from shared.config import Rate

from shared.ids import digest, new_id, random_token
from shared.timeutil import aware, isoformat, seconds

from controlplane.passwords import WrongPassword, require_strong
from controlplane.users import emails
from controlplane.users.errors import (AccountSuspended, EmailAlreadyRegistered, InvalidCredentials, InvalidResetToken,
                                       InvalidVerificationToken, LoginsLimited, RefreshTokenRejected, RegistrationsLimited,
                                       ResetRequestsLimited,
                                       ResetTokenExpired, UserLimitReached, UserNotFound, VerificationRequestsLimited,
                                       VerificationTokenExpired)
from controlplane.users.store import OneTimeTokenStore, SessionStore, UserStore

log = logging.getLogger("iamgate.users")

VERIFICATION, RESET = "verification", "reset"
# A tier-limit reservation older than this belongs to a registration that died between
# reserving the slot and inserting the user; its slot is given back.
STALE_RESERVATION_SECONDS = 60


class UserService:
    def __init__(self, ctx):
        self._ctx = ctx
        self.users = UserStore(ctx.store)
        self.sessions = SessionStore(ctx.store)
        self.one_time = OneTimeTokenStore(ctx.store)
        self._guard = ctx.password_guard
        self._rotation_key = hashlib.sha256(
            b"iamgate refresh-token rotation\0" + ctx.config.secret_key.encode("utf-8")).digest()

    @property
    def _config(self):
        return self._ctx.config

    def _now(self):
        return self._ctx.clock()

    # ------------------------------------------------------------------ reading

    def get(self, app_id: str, user_id: str) -> dict | None:
        """The user document, whatever its status (callers decide what a suspended or
        deleted user means to them), or None when the application has no such user."""
        return self.users.get(app_id, user_id)

    @staticmethod
    def serialize_user(user: dict) -> dict:
        """The spec's User resource (registration and login result)."""
        return {
            "id": user["_id"],
            "email": user["email"],
            "name": user["name"],
            "email_verified": bool(user.get("email_verified")),
            "created_at": isoformat(user["created_at"]),
            "metadata": user.get("metadata"),
        }

    @classmethod
    def serialize_admin_user(cls, user: dict) -> dict:
        """The User plus what an administrator needs: status and its timestamps."""
        return {
            **cls.serialize_user(user),
            "avatar_url": user.get("avatar_url"),
            "status": user.get("status", "active"),
            "updated_at": isoformat(user.get("updated_at")),
            "suspended_at": isoformat(user.get("suspended_at")),
            "deleted_at": isoformat(user.get("deleted_at")),
            "last_login_at": isoformat(user.get("last_login_at")),
        }

    # ------------------------------------------------------------------ registration

    def throttle_registration(self, app: dict, ip: str) -> None:
        """Registrations per client IP per application: the application's
        ``registration_rate_limit`` per minute (0 = unlimited) or IAMGATE_RATE_LIMIT_REGISTER."""
        per_minute = app.get("registration_rate_limit")
        rate = self._config.rate_limit_register if per_minute is None else Rate(per_minute, 60)
        self._ctx.rate_limiter.hit(f"register:{app['_id']}:{ip}", rate,
                                   error=RegistrationsLimited)

    def register(self, app: dict, *, email: str, password: str, name: str, metadata: dict | None = None) -> dict:
        """Create an unverified user, send the verification email, emit user.created.

        409 AUTH_EMAIL_ALREADY_REGISTERED for a taken email (a soft-deleted user keeps its
        email), 422 VALIDATION_PASSWORD_TOO_WEAK, 403 tier_limit_exceeded."""
        app_id = app["_id"]
        require_strong(password, email=email)
        if self.users.by_email(app_id, email) is not None:
            raise EmailAlreadyRegistered(email)
        password_hash = self._ctx.hasher.hash(password)
        now = self._now()
        user = {
            "_id": new_id(), "app_id": app_id, "email": email, "name": name, "password_hash": password_hash,
            "email_verified": False, "metadata": metadata, "avatar_url": None, "status": "active",
            "created_at": now, "updated_at": now, "deleted_at": None, "suspended_at": None, "last_login_at": None,
        }
        self._reserve_slot(app_id, user["_id"], now)
        try:
            self.users.insert(user)
        except DuplicateKeyError:
            self.users.cancel_reservation(app_id, user["_id"])
            raise EmailAlreadyRegistered(email) from None
        except BaseException:
            self.users.cancel_reservation(app_id, user["_id"])
            raise
        self.users.confirm_slot(app_id, user["_id"])
        self._send_verification(app, user)
        self._ctx.events.emit(app_id, "user.created", {"user_id": user["_id"], "email": email, "name": name},
                              subject={"user_id": user["_id"]})
        return user

    def _reserve_slot(self, app_id: str, user_id: str, now) -> None:
        limit = self._config.max_users_per_application
        if self.users.reserve_slot(app_id, user_id, limit, now):
            return
        if self._reclaim_stale_reservations(app_id, now) and self.users.reserve_slot(app_id, user_id, limit, now):
            return
        if self.users.reconcile_slots(app_id) and self.users.reserve_slot(app_id, user_id, limit, now):
            return
        raise UserLimitReached(limit)

    def _reclaim_stale_reservations(self, app_id: str, now) -> bool:
        reclaimed = False
        for user_id in self.users.stale_reservations(app_id, now - seconds(STALE_RESERVATION_SECONDS)):
            if self.users.get(app_id, user_id) is not None:
                self.users.confirm_slot(app_id, user_id)  # inserted; only the confirmation was lost
            elif self.users.cancel_reservation(app_id, user_id):
                reclaimed = True
        return reclaimed

    def release_user_slot(self, app_id: str) -> None:
        """Give back the tier-limit slot of a user who was soft-deleted.

        Call it exactly once per user, after the conditional status transition to
        ``deleted`` succeeded (a double call would let the application exceed its limit).
        A call lost to a crash is repaired when the limit is next reached
        (``UserStore.reconcile_slots``)."""
        self.users.release_slot(app_id)

    # ------------------------------------------------------------------ login

    def throttle_login(self, app: dict, ip: str) -> None:
        """Login requests per client IP (IAMGATE_RATE_LIMIT_LOGIN, default 10/60)."""
        self._ctx.rate_limiter.hit(f"login:{app['_id']}:{ip}", self._config.rate_limit_login,
                                   error=LoginsLimited)

    def login(self, app: dict, *, email: str, password: str, remember_me: bool, device_info: dict) -> dict:
        """A token pair, or the MFA challenge ``ctx.login_second_factor`` returns.

        401 AUTH_INVALID_CREDENTIALS for a wrong password or an unknown (or deleted)
        email, in the same time; 429 AUTH_ACCOUNT_LOCKED while locked, even with the
        right password; 403 AUTH_ACCOUNT_SUSPENDED only once the password is right."""
        user = self.users.by_email(app["_id"], email)
        if user is not None and user.get("status") == "deleted":
            user = None
        if not self._guard.check(app["_id"], email, password, user["password_hash"] if user else None):
            raise InvalidCredentials()
        if user["status"] == "suspended":
            raise AccountSuspended()
        challenge = self._ctx.login_second_factor(app, user, remember_me=remember_me, device_info=device_info)
        if challenge is not None:
            return challenge
        return self.issue_session(app, user, remember_me=remember_me, device_info=device_info)

    def check_password(self, app_id: str, user: dict, password: str) -> bool:
        """Check the user's password under the same brute-force guard as login: every
        check (login, change-password, MFA management) draws on one budget per account,
        so a stolen access token buys no extra guesses.  429 AUTH_ACCOUNT_LOCKED past it."""
        return self._guard.check(app_id, user["email"], password, user.get("password_hash"))

    # ------------------------------------------------------------------ sessions and tokens

    def issue_session(self, app: dict, user: dict, *, remember_me: bool, device_info: dict) -> dict:
        """Start a session for a user whose credentials (and second factor) were checked.

        Creates the refresh-token family, revokes the oldest sessions beyond the
        application's ``max_concurrent_sessions`` (0 = unlimited), emits user.login and
        returns the spec's Token pair {access_token, refresh_token, token_type,
        expires_in, user}."""
        config, now = self._config, self._now()
        app_id, user_id = app["_id"], user["_id"]
        ttl = config.refresh_token_remember_me_ttl if remember_me else config.refresh_token_ttl
        refresh_token = random_token()
        session = {
            "_id": new_id(), "app_id": app_id, "user_id": user_id,
            "refresh_digest": digest(refresh_token), "previous_digest": None, "rotated_at": None,
            "device_info": {"ip": device_info.get("ip"), "user_agent": device_info.get("user_agent")},
            "is_remember_me": bool(remember_me), "created_at": now, "last_used_at": now,
            "expires_at": now + seconds(ttl), "revoked_at": None,
        }
        self.sessions.insert(session)
        self._enforce_session_limit(app, user_id, now)
        self.users.update(app_id, user_id, {"last_login_at": now})
        self._ctx.events.emit(app_id, "user.login", {"user_id": user_id, "session_id": session["_id"]},
                              subject={"user_id": user_id})
        return self._token_pair(app_id, user, session["_id"], refresh_token)

    def _enforce_session_limit(self, app: dict, user_id: str, now) -> None:
        # Keep the N newest: every racing login computes the same survivors, so two
        # parallel logins can never revoke each other's sessions both.
        limit = app.get("max_concurrent_sessions") or 0
        if limit <= 0:
            return
        for session in self.sessions.active(app["_id"], user_id, now)[limit:]:
            self.sessions.revoke(app["_id"], session["_id"], now, "session_limit")

    def _token_pair(self, app_id: str, user: dict, session_id: str, refresh_token: str) -> dict:
        access_token, expires_in = self._ctx.tokens.issue_access_token(app_id, user["_id"], session_id)
        return {"access_token": access_token, "refresh_token": refresh_token, "token_type": "Bearer",
                "expires_in": expires_in, "user": self.serialize_user(user)}

    def _successor(self, refresh_token: str) -> str:
        mac = hmac.new(self._rotation_key, refresh_token.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def refresh(self, app: dict, refresh_token: str) -> dict:
        """Exchange a refresh token for a new pair, rotating it (ARCHITECTURE.md).

        401 UNAUTHORIZED (``details.reason``: unknown, expired, revoked, reused) when it
        cannot be used; presenting a rotated token outside the grace window revokes its
        session."""
        app_id, now = app["_id"], self._now()
        presented = digest(refresh_token)
        successor = self._successor(refresh_token)
        session = self.sessions.rotate(app_id, presented, digest(successor), now)
        if session is not None:
            self.sessions.record_rotated(session, presented, now)
        else:
            session = self._reuse_within_grace(app_id, presented, digest(successor), now)
        user = self.users.get(app_id, session["user_id"])
        if user is None or user.get("status") != "active":
            self.sessions.revoke(app_id, session["_id"], now, "user_inactive")
            raise RefreshTokenRejected("The user of this refresh token is no longer active.", details={"reason": "revoked"})
        return self._token_pair(app_id, user, session["_id"], successor)

    def _reuse_within_grace(self, app_id: str, presented: str, successor_digest: str, now) -> dict:
        """The session a non-live token may still refresh (the token rotated last, within
        the grace window); otherwise raise 401, revoking the family on reuse."""
        live = self.sessions.by_current(app_id, presented)
        if live is not None:
            raise self._refresh_refused(live, now)
        session = self.sessions.by_previous(app_id, presented)
        if session is not None:
            self._raise_if_unusable(session, now)
            grace_ends = aware(session["rotated_at"]) + seconds(self._config.refresh_reuse_grace)
            if now < grace_ends and session["refresh_digest"] == successor_digest:
                self.sessions.touch(app_id, session["_id"], now)
                return session
        else:
            session = self.sessions.by_rotated(app_id, presented)
            if session is None:
                raise RefreshTokenRejected("The refresh token is not valid.", details={"reason": "unknown"})
            self._raise_if_unusable(session, now)
        self.sessions.revoke(app_id, session["_id"], now, "refresh_token_reused")
        log.warning("refresh token reused; session revoked",
                    extra={"app_id": app_id, "user_id": session["user_id"], "session_id": session["_id"]})
        raise RefreshTokenRejected("The refresh token was already used; the session has been revoked.",
                           details={"reason": "reused"})

    def _raise_if_unusable(self, session: dict, now) -> None:
        if session.get("revoked_at") is not None or aware(session["expires_at"]) <= now:
            raise self._refresh_refused(session, now)

    @staticmethod
    def _refresh_refused(session: dict, now) -> RefreshTokenRejected:
        if session.get("revoked_at") is not None:
            return RefreshTokenRejected("The session of this refresh token has been revoked.", details={"reason": "revoked"})
        return RefreshTokenRejected("The refresh token has expired; log in again.", details={"reason": "expired"})

    def logout(self, app_id: str, refresh_token: str, *, user_id: str | None) -> bool:
        """Revoke the session of ``refresh_token``.  A user may only revoke their own
        sessions (``user_id``); an API key (``user_id`` None) any of its application.
        Unknown, foreign or already revoked tokens change nothing, and the caller is
        not told which (no oracle)."""
        presented = digest(refresh_token)
        session = (self.sessions.by_current(app_id, presented) or self.sessions.by_previous(app_id, presented)
                   or self.sessions.by_rotated(app_id, presented))
        if session is None or (user_id is not None and session["user_id"] != user_id):
            return False
        return self.sessions.revoke(app_id, session["_id"], self._now(), "logout")

    def revoke_sessions(self, app_id: str, user_id: str, *, reason: str = "revoked", keep: str | None = None) -> int:
        """Revoke every live session (refresh-token family) of the user except ``keep``;
        returns how many were revoked.  Access tokens already issued stay valid until
        they expire (spec, Authentication 2)."""
        return self.sessions.revoke_user(app_id, user_id, self._now(), reason, keep=keep)

    # ------------------------------------------------------------------ passwords

    def change_password(self, app_id: str, user_id: str, *, current_password: str, new_password: str,
                        current_session_id: str | None) -> None:
        """404 USER_NOT_FOUND, 422 VALIDATION_PASSWORD_TOO_WEAK, 422 INVALID_PASSWORD
        (the check counts toward the login lock), 429 AUTH_ACCOUNT_LOCKED.  Every other
        session of the user is revoked; the calling one stays."""
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        require_strong(new_password, email=user["email"], field="new_password")
        if not self._guard.check(app_id, user["email"], current_password, user["password_hash"]):
            raise WrongPassword("The current password is not correct.", details={"field": "current_password"})
        password_hash = self._ctx.hasher.hash(new_password)
        now = self._now()
        if self.users.update(app_id, user_id, {"password_hash": password_hash, "updated_at": now},
                             when={"status": {"$ne": "deleted"}}) is None:
            raise UserNotFound(user_id)
        self.sessions.revoke_user(app_id, user_id, now, "password_changed", keep=current_session_id)
        self._ctx.events.emit(app_id, "user.password_changed", {"user_id": user_id}, subject={"user_id": user_id})

    def forgot_password(self, app: dict, email: str) -> None:
        """Send a reset link if an active account has this email.  Every request for the
        email counts toward IAMGATE_RATE_LIMIT_FORGOT (429
        AUTH_PASSWORD_RESET_RATE_LIMITED), known or not; the answer never tells."""
        self._ctx.rate_limiter.hit(
            f"forgot:{app['_id']}:{email}", self._config.rate_limit_forgot,
            error=ResetRequestsLimited)
        user = self.users.by_email(app["_id"], email)
        if user is None or user.get("status") != "active":
            return
        ttl = self._config.reset_token_ttl
        token = self._issue_one_time(user, RESET, ttl)
        subject, body = emails.password_reset(app, user, self._link(app, "reset-password", token), ttl)
        self._ctx.mailer.send(user["email"], subject, body)

    def reset_password(self, app: dict, *, token: str, email: str, password: str) -> None:
        """Set a new password with a reset token.  400 AUTH_INVALID_RESET_TOKEN (unknown,
        used, or another email's), 410 AUTH_RESET_TOKEN_EXPIRED, 422
        VALIDATION_PASSWORD_TOO_WEAK.  Revokes every session, lifts a login lock and
        marks the email verified (the link proved the mailbox)."""
        app_id, now = app["_id"], self._now()
        token_digest = digest(token)
        record = self.one_time.get(app_id, token_digest, RESET)
        if record is None or record.get("used_at") is not None or record["email"] != email:
            raise InvalidResetToken()
        if aware(record["expires_at"]) <= now:
            raise ResetTokenExpired()
        user = self.users.get(app_id, record["user_id"])
        if user is None or user.get("status") != "active" or user["email"] != email:
            raise InvalidResetToken()
        require_strong(password, email=email)
        password_hash = self._ctx.hasher.hash(password)
        # Consume only now, so a weak password does not burn the token; the atomic
        # consume also decides between two racing resets with one token.
        if self.one_time.consume(app_id, token_digest, RESET, self._now()) is None:
            raise InvalidResetToken()
        now = self._now()
        self.users.update(app_id, user["_id"], {"password_hash": password_hash, "email_verified": True,
                                                "updated_at": now})
        self.one_time.invalidate_for_user(app_id, user["_id"], RESET, now)
        self.sessions.revoke_user(app_id, user["_id"], now, "password_reset")
        self._guard.lift(app_id, email)  # the mailbox owner lifts a lock
        self._ctx.events.emit(app_id, "user.password_reset", {"user_id": user["_id"]},
                              subject={"user_id": user["_id"]})

    # ------------------------------------------------------------------ email verification

    def verify_email(self, app_id: str, token: str) -> None:
        """400 AUTH_INVALID_VERIFICATION_TOKEN (unknown or used), 410
        AUTH_VERIFICATION_TOKEN_EXPIRED."""
        now = self._now()
        token_digest = digest(token)
        record = self.one_time.get(app_id, token_digest, VERIFICATION)
        if record is None or record.get("used_at") is not None:
            raise InvalidVerificationToken()
        if aware(record["expires_at"]) <= now:
            raise VerificationTokenExpired()
        user = self.users.get(app_id, record["user_id"])
        if user is None or user.get("status") == "deleted" or user["email"] != record["email"]:
            raise InvalidVerificationToken()
        if self.one_time.consume(app_id, token_digest, VERIFICATION, now) is None:
            raise InvalidVerificationToken()
        self.users.update(app_id, user["_id"], {"email_verified": True, "updated_at": now})
        self.one_time.invalidate_for_user(app_id, user["_id"], VERIFICATION, now)

    def resend_verification(self, app: dict, email: str) -> None:
        """Send a new verification link if an active, unverified account has this email.
        Only resend requests count toward IAMGATE_RATE_LIMIT_RESEND (429
        AUTH_VERIFICATION_RATE_LIMITED); the answer never tells whether it was sent."""
        self._ctx.rate_limiter.hit(
            f"resend:{app['_id']}:{email}", self._config.rate_limit_resend,
            error=VerificationRequestsLimited)
        user = self.users.by_email(app["_id"], email)
        if user is not None and user.get("status") == "active" and not user.get("email_verified"):
            self._send_verification(app, user)

    def _send_verification(self, app: dict, user: dict) -> None:
        ttl = self._config.verification_token_ttl
        token = self._issue_one_time(user, VERIFICATION, ttl)
        subject, body = emails.verification(app, user, self._link(app, "verify-email", token), ttl)
        self._ctx.mailer.send(user["email"], subject, body)

    def _issue_one_time(self, user: dict, purpose: str, ttl: int) -> str:
        token, now = random_token(), self._now()
        self.one_time.insert({
            "_id": digest(token), "app_id": user["app_id"], "user_id": user["_id"], "email": user["email"],
            "purpose": purpose, "created_at": now, "expires_at": now + seconds(ttl), "used_at": None,
        })
        return token

    def _link(self, app: dict, page: str, token: str) -> str:
        return emails.link(self._config.public_url, app["_id"], page, token)

    # ------------------------------------------------------------------ administration (dashboard)

    def list_users(self, app_id: str, *, search: str | None, status: str | None, page: int,
                   per_page: int) -> tuple[list[dict], int]:
        """Users of the application, newest first; ``search`` matches email or name
        (case-insensitive substring); soft-deleted users only when ``status`` asks."""
        statuses = (status,) if status else ("active", "suspended")
        return self.users.search(app_id, text=search, statuses=statuses, skip=(page - 1) * per_page, limit=per_page)

    def suspend(self, app_id: str, user_id: str) -> dict:
        """Suspend: the user's tokens stop at once (status is checked live), its sessions
        are revoked, login answers 403 AUTH_ACCOUNT_SUSPENDED.  Idempotent."""
        now = self._now()
        user = self.users.update(app_id, user_id, {"status": "suspended", "suspended_at": now, "updated_at": now},
                                 when={"status": "active"})
        if user is None:
            return self._unchanged(app_id, user_id)
        # Status first, then sessions: a crash in between leaves sessions whose refresh
        # is refused (and revoked) because the user is not active.
        self.sessions.revoke_user(app_id, user_id, now, "suspended")
        self._ctx.events.emit(app_id, "user.suspended", {"user_id": user_id}, subject={"user_id": user_id},
                              user_ids=[user_id])
        return user

    def unsuspend(self, app_id: str, user_id: str) -> dict:
        """Make a suspended user active again (they log in anew).  Idempotent."""
        now = self._now()
        user = self.users.update(app_id, user_id, {"status": "active", "suspended_at": None, "updated_at": now},
                                 when={"status": "suspended"})
        if user is None:
            return self._unchanged(app_id, user_id)
        self._ctx.events.emit(app_id, "user.unsuspended", {"user_id": user_id}, subject={"user_id": user_id},
                              user_ids=[user_id])
        return user

    def _unchanged(self, app_id: str, user_id: str) -> dict:
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

