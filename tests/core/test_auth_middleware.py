"""V1 routes are closed by default; API keys and user tokens are checked against
their own application; gates refuse what the credential may not do."""
import pytest

from controlplane.auth import CREDENTIAL, OWNER, PUBLIC, USER, permission
from shared.config import Rate
from shared.http import respond
from tests.conftest import assert_error, bearer

BASE = "/api/v1/applications/{app}"


class Probe:
    access = {"GET": CREDENTIAL, "POST": permission("roles:manage"), "PUT": USER}

    def on_get(self, req, resp, applicationId):
        p = req.context.principal
        respond(resp, {"kind": p.kind, "app_id": p.app_id, "user_id": p.user_id})

    def on_post(self, req, resp, applicationId):
        respond(resp, {"ok": True})

    def on_put(self, req, resp, applicationId):
        respond(resp, {"ok": True})


class Undeclared:
    def on_get(self, req, resp, applicationId):
        respond(resp, {"ok": True})


class OwnerProbe:
    access = {"GET": OWNER}

    def on_get(self, req, resp, applicationId, userId):
        respond(resp, {"ok": True})


class Public:
    access = {"GET": PUBLIC}

    def on_get(self, req, resp, applicationId):
        respond(resp, {"app": req.context.application["_id"]})


@pytest.fixture(autouse=True)
def probes(app):
    app.routes.add("/api/v1/applications/{applicationId}/probe", Probe(), "test")
    app.routes.add("/api/v1/applications/{applicationId}/undeclared", Undeclared(), "test")
    app.routes.add("/api/v1/applications/{applicationId}/users/{userId}/owned", OwnerProbe(), "test")
    app.routes.add("/api/v1/applications/{applicationId}/public", Public(), "test")


@pytest.fixture
def user(ctx, application):
    doc = {"_id": "0b7c1b8e-0000-4000-8000-000000000001", "app_id": application["_id"], "email": "u@example.com",
           "status": "active"}
    ctx.store["users"].insert_one(doc)
    return doc


def url(app, path="probe"):
    return f"{BASE.format(app=app['_id'])}/{path}"


def test_no_credential_is_401(client, application):
    assert_error(client.simulate_get(url(application)), 401, "UNAUTHORIZED")
    assert_error(client.simulate_get(url(application, "undeclared")), 401, "UNAUTHORIZED")


def test_malformed_authorization_header_is_401(client, application):
    assert_error(client.simulate_get(url(application), headers={"Authorization": "Basic abc"}), 401, "UNAUTHORIZED")
    assert_error(client.simulate_get(url(application), headers={"Authorization": "Bearer "}), 401, "UNAUTHORIZED")


def test_unknown_application_is_404(client, api_key):
    assert_error(client.simulate_get(f"{BASE.format(app='not-a-uuid')}/public"), 404, "NOT_FOUND")
    missing = "00000000-0000-4000-8000-000000000000"
    assert_error(client.simulate_get(f"{BASE.format(app=missing)}/probe", headers=bearer(api_key)), 404)


def test_public_route_resolves_the_application(client, application):
    assert client.simulate_get(url(application, "public")).json == {"data": {"app": application["_id"]}}


def test_api_key_of_the_application_is_accepted(client, application, api_key):
    body = client.simulate_get(url(application), headers=bearer(api_key)).json["data"]
    assert body == {"kind": "api_key", "app_id": application["_id"], "user_id": None}


def test_api_key_of_another_application_is_refused(client, application, make_application, make_api_key):
    foreign = make_api_key(make_application())
    assert_error(client.simulate_get(url(application), headers=bearer(foreign)), 401, "UNAUTHORIZED")


def test_unknown_and_revoked_api_keys_are_refused(ctx, client, application, make_api_key):
    assert_error(client.simulate_get(url(application), headers=bearer("sk_live_" + "x" * 43)), 401)
    secret = make_api_key(application)
    key_id = ctx.api_keys.list(application["_id"])[-1]["_id"]
    assert client.simulate_get(url(application), headers=bearer(secret)).status_code == 200
    ctx.api_keys.revoke(application["_id"], key_id)
    assert_error(client.simulate_get(url(application), headers=bearer(secret)), 401)


def test_api_key_permission_gate(client, application, make_api_key):
    reader = make_api_key(application, permissions=["roles:read"])
    error = assert_error(client.simulate_post(url(application), json={}, headers=bearer(reader)), 403, "FORBIDDEN")
    assert error["details"]["required_permission"] == "roles:manage"
    wildcard = make_api_key(application, permissions=["roles:*"])
    assert client.simulate_post(url(application), json={}, headers=bearer(wildcard)).status_code == 200


def test_user_token_is_accepted_and_permission_resolved_live(ctx, client, application, user):
    token, _ = ctx.tokens.issue_access_token(application["_id"], user["_id"], None)
    assert client.simulate_get(url(application), headers=bearer(token)).json["data"]["user_id"] == user["_id"]
    assert_error(client.simulate_post(url(application), json={}, headers=bearer(token)), 403, "FORBIDDEN")
    role = ctx.roles.create(application["_id"], {"name": "manager", "display_name": "Manager",
                                                 "permissions": ["roles:manage"]})
    ctx.roles.assign(application["_id"], user["_id"], {"role_id": role["_id"]})
    assert client.simulate_post(url(application), json={}, headers=bearer(token)).status_code == 200


@pytest.mark.parametrize("status", ["suspended", "deleted"])
def test_token_of_an_inactive_user_stops_at_once(ctx, client, application, user, status):
    token, _ = ctx.tokens.issue_access_token(application["_id"], user["_id"], None)
    ctx.store["users"].update_one({"_id": user["_id"]}, {"$set": {"status": status}})
    assert_error(client.simulate_get(url(application), headers=bearer(token)), 401, "UNAUTHORIZED")


def test_token_of_a_deleted_application_stops_at_once(ctx, client, application, user):
    token, _ = ctx.tokens.issue_access_token(application["_id"], user["_id"], None)
    ctx.applications.delete(application["_id"])
    assert_error(client.simulate_get(url(application), headers=bearer(token)), 404)


def test_user_token_of_another_application_is_refused(ctx, client, application, make_application, user):
    other = make_application()
    token, _ = ctx.tokens.issue_access_token(other["_id"], user["_id"], None)
    assert_error(client.simulate_get(url(application), headers=bearer(token)), 401)


def test_owner_gate(ctx, client, application, user, api_key):
    token, _ = ctx.tokens.issue_access_token(application["_id"], user["_id"], None)
    mine = f"{BASE.format(app=application['_id'])}/users/{user['_id']}/owned"
    theirs = f"{BASE.format(app=application['_id'])}/users/0b7c1b8e-0000-4000-8000-000000000002/owned"
    assert client.simulate_get(mine, headers=bearer(token)).status_code == 200
    assert_error(client.simulate_get(theirs, headers=bearer(token)), 403, "FORBIDDEN")
    assert_error(client.simulate_get(mine, headers=bearer(api_key)), 403, "FORBIDDEN")


def test_user_only_gate_refuses_api_keys(ctx, client, application, user, api_key):
    assert_error(client.simulate_put(url(application), json={}, headers=bearer(api_key)), 403, "FORBIDDEN")
    token, _ = ctx.tokens.issue_access_token(application["_id"], user["_id"], None)
    assert client.simulate_put(url(application), json={}, headers=bearer(token)).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"rate_limit_api": Rate(3, 60)}])
def test_general_throttle_per_credential(client, application, api_key, make_api_key):
    for _ in range(3):
        assert client.simulate_get(url(application), headers=bearer(api_key)).status_code == 200
    response = client.simulate_get(url(application), headers=bearer(api_key))
    assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert all(h in response.headers
               for h in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"))
    assert response.headers["X-RateLimit-Limit"] == "3" and response.headers["X-RateLimit-Remaining"] == "0"
    other = make_api_key(application)
    assert client.simulate_get(url(application), headers=bearer(other)).status_code == 200
