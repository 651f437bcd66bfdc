"""HTTP resources of passkeys: validation in, envelope out; rules in the service.

V1 = /api/v1/applications/{applicationId}.  Registration and management are the signed-in
user's own (an end-user access token; API keys get 403); the two sign-in routes are
public and share the password login's per-IP budget (IAMGATE_RATE_LIMIT_LOGIN), counted
before the body is read.
"""
from __future__ import annotations

from controlplane.auth import PUBLIC, USER
from controlplane.mfa.errors import MfaChallengeExpired, MfaLocked
from controlplane.openapi import op
from controlplane.passkeys import schemas
from controlplane.passkeys.errors import (
    AuthenticatorNotAllowed,
    ChallengeInvalid,
    CredentialUnknown,
    LastPasskey,
    OriginMismatch,
    PasskeyAlreadyRegistered,
    PasskeyLimitExceeded,
    PasskeyNotFound,
    PasskeysDisabled,
    PasskeysUnavailable,
    RpIdMismatch,
    SignCountInvalid,
    UserVerificationRequired,
    VerificationFailed,
)
from controlplane.passkeys.service import PasskeyService
from controlplane.resource import Action, Resource, ThrottledPerIp
from controlplane.users.errors import AccountSuspended, InvalidCredentials, LoginsLimited, SessionEnded
from controlplane.users.login import LoginService
from controlplane.users.resources import device_info_of
from shared.errors import Forbidden, ValidationFailed
from shared.http import respond

_GATES = [PasskeysDisabled, PasskeysUnavailable]
_CEREMONY = [ValidationFailed, ChallengeInvalid, OriginMismatch, RpIdMismatch, VerificationFailed]


class _OwnPasskeys(Resource):
    every_method = USER

    def __init__(self, passkeys: PasskeyService):
        self.passkeys = passkeys


class RegistrationOptions(_OwnPasskeys, Action):
    no_store = True
    docs = {"POST": op(
        body=schemas.REGISTRATION_START, response=schemas.REGISTRATION_OPTIONS,
        errors=[ValidationFailed, Forbidden, PasskeyLimitExceeded, *_GATES],
    )}

    def act(self, req, values, applicationId):
        """Start registering a passkey

        Creation options for navigator.credentials.create() (pass `options` to
        PublicKeyCredential.parseCreationOptionsFromJSON) and the challenge_id to send back. The challenge is
        single use, bound to the caller and valid 5 minutes. Attestation is `none` unless the application has
        an AAGUID allow-list. A user has at most 20 passkeys per application (409 PASSKEY_LIMIT_EXCEEDED)."""
        return self.passkeys.registration_options(req.context.application, req.context.principal.user_id)


class RegistrationVerify(_OwnPasskeys, Action):
    docs = {"POST": op(
        body=schemas.REGISTRATION_VERIFY, ok=201, response=schemas.PASSKEY,
        errors=[*_CEREMONY, AuthenticatorNotAllowed, PasskeyAlreadyRegistered, PasskeyLimitExceeded, SessionEnded,
                Forbidden, *_GATES],
    )}

    def act(self, req, values, applicationId):
        """Finish registering a passkey

        Verifies the attestation (challenge, origin, RP ID, signature) and stores the passkey. The user's
        first passkey emits mfa.enabled. Every verification failure is a 400 with its own PASSKEY_* code. The
        access token's session must still be live (401 once it was revoked: a passkey outlives the token)."""
        principal = req.context.principal
        return self.passkeys.register(req.context.application, principal.user_id, session_id=principal.session_id,
                                      **values)


class Passkeys(_OwnPasskeys, Action):
    docs = {"GET": op(response=schemas.PASSKEYS, errors=[Forbidden])}

    def act(self, req, values, applicationId):
        """The caller's passkeys"""
        return self.passkeys.list(applicationId, req.context.principal.user_id)


class PasskeyItem(_OwnPasskeys):
    docs = {
        "PATCH": op(body=schemas.RENAME, response=schemas.PASSKEY,
                    errors=[ValidationFailed, PasskeyNotFound, Forbidden]),
        "DELETE": op(ok=204, errors=[PasskeyNotFound, LastPasskey, Forbidden]),
    }

    def on_patch(self, req, resp, applicationId, passkeyId):
        """Rename one of the caller's passkeys"""
        name = self.body(req)["name"]
        respond(resp, self.passkeys.rename(applicationId, req.context.principal.user_id, passkeyId, name))

    def on_delete(self, req, resp, applicationId, passkeyId):
        """Delete one of the caller's passkeys

        The last passkey's deletion emits mfa.disabled. Refused (409 PASSKEY_LAST_CREDENTIAL) when it is the
        user's only way in (no password); a password reset sets one."""
        self.passkeys.delete(req.context.application, req.context.principal.user_id, passkeyId)
        resp.status = 204


class _SignIn(ThrottledPerIp):
    """The sign-in routes: public, counted against the login's per-IP budget first, and
    answered with a token pair or a challenge (no-store)."""

    access = {"POST": PUBLIC}
    no_store = True

    def __init__(self, passkeys: PasskeyService, login: LoginService, *, trusted_proxies):
        super().__init__(login, trusted_proxies=trusted_proxies)
        self.passkeys = passkeys
        self.login = login


class AuthenticationOptions(_SignIn):
    docs = {"POST": op(
        body=schemas.AUTHENTICATION_OPTIONS, response=schemas.AUTHENTICATION_OPTIONS_RESULT,
        errors=[ValidationFailed, MfaChallengeExpired, LoginsLimited, *_GATES],
    )}

    def act(self, req, values, applicationId):
        """Start signing in with a passkey

        Request options for navigator.credentials.get() (pass `options` to
        PublicKeyCredential.parseRequestOptionsFromJSON) and the challenge_id to send back. With the login's
        MFA challenge_token: the second factor, offering that user's passkeys. Without: a sign-in by passkey
        alone (application setting passkeys: passwordless), offering none so the authenticator lists its own,
        with user verification required."""
        return self.passkeys.authentication_options(req.context.application, **values)


class AuthenticationVerify(_SignIn):
    docs = {"POST": op(
        body=schemas.AUTHENTICATION_VERIFY, response=schemas.SIGN_IN_RESULT,
        errors=[*_CEREMONY, CredentialUnknown, UserVerificationRequired, SignCountInvalid, AccountSuspended,
                MfaChallengeExpired, MfaLocked, LoginsLimited, InvalidCredentials, *_GATES],
    )}

    def act(self, req, values, applicationId):
        """Sign in with a passkey

        Verifies the assertion and returns the token pair of a password login (user.login). As a second factor
        it answers the login's MFA challenge (the login's remember_me applies). A sign count that goes
        backwards is refused and audited; 0 stays 0 and is accepted."""
        return self.passkeys.authenticate(req.context.application, **values,
                                          device_info=device_info_of(req, self.trusted_proxies))
