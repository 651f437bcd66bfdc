"""Passkeys (WebAuthn) of end users: registration, management and sign-in
(docs/passkeys.md).

The application's ``passkeys`` setting decides what a passkey does:

- ``off`` (the default): nothing; registration and sign-in answer 403 PASSKEY_DISABLED
  (a user can still list, rename and delete the passkeys they have).
- ``second_factor``: any passkey of the user answers the login's MFA challenge, beside
  TOTP and backup codes (``login_challenge`` is the password login's ``SecondFactor``).
- ``passwordless``: as ``second_factor``, and a discoverable passkey with user
  verification also signs in alone.  ``passkeys_allow_password`` false refuses the
  password of a user who has such a passkey.

Challenges are random 32 bytes, single use (``PasskeyChallengeStore.take``), valid
``CHALLENGE_TTL`` seconds and bound: a registration's to the user who asked, a second
factor's to the login's MFA challenge, a sign-in's to the ``challenge_id`` handed out
with it.  A passkey becomes a factor on registration and stops on deletion: the first
one emits mfa.enabled and deleting the last mfa.disabled, as TOTP does.
"""
from __future__ import annotations

import base64
import secrets
from dataclasses import KW_ONLY, dataclass

from pymongo.errors import DuplicateKeyError

from controlplane.audit.context import actor, failure, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.mfa.errors import MfaChallengeExpired
from controlplane.mfa.service import MfaService
from controlplane.passkeys import ceremony
from controlplane.passkeys.errors import (
    AuthenticatorNotAllowed,
    ChallengeInvalid,
    CredentialUnknown,
    LastPasskey,
    PasskeyAlreadyRegistered,
    PasskeyNotFound,
    PasskeysDisabled,
    PasskeysUnavailable,
    PasswordSignInDisabled,
    SignCountInvalid,
    UserVerificationRequired,
)
from controlplane.passkeys.store import PasskeyChallengeStore, PasskeyStore
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import AccountSuspended, UserNotFound
from controlplane.users.sessions import SessionService
from shared.errors import DomainError
from shared.ids import digest, new_id, random_token
from shared.timeutil import Clock, isoformat, seconds

OFF, SECOND_FACTOR, PASSWORDLESS = "off", "second_factor", "passwordless"
MODES = (OFF, SECOND_FACTOR, PASSWORDLESS)
# The MFA challenge's method name; not an RFC 8176 amr value (the ID token says "hwk":
# controlplane.oidc.hosted).
WEBAUTHN = "webauthn"
CHALLENGE_TTL = 300
DEFAULT_NAME = "Passkey"


def serialize_passkey(passkey: dict) -> dict:
    return {
        "id": passkey["_id"],
        "name": passkey["name"],
        "created_at": isoformat(passkey["created_at"]),
        "last_used_at": isoformat(passkey.get("last_used_at")),
        "backed_up": passkey["backed_up"],
        "backup_eligible": passkey["backup_eligible"],
        "transports": passkey["transports"],
        "discoverable": passkey["discoverable"],
        "user_verified": passkey["user_verified"],
        "aaguid": passkey["aaguid"],
        # No AAGUID -> model table is shipped yet; the field is there for when it is.
        "authenticator_name": None,
    }


def signs_in_alone(passkey: dict) -> bool:
    """Registered with user verification and not known to be non-discoverable."""
    return bool(passkey["user_verified"]) and passkey["discoverable"] is not False


def _b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).decode().rstrip("=")


def _unb64(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


@dataclass(eq=False)
class PasskeyService:
    passkeys: PasskeyStore
    challenges: PasskeyChallengeStore
    users: UserDirectory
    mfa: MfaService
    sessions: SessionService
    events: EventLog
    audit: AuditLog
    clock: Clock
    _: KW_ONLY
    relying_party: ceremony.RelyingParty | None  # None: the public URL cannot carry passkeys
    challenge_ttl: int = CHALLENGE_TTL

    # ------------------------------------------------------------------ gates

    def _rp(self, app: dict, *modes: str) -> ceremony.RelyingParty:
        if self.relying_party is None:
            raise PasskeysUnavailable()
        if app.get("passkeys", OFF) not in (modes or (SECOND_FACTOR, PASSWORDLESS)):
            raise PasskeysDisabled()
        return self.relying_party

    def _user(self, app_id: str, user_id: str) -> dict:
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

    def _new_challenge(self, app_id: str, kind: str, *, user_id: str | None, mfa_challenge: str | None = None
                       ) -> tuple[str, bytes]:
        handle, challenge, now = random_token(), secrets.token_bytes(32), self.clock()
        self.challenges.insert({
            "_id": digest(handle), "app_id": app_id, "kind": kind, "user_id": user_id,
            "mfa_challenge": mfa_challenge, "challenge": _b64(challenge), "created_at": now,
            "expires_at": now + seconds(self.challenge_ttl),
        })
        return handle, challenge

    def _take(self, app_id: str, challenge_id: str, kind: str) -> dict:
        challenge = self.challenges.take(app_id, digest(challenge_id), kind, self.clock())
        if challenge is None:
            raise ChallengeInvalid()
        return challenge

    # ------------------------------------------------------------------ registration

    def registration_options(self, app: dict, user_id: str) -> dict:
        """{challenge_id, options}: creation options for the signed-in user, excluding
        the authenticators they already registered."""
        rp = self._rp(app)
        user = self._user(app["_id"], user_id)
        handle, challenge = self._new_challenge(app["_id"], "registration", user_id=user_id)
        attestation = "direct" if app.get("passkey_aaguids") else "none"
        options = ceremony.registration_options(
            rp, rp_name=app.get("brand_name") or app["name"], user_id=user_id, user_name=user["email"],
            display_name=user.get("name") or user["email"], challenge=challenge,
            exclude=self.passkeys.for_user(app["_id"], user_id), attestation=attestation)
        return {"challenge_id": handle, "options": options}

    def register(self, app: dict, user_id: str, *, challenge_id: str, credential: dict, name: str | None) -> dict:
        """Verify the attestation and store the passkey.  400 PASSKEY_* when it does not
        verify, 409 PASSKEY_ALREADY_REGISTERED."""
        rp = self._rp(app)
        app_id = app["_id"]
        user = self._user(app_id, user_id)
        challenge = self._take(app_id, challenge_id, "registration")
        if challenge["user_id"] != user_id:
            raise ChallengeInvalid()
        new = ceremony.verify_registration(rp, credential, challenge=_unb64(challenge["challenge"]))
        allowed = app.get("passkey_aaguids") or []
        if allowed and new.aaguid not in allowed:
            raise AuthenticatorNotAllowed()
        now = self.clock()
        passkey = {
            "_id": new_id(), "app_id": app_id, "user_id": user_id, "credential_id": new.credential_id,
            "public_key": new.public_key, "sign_count": new.sign_count, "transports": new.transports,
            "aaguid": new.aaguid, "name": name or DEFAULT_NAME, "backed_up": new.backed_up,
            "backup_eligible": new.backup_eligible, "discoverable": new.discoverable,
            "user_verified": new.user_verified, "created_at": now, "last_used_at": None,
        }
        try:
            self.passkeys.insert(passkey)
        except DuplicateKeyError:
            raise PasskeyAlreadyRegistered() from None
        who = actor("user", user_id, user["email"])
        self.audit.record("passkey.registered", result=success(), actor=who, target=who, application_id=app_id,
                          data={"passkey_id": passkey["_id"], "aaguid": new.aaguid})
        if self.passkeys.count_for_user(app_id, user_id) == 1:
            self.events.emit(app_id, "mfa.enabled", {"user_id": user_id, "method_id": passkey["_id"],
                                                     "method": WEBAUTHN}, subject={"user_id": user_id})
        return serialize_passkey(passkey)

    # ------------------------------------------------------------------ management

    def list(self, app_id: str, user_id: str) -> list[dict]:
        return [serialize_passkey(p) for p in self.passkeys.for_user(app_id, user_id)]

    def rename(self, app_id: str, user_id: str, passkey_id: str, name: str) -> dict:
        passkey = self.passkeys.rename(app_id, user_id, passkey_id, name)
        if passkey is None:
            raise PasskeyNotFound(passkey_id)
        return serialize_passkey(passkey)

    def delete(self, app: dict, user_id: str, passkey_id: str) -> None:
        """Remove one of the user's passkeys.  409 PASSKEY_LAST_CREDENTIAL when it is the
        last and the user has no password: the recovery path is a password reset, which
        sets one (docs/passkeys.md)."""
        app_id = app["_id"]
        user = self._user(app_id, user_id)
        if self.passkeys.of_user(app_id, user_id, passkey_id) is None:
            raise PasskeyNotFound(passkey_id)
        if not user.get("password_hash") and self.passkeys.count_for_user(app_id, user_id) == 1:
            raise LastPasskey()
        if not self.passkeys.delete_of_user(app_id, user_id, passkey_id):
            raise PasskeyNotFound(passkey_id)  # a parallel delete won
        who = actor("user", user_id, user["email"])
        self.audit.record("passkey.deleted", result=success(), actor=who, target=who, application_id=app_id,
                          data={"passkey_id": passkey_id})
        if self.passkeys.count_for_user(app_id, user_id) == 0:
            self.events.emit(app_id, "mfa.disabled", {"user_id": user_id, "method": WEBAUTHN},
                             subject={"user_id": user_id})

    # ------------------------------------------------------------------ sign-in

    def login_challenge(self, app: dict, user: dict, *, remember_me: bool, device_info: dict) -> dict | None:
        """The password login's second factor (``users.login.SecondFactor``): the MFA
        challenge, with ``webauthn`` among its methods when the user has a passkey and
        the application uses them.  403 PASSKEY_REQUIRED when the application refuses
        passwords of users who can sign in with a passkey alone."""
        mode = app.get("passkeys", OFF)
        passkeys = self._passkeys_offered(app, user)
        if mode == PASSWORDLESS and not app.get("passkeys_allow_password", True) and any(map(signs_in_alone, passkeys)):
            raise PasswordSignInDisabled()
        return self._challenge(app, user, passkeys, remember_me=remember_me, device_info=device_info)

    def sign_in_challenge(self, app: dict, user: dict, *, remember_me: bool, device_info: dict,
                          login_data: dict) -> dict | None:
        """The second factor of a sign-in that used no password (an upstream identity
        provider, named by ``login_data``): the login's MFA challenge, the same methods
        offered."""
        passkeys = self._passkeys_offered(app, user)
        return self._challenge(app, user, passkeys, remember_me=remember_me, device_info=device_info,
                               login_data=login_data)

    def _passkeys_offered(self, app: dict, user: dict) -> list:
        if app.get("passkeys", OFF) == OFF or self.relying_party is None:
            return []
        return self.passkeys.for_user(app["_id"], user["_id"])

    def _challenge(self, app: dict, user: dict, passkeys: list, *, remember_me: bool, device_info: dict,
                   login_data: dict | None = None):
        return self.mfa.login_challenge(app, user, remember_me=remember_me, device_info=device_info,
                                        other_methods=(WEBAUTHN,) if passkeys else (), login_data=login_data)

    def authentication_options(self, app: dict, *, challenge_token: str | None) -> dict:
        """{challenge_id, options}.  With the login's MFA ``challenge_token``: the
        second factor, offering that user's passkeys.  Without: a sign-in by passkey
        alone (``passwordless`` only), offering none so the authenticator lists its
        discoverable ones, with user verification required."""
        app_id = app["_id"]
        if challenge_token is None:
            rp = self._rp(app, PASSWORDLESS)
            handle, challenge = self._new_challenge(app_id, "authentication", user_id=None)
            options = ceremony.authentication_options(rp, challenge=challenge, allow=[], user_verification="required")
            return {"challenge_id": handle, "options": options}
        rp = self._rp(app)
        pending = self.mfa.pending_challenge(app_id, challenge_token, WEBAUTHN)
        if pending is None:
            raise MfaChallengeExpired()
        handle, challenge = self._new_challenge(app_id, "authentication", user_id=pending["user_id"],
                                                mfa_challenge=pending["_id"])
        options = ceremony.authentication_options(rp, challenge=challenge, user_verification="preferred",
                                                  allow=self.passkeys.for_user(app_id, pending["user_id"]))
        return {"challenge_id": handle, "options": options}

    def authenticate(self, app: dict, *, challenge_id: str, credential: dict, remember_me: bool,
                     device_info: dict) -> dict:
        """Verify an assertion and issue the token pair of a login (through the MFA
        challenge when it is a second factor).  400 PASSKEY_* when it does not verify;
        a sign count that goes backwards is refused and audited."""
        rp = self._rp(app)
        app_id = app["_id"]
        challenge = self._take(app_id, challenge_id, "authentication")
        passkey = self.passkeys.by_credential(app_id, ceremony.credential_id_of(credential))
        alone = challenge["user_id"] is None
        if passkey is None or not (alone or passkey["user_id"] == challenge["user_id"]):
            raise CredentialUnknown()
        who = actor("user", passkey["user_id"])
        try:
            pair = self._sign_in(app, rp, challenge, passkey, credential, alone=alone, remember_me=remember_me,
                                 device_info=device_info)
        except DomainError as exc:
            self.audit.record("passkey.sign_in", result=failure(exc.code.removeprefix("PASSKEY_").lower()),
                              actor=who, target=who, application_id=app_id,
                              data={"passkey_id": passkey["_id"], "second_factor": not alone})
            raise
        self.audit.record("passkey.sign_in", result=success(), actor=who, target=who, application_id=app_id,
                          data={"passkey_id": passkey["_id"], "second_factor": not alone})
        return pair

    def _sign_in(self, app: dict, rp: ceremony.RelyingParty, challenge: dict, passkey: dict, credential: dict, *,
                 alone: bool, remember_me: bool, device_info: dict) -> dict:
        app_id = app["_id"]
        if alone:
            if app.get("passkeys") != PASSWORDLESS:
                raise PasskeysDisabled()
            if ceremony.user_handle_of(credential) != passkey["user_id"]:
                raise UserVerificationRequired()  # not a discoverable credential, or not this one's
        assertion = ceremony.verify_assertion(rp, credential, challenge=_unb64(challenge["challenge"]),
                                              public_key=passkey["public_key"])
        if alone and not assertion.user_verified:
            raise UserVerificationRequired()
        if not ceremony.sign_count_moves_forward(passkey["sign_count"], assertion.sign_count) or \
                not self.passkeys.record_use(app_id, passkey["_id"], assertion.sign_count, assertion.backed_up,
                                             self.clock()):
            raise SignCountInvalid()
        if not alone:
            return self.mfa.complete(app, challenge["mfa_challenge"], method=WEBAUTHN)
        user = self.users.get(app_id, passkey["user_id"])
        if user is None or user.get("status") == "deleted":
            raise CredentialUnknown()
        if user.get("status") == "suspended":
            raise AccountSuspended()
        return self.sessions.issue(app, user, remember_me=remember_me, device_info=device_info)

    # ------------------------------------------------------------------ lifecycle

    def on_event(self, event) -> None:
        """Listener of the change log: a deleted user's passkeys go with it."""
        if event.type == "user.deleted" and event.app_id and event.subject.get("user_id"):
            self.passkeys.delete_for_user(event.app_id, event.subject["user_id"])
