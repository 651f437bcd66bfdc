"""Multi-factor authentication: the rules of the spec's "Multi-factor authentication"
section and the MFA rows of its states table.

``MfaService`` is the password login's second factor (``users.login.SecondFactor``):
the login calls ``login_challenge`` once the password and the account status are
checked.

- Setup creates a *pending* TOTP method (160-bit secret, encrypted at rest); it is not
  used at login nor reported as enabled until a correct code confirms it.  A new setup
  replaces an older pending one; an abandoned one expires after ``SETUP_TTL``.
- Confirm activates it, returns 10 backup codes (stored as keyed digests, shown once)
  and emits mfa.enabled.
- Login of a user with an active method answers an MFA challenge instead of tokens.
  ``verify`` counts the attempt on the challenge (atomic ``$inc``) before the code is
  checked, so at most ``mfa_max_attempts`` codes are ever tried per challenge; a TOTP
  code is accepted once (the method's last accepted time step only moves forward), a
  backup code once; the challenge is then consumed atomically and the token pair is
  issued exactly as a password login issues it (``SessionService.issue``).
- Disable (password) removes the method, the backup codes and pending challenges and
  emits mfa.disabled; regenerate (password) replaces the backup set.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import math
from dataclasses import KW_ONLY, InitVar, dataclass

from controlplane.applications.service import branding
from controlplane.audit.context import actor, failure, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.mail import Mailer
from controlplane.mfa import emails, totp
from controlplane.mfa.errors import (
    ConfirmationCodeInvalid,
    MfaAlreadyEnabled,
    MfaChallengeExpired,
    MfaCodeInvalid,
    MfaLocked,
    MfaMethodNotFound,
    MfaNotEnabled,
)
from controlplane.mfa.store import BackupCodeStore, ChallengeStore, MethodStore
from controlplane.passwords import WrongPassword
from controlplane.ratelimit import RateLimiter
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import AccountSuspended, UserNotFound
from controlplane.users.passwords import PasswordService
from controlplane.users.sessions import SessionService
from shared.config import Rate
from shared.crypto import SecretBox
from shared.ids import digest, new_id, random_token
from shared.timeutil import Clock, aware, isoformat, seconds

log = logging.getLogger("iamgate.mfa")

TOTP = "totp"
BACKUP_CODES_PER_SET = 10
# An unconfirmed setup (and its secret) is forgotten after this long.
SETUP_TTL = 3600
# Codes tried per user across all challenges, on top of the per-challenge lock: a caller
# who knows the password cannot get fresh guesses by logging in again and again.
VERIFY_RATE = Rate(20, 900)
# Why an answer to a login's challenge failed, as its audit record says.
_CHALLENGE_REASONS = {MfaCodeInvalid: "invalid_code", MfaLocked: "locked", MfaChallengeExpired: "challenge_expired",
                      AccountSuspended: "suspended"}
_CHALLENGE_FAILURES = tuple(_CHALLENGE_REASONS)


def serialize_method(method: dict) -> dict:
    """The spec's MFA method resource."""
    return {
        "id": method["_id"],
        "type": method["type"],
        "label": method["label"],
        "is_primary": bool(method.get("is_primary")),
        "verified_at": isoformat(method.get("verified_at")),
        "last_used_at": isoformat(method.get("last_used_at")),
    }


@dataclass(eq=False)
class MfaService:
    methods: MethodStore
    backup_codes: BackupCodeStore
    challenges: ChallengeStore
    users: UserDirectory
    sessions: SessionService
    passwords: PasswordService
    events: EventLog
    clock: Clock
    box: SecretBox
    rate_limiter: RateLimiter
    mailer: Mailer
    audit: AuditLog
    _: KW_ONLY
    secret_key: InitVar[str]
    challenge_ttl: int
    max_attempts: int

    def __post_init__(self, secret_key: str):
        # Backup codes carry ~59 bits; a keyed digest means a copy of the database alone
        # is not enough to brute-force them offline.
        self._backup_key = hashlib.sha256(
            b"iamgate mfa backup codes\0" + secret_key.encode("utf-8")).digest()

    def _now(self):
        return self.clock()

    def _user(self, app_id: str, user_id: str) -> dict:
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

    # ------------------------------------------------------------------ status

    def status(self, app_id: str, user_id: str) -> dict:
        """{mfa_enabled, methods (active ones), backup_codes_remaining}; a pending setup
        counts for nothing."""
        self._user(app_id, user_id)
        methods = self.methods.all_active(app_id, user_id)
        primary = next((m for m in methods if m["type"] == TOTP), None)
        remaining = self.backup_codes.remaining(app_id, user_id, primary.get("backup_set_id")) if primary else 0
        return {"mfa_enabled": bool(methods), "methods": [serialize_method(m) for m in methods],
                "backup_codes_remaining": remaining}

    def all_methods(self, app_id: str, user_id: str) -> list[dict]:
        """Every method of the user, pending ones too, newest first, without its secret
        (the self-service export shows each with its status)."""
        return self.methods.for_user(app_id, user_id)

    def export_methods(self, app_id: str, user_id: str) -> list[dict]:
        """The user's active MFA methods (spec shape, no secrets), for the GDPR export."""
        return [serialize_method(m) for m in self.methods.all_active(app_id, user_id)]

    # ------------------------------------------------------------------ enrolment

    def setup(self, app: dict, user_id: str, *, label: str) -> dict:
        """Start a TOTP enrolment: a pending method with a fresh secret.

        Returns {method_id, provisioning_uri, secret}.  409 MFA_ALREADY_ENABLED while an
        active TOTP method exists.  Replaces an earlier pending setup."""
        app_id = app["_id"]
        user = self._user(app_id, user_id)
        if self.methods.active(app_id, user_id) is not None:
            raise MfaAlreadyEnabled()
        secret, now = totp.new_secret(), self._now()
        method = {
            "_id": new_id(), "app_id": app_id, "user_id": user_id, "type": TOTP, "label": label,
            "secret": self.box.encrypt(secret), "status": "pending", "is_primary": True,
            "created_at": now, "verified_at": None, "last_used_at": None, "last_used_step": None,
            "expires_at": now + seconds(SETUP_TTL), "backup_set_id": None,
        }
        # Insert, then drop the older setups: of two racing setups the later one stays
        # (deleting first could leave both).
        self.methods.insert(method)
        self.methods.delete_pending(app_id, user_id, keep=method["_id"], created_by=now)
        uri = totp.provisioning_uri(secret, account=user["email"], issuer=branding(app)["name"])
        return {"method_id": method["_id"], "provisioning_uri": uri, "secret": secret}

    def confirm(self, app: dict, user_id: str, *, method_id: str, code: str) -> list[str]:
        """Activate a pending method with a code from the app; return its 10 backup codes
        and emit mfa.enabled.

        404 MFA_METHOD_NOT_FOUND (unknown, another user's, or an expired setup),
        409 MFA_ALREADY_ENABLED, 422 MFA_INVALID_CODE."""
        app_id, now = app["_id"], self._now()
        user = self._user(app_id, user_id)
        method = self.methods.get(app_id, user_id, method_id)
        if method is not None and method["status"] == "active":
            raise MfaAlreadyEnabled()
        if method is None or aware(method["expires_at"]) <= now:
            raise MfaMethodNotFound(method_id)
        if self.methods.active(app_id, user_id) is not None:
            raise MfaAlreadyEnabled()
        step = totp.matching_step(self._secret(method), code, now)
        if step is None:
            raise ConfirmationCodeInvalid()
        # The codes first, then the one write that makes them current: a crash or a lost
        # race in between leaves only codes no method points at.
        set_id, codes = self._new_backup_set(app_id, user_id, now)
        activated = self.methods.activate(app_id, user_id, method_id, now=now, step=step, backup_set_id=set_id)
        if activated is None:
            self.backup_codes.delete_set(app_id, user_id, set_id)
            if self.methods.active(app_id, user_id) is not None:
                raise MfaAlreadyEnabled()
            raise MfaMethodNotFound(method_id)
        self.events.emit(app_id, "mfa.enabled", {"user_id": user_id, "method_id": method_id},
                              subject={"user_id": user_id})
        self._mail(emails.enabled(app, user), user)
        return codes

    def regenerate_backup_codes(self, app: dict, user_id: str, *, password: str) -> list[str]:
        """A new set of 10 backup codes; every earlier code stops working.

        400 MFA_NOT_ENABLED, 422 INVALID_PASSWORD, 429 RATE_LIMIT_EXCEEDED (password
        checks per user)."""
        app_id = app["_id"]
        user, method = self._password_confirmed(app_id, user_id, password)
        set_id, codes = self._new_backup_set(app_id, user_id, self._now())
        before = self.methods.swap_backup_set(app_id, method["_id"], set_id)
        if before is None:  # disabled meanwhile
            self.backup_codes.delete_set(app_id, user_id, set_id)
            raise MfaNotEnabled()
        if before.get("backup_set_id"):
            self.backup_codes.delete_set(app_id, user_id, before["backup_set_id"])
        self.events.emit(app_id, "mfa.backup_codes_regenerated", {"user_id": user_id},
                              subject={"user_id": user_id})
        self._mail(emails.backup_codes_regenerated(app, user), user)
        return codes

    def disable(self, app: dict, user_id: str, *, password: str) -> None:
        """Remove the TOTP method, the backup codes and open challenges; emit mfa.disabled.
        Login then needs only the password.

        400 MFA_NOT_ENABLED, 422 INVALID_PASSWORD, 429 RATE_LIMIT_EXCEEDED."""
        user, method = self._password_confirmed(app["_id"], user_id, password)
        self._remove(app, user, method, by_administrator=False)

    def reset(self, app: dict, user_id: str) -> None:
        """An administrator turns a user's MFA off (lost device and backup codes).
        404 USER_NOT_FOUND, 400 MFA_NOT_ENABLED."""
        user = self._user(app["_id"], user_id)
        method = self.methods.active(app["_id"], user_id)
        if method is None:
            raise MfaNotEnabled()
        self._remove(app, user, method, by_administrator=True)

    def _remove(self, app: dict, user: dict, method: dict, *, by_administrator: bool) -> None:
        app_id, user_id = app["_id"], user["_id"]
        # The method first: once it is gone MFA is off, and leftovers (codes, challenges)
        # are ignored until the deletes below reclaim them.
        if not self.methods.delete_active(app_id, method["_id"]):
            raise MfaNotEnabled()  # a parallel disable won
        self.methods.delete_pending(app_id, user_id)
        self.backup_codes.delete_for_user(app_id, user_id)
        self.challenges.delete_for_user(app_id, user_id)
        self.events.emit(app_id, "mfa.disabled", {"user_id": user_id}, subject={"user_id": user_id})
        self._mail(emails.disabled(app, user, by_administrator=by_administrator), user)

    def forget_user(self, app_id: str, user_id: str) -> None:
        """Delete every MFA record of a user (account deletion); no event."""
        self.methods.delete_for_user(app_id, user_id)
        self.backup_codes.delete_for_user(app_id, user_id)
        self.challenges.delete_for_user(app_id, user_id)

    def on_event(self, event) -> None:
        """Listener of the change log: a deleted user's second factor goes with it."""
        if event.type == "user.deleted" and event.app_id and event.subject.get("user_id"):
            self.forget_user(event.app_id, event.subject["user_id"])

    # ------------------------------------------------------------------ login

    def login_challenge(self, app: dict, user: dict, *, remember_me: bool, device_info: dict,
                        other_methods: tuple = ()) -> dict | None:
        """The login's second factor: the MFA challenge {mfa_required,
        challenge_token, mfa_methods} when the user has an active TOTP method or
        ``other_methods`` (a passkey: ``webauthn``) to answer it with (the login then
        answers it instead of tokens), else None."""
        app_id, user_id = app["_id"], user["_id"]
        methods = ([TOTP] if self.methods.active(app_id, user_id) is not None else []) + list(other_methods)
        if not methods:
            return None
        token, now = random_token(), self._now()
        self.challenges.insert({
            "_id": digest(token), "app_id": app_id, "user_id": user_id, "remember_me": bool(remember_me),
            "device_info": {"ip": device_info.get("ip"), "user_agent": device_info.get("user_agent")},
            "attempts": 0, "created_at": now, "expires_at": now + seconds(self.challenge_ttl),
            "consumed_at": None, "methods": methods,
        })
        return {"mfa_required": True, "challenge_token": token, "mfa_methods": methods}

    def pending_challenge(self, app_id: str, challenge_token: str, method: str) -> dict | None:
        """The live, unused challenge of this token that ``method`` may answer, or None
        (a passkey asks before it answers: whose credentials to offer).  Its ``_id`` is
        what ``complete`` takes."""
        challenge = self.challenges.live(app_id, digest(challenge_token), self._now())
        return challenge if challenge is not None and method in challenge.get("methods", [TOTP]) else None

    def complete(self, app: dict, token_digest: str, *, method: str) -> dict:
        """Answer the challenge with a factor another area checked (a passkey's
        assertion): counted as an attempt, consumed once, and the token pair issued as for
        a code.  410 AUTH_MFA_CHALLENGE_EXPIRED, 429 AUTH_MFA_LOCKED, 403
        AUTH_ACCOUNT_SUSPENDED."""
        def answer(challenge, now):
            self._check_not_locked(challenge, now)
            return self._issue(app, challenge, self._answering_user(app["_id"], challenge))

        return self._attempt(app, token_digest, method, answer)

    def verify(self, app: dict, *, challenge_token: str, code: str) -> tuple[dict, int | None]:
        """Answer a login's MFA challenge with a TOTP or backup code.

        Returns (token pair, backup codes remaining when a backup code was used, else
        None); the pair, session and user.login event are those of a password login,
        with the login's remember_me.  410 AUTH_MFA_CHALLENGE_EXPIRED (unknown, used or
        older than IAMGATE_MFA_CHALLENGE_TTL), 429 AUTH_MFA_LOCKED (more than
        IAMGATE_MFA_MAX_ATTEMPTS codes on the challenge, or too many for the user),
        401 AUTH_INVALID_MFA_CODE, 403 AUTH_ACCOUNT_SUSPENDED."""
        kind = TOTP if totp.is_totp_code(code) else "backup_code"
        return self._attempt(app, digest(challenge_token), kind,
                             lambda challenge, now: self._answer(app, challenge, code, kind, now))

    def _attempt(self, app: dict, token_digest: str, method: str, answer):
        """Count one attempt on the live challenge, then ``answer(challenge, now)``; the
        outcome is the ``mfa.challenge`` audit record."""
        app_id, now = app["_id"], self._now()
        challenge = self.challenges.count_attempt(app_id, token_digest, now)
        if challenge is None:  # unknown, consumed or expired: nobody to record it against
            raise MfaChallengeExpired()
        try:
            result = answer(challenge, now)
        except _CHALLENGE_FAILURES as exc:
            reason = next(reason for error, reason in _CHALLENGE_REASONS.items() if isinstance(exc, error))
            self._record_challenge(app_id, challenge["user_id"], method, failure(reason))
            raise
        self._record_challenge(app_id, challenge["user_id"], method, success())
        return result

    def _record_challenge(self, app_id: str, user_id: str, kind: str, result: dict) -> None:
        user = actor("user", user_id)
        self.audit.record("mfa.challenge", result=result, actor=user, target=user, data={"method": kind},
                          application_id=app_id)

    def _check_not_locked(self, challenge: dict, now) -> None:
        if challenge["attempts"] > self.max_attempts:
            raise self._locked(aware(challenge["expires_at"]), now)

    def _answering_user(self, app_id: str, challenge: dict) -> dict:
        user = self.users.get(app_id, challenge["user_id"])
        if user is None or user.get("status") == "deleted":
            raise MfaChallengeExpired()
        if user.get("status") == "suspended":
            raise AccountSuspended()
        return user

    def _issue(self, app: dict, challenge: dict, user: dict) -> dict:
        """Consume the challenge (one winner) and start the session the login deferred."""
        if self.challenges.consume(app["_id"], challenge["_id"], self._now()) is None:
            raise MfaChallengeExpired()  # a parallel answer won, or it expired just now
        return self.sessions.issue(app, user, remember_me=challenge["remember_me"],
                                   device_info=challenge.get("device_info") or {})

    def _answer(self, app: dict, challenge: dict, code: str, kind: str, now) -> tuple[dict, int | None]:
        app_id, user_id = app["_id"], challenge["user_id"]
        attempts_left = self.max_attempts - challenge["attempts"]
        self._check_not_locked(challenge, now)
        self.rate_limiter.hit(
            f"mfa-verify:{app_id}:{user_id}", VERIFY_RATE, error=MfaLocked)
        user = self._answering_user(app_id, challenge)
        method = self.methods.active(app_id, user_id)
        if method is None:  # MFA was turned off after the login
            raise MfaChallengeExpired()

        remaining = None
        if kind == TOTP:
            self._accept_totp(app_id, method, code, now, attempts_left=attempts_left)
        else:
            self._accept_backup_code(app_id, user_id, method, code, now, attempts_left=attempts_left)
            remaining = self.backup_codes.remaining(app_id, user_id, method.get("backup_set_id"))

        pair = self._issue(app, challenge, user)
        if remaining is not None:
            self.events.emit(app_id, "mfa.backup_code_used", {"user_id": user_id, "remaining": remaining},
                                  subject={"user_id": user_id})
        return pair, remaining

    def _accept_totp(self, app_id: str, method: dict, code: str, now, *, attempts_left: int) -> None:
        step = totp.matching_step(self._secret(method), code, now)
        if step is None:
            raise self._invalid_code(attempts_left)
        if not self.methods.record_use(app_id, method["_id"], step, now):
            raise self._invalid_code(attempts_left, "This code was already used; wait for the next one.")

    def _accept_backup_code(self, app_id: str, user_id: str, method: dict, code: str, now, *,
                            attempts_left: int) -> None:
        canonical = totp.canonical_backup_code(code)
        set_id = method.get("backup_set_id")
        if canonical is None or set_id is None or not self.backup_codes.consume(
                app_id, user_id, set_id, self._backup_digest(app_id, user_id, canonical), now):
            raise self._invalid_code(attempts_left)

    def _invalid_code(self, attempts_left: int, message: str | None = None) -> MfaCodeInvalid:
        return MfaCodeInvalid(message, details={"attempts_remaining": max(0, attempts_left)})

    def _locked(self, until, now) -> MfaLocked:
        log.warning("MFA challenge locked after too many wrong codes")
        return MfaLocked(
            limit=self.max_attempts, reset_at=math.ceil(until.timestamp()),
            retry_after=math.ceil((until - now).total_seconds()),
            message="Too many wrong codes for this sign-in; log in again.",
        )

    # ------------------------------------------------------------------ helpers

    def _secret(self, method: dict) -> str:
        return self.box.decrypt(method["secret"]).decode("ascii")

    def _backup_digest(self, app_id: str, user_id: str, canonical: str) -> str:
        message = f"{app_id}:{user_id}:{canonical}".encode()
        return hmac.new(self._backup_key, message, hashlib.sha256).hexdigest()

    def _new_backup_set(self, app_id: str, user_id: str, now) -> tuple[str, list[str]]:
        """Store a new set of backup codes (digests only); (set id, the codes)."""
        set_id, codes = new_id(), []
        while len(codes) < BACKUP_CODES_PER_SET:
            code = totp.new_backup_code()
            if code not in codes:
                codes.append(code)
        self.backup_codes.insert_set([
            {"_id": new_id(), "app_id": app_id, "user_id": user_id, "set_id": set_id,
             "code_digest": self._backup_digest(app_id, user_id, totp.canonical_backup_code(code)),
             "used_at": None, "created_at": now}
            for code in codes
        ])
        return set_id, codes

    def _password_confirmed(self, app_id: str, user_id: str, password: str) -> tuple[dict, dict]:
        """The user and its active method, for a change that needs the password: 400
        MFA_NOT_ENABLED without one, 422 INVALID_PASSWORD unless ``password`` is the
        user's.  The check draws on the account's login budget (``PasswordService.check``):
        a stolen access token cannot be used to guess the password, and 429
        AUTH_ACCOUNT_LOCKED past it."""
        user = self._user(app_id, user_id)
        method = self.methods.active(app_id, user_id)
        if method is None:
            raise MfaNotEnabled()
        if not self.passwords.check(app_id, user, password):
            raise WrongPassword(details={"field": "password"})
        return user, method

    def _mail(self, message: tuple[str, str], user: dict) -> None:
        subject, body = message
        self.mailer.send(user["email"], subject, body)
