"""Passkeys of dashboard accounts: register, list, rename and delete them, and sign in
with one, alone or as the second step of a password sign-in.

docs/dashboard.md ("Passkeys").  The ceremonies are the end users'
(``passkeys.credentials.PasskeyCredentials``: the same relying party, challenges in
MongoDB, single use, 5 minutes), under the scope ``"dashboard"`` (``mfa.FACTOR_SCOPE``):
a dashboard passkey is never found by an application's sign-in, nor an end user's by
the dashboard's.  The user handle is the account's id.  What is the dashboard's own:

- Only an account that confirmed its address registers one (403
  DASHBOARD_EMAIL_UNVERIFIED), as for TOTP (``dashboard.mfa``); the claim of the
  address removes every passkey and pending challenge of the account (``on_claim``).
- A passkey is a second factor as soon as it is registered: it satisfies an
  organization's ``require_mfa``, and the account's password sign-ins ask for a passkey
  or a code (``mfa_methods`` lists ``webauthn``).  Registering the account's first
  second factor ends its other sessions, as confirming TOTP does.
- A discoverable passkey with user verification signs in alone (every dashboard
  account keeps its password; there is no passwordless-only account to lock out).
- As the second step it answers the sign-in's MFA challenge: the attempt is counted on
  the challenge first (at most IAMGATE_MFA_MAX_ATTEMPTS), then the challenge is used up.
- Records: ``dashboard_account.mfa_enabled`` / ``mfa_disabled`` (``method: webauthn``)
  when a passkey is added or removed, ``dashboard_account.passkey_sign_in`` for every
  assertion of a known passkey, each in every organization of the account.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from controlplane.audit.context import failure, success
from controlplane.dashboard.mfa import FACTOR_SCOPE, AccountFactorService, first_read
from controlplane.mfa.errors import MfaChallengeExpired
from controlplane.mfa.factor import TOTP, TotpFactor, challenge_locked
from controlplane.passkeys.credentials import AUTHENTICATION, PasskeyCredentials
from controlplane.passkeys.errors import CredentialUnknown
from controlplane.passkeys.service import WEBAUTHN, serialize_passkey
from shared.errors import DomainError
from shared.timeutil import aware

# The relying party's name the browser shows when a passkey is created.
RP_NAME = "iamgate dashboard"


@dataclass(eq=False)
class DashboardPasskeys(AccountFactorService):
    credentials: PasskeyCredentials
    factor: TotpFactor  # the sign-in's MFA challenges (which TOTP answers too)
    _: KW_ONLY
    max_attempts: int

    def count(self, account_id: str) -> int:
        return self.credentials.count(FACTOR_SCOPE, account_id)

    def list(self, account_id: str) -> list[dict]:
        return [serialize_passkey(p) for p in self.credentials.of_subject(FACTOR_SCOPE, account_id)]

    # ------------------------------------------------------------------ registration

    def registration_options(self, account: dict) -> dict:
        """{challenge_id, options}: creation options bound to the account; 503
        PASSKEY_UNAVAILABLE when the server has no RP ID, 403 DASHBOARD_EMAIL_UNVERIFIED
        for an account that has not confirmed its address."""
        self._require_confirmed(account)
        return self.credentials.creation_options(FACTOR_SCOPE, account["_id"], rp_name=RP_NAME,
                                                user_name=account["email"],
                                                display_name=account.get("name") or account["email"])

    def register(self, account: dict, *, challenge_id: str, credential: dict, name: str | None, password: str,
                 session: str | None) -> dict:
        """Verify the attestation and store the passkey, confirmed by the account's
        password (checked first, so a wrong one leaves the challenge unspent): a passkey
        signs in alone, so one planted through a stolen session cookie would outlive
        it.  When it is the account's first second factor, every session but
        ``session`` (the raw id of the one registering) ends.  400 PASSKEY_*, 409
        PASSKEY_ALREADY_REGISTERED, 422 INVALID_PASSWORD, 429 AUTH_ACCOUNT_LOCKED, 403
        DASHBOARD_EMAIL_UNVERIFIED."""
        self._require_confirmed(account)
        self._check_password(account, password)
        account_id = account["_id"]
        had_factor = self.factor.active(FACTOR_SCOPE, account_id) is not None or self.count(account_id) > 0
        passkey = self.credentials.enrol(FACTOR_SCOPE, account_id, challenge_id=challenge_id, credential=credential,
                                        name=name)
        if not had_factor:
            self._end_other_sessions(account_id, session)
        self._record("dashboard_account.mfa_enabled", account, success(),
                     {"method": WEBAUTHN, "passkey_id": passkey["_id"]})
        return serialize_passkey(passkey)

    # ------------------------------------------------------------------ management

    def rename(self, account_id: str, passkey_id: str, name: str) -> dict:
        return serialize_passkey(self.credentials.rename(FACTOR_SCOPE, account_id, passkey_id, name))

    def delete(self, account: dict, passkey_id: str, *, password: str) -> None:
        """Remove one of the account's own passkeys (404 PASSKEY_NOT_FOUND for any
        other), confirmed by the password as turning TOTP off is (422 INVALID_PASSWORD,
        429 AUTH_ACCOUNT_LOCKED): whoever holds only a session cookie cannot strip the
        account's second factor.  The account keeps its password, so deleting the last
        one locks nobody out; an organization requiring MFA is out of reach again
        without another factor."""
        self._check_password(account, password)
        self.credentials.delete(FACTOR_SCOPE, account["_id"], passkey_id)
        self._record("dashboard_account.mfa_disabled", account, success(),
                     {"method": WEBAUTHN, "passkey_id": passkey_id})

    def on_claim(self, account: dict) -> None:
        """The address claimed by its mailbox's owner (``AccountService``): every passkey
        of the account and every pending challenge bound to it go, whoever registered
        them; one ``mfa_disabled`` record when there were any."""
        if self.credentials.forget(FACTOR_SCOPE, account["_id"]):
            self._record("dashboard_account.mfa_disabled", account, success(),
                         {"method": WEBAUTHN, "confirmed_by": "account_claimed"})

    # ------------------------------------------------------------------ sign-in

    def challenge_methods(self, challenge_token: str) -> list[str]:
        """What may answer the sign-in's live MFA challenge (``totp``, ``webauthn``);
        nothing once it is used or expired."""
        pending = self.factor.live_challenge(FACTOR_SCOPE, challenge_token, self.clock())
        return pending.get("methods", [TOTP]) if pending is not None else []

    def sign_in_options(self, challenge_token: str | None) -> dict:
        """{challenge_id, options}.  With the password step's MFA ``challenge_token``:
        the second step, offering the account's passkeys (410
        AUTH_MFA_CHALLENGE_EXPIRED when it is not live or does not offer a passkey).
        Without: a sign-in by passkey alone (user verification required)."""
        if challenge_token is None:
            return self.credentials.request_options(FACTOR_SCOPE)
        pending = self.factor.live_challenge(FACTOR_SCOPE, challenge_token, self.clock())
        if pending is None or WEBAUTHN not in pending.get("methods", [TOTP]):
            raise MfaChallengeExpired()  # unknown, used, expired, or TOTP only
        return self.credentials.request_options(FACTOR_SCOPE, subject_id=pending["user_id"],
                                               mfa_challenge=pending["_id"])

    def sign_in(self, *, challenge_id: str, credential: dict) -> dict:
        """Verify an assertion; the account signed in, as read before the assertion was
        checked (as the password step read it, for the second step: ``first_read``).
        As the second step, the MFA challenge is counted and used up (410
        AUTH_MFA_CHALLENGE_EXPIRED, 429 AUTH_MFA_LOCKED).  400 PASSKEY_* when it does
        not verify."""
        challenge = self.credentials.take(FACTOR_SCOPE, challenge_id, AUTHENTICATION)
        passkey = self.credentials.asserted_passkey(FACTOR_SCOPE, challenge, credential)
        # Read before ``verify_use`` stores the use (only while the passkey is there), so
        # a change that removes the passkey and stamps the account after leaves this
        # sign-in an older stamp.
        account = self.store.account(passkey["user_id"])
        if account is None:
            raise CredentialUnknown()
        second_factor = challenge["mfa_challenge"] is not None
        data = {"passkey_id": passkey["_id"], "second_factor": second_factor}
        try:
            mfa_challenge = self._count_attempt(challenge["mfa_challenge"]) if second_factor else None
            self.credentials.verify_use(FACTOR_SCOPE, challenge, passkey, credential)
            if mfa_challenge is not None and not self.factor.consume_challenge(FACTOR_SCOPE, mfa_challenge,
                                                                               self.clock()):
                raise MfaChallengeExpired()  # a parallel answer won, or it expired just now
        except DomainError as exc:
            self._record("dashboard_account.passkey_sign_in", account,
                         failure(exc.code.removeprefix("PASSKEY_").removeprefix("AUTH_MFA_").lower()), data)
            raise
        self._record("dashboard_account.passkey_sign_in", account, success(), data)
        return first_read(account, mfa_challenge) if mfa_challenge is not None else account

    def _count_attempt(self, token_digest: str) -> dict:
        now = self.clock()
        challenge = self.factor.count_attempt(FACTOR_SCOPE, token_digest, now, digested=True)
        if challenge is None:
            raise MfaChallengeExpired()
        if challenge["attempts"] > self.max_attempts:
            raise challenge_locked(self.max_attempts, aware(challenge["expires_at"]), now)
        return challenge
