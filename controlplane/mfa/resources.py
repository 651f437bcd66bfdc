"""HTTP resources of the MFA area: validation in, envelope out; rules in the service.

V1 = /api/v1/applications/{applicationId}.  Every route under V1/users/{userId}/mfa is
JWT-owner (an API key or another user's token gets 403); V1/users/mfa/verify needs no
authentication (the challenge token is the credential).  Responses that carry secrets
(the TOTP secret, backup codes, tokens) are sent with Cache-Control: no-store.
"""
from __future__ import annotations

import falcon

from controlplane.auth import DASHBOARD, OWNER, PUBLIC
from controlplane.dashboard.access import DashboardAccess, member_of_application
from controlplane.lockout import AccountLocked
from controlplane.mfa import schemas
from controlplane.mfa.errors import (
    ConfirmationCodeInvalid,
    MfaAlreadyEnabled,
    MfaChallengeExpired,
    MfaCodeInvalid,
    MfaLocked,
    MfaMethodNotFound,
    MfaNotEnabled,
)
from controlplane.mfa.service import MfaService
from controlplane.openapi import op
from controlplane.passkeys.service import PasskeyService
from controlplane.passwords import WrongPassword
from controlplane.resource import Action, Resource
from controlplane.users.errors import AccountSuspended, InvalidCredentials, UserNotFound
from shared.errors import ApplicationNotFound, Forbidden, ValidationFailed
from shared.http import respond

_PASSWORD_CONFIRMED = [ValidationFailed, MfaNotEnabled, Forbidden, WrongPassword, AccountLocked]
# Shared with the dashboard accounts' own two-step verification, which ``TotpFactor`` serves
# too: what confirming the pending method can fail with, and the answers handing out codes.
CONFIRM_ERRORS = [MfaMethodNotFound, MfaAlreadyEnabled, ConfirmationCodeInvalid]


def enabled_answer(backup_codes: list[str]) -> dict:
    return {"message": "Two-step verification is on. Store these backup codes somewhere safe; each works once.",
            "backup_codes": backup_codes}


def regenerated_answer(backup_codes: list[str]) -> dict:
    return {"message": "New backup codes created; the earlier ones no longer work.", "backup_codes": backup_codes}


class _MfaResource(Action):
    every_method = OWNER

    def __init__(self, mfa: MfaService):
        self.mfa = mfa


class TotpSetup(_MfaResource):
    no_store = True
    docs = {"POST": op(
        body=schemas.SETUP, response=schemas.SETUP_RESULT,
        errors=[ValidationFailed, Forbidden, MfaAlreadyEnabled],
    )}

    def act(self, req, values, applicationId, userId):
        """Start setting up an authenticator app (TOTP)

        Creates a pending TOTP method with a new 160-bit secret and returns it with its otpauth://
        provisioning URI (for a QR code). The method is not used at login and not reported as enabled until
        POST mfa/totp/confirm; a new setup replaces an earlier pending one, and an unconfirmed setup expires
        after 1 hour."""
        return self.mfa.setup(req.context.application, userId, label=values["label"])


class TotpConfirm(_MfaResource):
    no_store = True
    docs = {"POST": op(
        body=schemas.CONFIRM, ok=201, response=schemas.BACKUP_CODES,
        errors=[ValidationFailed, Forbidden, *CONFIRM_ERRORS],
    )}

    def act(self, req, values, applicationId, userId):
        """Confirm the authenticator app with a code and turn MFA on

        Activates the pending method when the code is the app's current one (one 30-second step of clock drift
        either way is accepted) and returns 10 backup codes, shown only this once. Emits mfa.enabled with
        method totp."""
        return enabled_answer(self.mfa.confirm(req.context.application, userId, **values))


class Totp(Action):
    every_method = OWNER
    password_work = ("DELETE",)
    docs = {"DELETE": op(body=schemas.PASSWORD, ok=204, errors=_PASSWORD_CONFIRMED)}

    def __init__(self, passkeys: PasskeyService):
        self.passkeys = passkeys  # it tells whether a passkey still guards the login

    def act(self, req, values, applicationId, userId):
        """Turn MFA off (remove the authenticator app)

        Needs the password. Removes the TOTP method, every backup code and open MFA challenges; login then
        needs only the password, unless the user has a passkey that answers the login's second step (the
        emailed notice says which). Emits mfa.disabled with method totp. Password checks are limited per user
        (IAMGATE_LOCKOUT_THRESHOLD per IAMGATE_LOCKOUT_SECONDS)."""
        self.passkeys.disable_totp(req.context.application, userId, password=values["password"])


_STATUS_DESCRIPTION = ("mfa_enabled is true once a TOTP method is confirmed; methods lists the active methods; "
                       "backup_codes_remaining counts the unused codes of the current set; passkeys counts the "
                       "user's passkeys and says whether they answer the login's second step (the application's "
                       "passkeys setting is not off).")


class MfaStatus(Action):
    every_method = OWNER
    docs = {"GET": op("MFA status of the user", description=_STATUS_DESCRIPTION, response=schemas.STATUS,
                      errors=[Forbidden])}

    def __init__(self, passkeys: PasskeyService):
        self.passkeys = passkeys

    def act(self, req, values, applicationId, userId):
        return self.passkeys.mfa_status(req.context.application, userId)


class RegenerateBackupCodes(_MfaResource):
    no_store = True
    password_work = ("POST",)
    docs = {"POST": op(body=schemas.PASSWORD, response=schemas.BACKUP_CODES, errors=_PASSWORD_CONFIRMED)}

    def act(self, req, values, applicationId, userId):
        """Replace the backup codes

        Needs the password. Returns a new set of 10 codes (shown only this once); every earlier code stops
        working."""
        return regenerated_answer(
            self.mfa.regenerate_backup_codes(req.context.application, userId, password=values["password"]))


class Verify(_MfaResource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        body=schemas.VERIFY, response=schemas.VERIFY_RESULT, wrapped=False,
        errors=[ValidationFailed, MfaCodeInvalid, AccountSuspended, MfaChallengeExpired, MfaLocked,
                InvalidCredentials],
    )}

    def on_post(self, req, resp, applicationId):
        """Answer a login's MFA challenge

        With a 6-digit TOTP code or an unused backup code (dashes optional, any case). Issues the token pair
        and session exactly as a password login does (user.login, the login's remember_me). The challenge is
        single use and valid IAMGATE_MFA_CHALLENGE_TTL seconds (300); after IAMGATE_MFA_MAX_ATTEMPTS (5) wrong
        codes it is locked. A TOTP code is accepted once. When a backup code was used, a top-level message
        says how many remain."""
        pair, remaining = self.mfa.verify(req.context.application, **self.body(req))
        message = None
        if remaining is not None:
            message = f"A backup code was used; {remaining} remain{'s' if remaining == 1 else ''}."
        respond(resp, pair, message=message, cacheable=False)


class AdminMfa(Resource):
    access = {"GET": DASHBOARD, "DELETE": DASHBOARD}
    docs = {
        "GET": op("An end user's MFA status (dashboard)", description=_STATUS_DESCRIPTION, response=schemas.STATUS,
                  errors=[ApplicationNotFound, UserNotFound]),
        "DELETE": op(ok=204, errors=[MfaNotEnabled, Forbidden, ApplicationNotFound, UserNotFound]),
    }

    def __init__(self, passkeys: PasskeyService, dashboard_access: DashboardAccess):
        self.passkeys = passkeys  # the status and the reset of both second factors, TOTP and passkeys
        self.dashboard_access = dashboard_access

    @falcon.before(member_of_application())
    def on_get(self, req, resp, applicationId, userId):
        respond(resp, self.passkeys.mfa_status(req.context.application, userId))

    @falcon.before(member_of_application(write=True))
    def on_delete(self, req, resp, applicationId, userId):
        """Reset an end user's MFA (dashboard)

        For a user who lost every second factor: removes the TOTP method, the backup codes and open challenges,
        and every passkey of the user, and emits mfa.disabled for each factor removed (method totp, webauthn);
        the user is told by email. 400 MFA_NOT_ENABLED when the user has neither. Owners and admins only."""
        self.passkeys.reset_mfa(req.context.application, userId)
        resp.status = 204
