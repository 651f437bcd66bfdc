"""HTTP resources of the users area: validation in, envelope out; rules in the services
(``registration``, ``login``, ``sessions``, ``passwords``, ``verification``, ``admin``).

V1 = /api/v1/applications/{applicationId}.  Throttles that count every request (login
per IP, registration per IP) run before the body is validated, so malformed requests
are counted too.
"""
from __future__ import annotations

from collections.abc import Callable

import falcon

from controlplane.auth import CREDENTIAL, DASHBOARD, OWNER, PUBLIC
from controlplane.dashboard.access import DashboardAccess, member_of_application
from controlplane.lockout import AccountLocked
from controlplane.openapi import op
from controlplane.passkeys.errors import PasswordSignInDisabled
from controlplane.passwords import PasswordTooWeak, WrongPassword
from controlplane.resource import Action, Resource, ThrottledPerIp, query_param
from controlplane.users import schemas
from controlplane.users.admin import UserAdminService
from controlplane.users.errors import (
    AccountSuspended,
    EmailAlreadyRegistered,
    InvalidCredentials,
    InvalidResetToken,
    InvalidVerificationToken,
    LoginsLimited,
    PasswordConfirmationMismatch,
    RefreshTokenRejected,
    RegistrationsLimited,
    ResetRequestsLimited,
    ResetTokenExpired,
    UserLimitReached,
    UserNotFound,
    VerificationRequestsLimited,
    VerificationTokenExpired,
)
from controlplane.users.login import LoginService
from controlplane.users.passwords import PasswordService
from controlplane.users.registration import RegistrationService
from controlplane.users.serializers import serialize_admin_user, serialize_user
from controlplane.users.sessions import SessionService
from controlplane.users.verification import EmailVerificationService
from shared.errors import ApplicationNotFound, Forbidden, RateLimited, ValidationFailed
from shared.http import PAGE_QUERY, client_ip, page_params, paginated, read_json, respond
from shared.validation import String


def device_info_of(req, trusted_proxies) -> dict:
    """The device a session records: the client IP and its user agent (bounded)."""
    agent = req.user_agent
    return {"ip": client_ip(req, trusted_proxies), "user_agent": agent[:512] if agent else None}


class _ThrottledPerIp(ThrottledPerIp):
    """Register and Login: the per-IP throttle of their own service counts every request."""

    access = {"POST": PUBLIC}
    password_work = ("POST",)

    def __init__(self, service: RegistrationService | LoginService, *, trusted_proxies):
        super().__init__(service, trusted_proxies=trusted_proxies)
        self.service = service


class Register(_ThrottledPerIp):
    message = "Registration successful. Check your email to verify your address."
    docs = {"POST": op(
        body=schemas.REGISTER, ok=201, response=schemas.REGISTERED, wrapped=False,
        errors=[ValidationFailed, EmailAlreadyRegistered, PasswordTooWeak, UserLimitReached, RegistrationsLimited],
    )}

    def act(self, req, values, applicationId):
        """Register an end user

        Creates an unverified user, sends the verification email and emits user.created. Throttled per client
        IP per application (application registration_rate_limit per minute, else IAMGATE_RATE_LIMIT_REGISTER).
        Login before verification is allowed."""
        return serialize_user(self.service.register(req.context.application, **values))


class Login(_ThrottledPerIp):
    no_store = True
    docs = {"POST": op(
        body=schemas.LOGIN, response=schemas.LOGIN_RESULT,
        errors=[ValidationFailed, InvalidCredentials, AccountSuspended, AccountLocked, LoginsLimited,
                PasswordSignInDisabled],
    )}

    def act(self, req, values, applicationId):
        """Log in with email and password

        Returns a token pair, or an MFA challenge (no tokens) when the user has TOTP enabled or a passkey the
        application accepts as a second factor (mfa_methods: totp, webauthn). 5 consecutive failed logins per
        email per application lock it for 15 minutes; 10 requests per minute per client IP."""
        return self.service.login(req.context.application, email=values["email"], password=values["password"],
                                  remember_me=values["remember_me"],
                                  device_info=device_info_of(req, self.trusted_proxies))


class Logout(Action):
    access = {"POST": CREDENTIAL}
    docs = {"POST": op(body=schemas.REFRESH_TOKEN, ok=204, errors=[ValidationFailed])}

    def __init__(self, sessions: SessionService):
        self.sessions = sessions

    def act(self, req, values, applicationId):
        """Log out: revoke a refresh token

        Revokes the session of the refresh token; the access token stays valid until it expires. A user token
        may only revoke that user's own refresh tokens; an API key any of its application. Unknown or foreign
        tokens are answered the same (204) and change nothing."""
        principal = req.context.principal
        self.sessions.logout(applicationId, values["refresh_token"],
                             user_id=principal.user_id if principal.kind == "user" else None)


class Refresh(Action):
    access = {"POST": PUBLIC}
    no_store = True
    docs = {"POST": op(
        body=schemas.REFRESH_TOKEN, response=schemas.TOKEN_PAIR,
        errors=[ValidationFailed, RefreshTokenRejected],
    )}

    def __init__(self, sessions: SessionService):
        self.sessions = sessions

    def act(self, req, values, applicationId):
        """Exchange a refresh token for a new token pair

        Rotates the refresh token. Presenting an already rotated token revokes its session, except the token
        rotated last within IAMGATE_REFRESH_REUSE_GRACE seconds (default 10), which yields a new pair and
        leaves the other holder's token valid. No bearer token needed."""
        return self.sessions.refresh(req.context.application, values["refresh_token"])


class ChangePassword(Resource):
    access = {"POST": OWNER}
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.CHANGE_PASSWORD, response=schemas.MESSAGE,
        errors=[ValidationFailed, PasswordConfirmationMismatch, Forbidden, UserNotFound, WrongPassword,
                PasswordTooWeak, AccountLocked],
    )}

    def __init__(self, passwords: PasswordService):
        self.passwords = passwords

    def on_post(self, req, resp, applicationId, userId):
        """Change the user's password

        Needs the current password (wrong answers count toward the login lock). Revokes every other session of
        the user and every OIDC grant not made in the calling session; the calling session and its grants
        stay."""
        values = schemas.validate_change_password(read_json(req))
        self.passwords.change(applicationId, userId, current_password=values["current_password"],
                              new_password=values["new_password"],
                              current_session_id=req.context.principal.session_id)
        respond(resp, {"message": "Password changed."})


class _EmailedLink(Action):
    """POST {email}: ``send(app, email)`` mails the address a link when an account of it
    wants one; the answer is the same ``reply`` either way, so it tells no one which
    addresses have accounts.  ``docs`` come from ``emailed_link_docs``."""

    access = {"POST": PUBLIC}
    reply: str

    def __init__(self, send: Callable[[dict, str], None]):
        self.send = send

    def act(self, req, values, applicationId):
        self.send(req.context.application, values["email"])
        return {"message": self.reply}

    @staticmethod
    def emailed_link_docs(summary: str, description: str, limited: type[RateLimited]) -> dict:
        return {"POST": op(summary, description=description, body=schemas.EMAIL_ONLY, response=schemas.MESSAGE,
                           errors=[ValidationFailed, limited])}


class ForgotPassword(_EmailedLink):
    docs = _EmailedLink.emailed_link_docs(
        "Ask for a password reset email",
        "The same answer whether or not the email has an account. 3 requests per 15 minutes per email, counted "
        "whether or not it exists. The reset link is valid 1 hour.",
        ResetRequestsLimited)
    reply = "If an account exists for this email, a password reset link has been sent."


class ResetPassword(Action):
    access = {"POST": PUBLIC}
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.RESET_PASSWORD, response=schemas.MESSAGE,
        errors=[ValidationFailed, InvalidResetToken, ResetTokenExpired, PasswordTooWeak],
    )}

    def __init__(self, passwords: PasswordService):
        self.passwords = passwords

    def act(self, req, values, applicationId):
        """Set a new password with a reset token

        Single use. Revokes every session and every OIDC grant of the user and lifts a login lock."""
        self.passwords.reset(req.context.application, **values)
        return {"message": "Your password has been reset. You can now log in."}


class VerifyEmail(Action):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        body=schemas.VERIFY_EMAIL, response=schemas.MESSAGE,
        errors=[ValidationFailed, InvalidVerificationToken, VerificationTokenExpired],
    )}

    def __init__(self, verification: EmailVerificationService):
        self.verification = verification

    def act(self, req, values, applicationId):
        """Verify the email address with the emailed token

        Single use; the token is valid 24 hours."""
        self.verification.verify(applicationId, values["token"])
        return {"message": "Your email address has been verified."}


class ResendVerification(_EmailedLink):
    docs = _EmailedLink.emailed_link_docs(
        "Send the verification email again",
        "The same answer whether or not the account exists or is already verified. 2 requests per minute per "
        "email (only resend requests count).",
        VerificationRequestsLimited)
    reply = "If this email has an account awaiting verification, a new verification email has been sent."


# ---------------------------------------------------------------- dashboard administration

_SEARCH = String(max_len=255)
_STATUS = String(choices=schemas.USER_STATUSES)


class AdminUsers(Resource):
    access = {"GET": DASHBOARD}
    docs = {"GET": op(
        query={
            "search": ({"type": "string", "maxLength": 255}, "substring of email or name"),
            "status": ({"type": "string", "enum": list(schemas.USER_STATUSES)}, "only users in this state"),
            **PAGE_QUERY,
        },
        response=schemas.ADMIN_USER_PAGE, wrapped=False,
        errors=[ValidationFailed, ApplicationNotFound],
    )}

    def __init__(self, admin: UserAdminService, dashboard_access: DashboardAccess):
        self.admin = admin
        self.dashboard_access = dashboard_access

    @falcon.before(member_of_application())
    def on_get(self, req, resp, applicationId):
        """List and search the application's end users

        Newest first. search matches email or name (case-insensitive substring); soft-deleted users appear
        only with status=deleted."""
        page, per_page = page_params(req)
        items, total = self.admin.search(
            applicationId, search=query_param(req, "search", _SEARCH, blank_is_absent=True),
            status=query_param(req, "status", _STATUS, blank_is_absent=True), page=page, per_page=per_page)
        resp.media = paginated([serialize_admin_user(u) for u in items], total, page, per_page)


class _StatusChange(Resource):
    """POST: ``change(app_id, user_id)`` (``UserAdminService.suspend`` or ``unsuspend``)
    answers the user as it is now; owners and admins only.  ``docs`` come from
    ``status_change_docs``."""

    access = {"POST": DASHBOARD}

    def __init__(self, change: Callable[[str, str], dict], dashboard_access: DashboardAccess):
        self.change = change
        self.dashboard_access = dashboard_access

    @falcon.before(member_of_application(write=True))
    def on_post(self, req, resp, applicationId, userId):
        respond(resp, serialize_admin_user(self.change(applicationId, userId)))

    @staticmethod
    def status_change_docs(summary: str, description: str) -> dict:
        return {"POST": op(summary, description=description, response=schemas.ADMIN_USER,
                           errors=[Forbidden, UserNotFound, ApplicationNotFound])}


class SuspendUser(_StatusChange):
    docs = _StatusChange.status_change_docs(
        "Suspend an end user",
        "The user's access tokens stop working at once, its sessions and OIDC grants are revoked and login answers "
        "403 AUTH_ACCOUNT_SUSPENDED. Idempotent. Owners and admins only.")


class UnsuspendUser(_StatusChange):
    docs = _StatusChange.status_change_docs("Lift a suspension",
                                            "The user may log in again. Idempotent. Owners and admins only.")
