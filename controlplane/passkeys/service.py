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

The ceremonies, challenges and stored passkeys are ``credentials.PasskeyCredentials``
(shared with dashboard accounts), under the application's id as scope.  Challenges are
bound: a registration's to the user who asked, a second factor's to the login's MFA
challenge, a sign-in's to the ``challenge_id`` handed out with it.  A passkey becomes a
factor on registration and stops on deletion: the first one emits mfa.enabled and
deleting the last mfa.disabled, as TOTP does.  Each registration and each deletion is
mailed to the account's address (``emails``), as TOTP's changes are: a password reset
leaves a passkey in place, so its owner must hear of one they did not add.  A hand-over's
removals (``on_claim``) and a deleted account's are not mailed.

The passkeys and TOTP are one login challenge's second factors, so what concerns them
together is here, around ``MfaService``: the status of both (``mfa_status``), turning
TOTP off while a passkey remains (``disable_totp``), and an administrator's reset of
every second factor (``reset_mfa``).
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.audit.context import actor, failure, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.mail import Mailer
from controlplane.mfa import emails as mfa_emails
from controlplane.mfa.errors import MfaChallengeExpired, MfaNotEnabled
from controlplane.mfa.service import MfaService
from controlplane.passkeys import ceremony, emails
from controlplane.passkeys.authenticators import authenticator_name
from controlplane.passkeys.credentials import AUTHENTICATION, PROOF, PasskeyCredentials
from controlplane.passkeys.errors import (
    ChallengeInvalid,
    CredentialUnknown,
    LastPasskey,
    PasskeyLimitExceeded,
    PasskeyNotFound,
    PasskeysDisabled,
    PasswordSignInDisabled,
)
from controlplane.passkeys.store import PasskeyStore
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import AccountSuspended, SessionEnded
from controlplane.users.sessions import SessionService
from shared.errors import DomainError
from shared.ids import digest
from shared.timeutil import Clock, isoformat

OFF, SECOND_FACTOR, PASSWORDLESS = "off", "second_factor", "passwordless"
MODES = (OFF, SECOND_FACTOR, PASSWORDLESS)
# The MFA challenge's method name; not an RFC 8176 amr value (the ID token says "hwk":
# controlplane.oidc.hosted).
WEBAUTHN = "webauthn"
# Passkeys one user may have in one application: room for several platforms' keychains
# and security keys, while every passkey goes back in each of the user's options answers
# (excludeCredentials, a second factor's allowCredentials) and in their listing.
MAX_PASSKEYS_PER_USER = 20


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
        "authenticator_name": authenticator_name(passkey["aaguid"]),
    }


def signs_in_alone(passkey: dict) -> bool:
    """Registered with user verification and not known to be non-discoverable."""
    return bool(passkey["user_verified"]) and passkey["discoverable"] is not False


@dataclass(eq=False)
class PasskeyService:
    passkeys: PasskeyStore
    credentials: PasskeyCredentials
    users: UserDirectory
    mfa: MfaService
    sessions: SessionService
    events: EventLog
    audit: AuditLog
    mailer: Mailer
    clock: Clock

    @property
    def relying_party(self) -> ceremony.RelyingParty | None:
        return self.credentials.relying_party

    # ------------------------------------------------------------------ gates

    def _gate(self, app: dict, *modes: str) -> None:
        self.credentials.rp()
        if app.get("passkeys", OFF) not in (modes or (SECOND_FACTOR, PASSWORDLESS)):
            raise PasskeysDisabled()

    # ------------------------------------------------------------------ registration

    def registration_options(self, app: dict, user_id: str) -> dict:
        """{challenge_id, options}: creation options for the signed-in user, excluding
        the authenticators they already registered; 409 PASSKEY_LIMIT_EXCEEDED when they
        have ``MAX_PASSKEYS_PER_USER``."""
        self._gate(app)
        user = self.users.live(app["_id"], user_id)
        self._room_for_one_more(app["_id"], user_id)
        return self.credentials.creation_options(
            app["_id"], user_id, rp_name=app.get("brand_name") or app["name"], user_name=user["email"],
            display_name=user.get("name") or user["email"],
            attestation="direct" if app.get("passkey_aaguids") else "none")

    def register(self, app: dict, user_id: str, *, session_id: str | None, challenge_id: str, credential: dict,
                 name: str | None) -> dict:
        """Verify the attestation and store the passkey, while the caller's session
        ``session_id`` is live, and tell the account's address.  400 PASSKEY_* when it does
        not verify, 409 PASSKEY_ALREADY_REGISTERED, 409 PASSKEY_LIMIT_EXCEEDED when the
        user has ``MAX_PASSKEYS_PER_USER`` already, 401 when the session has ended."""
        self._gate(app)
        app_id = app["_id"]
        user = self.users.live(app_id, user_id)
        self._room_for_one_more(app_id, user_id)
        passkey = self.credentials.enrol(app_id, user_id, challenge_id=challenge_id, credential=credential, name=name,
                                        allowed_aaguids=app.get("passkey_aaguids") or ())
        # A passkey outlives the access token that adds it, which outlives its session: a
        # session ended (a password reset, a hand-over, a sign-out everywhere) must not
        # leave one behind.  Checked after the insert, so an end racing it is seen here
        # or sweeps the passkey itself.
        if session_id is None or not self.sessions.is_active(app_id, session_id):
            self.credentials.delete(app_id, user_id, passkey["_id"])
            raise SessionEnded()
        # Counted again with this passkey in: parallel registrations all passed the count
        # above, and each that finds the user over the limit removes its own.
        count = self.passkeys.count_for_user(app_id, user_id)
        if count > MAX_PASSKEYS_PER_USER:
            self.credentials.delete(app_id, user_id, passkey["_id"])
            raise PasskeyLimitExceeded(MAX_PASSKEYS_PER_USER)
        who = actor("user", user_id, user["email"])
        self.audit.record("passkey.registered", result=success(), actor=who, target=who, application_id=app_id,
                          data={"passkey_id": passkey["_id"], "aaguid": passkey["aaguid"]})
        if count == 1:
            self.events.emit(app_id, "mfa.enabled", {"user_id": user_id, "method_id": passkey["_id"],
                                                     "method": WEBAUTHN}, subject={"user_id": user_id})
        self._mail(emails.added(app, user, passkey), user)
        return serialize_passkey(passkey)

    def _room_for_one_more(self, app_id: str, user_id: str) -> None:
        if self.passkeys.count_for_user(app_id, user_id) >= MAX_PASSKEYS_PER_USER:
            raise PasskeyLimitExceeded(MAX_PASSKEYS_PER_USER)

    # ------------------------------------------------------------------ management

    def list(self, app_id: str, user_id: str) -> list[dict]:
        return [serialize_passkey(p) for p in self.passkeys.for_user(app_id, user_id)]

    def mfa_status(self, app: dict, user_id: str) -> dict:
        """The user's MFA status (``MfaService.status``: the TOTP method) with
        ``passkeys``: {count, second_factor}; a passkey is a second factor while the
        application uses passkeys (and the server can verify them)."""
        status = self.mfa.status(app["_id"], user_id)
        count = self.credentials.count(app["_id"], user_id)
        in_use = app.get("passkeys", OFF) != OFF and self.relying_party is not None
        return {**status, "passkeys": {"count": count, "second_factor": in_use and count > 0}}

    def disable_totp(self, app: dict, user_id: str, *, password: str) -> None:
        """The user turns TOTP off (``MfaService.disable``: the password, mfa.disabled
        with ``method: totp``).  A passkey the application accepts still answers the
        login's challenge, so the notice says that one of them is still asked for rather
        than that the password alone signs in."""
        self.mfa.disable(app, user_id, password=password, passkeys_left=self.can_prove(app, user_id))

    def reset_mfa(self, app: dict, user_id: str) -> None:
        """An administrator's reset, for a user who lost every second factor
        (docs/mfa.md): the TOTP method, its backup codes (``MfaService.reset_totp``) and
        every passkey, with the challenges bound to them, go, whatever the application's
        ``passkeys`` setting (a passkey kept would guard the login again once it is on).
        A passkey is a second factor of the same login challenge: a reset that left one
        would leave the user asked for it, and a user whose only factor was a lost
        passkey with no way in at all (a password reset keeps passkeys).

        Each factor removed emits its mfa.disabled (``method`` totp, webauthn), each
        passkey a ``passkey.deleted`` record whose actor is the administrator
        (``data.mfa_reset``), and one notice says what went.  404 USER_NOT_FOUND, 400
        MFA_NOT_ENABLED when the user has no second factor."""
        app_id = app["_id"]
        user = self.users.live(app_id, user_id)
        totp = self.mfa.reset_totp(app, user)
        passkeys = self.passkeys.for_user(app_id, user_id)
        removed = self.credentials.forget(app_id, user_id) if passkeys else 0
        if not totp and not removed:
            raise MfaNotEnabled()
        target = actor("user", user_id, user["email"])
        for passkey in passkeys:
            self.audit.record("passkey.deleted", result=success(), target=target, application_id=app_id,
                              data={"passkey_id": passkey["_id"], "mfa_reset": True})
        if removed:
            self.events.emit(app_id, "mfa.disabled", {"user_id": user_id, "method": WEBAUTHN},
                             subject={"user_id": user_id})
        self._mail(mfa_emails.reset(app, user, totp=totp, passkeys=removed), user)

    def rename(self, app_id: str, user_id: str, passkey_id: str, name: str) -> dict:
        return serialize_passkey(self.credentials.rename(app_id, user_id, passkey_id, name))

    def delete(self, app: dict, user_id: str, passkey_id: str) -> None:
        """Remove one of the user's passkeys and tell the account's address.  409
        PASSKEY_LAST_CREDENTIAL when it is the last and the user has no password: the
        recovery path is a password reset, which sets one (docs/passkeys.md)."""
        app_id = app["_id"]
        user = self.users.live(app_id, user_id)
        passkey = self.passkeys.of_user(app_id, user_id, passkey_id)
        if passkey is None:
            raise PasskeyNotFound(passkey_id)
        if not user.get("password_hash") and self.passkeys.count_for_user(app_id, user_id) == 1:
            raise LastPasskey()
        self.credentials.delete(app_id, user_id, passkey_id)
        left = self.passkeys.count_for_user(app_id, user_id)
        # Checked again after the delete: two parallel deletions of a user's last two
        # passkeys both passed the count above; the one that sees none left (or both)
        # puts its passkey back.
        if left == 0 and not self.users.live(app_id, user_id).get("password_hash"):
            self.passkeys.insert(passkey)
            raise LastPasskey()
        who = actor("user", user_id, user["email"])
        self.audit.record("passkey.deleted", result=success(), actor=who, target=who, application_id=app_id,
                          data={"passkey_id": passkey_id})
        if left == 0:
            self.events.emit(app_id, "mfa.disabled", {"user_id": user_id, "method": WEBAUTHN},
                             subject={"user_id": user_id})
        self._mail(emails.removed(app, user, passkey, self.clock()), user)

    def _mail(self, message: tuple[str, str], user: dict) -> None:
        subject, body = message
        self.mailer.send(user["email"], subject, body)

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
            self._gate(app, PASSWORDLESS)
            return self.credentials.request_options(app_id)
        self._gate(app)
        pending = self.mfa.pending_challenge(app_id, challenge_token, WEBAUTHN)
        if pending is None:
            raise MfaChallengeExpired()
        return self.credentials.request_options(app_id, subject_id=pending["user_id"], mfa_challenge=pending["_id"])

    def authenticate(self, app: dict, *, challenge_id: str, credential: dict, remember_me: bool,
                     device_info: dict, answering: str | None = None, alone_only: bool = False) -> dict:
        """Verify an assertion and issue the token pair of a login (through the MFA
        challenge when it is a second factor).  400 PASSKEY_* when it does not verify;
        a sign count that goes backwards is refused and audited.  ``answering``: the MFA
        challenge token of the login whose second factor this must be (the hosted MFA
        step): a challenge of another login, or of a sign-in by passkey alone, is 400
        PASSKEY_CHALLENGE_INVALID, so no other account's passkey can finish this login.
        ``alone_only``: this must be a sign-in by passkey alone (the hosted login page's
        passkey form, whose sign-in claims user verification): any other challenge (a
        second factor's, which needs no UV) is 400 PASSKEY_CHALLENGE_INVALID."""
        self._gate(app)
        app_id = app["_id"]
        challenge = self.credentials.take(app_id, challenge_id, AUTHENTICATION)
        if answering is not None and challenge.get("mfa_challenge") != digest(answering):
            raise ChallengeInvalid()
        if alone_only and (challenge["user_id"] is not None or challenge.get("mfa_challenge") is not None):
            raise ChallengeInvalid()
        passkey = self.credentials.asserted_passkey(app_id, challenge, credential)
        alone = challenge["user_id"] is None
        who = actor("user", passkey["user_id"])
        try:
            pair = self._sign_in(app, challenge, passkey, credential, alone=alone, remember_me=remember_me,
                                 device_info=device_info)
        except DomainError as exc:
            self.audit.record("passkey.sign_in", result=failure(exc.code.removeprefix("PASSKEY_").lower()),
                              actor=who, target=who, application_id=app_id,
                              data={"passkey_id": passkey["_id"], "second_factor": not alone})
            raise
        self.audit.record("passkey.sign_in", result=success(), actor=who, target=who, application_id=app_id,
                          data={"passkey_id": passkey["_id"], "second_factor": not alone})
        return pair

    def _sign_in(self, app: dict, challenge: dict, passkey: dict, credential: dict, *, alone: bool,
                 remember_me: bool, device_info: dict) -> dict:
        app_id = app["_id"]
        if alone and app.get("passkeys") != PASSWORDLESS:
            raise PasskeysDisabled()
        if not alone:
            self.credentials.verify_use(app_id, challenge, passkey, credential)
            return self.mfa.complete(app, challenge["mfa_challenge"], method=WEBAUTHN)
        # The account as it is before the passkey is used: one handed over to its
        # email's owner meanwhile (users.claim) gets no session.
        user = self.users.get(app_id, passkey["user_id"])
        if user is None or user.get("status") == "deleted":
            raise CredentialUnknown()
        if user.get("status") == "suspended":
            raise AccountSuspended()
        self.credentials.verify_use(app_id, challenge, passkey, credential)
        return self.sessions.issue(app, user, remember_me=remember_me, device_info=device_info)

    # ------------------------------------------------------------------ proving an account

    def can_prove(self, app: dict, user_id: str) -> bool:
        """Whether ``user_id`` has a passkey the application accepts now."""
        return bool(self._passkeys_offered(app, {"_id": user_id}))

    def proof_options(self, app: dict, user_id: str) -> dict:
        """{challenge_id, options} asking for one of ``user_id``'s own passkeys, to prove
        the account outside a sign-in (an upstream identity's pending link,
        docs/connections.md): a ``PROOF`` challenge, user verification required, since
        the proof stands in for the password (a security key without its PIN, stolen,
        proves nothing)."""
        self._gate(app)
        return self.credentials.request_options(app["_id"], subject_id=user_id, kind=PROOF)

    def prove(self, app: dict, user_id: str, *, challenge_id: str, credential: dict) -> None:
        """Verify an assertion answering ``proof_options`` for ``user_id``; 400 PASSKEY_*
        when it does not (another user's passkey or challenge, a sign-in's challenge, a
        bad signature, a sign count that goes backwards, no user verification: 400
        PASSKEY_USER_VERIFICATION_REQUIRED)."""
        self._gate(app)
        app_id = app["_id"]
        challenge = self.credentials.take(app_id, challenge_id, PROOF)
        if challenge["user_id"] != user_id:
            raise ChallengeInvalid()
        passkey = self.credentials.asserted_passkey(app_id, challenge, credential)
        self.credentials.verify_use(app_id, challenge, passkey, credential)

    # ------------------------------------------------------------------ lifecycle

    def on_claim(self, app_id: str, user_id: str) -> None:
        """An unverified account handed to its mailbox's owner (``users.claim``): the
        passkeys someone else may have registered go; mfa.disabled when there were any.
        No notice per passkey: the hand-over is the new owner's own doing."""
        if self.passkeys.delete_for_user(app_id, user_id):
            self.events.emit(app_id, "mfa.disabled", {"user_id": user_id, "method": WEBAUTHN},
                             subject={"user_id": user_id})

    def on_event(self, event) -> None:
        """Listener of the change log: a deleted user's passkeys go with it."""
        if event.type == "user.deleted" and event.app_id and event.subject.get("user_id"):
            self.passkeys.delete_for_user(event.app_id, event.subject["user_id"])
