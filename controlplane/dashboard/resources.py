"""HTTP resources of the dashboard (/api/dashboard/...): session cookie authentication.

Thin: read and validate the request, call the account, organization or application
service (or, once the ``member_of_application`` hook has checked the caller's
organization role, the application and API key services), shape the response.
Mutating calls must send Content-Type: application/json (``JsonBodyMiddleware`` answers
415 otherwise), which a cross-site form cannot do: together with the SameSite=Lax cookie
that is the CSRF defence.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Generic, TypeVar

import falcon

from controlplane.apikeys.errors import ApiKeyNotFound
from controlplane.apikeys.service import ApiKeyService
from controlplane.apikeys.service import serialize as serialize_api_key
from controlplane.applications.service import ApplicationService
from controlplane.applications.service import serialize as serialize_application
from controlplane.auth import DASHBOARD, PUBLIC, SESSION_COOKIE
from controlplane.dashboard import schemas
from controlplane.dashboard.access import DashboardAccess, member_of_application
from controlplane.dashboard.accounts import AccountService, serialize_account, serialize_account_status
from controlplane.dashboard.applications import OrganizationApplications
from controlplane.dashboard.errors import (
    AccountEmailUnverified,
    AccountNotFound,
    AlreadyMember,
    ApplicationLimitReached,
    ApplicationNotAccessible,
    DashboardEmailUnverified,
    DashboardMfaRequired,
    DashboardReauthRequired,
    EmailTaken,
    InvalidCredentials,
    LastOwner,
    MemberNotFound,
    NotAMember,
    OrganizationIdInvalid,
    OrganizationNotFound,
    OrganizationRequired,
    OwnerMfaMissing,
    OwnerRequired,
    RoleCannotWrite,
    VerificationRequestsLimited,
)
from controlplane.dashboard.mfa import DashboardMfa
from controlplane.dashboard.organizations import OrganizationService, serialize_organization
from controlplane.dashboard.passkeys import DashboardPasskeys
from controlplane.dashboard.sudo import DashboardSudo
from controlplane.lockout import AccountLocked
from controlplane.mfa.errors import (
    ConfirmationCodeInvalid,
    MfaAlreadyEnabled,
    MfaChallengeExpired,
    MfaCodeInvalid,
    MfaLocked,
    MfaNotEnabled,
)
from controlplane.mfa.resources import CONFIRM_ERRORS, enabled_answer, regenerated_answer
from controlplane.openapi import list_op, op
from controlplane.passkeys import schemas as passkey_schemas
from controlplane.passkeys.errors import (
    ChallengeInvalid,
    CredentialUnknown,
    OriginMismatch,
    PasskeyAlreadyRegistered,
    PasskeyNotFound,
    PasskeysUnavailable,
    RpIdMismatch,
    SignCountInvalid,
    UserVerificationRequired,
    VerificationFailed,
)
from controlplane.passwords import PasswordTooWeak, WrongPassword
from controlplane.ratelimit import Unit
from controlplane.resource import Action, Resource
from controlplane.users.errors import (
    InvalidResetToken,
    InvalidVerificationToken,
    ResetRequestsLimited,
    ResetTokenExpired,
    VerificationTokenExpired,
)
from shared.config import Config
from shared.errors import RateLimited, UnsupportedMediaType, ValidationFailed
from shared.http import client_ip, no_store, respond, respond_list

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WRITE = [RoleCannotWrite, ApplicationNotAccessible, DashboardEmailUnverified]


def account_id(req) -> str:
    """The signed-in dashboard account (set by the auth middleware for DASHBOARD routes)."""
    return req.context.principal.account_id


def set_session_cookie(resp, raw: str, config: Config) -> None:
    """The session cookie: HttpOnly, SameSite=Lax, Secure under an https public URL."""
    resp.set_cookie(SESSION_COOKIE, raw, max_age=config.dashboard_session_ttl, path="/",
                    secure=config.cookie_secure, http_only=True, same_site="Lax")
    no_store(resp)


def clear_session_cookie(resp, config: Config) -> None:
    resp.set_cookie(SESSION_COOKIE, "", expires=_EPOCH, path="/",
                    secure=config.cookie_secure, http_only=True, same_site="Lax")


# The errors every passkey ceremony's second half may answer.
_PASSKEY_CEREMONY = [ValidationFailed, UnsupportedMediaType, ChallengeInvalid, OriginMismatch, RpIdMismatch,
                     VerificationFailed, PasskeysUnavailable]


class _SignedIn(Resource):
    """A route of the signed-in account (the session cookie) only."""

    every_method = DASHBOARD


# ---------------------------------------------------------------- accounts


class _AccountResource(Action):
    """A route of the accounts service; ``config`` gives the client IP's trusted proxies
    and the session cookie's settings."""

    def __init__(self, accounts: AccountService, config: Config):
        self.accounts = accounts
        self.config = config

    def client_ip(self, req) -> str:
        return client_ip(req, self.config.trusted_proxies)

    def sign_in_unit(self, req) -> Unit:
        """This request's unit of the client IP's sign-in budget (``AccountService.sign_in_unit``)."""
        return self.accounts.sign_in_unit(self.client_ip(req))


class Register(_AccountResource):
    access = {"POST": PUBLIC}
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.REGISTER, ok=201, response=schemas.ACCOUNT_RESPONSE,
        errors=[ValidationFailed, EmailTaken, UnsupportedMediaType, PasswordTooWeak, RateLimited],
    )}

    def act(self, req, values):
        """Create a dashboard account and its personal organization

        The account owns a new organization named after it. Sign in with POST /api/dashboard/login. A
        verification link is mailed; until it is used (POST /api/dashboard/email/verify) no organization can
        add the account as a member, and the account itself only reads and manages itself (403
        DASHBOARD_EMAIL_UNVERIFIED). An address held by an unconfirmed account answers 409 too, and that
        address is mailed a link to claim the account: the claim undoes what the earlier holder granted
        (docs/security.md)."""
        return serialize_account(self.accounts.register(values, ip=self.client_ip(req)))


class _SignInStep(_AccountResource):
    """A step of signing in, whose ``act`` returns the accounts service's sign-in."""

    def answer(self, req, resp, sign_in) -> None:
        """The session cookie and the account, or the second factor's challenge (no cookie)."""
        if sign_in.challenge is not None:
            respond(resp, sign_in.challenge, cacheable=False)
            return
        set_session_cookie(resp, sign_in.session, self.config)
        respond(resp, serialize_account(sign_in.account))


class Login(_SignInStep):
    access = {"POST": PUBLIC}
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.LOGIN, response=schemas.LOGIN_RESULT,
        errors=[ValidationFailed, InvalidCredentials, UnsupportedMediaType, RateLimited, AccountLocked],
    )}

    def act(self, req, values):
        """Sign in: sets the HttpOnly, SameSite=Lax session cookie and returns the account, or asks for a code

        The cookie (iamgate_session) is Secure when IAMGATE_PUBLIC_URL is https and lasts
        IAMGATE_DASHBOARD_SESSION_TTL seconds. An account with two-step verification on gets no cookie yet:
        the answer is {mfa_required: true, challenge_token, mfa_methods}, and POST /api/dashboard/login/mfa
        with a code (totp) or POST /api/dashboard/login/passkey with a passkey (webauthn) sets the cookie."""
        return self.accounts.login(values["email"], values["password"], unit=self.sign_in_unit(req),
                                   previous_session=req.cookies.get(SESSION_COOKIE))


class LoginMfa(_SignInStep):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        body=schemas.LOGIN_MFA, response=schemas.ACCOUNT_RESPONSE,
        errors=[ValidationFailed, UnsupportedMediaType, MfaCodeInvalid, MfaChallengeExpired, MfaLocked],
    )}

    def act(self, req, values):
        """Sign in, second step: a code answers the challenge; sets the session cookie and returns the account

        A 6-digit code of the authenticator app or an unused backup code. The challenge is single use and
        valid IAMGATE_MFA_CHALLENGE_TTL seconds; after IAMGATE_MFA_MAX_ATTEMPTS wrong codes it is locked (sign
        in again), and IAMGATE_LOCKOUT_THRESHOLD consecutive wrong codes lock the account's codes for
        IAMGATE_LOCKOUT_SECONDS. A TOTP code is accepted once."""
        return self.accounts.login_second_factor(values["challenge_token"], values["code"],
                                                 previous_session=req.cookies.get(SESSION_COOKIE))


class VerifyEmail(_AccountResource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        body=schemas.VERIFY_EMAIL, response=schemas.ACCOUNT_STATUS_RESPONSE,
        errors=[ValidationFailed, UnsupportedMediaType, InvalidVerificationToken, VerificationTokenExpired],
    )}

    def act(self, req, values):
        """Confirm the account's email address with the token of the mailed link

        Single use; the link lives IAMGATE_VERIFICATION_TOKEN_TTL seconds (24 h)."""
        return serialize_account_status(self.accounts.verify_email(values["token"]))


class ResendVerification(_AccountResource):
    access = {"POST": DASHBOARD}
    docs = {"POST": op(ok=202, response=schemas.MESSAGE, errors=[UnsupportedMediaType, VerificationRequestsLimited])}

    def act(self, req, values):
        """Mail the signed-in account a new verification link

        Nothing is sent once the address is confirmed. Limited by IAMGATE_RATE_LIMIT_RESEND."""
        self.accounts.resend_verification(account_id(req))
        return {"message": "If the address is not confirmed yet, a new link was sent."}


class ForgotPassword(_AccountResource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        body=schemas.FORGOT_PASSWORD,
        response=schemas.MESSAGE,
        errors=[ValidationFailed, UnsupportedMediaType, ResetRequestsLimited],
    )}

    def act(self, req, values):
        """Mail a password reset link to a dashboard account

        Always 200, known address or not. Every request for the address counts toward
        IAMGATE_RATE_LIMIT_FORGOT."""
        self.accounts.forgot_password(values["email"])
        return {"message": "If an account has this address, a reset link was sent."}


class ResetPassword(_AccountResource):
    access = {"POST": PUBLIC}
    password_work = ("POST",)
    no_store = True
    docs = {"POST": op(
        body=schemas.RESET_PASSWORD,
        response=schemas.MESSAGE,
        errors=[ValidationFailed, UnsupportedMediaType, InvalidResetToken, ResetTokenExpired, PasswordTooWeak],
    )}

    def act(self, req, values):
        """Set a new password with the token of a mailed reset link

        Confirms the address, ends every session of the account and lifts a login lock. The link lives
        IAMGATE_RESET_TOKEN_TTL seconds (1 h)."""
        self.accounts.reset_password(values["token"], values["password"])
        return {"message": "Password changed. Sign in with the new password."}


class Logout(_AccountResource):
    # Public so that a browser holding an expired or revoked cookie can still clear it.
    access = {"POST": PUBLIC}
    docs = {"POST": op(ok=204, errors=[UnsupportedMediaType])}

    def on_post(self, req, resp):
        """Sign out: deletes the stored session and expires the cookie

        Idempotent: answers 204 with or without a valid session cookie."""
        self.accounts.logout(req.cookies.get(SESSION_COOKIE))
        clear_session_cookie(resp, self.config)
        no_store(resp)
        resp.status = 204


class Me(_SignedIn):
    docs = {
        "GET": op(response=schemas.ME_RESPONSE),
        "PUT": op(body=schemas.ACCOUNT_UPDATE, response=schemas.ACCOUNT_RESPONSE,
                  errors=[ValidationFailed, UnsupportedMediaType]),
    }

    def __init__(self, accounts: AccountService, organizations: OrganizationService, mfa: DashboardMfa):
        self.accounts, self.organizations, self.mfa = accounts, organizations, mfa

    def on_get(self, req, resp):
        """The signed-in account and its organizations"""
        caller = account_id(req)
        data = serialize_account_status(self.accounts.account(caller))
        data["mfa_enabled"] = self.mfa.has_second_factor(caller)
        data["organizations"] = [serialize_organization(org, role)
                                 for org, role in self.organizations.organizations(caller)]
        respond(resp, data)

    def on_put(self, req, resp):
        """Rename the signed-in account"""
        values = self.body(req)  # name is the one field: required
        respond(resp, serialize_account(self.accounts.update_account(account_id(req), values)))


class Password(_AccountResource):
    access = {"POST": DASHBOARD}
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.PASSWORD_CHANGE, response=schemas.MESSAGE,
        errors=[ValidationFailed, UnsupportedMediaType, WrongPassword, PasswordTooWeak, AccountLocked],
    )}

    def on_post(self, req, resp):
        """Change the signed-in account's password; ends every session and sets a new cookie"""
        values = self.body(req)
        raw = self.accounts.change_password(account_id(req), values["current_password"], values["new_password"])
        set_session_cookie(resp, raw, self.config)
        respond(resp, {"message": "Password changed. Other sessions were signed out."})


class Reauthenticate(_SignedIn, Action):
    password_work = ("POST",)
    docs = {"POST": op(body=schemas.REAUTHENTICATE, ok=204,
                       errors=[ValidationFailed, UnsupportedMediaType, WrongPassword, AccountLocked])}

    def __init__(self, sudo: DashboardSudo, accounts: AccountService):
        self.sudo, self.accounts = sudo, accounts

    def act(self, req, values):
        """Confirm the password: this session may take sensitive actions again

        Sensitive actions (creating an API key, adding a member or changing a member's role, deleting an
        application...; docs/dashboard.md, "Sensitive actions") need the session's sign-in or its last
        re-authentication to be at most IAMGATE_DASHBOARD_SUDO_SECONDS old, else 403 DASHBOARD_REAUTH_REQUIRED.
        This moves the calling session's proof to now; other sessions of the account are unchanged. The
        password is checked under the account's login lock (429 AUTH_ACCOUNT_LOCKED)."""
        self.sudo.reauthenticate(self.accounts.account(account_id(req)), values["password"],
                                 req.cookies.get(SESSION_COOKIE))


class ReauthenticatePasskeyOptions(_SignedIn, Action):
    no_store = True
    docs = {"POST": op(body=passkey_schemas.REGISTRATION_START, response=passkey_schemas.AUTHENTICATION_OPTIONS_RESULT,
                       errors=[ValidationFailed, UnsupportedMediaType, PasskeysUnavailable])}

    def __init__(self, sudo: DashboardSudo, accounts: AccountService):
        self.sudo, self.accounts = sudo, accounts

    def act(self, req, values):
        """Start confirming it is you with a passkey, for sensitive actions

        Request options for navigator.credentials.get() offering the signed-in account's passkeys, user
        verification required, and the challenge_id to send to POST
        /api/dashboard/me/reauthenticate/passkey. The challenge is single use, bound to the account and valid
        5 minutes; no sign-in accepts it."""
        return self.sudo.passkey_options(self.accounts.account(account_id(req)))


class ReauthenticatePasskey(_SignedIn, Action):
    docs = {"POST": op(body=schemas.LOGIN_PASSKEY, ok=204,
                       errors=[*_PASSKEY_CEREMONY, CredentialUnknown, UserVerificationRequired, SignCountInvalid])}

    def __init__(self, sudo: DashboardSudo, accounts: AccountService):
        self.sudo, self.accounts = sudo, accounts

    def act(self, req, values):
        """Confirm it is you with a passkey: this session may take sensitive actions again

        As POST /api/dashboard/me/reauthenticate with the password: moves the calling session's proof to now.
        The assertion answers this account's challenge from .../reauthenticate/passkey/options with one of
        its passkeys, and must verify the user (400 PASSKEY_USER_VERIFICATION_REQUIRED)."""
        self.sudo.reauthenticate_with_passkey(self.accounts.account(account_id(req)), **values,
                                              session=req.cookies.get(SESSION_COOKIE))


# ---------------------------------------------------------------- organizations


class Organizations(_SignedIn):
    docs = {
        "GET": list_op(schemas.ORGANIZATION_RESPONSE, errors=[ValidationFailed]),
        "POST": op(body=schemas.ORGANIZATION, ok=201,
                   response=schemas.ORGANIZATION_RESPONSE,
                   errors=[ValidationFailed, UnsupportedMediaType, DashboardEmailUnverified]),
    }

    def __init__(self, organizations: OrganizationService):
        self.organizations = organizations

    def on_get(self, req, resp):
        """Organizations the caller belongs to, with the caller's role, oldest first"""
        orgs = self.organizations.organizations(account_id(req))
        respond_list(req, resp, orgs, lambda pair: serialize_organization(*pair))

    def on_post(self, req, resp):
        """Create an organization; the caller becomes its owner"""
        values = self.body(req)
        org, role = self.organizations.create_organization(account_id(req), values["name"])
        respond(resp, serialize_organization(org, role), status=201)


class Organization(_SignedIn):
    docs = {"PATCH": op(
        body=schemas.ORGANIZATION_UPDATE, response=schemas.ORGANIZATION_RESPONSE,
        errors=[ValidationFailed, UnsupportedMediaType, OrganizationNotFound, OwnerRequired, OwnerMfaMissing,
                DashboardEmailUnverified],
    )}

    def __init__(self, organizations: OrganizationService):
        self.organizations = organizations

    def on_patch(self, req, resp, organizationId):
        """Change the organization's name or require_mfa (owners)

        Omitted fields stay unchanged. With require_mfa true, a member without a second factor gets 403
        DASHBOARD_MFA_REQUIRED on every route of the organization and its applications until they set one up
        (API keys are not affected). The owner turning it on must have one (409
        ORGANIZATION_OWNER_MFA_REQUIRED)."""
        values = self.body(req, partial=True)
        org, role = self.organizations.update_organization(account_id(req), organizationId, values)
        respond(resp, serialize_organization(org, role))


class Members(_SignedIn):
    sensitive = ("POST",)  # a member account of the thief's own would outlive the session
    docs = {
        "GET": list_op(schemas.MEMBER_RESPONSE, errors=[OrganizationNotFound, ValidationFailed]),
        "POST": op(
            body=schemas.MEMBER_ADD, ok=201, response=schemas.MEMBER_RESPONSE,
            errors=[ValidationFailed, RoleCannotWrite, OwnerRequired, OrganizationNotFound, AccountNotFound,
                    AccountEmailUnverified, DashboardEmailUnverified, AlreadyMember, UnsupportedMediaType,
                    RateLimited],
        ),
    }

    def __init__(self, organizations: OrganizationService, config: Config):
        self.organizations = organizations
        self.config = config

    def on_get(self, req, resp, organizationId):
        """Members of an organization (any member may read), in the order they joined"""
        respond_list(req, resp, self.organizations.members(account_id(req), organizationId))

    def on_post(self, req, resp, organizationId):
        """Add an existing dashboard account to the organization (owners and admins)

        Only an owner may add another owner. The account added must have confirmed its email (409
        ACCOUNT_EMAIL_UNVERIFIED), and so must the caller (403 DASHBOARD_EMAIL_UNVERIFIED). Limited per client
        IP and per caller by IAMGATE_RATE_LIMIT_MEMBER_ADD."""
        values = self.body(req)
        member = self.organizations.add_member(account_id(req), organizationId, values["email"], values["role"],
                                           ip=client_ip(req, self.config.trusted_proxies))
        respond(resp, member, status=201)


class Member(_SignedIn):
    sensitive = ("PUT",)  # raising a role (one form demotes too: a stolen session reshuffles no owners)
    docs = {
        "PUT": op(
            body=schemas.MEMBER_UPDATE, response=schemas.MEMBER_RESPONSE,
            errors=[ValidationFailed, RoleCannotWrite, OwnerRequired, OrganizationNotFound, MemberNotFound,
                    LastOwner, UnsupportedMediaType, DashboardEmailUnverified],
        ),
        "DELETE": op(
            ok=204,
            errors=[RoleCannotWrite, OwnerRequired, OrganizationNotFound, MemberNotFound, LastOwner,
                    DashboardEmailUnverified],
        ),
    }

    def __init__(self, organizations: OrganizationService):
        self.organizations = organizations

    def on_put(self, req, resp, organizationId, accountId):
        """Change a member's role (owners and admins; only owners grant or remove owner)"""
        values = self.body(req)
        respond(resp, self.organizations.change_member_role(account_id(req), organizationId, accountId, values["role"]))

    def on_delete(self, req, resp, organizationId, accountId):
        """Remove a member, or leave the organization (your own account id)

        Leaving needs no confirmed address; removing someone else does."""
        self.organizations.remove_member(account_id(req), organizationId, accountId)
        resp.status = 204


# ---------------------------------------------------------------- two-step verification

F = TypeVar("F")  # the service of an account's own second factors


class _OwnFactor(_SignedIn, Generic[F]):
    """The signed-in account's own second factors, through ``service`` (``DashboardMfa``:
    its authenticator app, or ``DashboardPasskeys``): reachable whatever its organizations
    require, since they are how a member sent to enrol gets back in."""

    def __init__(self, service: F, accounts: AccountService):
        self.service, self.accounts = service, accounts

    def account(self, req) -> dict:
        return self.accounts.account(account_id(req))


class AccountMfaStatus(_OwnFactor[DashboardMfa], Action):
    docs = {"GET": op(response=schemas.MFA_STATUS)}

    def act(self, req, values):
        """The signed-in account's two-step verification

        mfa_enabled is true once an authenticator app is confirmed."""
        return self.service.status(account_id(req))


class AccountTotpSetup(_OwnFactor[DashboardMfa], Action):
    no_store = True
    docs = {"POST": op(
        body=schemas.MFA_SETUP, response=schemas.MFA_SETUP_RESULT,
        errors=[ValidationFailed, MfaAlreadyEnabled, DashboardEmailUnverified],
    )}

    def act(self, req, values):
        """Start setting up an authenticator app (TOTP) for the signed-in account

        Returns the secret and its otpauth:// URI (for a QR code). Nothing changes until POST
        /api/dashboard/me/mfa/totp/confirm; an unconfirmed setup expires after 1 hour. An account that has not
        confirmed its email address cannot enrol a second factor (403 DASHBOARD_EMAIL_UNVERIFIED)."""
        return self.service.setup(self.account(req), label=values["label"])


class AccountTotpConfirm(_OwnFactor[DashboardMfa], Action):
    no_store = True
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.MFA_CONFIRM, ok=201, response=schemas.MFA_BACKUP_CODES,
        errors=[ValidationFailed, *CONFIRM_ERRORS, WrongPassword, AccountLocked, DashboardEmailUnverified],
    )}

    def act(self, req, values):
        """Confirm the authenticator app with a code and the password: two-step verification is on

        Returns 10 backup codes, shown only this once. The password confirms the change, as it does turning
        the factor off: a session cookie alone adds no factor. Later sign-ins ask for a code, and every other
        session of the account ends (they were opened with the password alone)."""
        return enabled_answer(self.service.confirm(self.account(req), **values,
                                                   session=req.cookies.get(SESSION_COOKIE)))


class AccountTotp(_OwnFactor[DashboardMfa], Action):
    password_work = ("DELETE",)
    docs = {"DELETE": op(
        body=schemas.MFA_DISABLE, ok=204,
        errors=[ValidationFailed, MfaNotEnabled, WrongPassword, ConfirmationCodeInvalid, AccountLocked, MfaLocked],
    )}

    def act(self, req, values):
        """Turn two-step verification off

        Confirmed by the password or by a current code (a backup code too). Removes the app and the backup
        codes. Organizations that require a second factor are out of reach again until a new one is set up."""
        self.service.disable(self.account(req), password=values.get("password"), code=values.get("code"))


class AccountBackupCodes(_OwnFactor[DashboardMfa], Action):
    no_store = True
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.MFA_PASSWORD, response=schemas.MFA_BACKUP_CODES,
        errors=[ValidationFailed, MfaNotEnabled, WrongPassword, AccountLocked],
    )}

    def act(self, req, values):
        """Replace the signed-in account's backup codes

        Needs the password. Returns 10 new codes (shown only this once); the earlier ones stop working."""
        return regenerated_answer(self.service.regenerate_backup_codes(self.account(req), password=values["password"]))


# ---------------------------------------------------------------- applications


class Applications(_SignedIn):
    docs = {
        "GET": list_op(
            schemas.APPLICATION_RESPONSE,
            query={"organization_id": ({"type": "string", "format": "uuid"}, "only this organization's")},
            errors=[OrganizationIdInvalid, NotAMember, DashboardMfaRequired, ValidationFailed],
        ),
        "POST": op(
            body=schemas.APPLICATION_CREATE, ok=201, response=schemas.APPLICATION_RESPONSE,
            errors=[ValidationFailed, NotAMember, RoleCannotWrite, ApplicationLimitReached, UnsupportedMediaType,
                    OrganizationRequired, DashboardEmailUnverified, DashboardMfaRequired],
        ),
    }

    def __init__(self, dashboard_applications: OrganizationApplications):
        self.dashboard_applications = dashboard_applications

    def on_get(self, req, resp):
        """Applications of every organization the caller belongs to, oldest first"""
        organization_id = req.get_param("organization_id")  # "" is not a UUID: 400, as documented
        apps = self.dashboard_applications.for_account(account_id(req), organization_id)
        respond_list(req, resp, apps, lambda pair: serialize_application(*pair))

    def on_post(self, req, resp):
        """Create an application in one of the caller's organizations (owners and admins)"""
        values = self.body(req)
        app, role = self.dashboard_applications.create_application(account_id(req), values)
        respond(resp, serialize_application(app, role), status=201)


class Application(_SignedIn):
    sensitive = ("DELETE",)  # irreversible; a PUT adding a sign-in redirect URI too (on_put)
    docs = {
        "GET": op(response=schemas.APPLICATION_RESPONSE, errors=[ApplicationNotAccessible]),
        "PUT": op(body=schemas.APPLICATION_UPDATE, response=schemas.APPLICATION_RESPONSE,
                  errors=[ValidationFailed, *_WRITE, UnsupportedMediaType, DashboardReauthRequired]),
        "DELETE": op(ok=204, errors=_WRITE),
    }

    def __init__(self, dashboard_applications: OrganizationApplications, applications: ApplicationService,
                 dashboard_access: DashboardAccess, sudo: DashboardSudo):
        self.dashboard_applications = dashboard_applications
        self.applications = applications
        self.dashboard_access = dashboard_access
        self.sudo = sudo

    @falcon.before(member_of_application())
    def on_get(self, req, resp, applicationId):
        """The full application with its branding"""
        respond(resp, serialize_application(req.context.application, req.context.org_role))

    @falcon.before(member_of_application(write=True))  # 404/403 before judging the body
    def on_put(self, req, resp, applicationId):
        """Update the application; omitted fields stay unchanged

        Adding a URI to oauth_redirect_uris (where connection sign-ins send the provider's code) is a
        sensitive action: it needs a recent sign-in or re-authentication."""
        values = self.body(req, partial=True)
        known = set(req.context.application.get("oauth_redirect_uris") or ())
        if set(values.get("oauth_redirect_uris") or ()) - known:
            self.sudo.require(req.context.principal.authenticated_at)
        app = self.applications.update(applicationId, values)
        respond(resp, serialize_application(app, req.context.org_role))

    @falcon.before(member_of_application(write=True))
    def on_delete(self, req, resp, applicationId):
        """Delete the application irreversibly

        Deletes every user, role, permission, API key, webhook and other record of the application."""
        self.dashboard_applications.delete_application(applicationId)
        resp.status = 204


class Branding(_SignedIn):
    docs = {"PUT": op(
        body=schemas.BRANDING, response=schemas.APPLICATION_RESPONSE,
        errors=[ValidationFailed, *_WRITE, UnsupportedMediaType],
    )}

    def __init__(self, applications: ApplicationService, dashboard_access: DashboardAccess):
        self.applications = applications
        self.dashboard_access = dashboard_access

    @falcon.before(member_of_application(write=True))
    def on_put(self, req, resp, applicationId):
        """Update the application's branding; custom_css is sanitised

        branding_options merge field by field (dark_mode too). custom_css is reduced to an allow-list of rules,
        @media blocks and properties: @import, expression(), behavior, external url(...) references and any
        token holding a '<' (written or escaped) are dropped. The response is the application with a
        branding object {name, logo_url, color, background}."""
        values = self.body(req, partial=True)
        app = self.applications.update_branding(applicationId, values)
        respond(resp, serialize_application(app, req.context.org_role))


# ---------------------------------------------------------------- API keys


class _ApiKeyResource(_SignedIn):
    def __init__(self, api_keys: ApiKeyService, dashboard_access: DashboardAccess):
        self.api_keys = api_keys
        self.dashboard_access = dashboard_access


class ApiKeys(_ApiKeyResource):
    sensitive = ("POST",)  # a key outlives the session that minted it
    docs = {
        "GET": list_op(schemas.API_KEY_RESPONSE, errors=[ApplicationNotAccessible, ValidationFailed]),
        "POST": op(
            body=schemas.API_KEY_CREATE, ok=201,
            response=schemas.API_KEY_RESPONSE, errors=[ValidationFailed, *_WRITE, UnsupportedMediaType],
        ),
    }

    @falcon.before(member_of_application())
    def on_get(self, req, resp, applicationId):
        """The application's active API keys, without secrets, oldest first"""
        respond_list(req, resp, self.api_keys.list(applicationId), serialize_api_key)

    @falcon.before(member_of_application(write=True))
    def on_post(self, req, resp, applicationId):
        """Create an API key; the key is in this response only

        permissions default to every V1 permission. The key (sk_test_ or sk_live_ by the application's
        is_test_mode) is accepted as Authorization: Bearer on the application's V1 routes. Sent with
        Cache-Control: no-store."""
        values = self.body(req)
        key, secret = self.api_keys.create(req.context.application, values, created_by=account_id(req))
        respond(resp, serialize_api_key(key, secret), status=201, cacheable=False)


class ApiKey(_ApiKeyResource):
    docs = {"DELETE": op(ok=204, errors=[*_WRITE, ApiKeyNotFound])}

    @falcon.before(member_of_application(write=True))
    def on_delete(self, req, resp, applicationId, keyId):
        """Revoke an API key: it stops authenticating at once"""
        self.api_keys.revoke(applicationId, keyId)
        resp.status = 204


# ---------------------------------------------------------------- passkeys

class LoginPasskeyOptions(_AccountResource):
    access = {"POST": PUBLIC}
    no_store = True
    docs = {"POST": op(
        body=schemas.LOGIN_PASSKEY_OPTIONS, response=passkey_schemas.AUTHENTICATION_OPTIONS_RESULT,
        errors=[ValidationFailed, UnsupportedMediaType, MfaChallengeExpired, RateLimited, PasskeysUnavailable],
    )}

    def act(self, req, values):
        """Start signing in with a passkey, alone or as the second step

        Request options for navigator.credentials.get() (pass `options` to
        PublicKeyCredential.parseRequestOptionsFromJSON) and the challenge_id to send to POST
        /api/dashboard/login/passkey. Without a body field: a sign-in by passkey alone, offering none so the
        authenticator lists its own dashboard passkeys, user verification required. With the password step's
        challenge_token (mfa_methods has webauthn): the account's passkeys. The challenge is single use and
        valid 5 minutes. Counted against IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN."""
        return self.accounts.passkey_options(values["challenge_token"], unit=self.sign_in_unit(req))


class LoginPasskey(_SignInStep):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        body=schemas.LOGIN_PASSKEY, response=schemas.ACCOUNT_RESPONSE,
        errors=[*_PASSKEY_CEREMONY, CredentialUnknown, UserVerificationRequired, SignCountInvalid,
                MfaChallengeExpired, MfaLocked, RateLimited],
    )}

    def act(self, req, values):
        """Sign in with a passkey: sets the session cookie and returns the account

        Verifies the assertion of a dashboard account's passkey (an end user's passkey of an application is
        unknown here: 400 PASSKEY_CREDENTIAL_UNKNOWN). Alone, the passkey must be discoverable and verify the
        user; as the second step it answers the sign-in's MFA challenge (single use, IAMGATE_MFA_MAX_ATTEMPTS
        attempts). Counted against IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN."""
        return self.accounts.login_with_passkey(values["challenge_id"], values["credential"],
                                                unit=self.sign_in_unit(req),
                                                previous_session=req.cookies.get(SESSION_COOKIE))


class AccountPasskeys(_OwnFactor[DashboardPasskeys], Action):
    docs = {"GET": op(response=passkey_schemas.PASSKEYS)}

    def act(self, req, values):
        """The signed-in account's passkeys"""
        return self.service.list(account_id(req))


class AccountPasskeyOptions(_OwnFactor[DashboardPasskeys], Action):
    no_store = True
    docs = {"POST": op(
        body=passkey_schemas.REGISTRATION_START, response=passkey_schemas.REGISTRATION_OPTIONS,
        errors=[ValidationFailed, UnsupportedMediaType, PasskeysUnavailable, DashboardEmailUnverified],
    )}

    def act(self, req, values):
        """Start registering a passkey for the signed-in account

        Creation options for navigator.credentials.create() (pass `options` to
        PublicKeyCredential.parseCreationOptionsFromJSON) and the challenge_id to send back. The challenge is
        single use, bound to the account and valid 5 minutes. An account that has not confirmed its email
        address cannot register a passkey (403 DASHBOARD_EMAIL_UNVERIFIED)."""
        return self.service.registration_options(self.account(req))


class AccountPasskeyRegistration(_OwnFactor[DashboardPasskeys], Action):
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.PASSKEY_REGISTRATION, ok=201, response=passkey_schemas.PASSKEY,
        errors=[*_PASSKEY_CEREMONY, PasskeyAlreadyRegistered, WrongPassword, AccountLocked, DashboardEmailUnverified],
    )}

    def act(self, req, values):
        """Finish registering a passkey: it is a second factor at once

        Confirmed by the account's password (checked before the attestation, so a wrong one leaves the
        challenge for another try): a passkey signs in alone, so a session cookie alone adds none.
        Verifies the attestation (challenge, origin, RP ID, signature) and stores the passkey. It counts for
        an organization's require_mfa, and password sign-ins then ask for a passkey or a code. The account's
        first second factor ends its other sessions."""
        return self.service.register(self.account(req), **values, session=req.cookies.get(SESSION_COOKIE))


class AccountPasskey(_OwnFactor[DashboardPasskeys]):
    password_work = ("DELETE",)
    docs = {
        "PATCH": op(body=passkey_schemas.RENAME,
                    response=passkey_schemas.PASSKEY, errors=[ValidationFailed, UnsupportedMediaType, PasskeyNotFound]),
        "DELETE": op(body=schemas.MFA_PASSWORD, ok=204,
                     errors=[ValidationFailed, UnsupportedMediaType, WrongPassword, AccountLocked, PasskeyNotFound]),
    }

    def on_patch(self, req, resp, passkeyId):
        """Rename one of the signed-in account's passkeys"""
        respond(resp, self.service.rename(account_id(req), passkeyId, self.body(req)["name"]))

    def on_delete(self, req, resp, passkeyId):
        """Delete one of the signed-in account's passkeys

        Confirmed by the account's password, as turning TOTP off is. Another account's passkey is not found.
        Without another second factor, organizations that require one are out of reach again."""
        values = self.body(req)
        self.service.delete(self.account(req), passkeyId, password=values["password"])
        resp.status = 204
