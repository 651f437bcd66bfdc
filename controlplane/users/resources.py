"""HTTP resources of the users area: validation in, envelope out; rules in the service.

V1 = /api/v1/applications/{applicationId}.  Throttles that count every request (login
per IP, registration per IP) run before the body is validated, so malformed requests
are counted too.
"""
from __future__ import annotations

import falcon

from shared.errors import ValidationFailed
from shared.http import client_ip, no_store, page_params, paginated, read_json, respond
from shared.validation import Invalid, String

from controlplane.auth import CREDENTIAL, DASHBOARD, OWNER, PUBLIC
from controlplane.openapi import op
from controlplane.users import schemas

_LOCKED = (429, "AUTH_ACCOUNT_LOCKED")
_THROTTLED = (429, "RATE_LIMIT_EXCEEDED")
_INVALID = [(400, "VALIDATION_INVALID_FORMAT"), (400, "VALIDATION_MULTIPLE_ERRORS")]


def _device_info(req, config) -> dict:
    agent = req.user_agent
    return {"ip": client_ip(req, config.trusted_proxies), "user_agent": agent[:512] if agent else None}


class _Resource:
    def __init__(self, ctx):
        self.ctx = ctx

    @property
    def users(self):
        return self.ctx.users


class Register(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Register an end user",
        description="Creates an unverified user, sends the verification email and emits user.created. "
                    "Throttled per client IP per application (application registration_rate_limit per minute, "
                    "else IAMGATE_RATE_LIMIT_REGISTER). Login before verification is allowed.",
        body=schemas.REGISTER, ok=201, response=schemas.REGISTERED, wrapped=False,
        errors=[*_INVALID, (409, "AUTH_EMAIL_ALREADY_REGISTERED"), (422, "VALIDATION_PASSWORD_TOO_WEAK"),
                (403, "tier_limit_exceeded"), _THROTTLED],
    )}

    def on_post(self, req, resp, applicationId):
        app = req.context.application
        self.users.throttle_registration(app, client_ip(req, self.ctx.config.trusted_proxies))
        values = schemas.REGISTER.validate(read_json(req))
        user = self.users.register(app, **values)
        respond(resp, self.users.serialize_user(user), status=201,
                message="Registration successful. Check your email to verify your address.")


class Login(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Log in with email and password",
        description="Returns a token pair, or an MFA challenge (no tokens) when the user has TOTP enabled. "
                    "5 consecutive failed logins per email per application lock it for 15 minutes; "
                    "10 requests per minute per client IP.",
        body=schemas.LOGIN, response=schemas.LOGIN_RESULT,
        errors=[*_INVALID, (401, "AUTH_INVALID_CREDENTIALS"), (403, "AUTH_ACCOUNT_SUSPENDED"), _LOCKED, _THROTTLED],
    )}

    def on_post(self, req, resp, applicationId):
        app, config = req.context.application, self.ctx.config
        self.users.throttle_login(app, client_ip(req, config.trusted_proxies))
        values = schemas.LOGIN.validate(read_json(req))
        result = self.users.login(app, email=values["email"], password=values["password"],
                                  remember_me=values["remember_me"], device_info=_device_info(req, config))
        no_store(resp)
        respond(resp, result)


class Logout(_Resource):
    access = {"POST": CREDENTIAL}
    docs = {"POST": op(
        "Log out: revoke a refresh token",
        description="Revokes the session of the refresh token; the access token stays valid until it expires. "
                    "A user token may only revoke that user's own refresh tokens; an API key any of its "
                    "application. Unknown or foreign tokens are answered the same (204) and change nothing.",
        body=schemas.REFRESH_TOKEN, ok=204, errors=_INVALID,
    )}

    def on_post(self, req, resp, applicationId):
        values = schemas.REFRESH_TOKEN.validate(read_json(req))
        principal = req.context.principal
        self.users.logout(applicationId, values["refresh_token"],
                          user_id=principal.user_id if principal.kind == "user" else None)
        resp.status = falcon.HTTP_204


class Refresh(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Exchange a refresh token for a new token pair",
        description="Rotates the refresh token. Presenting an already rotated token revokes its session, except "
                    "the token rotated last within IAMGATE_REFRESH_REUSE_GRACE seconds (default 10), which "
                    "yields a new pair and leaves the other holder's token valid. No bearer token needed.",
        body=schemas.REFRESH_TOKEN, response=schemas.TOKEN_PAIR,
        errors=[*_INVALID, (401, "UNAUTHORIZED")],
    )}

    def on_post(self, req, resp, applicationId):
        values = schemas.REFRESH_TOKEN.validate(read_json(req))
        pair = self.users.refresh(req.context.application, values["refresh_token"])
        no_store(resp)
        respond(resp, pair)


class ChangePassword(_Resource):
    access = {"POST": OWNER}
    docs = {"POST": op(
        "Change the user's password",
        description="Needs the current password (wrong answers count toward the login lock). Revokes every "
                    "other session of the user; the calling session stays.",
        body=schemas.CHANGE_PASSWORD, response=schemas.MESSAGE,
        errors=[*_INVALID, (403, "FORBIDDEN"), (404, "USER_NOT_FOUND"), (422, "INVALID_PASSWORD"),
                (422, "VALIDATION_PASSWORD_TOO_WEAK"), _LOCKED],
    )}

    def on_post(self, req, resp, applicationId, userId):
        values = schemas.validate_change_password(read_json(req))
        self.users.change_password(applicationId, userId, current_password=values["current_password"],
                                   new_password=values["new_password"],
                                   current_session_id=req.context.principal.session_id)
        respond(resp, {"message": "Password changed."})


class ForgotPassword(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Ask for a password reset email",
        description="The same answer whether or not the email has an account. 3 requests per 15 minutes per "
                    "email, counted whether or not it exists. The reset link is valid 1 hour.",
        body=schemas.EMAIL_ONLY, response=schemas.MESSAGE,
        errors=[*_INVALID, (429, "AUTH_PASSWORD_RESET_RATE_LIMITED")],
    )}

    def on_post(self, req, resp, applicationId):
        values = schemas.EMAIL_ONLY.validate(read_json(req))
        self.users.forgot_password(req.context.application, values["email"])
        respond(resp, {"message": "If an account exists for this email, a password reset link has been sent."})


class ResetPassword(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Set a new password with a reset token",
        description="Single use. Revokes every session of the user and lifts a login lock.",
        body=schemas.RESET_PASSWORD, response=schemas.MESSAGE,
        errors=[*_INVALID, (400, "AUTH_INVALID_RESET_TOKEN"), (410, "AUTH_RESET_TOKEN_EXPIRED"),
                (422, "VALIDATION_PASSWORD_TOO_WEAK")],
    )}

    def on_post(self, req, resp, applicationId):
        values = schemas.RESET_PASSWORD.validate(read_json(req))
        self.users.reset_password(req.context.application, **values)
        respond(resp, {"message": "Your password has been reset. You can now log in."})


class VerifyEmail(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Verify the email address with the emailed token",
        description="Single use; the token is valid 24 hours.",
        body=schemas.VERIFY_EMAIL, response=schemas.MESSAGE,
        errors=[*_INVALID, (400, "AUTH_INVALID_VERIFICATION_TOKEN"), (410, "AUTH_VERIFICATION_TOKEN_EXPIRED")],
    )}

    def on_post(self, req, resp, applicationId):
        values = schemas.VERIFY_EMAIL.validate(read_json(req))
        self.users.verify_email(applicationId, values["token"])
        respond(resp, {"message": "Your email address has been verified."})


class ResendVerification(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Send the verification email again",
        description="The same answer whether or not the account exists or is already verified. 2 requests per "
                    "minute per email (only resend requests count).",
        body=schemas.EMAIL_ONLY, response=schemas.MESSAGE,
        errors=[*_INVALID, (429, "AUTH_VERIFICATION_RATE_LIMITED")],
    )}

    def on_post(self, req, resp, applicationId):
        values = schemas.EMAIL_ONLY.validate(read_json(req))
        self.users.resend_verification(req.context.application, values["email"])
        respond(resp, {"message": "If this email has an account awaiting verification, a new verification "
                                  "email has been sent."})


# ---------------------------------------------------------------- dashboard administration

_SEARCH = String(max_len=255)
_STATUS = String(choices=schemas.USER_STATUSES)


def _query(req, name, field):
    raw = req.get_param(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return field.clean(raw)
    except Invalid as exc:
        raise ValidationFailed({name: str(exc)}) from None


class AdminUsers(_Resource):
    access = {"GET": DASHBOARD}
    docs = {"GET": op(
        "List and search the application's end users",
        description="Newest first. search matches email or name (case-insensitive substring); soft-deleted "
                    "users appear only with status=deleted.",
        query={
            "search": ({"type": "string", "maxLength": 255}, "substring of email or name"),
            "status": ({"type": "string", "enum": list(schemas.USER_STATUSES)}, "only users in this state"),
            "page": ({"type": "integer", "minimum": 1, "default": 1}, "page number"),
            "per_page": ({"type": "integer", "minimum": 1, "maximum": 100, "default": 15}, "page size"),
        },
        response=schemas.paginated(schemas.ADMIN_USER), wrapped=False,
        errors=[*_INVALID, (404, "NOT_FOUND")],
    )}

    def on_get(self, req, resp, applicationId):
        self.ctx.dashboard_access.application(req.context.principal.account_id, applicationId)
        page, per_page = page_params(req)
        items, total = self.users.list_users(
            applicationId, search=_query(req, "search", _SEARCH), status=_query(req, "status", _STATUS),
            page=page, per_page=per_page)
        resp.media = paginated([self.users.serialize_admin_user(u) for u in items], total, page, per_page)


class _AdminStatus(_Resource):
    access = {"POST": DASHBOARD}
    action = ""

    def on_post(self, req, resp, applicationId, userId):
        self.ctx.dashboard_access.application(req.context.principal.account_id, applicationId, write=True)
        user = getattr(self.users, self.action)(applicationId, userId)
        respond(resp, self.users.serialize_admin_user(user))


class SuspendUser(_AdminStatus):
    action = "suspend"
    docs = {"POST": op(
        "Suspend an end user",
        description="The user's access tokens stop working at once, its sessions are revoked and login answers "
                    "403 AUTH_ACCOUNT_SUSPENDED. Idempotent. Owners and admins only.",
        response=schemas.ADMIN_USER, errors=[(403, "FORBIDDEN"), (404, "USER_NOT_FOUND"), (404, "NOT_FOUND")],
    )}


class UnsuspendUser(_AdminStatus):
    action = "unsuspend"
    docs = {"POST": op(
        "Lift a suspension",
        description="The user may log in again. Idempotent. Owners and admins only.",
        response=schemas.ADMIN_USER, errors=[(403, "FORBIDDEN"), (404, "USER_NOT_FOUND"), (404, "NOT_FOUND")],
    )}

