"""Passkeys of any kind of account: the two WebAuthn ceremonies over MongoDB, and the
stored credentials.

End users of an application and dashboard accounts keep their passkeys and challenges
in the same collections (``store.py``); ``scope`` is what those documents store as
``app_id``: the application's id for its end users, ``"dashboard"`` for dashboard
accounts.  Application ids are UUIDs, so the two never meet: every lookup filters on the
scope, and a credential registered in one is unknown in the other (an end user's passkey
never signs in to the dashboard, nor a dashboard account's to an application).
``subject_id`` is the user or the account, and the user handle the authenticator stores.

``PasskeyCredentials`` holds what both share: the subject's own passkeys (listed,
counted, renamed, deleted: another subject's is not found), the relying party (503
PASSKEY_UNAVAILABLE without one), challenges (random 32 bytes, single use, valid
``challenge_ttl`` seconds, bound to the subject or sign-in that asked), the verified
registration stored as a passkey, and an assertion verified with its sign count moved
forward in one compare-and-set.  Modes, events, audit records and sessions are the
callers'.
"""
from __future__ import annotations

import base64
import secrets
from dataclasses import KW_ONLY, dataclass

from pymongo.errors import DuplicateKeyError

from controlplane.passkeys import ceremony
from controlplane.passkeys.errors import (
    AuthenticatorNotAllowed,
    ChallengeInvalid,
    CredentialUnknown,
    PasskeyAlreadyRegistered,
    PasskeyNotFound,
    PasskeysUnavailable,
    SignCountInvalid,
    UserVerificationRequired,
    VerificationFailed,
)
from controlplane.passkeys.store import PasskeyChallengeStore, PasskeyStore
from shared.ids import digest, new_id, random_token
from shared.timeutil import Clock, seconds

CHALLENGE_TTL = 300
DEFAULT_NAME = "Passkey"
REGISTRATION, AUTHENTICATION = "registration", "authentication"
# A subject proving who they are outside a sign-in (the dashboard's sudo mode, an upstream
# identity's pending link): a challenge of its own kind, so a sign-in never takes one,
# nor a proof a sign-in's; it offers the subject's passkeys and needs the UV flag, as a
# sign-in alone does: the proof stands in for the password, so possession alone (a
# security key without its PIN) proves nothing.
PROOF = "proof"


def _b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).decode().rstrip("=")


def _unb64(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


@dataclass(eq=False)
class PasskeyCredentials:
    passkeys: PasskeyStore
    challenges: PasskeyChallengeStore
    clock: Clock
    _: KW_ONLY
    relying_party: ceremony.RelyingParty | None  # None: the public URL cannot carry passkeys
    challenge_ttl: int = CHALLENGE_TTL

    def rp(self) -> ceremony.RelyingParty:
        if self.relying_party is None:
            raise PasskeysUnavailable()
        return self.relying_party

    def _new_challenge(self, scope: str, kind: str, *, subject_id: str | None, mfa_challenge: str | None = None
                       ) -> tuple[str, bytes]:
        handle, challenge, now = random_token(), secrets.token_bytes(32), self.clock()
        self.challenges.insert({
            "_id": digest(handle), "app_id": scope, "kind": kind, "user_id": subject_id,
            "mfa_challenge": mfa_challenge, "challenge": _b64(challenge), "created_at": now,
            "expires_at": now + seconds(self.challenge_ttl),
        })
        return handle, challenge

    def take(self, scope: str, challenge_id: str, kind: str) -> dict:
        """The live challenge of ``challenge_id``, used up; 400 PASSKEY_CHALLENGE_INVALID
        when it is unknown, of another kind or scope, used, or expired."""
        challenge = self.challenges.take(scope, digest(challenge_id), kind, self.clock())
        if challenge is None:
            raise ChallengeInvalid()
        return challenge

    # ------------------------------------------------------------------ the subject's passkeys

    def of_subject(self, scope: str, subject_id: str) -> list[dict]:
        """The stored passkeys, oldest first."""
        return self.passkeys.for_user(scope, subject_id)

    def count(self, scope: str, subject_id: str) -> int:
        return self.passkeys.count_for_user(scope, subject_id)

    def rename(self, scope: str, subject_id: str, passkey_id: str, name: str) -> dict:
        """The renamed passkey; 404 PASSKEY_NOT_FOUND unless it is the subject's."""
        passkey = self.passkeys.rename(scope, subject_id, passkey_id, name)
        if passkey is None:
            raise PasskeyNotFound(passkey_id)
        return passkey

    def delete(self, scope: str, subject_id: str, passkey_id: str) -> None:
        """404 PASSKEY_NOT_FOUND unless it is the subject's (or a parallel delete won)."""
        if not self.passkeys.delete_of_user(scope, subject_id, passkey_id):
            raise PasskeyNotFound(passkey_id)

    def forget(self, scope: str, subject_id: str) -> int:
        """Remove every passkey of the subject and every pending challenge bound to it;
        how many passkeys went.  The passkeys first: once they are gone no challenge can
        be answered with one."""
        removed = self.passkeys.delete_for_user(scope, subject_id)
        self.challenges.delete_for_user(scope, subject_id)
        return removed

    # ------------------------------------------------------------------ registration

    def creation_options(self, scope: str, subject_id: str, *, rp_name: str, user_name: str, display_name: str,
                         attestation: str = "none") -> dict:
        """{challenge_id, options}: creation options for the subject, bound to it,
        excluding the authenticators it already registered."""
        rp = self.rp()
        handle, challenge = self._new_challenge(scope, REGISTRATION, subject_id=subject_id)
        options = ceremony.registration_options(
            rp, rp_name=rp_name, user_id=subject_id, user_name=user_name, display_name=display_name,
            challenge=challenge, exclude=self.passkeys.for_user(scope, subject_id), attestation=attestation)
        return {"challenge_id": handle, "options": options}

    def enrol(self, scope: str, subject_id: str, *, challenge_id: str, credential: dict, name: str | None,
              allowed_aaguids=()) -> dict:
        """Verify the attestation against the subject's registration challenge and store
        the passkey (the stored document).  400 PASSKEY_* when it does not verify (or
        its AAGUID is not in a non-empty ``allowed_aaguids``), 409
        PASSKEY_ALREADY_REGISTERED."""
        rp = self.rp()
        challenge = self.take(scope, challenge_id, REGISTRATION)
        if challenge["user_id"] != subject_id:
            raise ChallengeInvalid()
        new = ceremony.verify_registration(rp, credential, challenge=_unb64(challenge["challenge"]))
        if allowed_aaguids and new.aaguid not in allowed_aaguids:
            raise AuthenticatorNotAllowed()
        passkey = {
            "_id": new_id(), "app_id": scope, "user_id": subject_id, "credential_id": new.credential_id,
            "public_key": new.public_key, "sign_count": new.sign_count, "transports": new.transports,
            "aaguid": new.aaguid, "name": name or DEFAULT_NAME, "backed_up": new.backed_up,
            "backup_eligible": new.backup_eligible, "discoverable": new.discoverable,
            "user_verified": new.user_verified, "created_at": self.clock(), "last_used_at": None,
        }
        try:
            self.passkeys.insert(passkey)
        except DuplicateKeyError:
            raise PasskeyAlreadyRegistered() from None
        return passkey

    # ------------------------------------------------------------------ authentication

    def request_options(self, scope: str, *, subject_id: str | None = None, mfa_challenge: str | None = None,
                        kind: str = AUTHENTICATION) -> dict:
        """{challenge_id, options}.  Without ``subject_id``: a sign-in by passkey alone,
        offering no credential (the authenticator lists its discoverable ones) and
        requiring user verification.  With it: the subject's passkeys, as a second
        factor (``mfa_challenge``: the digest of the sign-in's MFA challenge it answers),
        or, of ``kind`` PROOF, as the subject's proof outside a sign-in (user
        verification required)."""
        rp = self.rp()
        handle, challenge = self._new_challenge(scope, kind, subject_id=subject_id, mfa_challenge=mfa_challenge)
        if subject_id is None:
            options = ceremony.authentication_options(rp, challenge=challenge, allow=[], user_verification="required")
        else:
            options = ceremony.authentication_options(
                rp, challenge=challenge, allow=self.passkeys.for_user(scope, subject_id),
                user_verification="required" if kind == PROOF else "preferred")
        return {"challenge_id": handle, "options": options}

    def asserted_passkey(self, scope: str, challenge: dict, credential: dict) -> dict:
        """The stored passkey ``credential`` names, when the challenge may be answered
        with it: any of the scope's for a sign-in alone, else only the subject's.  400
        PASSKEY_CREDENTIAL_UNKNOWN otherwise (unknown, another scope's, another's)."""
        passkey = self.passkeys.by_credential(scope, ceremony.credential_id_of(credential))
        if passkey is None or challenge["user_id"] not in (None, passkey["user_id"]):
            raise CredentialUnknown()
        return passkey

    def verify_use(self, scope: str, challenge: dict, passkey: dict, credential: dict) -> ceremony.Assertion:
        """Verify the assertion; a sign-in alone (a challenge without subject) needs the
        passkey's own user handle and the UV flag (400
        PASSKEY_USER_VERIFICATION_REQUIRED), a proof (``PROOF``) the UV flag; the BE flag
        must be the one registered (400 PASSKEY_VERIFICATION_FAILED).  The sign count must move forward (or stay
        0), checked and stored at once: 400 PASSKEY_SIGN_COUNT_INVALID otherwise.

        Once stored, the count and the use stay whatever the caller then makes of the
        sign-in (section 6.1.1: a signed counter is evidence against a clone either
        way), so callers refuse what they can before calling this, never undo it."""
        alone = challenge["user_id"] is None
        if alone and ceremony.user_handle_of(credential) != passkey["user_id"]:
            raise UserVerificationRequired()  # not a discoverable credential, or not this one's
        assertion = ceremony.verify_assertion(self.rp(), credential, challenge=_unb64(challenge["challenge"]),
                                              public_key=passkey["public_key"])
        if (alone or challenge["kind"] == PROOF) and not assertion.user_verified:
            raise UserVerificationRequired()
        # L3 6.1.3: backup eligibility is fixed for a credential's life, so an answer with
        # another BE flag does not come from the credential that was registered.
        if assertion.backup_eligible != passkey["backup_eligible"]:
            raise VerificationFailed()
        if not ceremony.sign_count_moves_forward(passkey["sign_count"], assertion.sign_count) or \
                not self.passkeys.record_use(scope, passkey["_id"], assertion.sign_count, assertion.backed_up,
                                             self.clock()):
            raise SignCountInvalid()
        return assertion
