"""HTTP resources of the dashboard (/api/dashboard/...): session cookie authentication.

Thin: read and validate the request, call ``DashboardService``, shape the response.
Mutating calls must send Content-Type: application/json (``JsonBodyMiddleware`` answers
415 otherwise), which a cross-site form cannot do: together with the SameSite=Lax cookie
that is the CSRF defence.
"""
from __future__ import annotations

from datetime import datetime, timezone

from shared.http import client_ip, no_store, read_json, respond

from controlplane.apikeys.service import serialize as serialize_api_key
from controlplane.applications.service import serialize as serialize_application
from controlplane.auth import DASHBOARD, PUBLIC, SESSION_COOKIE
from controlplane.dashboard import schemas
from controlplane.dashboard.service import serialize_account, serialize_organization
from controlplane.openapi import op

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_JSON = [(415, "UNSUPPORTED_MEDIA_TYPE")]
_INVALID = [(400, "VALIDATION_INVALID_FORMAT"), (400, "VALIDATION_MULTIPLE_ERRORS")]
_APP_NOT_FOUND = [(404, "NOT_FOUND")]
_WRITE = [(403, "FORBIDDEN"), (404, "NOT_FOUND")]


class _Resource:
    def __init__(self, ctx):
        self.ctx = ctx
        self.service = ctx.dashboard

    def account_id(self, req) -> str:
        return req.context.principal.account_id

    def set_session_cookie(self, resp, raw: str) -> None:
        config = self.ctx.config
        resp.set_cookie(SESSION_COOKIE, raw, max_age=config.dashboard_session_ttl, path="/",
                        secure=config.cookie_secure, http_only=True, same_site="Lax")
        no_store(resp)

    def clear_session_cookie(self, resp) -> None:
        resp.set_cookie(SESSION_COOKIE, "", expires=_EPOCH, path="/",
                        secure=self.ctx.config.cookie_secure, http_only=True, same_site="Lax")


# ---------------------------------------------------------------- accounts


class Register(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Create a dashboard account and its personal organization",
        body=schemas.REGISTER, ok=201, response=schemas.ACCOUNT_RESPONSE,
        errors=[*_INVALID, (409, "AUTH_EMAIL_ALREADY_REGISTERED"), *_JSON,
                (422, "VALIDATION_PASSWORD_TOO_WEAK"), (429, "RATE_LIMIT_EXCEEDED")],
        description="The account owns a new organization named after it. Sign in with POST /api/dashboard/login.",
    )}

    def on_post(self, req, resp):
        values = schemas.REGISTER.validate(read_json(req))
        account = self.service.register(values, ip=client_ip(req, self.ctx.config.trusted_proxies))
        respond(resp, serialize_account(account), status=201)


class Login(_Resource):
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Sign in: sets the HttpOnly, SameSite=Lax session cookie and returns the account",
        body=schemas.LOGIN, response=schemas.ACCOUNT_RESPONSE,
        errors=[*_INVALID, (401, "AUTH_INVALID_CREDENTIALS"), *_JSON,
                (429, "RATE_LIMIT_EXCEEDED"), (429, "AUTH_ACCOUNT_LOCKED")],
        description="The cookie (iamgate_session) is Secure when IAMGATE_PUBLIC_URL is https and lasts "
                    "IAMGATE_DASHBOARD_SESSION_TTL seconds.",
    )}

    def on_post(self, req, resp):
        values = schemas.LOGIN.validate(read_json(req))
        account, raw = self.service.login(values["email"], values["password"],
                                          ip=client_ip(req, self.ctx.config.trusted_proxies),
                                          previous_session=req.cookies.get(SESSION_COOKIE))
        self.set_session_cookie(resp, raw)
        respond(resp, serialize_account(account))


class Logout(_Resource):
    # Public so that a browser holding an expired or revoked cookie can still clear it.
    access = {"POST": PUBLIC}
    docs = {"POST": op(
        "Sign out: deletes the stored session and expires the cookie", ok=204, errors=_JSON,
        description="Idempotent: answers 204 with or without a valid session cookie.",
    )}

    def on_post(self, req, resp):
        self.service.logout(req.cookies.get(SESSION_COOKIE))
        self.clear_session_cookie(resp)
        no_store(resp)
        resp.status = 204


class Me(_Resource):
    access = {"GET": DASHBOARD, "PUT": DASHBOARD}
    docs = {
        "GET": op("The signed-in account and its organizations", response=schemas.ME_RESPONSE),
        "PUT": op("Rename the signed-in account", body=schemas.ACCOUNT_UPDATE, response=schemas.ACCOUNT_RESPONSE,
                  errors=[*_INVALID, *_JSON]),
    }

    def on_get(self, req, resp):
        account_id = self.account_id(req)
        data = serialize_account(self.service.account(account_id))
        data["organizations"] = [serialize_organization(org, role)
                                 for org, role in self.service.organizations(account_id)]
        respond(resp, data)

    def on_put(self, req, resp):
        values = schemas.ACCOUNT_UPDATE.validate(read_json(req), partial=True)
        respond(resp, serialize_account(self.service.update_account(self.account_id(req), values)))


class Password(_Resource):
    access = {"POST": DASHBOARD}
    docs = {"POST": op(
        "Change the signed-in account's password; ends every session and sets a new cookie",
        body=schemas.PASSWORD_CHANGE, response={"type": "object", "properties": {"message": {"type": "string"}}},
        errors=[*_INVALID, *_JSON, (422, "INVALID_PASSWORD"), (422, "VALIDATION_PASSWORD_TOO_WEAK"),
                (429, "AUTH_ACCOUNT_LOCKED")],
    )}

    def on_post(self, req, resp):
        values = schemas.PASSWORD_CHANGE.validate(read_json(req))
        raw = self.service.change_password(self.account_id(req), values["current_password"], values["new_password"])
        self.set_session_cookie(resp, raw)
        respond(resp, {"message": "Password changed. Other sessions were signed out."})


# ---------------------------------------------------------------- organizations


class Organizations(_Resource):
    access = {"GET": DASHBOARD, "POST": DASHBOARD}
    docs = {
        "GET": op("Organizations the caller belongs to, with the caller's role",
                  response=schemas.array_of(schemas.ORGANIZATION_RESPONSE)),
        "POST": op("Create an organization; the caller becomes its owner", body=schemas.ORGANIZATION, ok=201,
                   response=schemas.ORGANIZATION_RESPONSE, errors=[*_INVALID, *_JSON]),
    }

    def on_get(self, req, resp):
        orgs = self.service.organizations(self.account_id(req))
        respond(resp, [serialize_organization(org, role) for org, role in orgs])

    def on_post(self, req, resp):
        values = schemas.ORGANIZATION.validate(read_json(req))
        org, role = self.service.create_organization(self.account_id(req), values["name"])
        respond(resp, serialize_organization(org, role), status=201)


class Members(_Resource):
    access = {"GET": DASHBOARD, "POST": DASHBOARD}
    docs = {
        "GET": op("Members of an organization (any member may read)",
                  response=schemas.array_of(schemas.MEMBER_RESPONSE), errors=[(404, "NOT_FOUND")]),
        "POST": op(
            "Add an existing dashboard account to the organization (owners and admins)",
            body=schemas.MEMBER_ADD, ok=201, response=schemas.MEMBER_RESPONSE,
            errors=[*_INVALID, (403, "FORBIDDEN"), (404, "NOT_FOUND"), (404, "USER_NOT_FOUND"),
                    (409, "RESOURCE_ALREADY_EXISTS"), *_JSON],
            description="Only an owner may add another owner.",
        ),
    }

    def on_get(self, req, resp, organizationId):
        respond(resp, self.service.members(self.account_id(req), organizationId))

    def on_post(self, req, resp, organizationId):
        values = schemas.MEMBER_ADD.validate(read_json(req))
        member = self.service.add_member(self.account_id(req), organizationId, values["email"], values["role"])
        respond(resp, member, status=201)


class Member(_Resource):
    access = {"PUT": DASHBOARD, "DELETE": DASHBOARD}
    docs = {
        "PUT": op(
            "Change a member's role (owners and admins; only owners grant or remove owner)",
            body=schemas.MEMBER_UPDATE, response=schemas.MEMBER_RESPONSE,
            errors=[*_INVALID, (403, "FORBIDDEN"), (404, "NOT_FOUND"), (404, "USER_NOT_FOUND"),
                    (409, "ORGANIZATION_LAST_OWNER"), *_JSON],
        ),
        "DELETE": op(
            "Remove a member, or leave the organization (your own account id)", ok=204,
            errors=[(403, "FORBIDDEN"), (404, "NOT_FOUND"), (404, "USER_NOT_FOUND"), (409, "ORGANIZATION_LAST_OWNER")],
        ),
    }

    def on_put(self, req, resp, organizationId, accountId):
        values = schemas.MEMBER_UPDATE.validate(read_json(req))
        respond(resp, self.service.change_member_role(self.account_id(req), organizationId, accountId,
                                                      values["role"]))

    def on_delete(self, req, resp, organizationId, accountId):
        self.service.remove_member(self.account_id(req), organizationId, accountId)
        resp.status = 204


# ---------------------------------------------------------------- applications


class Applications(_Resource):
    access = {"GET": DASHBOARD, "POST": DASHBOARD}
    docs = {
        "GET": op(
            "Applications of every organization the caller belongs to",
            query={"organization_id": ({"type": "string", "format": "uuid"}, "only this organization's")},
            response=schemas.array_of(schemas.APPLICATION_RESPONSE),
            errors=[(400, "VALIDATION_INVALID_FORMAT"), (403, "FORBIDDEN")],
        ),
        "POST": op(
            "Create an application in one of the caller's organizations (owners and admins)",
            body=schemas.APPLICATION_CREATE, ok=201, response=schemas.APPLICATION_RESPONSE,
            errors=[*_INVALID, (403, "FORBIDDEN"), (403, "resource_limit_exceeded"), *_JSON,
                    (422, "VALIDATION_ERROR")],
        ),
    }

    def on_get(self, req, resp):
        organization_id = req.get_param("organization_id") or None
        apps = self.service.applications(self.account_id(req), organization_id)
        respond(resp, [serialize_application(app, role) for app, role in apps])

    def on_post(self, req, resp):
        values = schemas.APPLICATION_CREATE.validate(read_json(req))
        app, role = self.service.create_application(self.account_id(req), values)
        respond(resp, serialize_application(app, role), status=201)


class Application(_Resource):
    access = {"GET": DASHBOARD, "PUT": DASHBOARD, "DELETE": DASHBOARD}
    docs = {
        "GET": op("The full application with its branding", response=schemas.APPLICATION_RESPONSE,
                  errors=_APP_NOT_FOUND),
        "PUT": op("Update the application; omitted fields stay unchanged", body=schemas.APPLICATION_UPDATE,
                  response=schemas.APPLICATION_RESPONSE, errors=[*_INVALID, *_WRITE, *_JSON]),
        "DELETE": op(
            "Delete the application irreversibly", ok=204, errors=_WRITE,
            description="Deletes every user, role, permission, API key, webhook and other record of the application.",
        ),
    }

    def on_get(self, req, resp, applicationId):
        app, role = self.service.application(self.account_id(req), applicationId)
        respond(resp, serialize_application(app, role))

    def on_put(self, req, resp, applicationId):
        account_id = self.account_id(req)
        self.service.application(account_id, applicationId, write=True)  # 404/403 before judging the body
        values = schemas.APPLICATION_UPDATE.validate(read_json(req), partial=True)
        app, role = self.service.update_application(account_id, applicationId, values)
        respond(resp, serialize_application(app, role))

    def on_delete(self, req, resp, applicationId):
        self.service.delete_application(self.account_id(req), applicationId)
        resp.status = 204


class Branding(_Resource):
    access = {"PUT": DASHBOARD}
    docs = {"PUT": op(
        "Update the application's branding; custom_css is sanitised",
        body=schemas.BRANDING, response=schemas.APPLICATION_RESPONSE, errors=[*_INVALID, *_WRITE, *_JSON],
        description="branding_options merge field by field (dark_mode too). custom_css loses </style>, @import, "
                    "expression(, javascript: and external url(...) references. The response is the application "
                    "with a branding object {name, logo_url, color, background}.",
    )}

    def on_put(self, req, resp, applicationId):
        account_id = self.account_id(req)
        self.service.application(account_id, applicationId, write=True)
        values = schemas.BRANDING.validate(read_json(req), partial=True)
        app, role = self.service.update_branding(account_id, applicationId, values)
        respond(resp, serialize_application(app, role))


# ---------------------------------------------------------------- API keys


class ApiKeys(_Resource):
    access = {"GET": DASHBOARD, "POST": DASHBOARD}
    docs = {
        "GET": op("The application's active API keys, without secrets",
                  response=schemas.array_of(schemas.API_KEY_RESPONSE), errors=_APP_NOT_FOUND),
        "POST": op(
            "Create an API key; the key is in this response only", body=schemas.API_KEY_CREATE, ok=201,
            response=schemas.API_KEY_RESPONSE, errors=[*_INVALID, *_WRITE, *_JSON],
            description="permissions default to every V1 permission. The key (sk_test_ or sk_live_ by the "
                        "application's is_test_mode) is accepted as Authorization: Bearer on the application's "
                        "V1 routes. Sent with Cache-Control: no-store.",
        ),
    }

    def on_get(self, req, resp, applicationId):
        keys = self.service.api_keys(self.account_id(req), applicationId)
        respond(resp, [serialize_api_key(key) for key in keys])

    def on_post(self, req, resp, applicationId):
        account_id = self.account_id(req)
        self.service.application(account_id, applicationId, write=True)
        values = schemas.API_KEY_CREATE.validate(read_json(req))
        key, secret = self.service.create_api_key(account_id, applicationId, values)
        no_store(resp)
        respond(resp, serialize_api_key(key, secret), status=201)


class ApiKey(_Resource):
    access = {"DELETE": DASHBOARD}
    docs = {"DELETE": op("Revoke an API key: it stops authenticating at once", ok=204,
                         errors=[(403, "FORBIDDEN"), (404, "NOT_FOUND")])}

    def on_delete(self, req, resp, applicationId, keyId):
        self.service.revoke_api_key(self.account_id(req), applicationId, keyId)
        resp.status = 204
