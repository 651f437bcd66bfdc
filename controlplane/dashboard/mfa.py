"""Two-step verification of dashboard accounts: an authenticator app (TOTP) and backup
codes, the sign-in's second step, and the answer to an organization's ``require_mfa``.
A passkey (``dashboard.passkeys``) is a second factor too: it counts for ``require_mfa``
and is offered at the sign-in's second step.

docs/dashboard.md ("Two-step verification").  The factor's rules are the end users'
(``mfa.factor.TotpFactor``: a setup confirmed by a code, the secret encrypted at rest,
backup codes as keyed digests, a TOTP code accepted once), kept in the same collections
under the scope ``"dashboard"``.  What is the dashboard's own:

- A sign-in of an account with a factor answers a challenge (``mfa_required``, a
  challenge token) instead of a session; ``verify`` counts the attempt on the challenge
  (atomic ``$inc``) before the code is checked, at most IAMGATE_MFA_MAX_ATTEMPTS per
  challenge, and every code checked (at sign-in, or to turn the factor off) draws on the
  account's budget in the login lock (``controlplane/lockout.py``, scope
  ``"dashboard-mfa"``): IAMGATE_LOCKOUT_THRESHOLD consecutive wrong codes lock the
  account's codes for IAMGATE_LOCKOUT_SECONDS (429 AUTH_MFA_LOCKED), so signing in
  again and again brings no fresh guesses.
- Only an account that confirmed its address enrols a factor (403
  DASHBOARD_EMAIL_UNVERIFIED otherwise): anyone can register any address, and a factor
  set up by such a holder would outlive the claim of the address by its mailbox's owner.
  The claim removes whatever was set up before that rule (``on_claim``).
- Adding a factor is confirmed by the password, as removing one is: a factor planted
  through a stolen session cookie would outlive the session (a passkey signs in alone),
  and turning TOTP on ends every other session, the owner's too, who would then need
  the planter's codes.
- Turning the factor on ends the account's other sessions: they were opened with the
  password alone, and the factor (or an organization's ``require_mfa``) is meant to
  shut out whoever holds only that.  Before they end, the account is stamped anew,
  keeping the calling session (``AccountFactorService._end_other_sessions``), so a
  sign-in whose password step found no factor yet keeps no session either.
- A challenge keeps the stamp of the password step that opened it, and the session its
  answer opens is that step's (``first_read``): a reset or a password change since
  leaves it none.
- Turning the factor on and off, and every answer to a challenge, are audit records of
  each organization the account belongs to: its administrators see who of their
  members has a second factor.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from controlplane.audit.context import actor, failure, success
from controlplane.audit.service import AuditLog
from controlplane.dashboard.accounts import LOCK_SCOPE
from controlplane.dashboard.errors import DashboardEmailUnverified
from controlplane.dashboard.sessions import DashboardSessions
from controlplane.dashboard.store import DashboardStore
from controlplane.lockout import PasswordGuard
from controlplane.mfa.errors import (
    ConfirmationCodeInvalid,
    MfaChallengeExpired,
    MfaCodeInvalid,
    MfaLocked,
    MfaNotEnabled,
)
from controlplane.mfa.factor import ACCEPTED, TOTP, TotpFactor, challenge_locked, code_kind, code_refused
from controlplane.passkeys.service import WEBAUTHN
from controlplane.passwords import WrongPassword
from shared.errors import ValidationFailed
from shared.timeutil import Clock, aware

# What the MFA collections store as ``app_id`` for dashboard accounts (no application's id).
FACTOR_SCOPE = "dashboard"
# The login lock's scope of the account's codes, by account id (passwords are by email).
CODE_LOCK_SCOPE = "dashboard-mfa"
# The issuer an authenticator app shows beside the account's email.
ISSUER = "iamgate dashboard"
_CHALLENGE_REASONS = {MfaCodeInvalid: "invalid_code", MfaLocked: "locked", MfaChallengeExpired: "challenge_expired"}


class Passkeys(Protocol):
    """The account's passkeys (``dashboard.passkeys.DashboardPasskeys``)."""

    def count(self, account_id: str) -> int: ...


def first_read(account: dict, challenge: dict) -> dict:
    """``account`` with the stamp its sign-in's password step read before checking the
    password, kept on the challenge that step opened: the session the second step opens
    is that sign-in's."""
    return {**account, "tokens_not_before": challenge.get("tokens_not_before")}


@dataclass(eq=False)
class AccountFactorService:
    """What both second factors of a dashboard account (TOTP, passkeys) work with, and its
    re-authentication (``dashboard.sudo``): the accounts and their organizations, the
    sessions a change revokes, the password guard that confirms a change, the audit log
    and the clock."""

    store: DashboardStore
    sessions: DashboardSessions
    password_guard: PasswordGuard
    audit: AuditLog
    clock: Clock

    def _end_other_sessions(self, account_id: str, session: str | None) -> None:
        """Stamp the account anew, keeping ``session`` (the raw id of the one making the
        change), then end every other session: one whose sign-in read the account before
        is refused even if it is stored after this (``dashboard.sessions``)."""
        now = self.clock()
        self.store.restamp(account_id, {"updated_at": now}, now, kept_session=self.sessions.stored_id(session))
        self.sessions.revoke_others(account_id, session)

    def _require_confirmed(self, account: dict) -> None:
        """403 DASHBOARD_EMAIL_UNVERIFIED: an unconfirmed holder of an address may be a
        stranger who registered it, and whoever proves the mailbox claims the account
        (``AccountService.reset_password``); a factor such a holder enrolled would let
        it back in, or lock the owner out."""
        if not account.get("email_verified"):
            raise DashboardEmailUnverified()

    def _check_password(self, account: dict, password: str) -> None:
        """The account's password confirms a change to its second factors, under its login
        lock (a stolen session cookie cannot be used to guess it): 422 INVALID_PASSWORD,
        429 AUTH_ACCOUNT_LOCKED."""
        if not self.password_guard.check(LOCK_SCOPE, account["email"], password, account["password_hash"]):
            raise WrongPassword(details={"field": "password"})

    def _record(self, action: str, account: dict, result: dict, data: dict) -> None:
        """One record per organization of the account (a dashboard record is an
        organization's); the account is actor and target."""
        who = actor("dashboard_account", account["_id"], account.get("email"))
        for membership in self.store.memberships(account["_id"]):
            self.audit.record(action, result=result, actor=who, target=who, data=data,
                              organization_id=membership["organization_id"])


@dataclass(eq=False)
class DashboardMfa(AccountFactorService):
    factor: TotpFactor
    passkeys: Passkeys
    _: KW_ONLY
    challenge_ttl: int
    max_attempts: int

    def has_second_factor(self, account_id: str) -> bool:
        """Whether the account has an active second factor, TOTP or a passkey
        (``access.SecondFactors``)."""
        return self.factor.active(FACTOR_SCOPE, account_id) is not None or self.passkeys.count(account_id) > 0

    def status(self, account_id: str) -> dict:
        """{mfa_enabled, methods, backup_codes_remaining} (TOTP), as for end users, and
        ``passkeys``: {count, second_factor} (every passkey of an account is one)."""
        count = self.passkeys.count(account_id)
        return {**self.factor.status(FACTOR_SCOPE, account_id), "passkeys": {"count": count,
                                                                             "second_factor": count > 0}}

    def setup(self, account: dict, *, label: str) -> dict:
        """A pending TOTP method: {method_id, provisioning_uri, secret}; 409
        MFA_ALREADY_ENABLED while one is active, 403 DASHBOARD_EMAIL_UNVERIFIED for an
        account that has not confirmed its address."""
        self._require_confirmed(account)
        return self.factor.start(FACTOR_SCOPE, account["_id"], self.clock(), label=label, account=account["email"],
                                 issuer=ISSUER)

    def confirm(self, account: dict, *, method_id: str, code: str, password: str, session: str | None) -> list[str]:
        """Activate the pending method with a code from the app, confirmed by the
        account's password (checked first, so a wrong one spends nothing); its 10 backup
        codes.  Every session of the account but ``session`` (the raw id of the one
        confirming) ends.  404 MFA_METHOD_NOT_FOUND, 409 MFA_ALREADY_ENABLED, 422
        MFA_INVALID_CODE or INVALID_PASSWORD, 429 AUTH_ACCOUNT_LOCKED, 403
        DASHBOARD_EMAIL_UNVERIFIED."""
        self._require_confirmed(account)
        self._check_password(account, password)
        codes = self.factor.activate(FACTOR_SCOPE, account["_id"], method_id, code, self.clock())
        self._end_other_sessions(account["_id"], session)
        self._record("dashboard_account.mfa_enabled", account, success(), {"method": TOTP})
        return codes

    def regenerate_backup_codes(self, account: dict, *, password: str) -> list[str]:
        """A new set of 10 backup codes (the password confirms it); 400 MFA_NOT_ENABLED,
        422 INVALID_PASSWORD, 429 AUTH_ACCOUNT_LOCKED."""
        method = self._active(account["_id"])
        self._check_password(account, password)
        return self.factor.regenerate(FACTOR_SCOPE, account["_id"], method, self.clock())

    def disable(self, account: dict, *, password: str | None = None, code: str | None = None) -> None:
        """Turn the factor off, confirmed by the password or by a current code (TOTP or
        backup); its backup codes and open challenges go with it.  400 MFA_NOT_ENABLED,
        422 INVALID_PASSWORD or MFA_INVALID_CODE, 429 AUTH_ACCOUNT_LOCKED (passwords)
        or AUTH_MFA_LOCKED (codes).  An organization requiring MFA shuts the account out
        again until it enrols anew."""
        if (password is None) == (code is None):
            raise ValidationFailed({"password": "send either password or code, not both"})
        account_id = account["_id"]
        method = self._active(account_id)
        if password is not None:
            self._check_password(account, password)
        else:
            self._check_code(account_id, method, code, lambda _verdict: ConfirmationCodeInvalid())
        self.factor.remove(FACTOR_SCOPE, account_id, method)
        self._record("dashboard_account.mfa_disabled", account, success(),
                     {"confirmed_by": "password" if password is not None else code_kind(code)})

    def on_claim(self, account: dict) -> None:
        """The address claimed by its mailbox's owner (``AccountService``): the TOTP
        method (a pending setup too), its backup codes and every open sign-in challenge
        go, whoever set them up; ``mfa_disabled`` is recorded when one was on."""
        enabled = self.factor.active(FACTOR_SCOPE, account["_id"]) is not None
        self.factor.forget(FACTOR_SCOPE, account["_id"])
        if enabled:
            self._record("dashboard_account.mfa_disabled", account, success(),
                         {"method": TOTP, "confirmed_by": "account_claimed"})

    # ------------------------------------------------------------------ sign-in

    def login_challenge(self, account: dict) -> dict | None:
        """The sign-in's second step when the account has a factor: {mfa_required,
        challenge_token, mfa_methods (``totp``, ``webauthn``: what may answer it)};
        None without one (the password was enough)."""
        methods = ([TOTP] if self.factor.active(FACTOR_SCOPE, account["_id"]) is not None else []) + (
            [WEBAUTHN] if self.passkeys.count(account["_id"]) > 0 else [])
        if not methods:
            return None
        token = self.factor.open_challenge(FACTOR_SCOPE, account["_id"], self.clock(), self.challenge_ttl,
                                           methods=methods, tokens_not_before=account.get("tokens_not_before"))
        return {"mfa_required": True, "challenge_token": token, "mfa_methods": methods}

    def verify(self, *, challenge_token: str, code: str) -> dict:
        """Answer a sign-in's challenge with a TOTP or backup code; the account signed
        in, as the password step read it (``first_read``).  410
        AUTH_MFA_CHALLENGE_EXPIRED (unknown, used, expired), 401 AUTH_INVALID_MFA_CODE
        (``details.attempts_remaining``), 429 AUTH_MFA_LOCKED."""
        now = self.clock()
        challenge = self.factor.count_attempt(FACTOR_SCOPE, challenge_token, now)
        if challenge is None:  # nobody to record it against
            raise MfaChallengeExpired()
        account = self.store.account(challenge["user_id"])
        if account is None:
            raise MfaChallengeExpired()
        try:
            self._answer(challenge, code, now)
        except tuple(_CHALLENGE_REASONS) as exc:
            reason = next(reason for error, reason in _CHALLENGE_REASONS.items() if isinstance(exc, error))
            self._record("dashboard_account.mfa_challenge", account, failure(reason), {"method": code_kind(code)})
            raise
        self._record("dashboard_account.mfa_challenge", account, success(), {"method": code_kind(code)})
        return first_read(account, challenge)

    def _answer(self, challenge: dict, code: str, now) -> None:
        attempts_left = self.max_attempts - challenge["attempts"]
        if attempts_left < 0:
            raise challenge_locked(self.max_attempts, aware(challenge["expires_at"]), now)
        method = self.factor.active(FACTOR_SCOPE, challenge["user_id"])
        if method is None:  # turned off after the password step
            raise MfaChallengeExpired()
        self._check_code(challenge["user_id"], method, code, lambda verdict: code_refused(verdict, attempts_left))
        if not self.factor.consume_challenge(FACTOR_SCOPE, challenge, self.clock()):
            raise MfaChallengeExpired()  # a parallel answer won, or it expired just now

    # ------------------------------------------------------------------ helpers

    def _active(self, account_id: str) -> dict:
        method = self.factor.active(FACTOR_SCOPE, account_id)
        if method is None:
            raise MfaNotEnabled()
        return method

    def _check_code(self, account_id: str, method: dict, code: str, refused) -> None:
        """Accept ``code`` under the account's code budget, else raise ``refused(verdict)``."""
        key = self.password_guard.take(CODE_LOCK_SCOPE, account_id, error=MfaLocked)
        verdict = self.factor.check(FACTOR_SCOPE, account_id, method, code, self.clock())
        if verdict != ACCEPTED:
            self.password_guard.failed(key)
            raise refused(verdict)
        self.password_guard.succeeded(key)
