"""Multi-factor authentication: the rules of the spec's "Multi-factor authentication"
section and the MFA rows of its states table.

``MfaService`` is the password login's second factor (``users.login.SecondFactor``):
the login calls ``login_challenge`` once the password and the account status are
checked.

- Setup creates a *pending* TOTP method (160-bit secret, encrypted at rest); it is not
  used at login nor reported as enabled until a correct code confirms it.  A new setup
  replaces an older pending one; an abandoned one expires after ``SETUP_TTL``.
- Confirm activates it, returns 10 backup codes (stored as keyed digests, shown once)
  and emits mfa.enabled with ``method: totp`` (a passkey's carry ``webauthn``: a
  consumer tells the two factors apart).
- Login of a user with an active method answers an MFA challenge instead of tokens.
  ``verify`` counts the attempt on the challenge (atomic ``$inc``) before the code is
  checked, so at most ``mfa_max_attempts`` codes are ever tried per challenge; a TOTP
  code is accepted once (the method's last accepted time step only moves forward), a
  backup code once; the challenge is then consumed atomically and the token pair is
  issued exactly as a password login issues it (``SessionService.issue``).
- Disable (password) removes the method, the backup codes and pending challenges and
  emits mfa.disabled (``method: totp``); its notice says whether a passkey still
  guards the sign-in (``PasskeyService.disable_totp`` tells).  Regenerate (password)
  replaces the backup set.
- An administrator's reset removes the same without a password (``reset_totp``), as a
  part of ``PasskeyService.reset_mfa``, which removes the passkeys too and mails the
  one notice of all it removed.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass

from controlplane.applications.service import branding
from controlplane.audit.context import actor, failure, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.mail import Mailer
from controlplane.mfa import emails
from controlplane.mfa.errors import MfaChallengeExpired, MfaCodeInvalid, MfaLocked, MfaNotEnabled
from controlplane.mfa.factor import (
    ACCEPTED,
    BACKUP_CODE,
    TOTP,
    TotpFactor,
    challenge_locked,
    code_kind,
    code_refused,
    serialize_method,
)
from controlplane.mfa.store import BackupCodeStore, ChallengeStore, MethodStore
from controlplane.passwords import WrongPassword
from controlplane.ratelimit import RateLimiter
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import AccountSuspended
from controlplane.users.passwords import PasswordService
from controlplane.users.sessions import SessionService
from shared.config import Rate
from shared.crypto import SecretBox
from shared.ids import digest
from shared.timeutil import Clock, aware

# Codes tried per user across all challenges, on top of the per-challenge lock: a caller
# who knows the password cannot get fresh guesses by logging in again and again.
VERIFY_RATE = Rate(20, 900)
# Why an answer to a login's challenge failed, as its audit record says.
_CHALLENGE_REASONS = {MfaCodeInvalid: "invalid_code", MfaLocked: "locked", MfaChallengeExpired: "challenge_expired",
                      AccountSuspended: "suspended"}
_CHALLENGE_FAILURES = tuple(_CHALLENGE_REASONS)


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
        # The rules of the factor itself, shared with dashboard accounts (scope: app_id).
        self.factor = TotpFactor(self.methods, self.backup_codes, self.challenges, self.box, secret_key=secret_key)

    def _now(self):
        return self.clock()

    # ------------------------------------------------------------------ status

    def status(self, app_id: str, user_id: str) -> dict:
        """{mfa_enabled, methods (active ones), backup_codes_remaining}; a pending setup
        counts for nothing."""
        self.users.live(app_id, user_id)
        return self.factor.status(app_id, user_id)

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
        user = self.users.live(app["_id"], user_id)
        return self.factor.start(app["_id"], user_id, self._now(), label=label, account=user["email"],
                                 issuer=branding(app)["name"])

    def confirm(self, app: dict, user_id: str, *, method_id: str, code: str) -> list[str]:
        """Activate a pending method with a code from the app; return its 10 backup codes
        and emit mfa.enabled.

        404 MFA_METHOD_NOT_FOUND (unknown, another user's, or an expired setup),
        409 MFA_ALREADY_ENABLED, 422 MFA_INVALID_CODE."""
        app_id = app["_id"]
        user = self.users.live(app_id, user_id)
        codes = self.factor.activate(app_id, user_id, method_id, code, self._now())
        self.events.emit(app_id, "mfa.enabled", {"user_id": user_id, "method_id": method_id, "method": TOTP},
                         subject={"user_id": user_id})
        self._mail(emails.enabled(app, user), user)
        return codes

    def regenerate_backup_codes(self, app: dict, user_id: str, *, password: str) -> list[str]:
        """A new set of 10 backup codes; every earlier code stops working.

        400 MFA_NOT_ENABLED, 422 INVALID_PASSWORD, 429 RATE_LIMIT_EXCEEDED (password
        checks per user)."""
        app_id = app["_id"]
        user, method = self._password_confirmed(app_id, user_id, password)
        codes = self.factor.regenerate(app_id, user_id, method, self._now())
        self.events.emit(app_id, "mfa.backup_codes_regenerated", {"user_id": user_id},
                              subject={"user_id": user_id})
        self._mail(emails.backup_codes_regenerated(app, user), user)
        return codes

    def disable(self, app: dict, user_id: str, *, password: str, passkeys_left: bool = False) -> None:
        """Remove the TOTP method, the backup codes and open challenges; emit mfa.disabled.
        Login then needs only the password, unless ``passkeys_left``: the user has a
        passkey that still answers the login's challenge (``PasskeyService.disable_totp``),
        and the notice says so rather than that the password alone signs in.

        400 MFA_NOT_ENABLED, 422 INVALID_PASSWORD, 429 RATE_LIMIT_EXCEEDED."""
        user, method = self._password_confirmed(app["_id"], user_id, password)
        self._remove(app, user, method)
        self._mail(emails.disabled(app, user, passkeys_left=passkeys_left), user)

    def reset_totp(self, app: dict, user: dict) -> bool:
        """An administrator's reset of the TOTP factor, without a password: the method,
        the backup codes and open challenges go, mfa.disabled is emitted; whether there
        was one.  No notice: the reset is every second factor's
        (``PasskeyService.reset_mfa``), whose one notice says all it removed."""
        method = self.methods.active(app["_id"], user["_id"])
        if method is None:
            return False
        try:
            self._remove(app, user, method)
        except MfaNotEnabled:  # a parallel disable or reset removed it first
            return False
        return True

    def _remove(self, app: dict, user: dict, method: dict) -> None:
        app_id, user_id = app["_id"], user["_id"]
        self.factor.remove(app_id, user_id, method)
        self.events.emit(app_id, "mfa.disabled", {"user_id": user_id, "method": TOTP}, subject={"user_id": user_id})

    def forget_user(self, app_id: str, user_id: str) -> None:
        """Delete every MFA record of a user (account deletion); no event."""
        self.factor.forget(app_id, user_id)

    def on_claim(self, app_id: str, user_id: str) -> None:
        """An unverified account handed to its mailbox's owner (``users.claim``): the TOTP
        method and backup codes someone else may have set go; mfa.disabled when one was on."""
        enabled = self.methods.active(app_id, user_id) is not None
        self.factor.forget(app_id, user_id)
        if enabled:
            self.events.emit(app_id, "mfa.disabled", {"user_id": user_id, "method": TOTP},
                             subject={"user_id": user_id})

    def on_event(self, event) -> None:
        """Listener of the change log: a deleted user's second factor goes with it."""
        if event.type == "user.deleted" and event.app_id and event.subject.get("user_id"):
            self.forget_user(event.app_id, event.subject["user_id"])

    # ------------------------------------------------------------------ login

    def login_challenge(self, app: dict, user: dict, *, remember_me: bool, device_info: dict,
                        other_methods: tuple = (), login_data: dict | None = None) -> dict | None:
        """The login's second factor: the MFA challenge {mfa_required,
        challenge_token, mfa_methods} when the user has an active TOTP method or
        ``other_methods`` (a passkey: ``webauthn``) to answer it with (the login then
        answers it instead of tokens), else None.  ``login_data``: how the first step
        signed in, kept for the session's user.login (``SessionService.issue``)."""
        app_id, user_id = app["_id"], user["_id"]
        methods = ([TOTP] if self.methods.active(app_id, user_id) is not None else []) + list(other_methods)
        if not methods:
            return None
        token = self.factor.open_challenge(
            app_id, user_id, self._now(), self.challenge_ttl, remember_me=bool(remember_me),
            device_info={"ip": device_info.get("ip"), "user_agent": device_info.get("user_agent")}, methods=methods,
            login_data=login_data, tokens_not_before=user.get("tokens_not_before"),
            password_changed_at=user.get("password_changed_at"))
        return {"mfa_required": True, "challenge_token": token, "mfa_methods": methods}

    def pending_challenge(self, app_id: str, challenge_token: str, method: str) -> dict | None:
        """The live, unused challenge of this token that ``method`` may answer, or None
        (a passkey asks before it answers: whose credentials to offer).  Its ``_id`` is
        what ``complete`` takes."""
        challenge = self.factor.live_challenge(app_id, challenge_token, self._now())
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
        kind = code_kind(code)
        return self._attempt(app, digest(challenge_token), kind,
                             lambda challenge, now: self._answer(app, challenge, code, kind, now))

    def _attempt(self, app: dict, token_digest: str, method: str, answer):
        """Count one attempt on the live challenge, then ``answer(challenge, now)``; the
        outcome is the ``mfa.challenge`` audit record."""
        app_id, now = app["_id"], self._now()
        challenge = self.factor.count_attempt(app_id, token_digest, now, digested=True)
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
            raise challenge_locked(self.max_attempts, aware(challenge["expires_at"]), now)

    def _answering_user(self, app_id: str, challenge: dict) -> dict:
        user = self.users.get(app_id, challenge["user_id"])
        if user is None or user.get("status") == "deleted":
            raise MfaChallengeExpired()
        if user.get("status") == "suspended":
            raise AccountSuspended()
        return user

    def _issue(self, app: dict, challenge: dict, user: dict) -> dict:
        """Consume the challenge (one winner) and start the session the login deferred,
        for the account as the login's first step found it: a password reset or a
        hand-over since (a new stamp), or a password change since, gets no session."""
        if not self.factor.consume_challenge(app["_id"], challenge, self._now()):
            raise MfaChallengeExpired()  # a parallel answer won, or it expired just now
        # What the login read before checking the first factor, not what the answer read:
        # ``SessionService.issue`` compares it with the account once the session is
        # stored, which no password change or reset can slip between (users.passwords).
        as_first_read = {**user, "tokens_not_before": challenge.get("tokens_not_before"),
                         "password_changed_at": challenge.get("password_changed_at")}
        return self.sessions.issue(app, as_first_read, remember_me=challenge["remember_me"],
                                   device_info=challenge.get("device_info") or {},
                                   login_data=challenge.get("login_data"))

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

        verdict = self.factor.check(app_id, user_id, method, code, now)
        if verdict != ACCEPTED:
            raise code_refused(verdict, attempts_left)
        remaining = self.factor.remaining_backup_codes(app_id, user_id, method) if kind == BACKUP_CODE else None

        pair = self._issue(app, challenge, user)
        if remaining is not None:
            self.events.emit(app_id, "mfa.backup_code_used", {"user_id": user_id, "remaining": remaining},
                                  subject={"user_id": user_id})
        return pair, remaining

    # ------------------------------------------------------------------ helpers

    def _password_confirmed(self, app_id: str, user_id: str, password: str) -> tuple[dict, dict]:
        """The user and its active method, for a change that needs the password: 400
        MFA_NOT_ENABLED without one, 422 INVALID_PASSWORD unless ``password`` is the
        user's.  The check draws on the account's login budget (``PasswordService.check``):
        a stolen access token cannot be used to guess the password, and 429
        AUTH_ACCOUNT_LOCKED past it."""
        user = self.users.live(app_id, user_id)
        method = self.methods.active(app_id, user_id)
        if method is None:
            raise MfaNotEnabled()
        if not self.passwords.check(app_id, user, password):
            raise WrongPassword(details={"field": "password"})
        return user, method

    def _mail(self, message: tuple[str, str], user: dict) -> None:
        subject, body = message
        self.mailer.send(user["email"], subject, body)
