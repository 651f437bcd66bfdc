"""API keys from the dashboard, and what they open on V1 routes; the delete cascade."""
from __future__ import annotations

import pytest

from controlplane.apikeys.service import V1_PERMISSIONS
from controlplane.auth import permission
from shared.ids import digest, new_id
from tests.conftest import assert_error, bearer

APPS = "/api/dashboard/applications"


class V1Probe:
    """A stand-in V1 route gated by roles:read, so API keys can be tried end to end
    before (and independently of) the areas that own real V1 routes."""

    access = {"GET": permission("roles:read")}

    def on_get(self, req, resp, applicationId):
        principal = req.context.principal
        resp.media = {"kind": principal.kind, "app_id": principal.app_id, "key_id": principal.key_id}


@pytest.fixture
def probe(app, client):
    app.routes.add("/api/v1/applications/{applicationId}/dashboard-probe", V1Probe(), "tests")

    def call(app_id, key):
        return client.simulate_get(f"/api/v1/applications/{app_id}/dashboard-probe", headers=bearer(key))

    return call


def keys_path(app_id, key_id=None):
    return f"{APPS}/{app_id}/api-keys" + (f"/{key_id}" if key_id else "")


def create_key(account, app_id, **body):
    return account.post(keys_path(app_id), json={"name": "backend", **body})


def test_create_returns_the_key_once_with_no_store(dashboard_account, dashboard_app, ctx):
    response = create_key(dashboard_account, dashboard_app["id"])

    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    key = response.json["data"]
    assert set(key) == {"id", "name", "key_prefix", "permissions", "created_at", "last_used_at", "key"}
    assert key["name"] == "backend" and key["last_used_at"] is None
    assert key["permissions"] == list(V1_PERMISSIONS)
    assert key["key"].startswith("sk_live_") and key["key"].startswith(key["key_prefix"])
    stored = ctx.store["api_keys"].find_one({"_id": key["id"]})
    assert stored["key_digest"] == digest(key["key"])
    assert key["key"] not in str(stored)

    listed = dashboard_account.get(keys_path(dashboard_app["id"]))
    assert listed.status_code == 200
    assert listed.json["data"] == [{k: v for k, v in key.items() if k != "key"}]


def test_test_mode_applications_get_sk_test_keys(dashboard_account, make_dashboard_app):
    app = make_dashboard_app(dashboard_account, is_test_mode=True)
    assert create_key(dashboard_account, app["id"]).json["data"]["key"].startswith("sk_test_")


def test_create_with_explicit_permissions(dashboard_account, dashboard_app):
    key = create_key(dashboard_account, dashboard_app["id"], permissions=["roles:*", "authz:check"]).json["data"]
    assert key["permissions"] == ["roles:*", "authz:check"]


@pytest.mark.parametrize("body, code", [
    ({"name": ""}, "VALIDATION_INVALID_FORMAT"),
    ({"name": "x" * 256}, "VALIDATION_INVALID_FORMAT"),
    ({"name": "k", "permissions": []}, "VALIDATION_INVALID_FORMAT"),
    ({"name": "k", "permissions": ["roles"]}, "VALIDATION_INVALID_FORMAT"),
    ({"name": "k", "permissions": ["roles:read", "bad perm:x"]}, "VALIDATION_INVALID_FORMAT"),
    ({"name": "k", "permissions": "roles:read"}, "VALIDATION_INVALID_FORMAT"),
    ({"permissions": 5}, "VALIDATION_MULTIPLE_ERRORS"),
])
def test_create_validation(dashboard_account, dashboard_app, ctx, body, code):
    assert_error(dashboard_account.post(keys_path(dashboard_app["id"]), json=body), 400, code)
    assert ctx.store["api_keys"].count_documents({}) == 0


def test_key_authenticates_on_its_own_applications_v1_routes_only(dashboard_account, dashboard_app,
                                                                   make_dashboard_app, probe):
    other = make_dashboard_app(dashboard_account, name="Other")
    key = create_key(dashboard_account, dashboard_app["id"]).json["data"]

    ok = probe(dashboard_app["id"], key["key"])
    assert ok.status_code == 200
    assert ok.json == {"kind": "api_key", "app_id": dashboard_app["id"], "key_id": key["id"]}
    assert_error(probe(other["id"], key["key"]), 401, "UNAUTHORIZED")
    assert_error(probe(dashboard_app["id"], key["key"] + "x"), 401, "UNAUTHORIZED")


def test_key_permissions_gate_v1_routes(dashboard_account, dashboard_app, probe):
    narrow = create_key(dashboard_account, dashboard_app["id"], permissions=["authz:check"]).json["data"]
    error = assert_error(probe(dashboard_app["id"], narrow["key"]), 403, "FORBIDDEN")
    assert error["details"]["required_permission"] == "roles:read"


def test_use_shows_in_last_used_at(dashboard_account, dashboard_app, probe):
    key = create_key(dashboard_account, dashboard_app["id"]).json["data"]
    probe(dashboard_app["id"], key["key"])
    listed = dashboard_account.get(keys_path(dashboard_app["id"])).json["data"]
    assert listed[0]["last_used_at"] is not None


def test_revoke_stops_the_key_at_once(dashboard_account, dashboard_app, probe):
    keep = create_key(dashboard_account, dashboard_app["id"], name="keep").json["data"]
    gone = create_key(dashboard_account, dashboard_app["id"], name="gone").json["data"]
    assert probe(dashboard_app["id"], gone["key"]).status_code == 200

    assert dashboard_account.delete(keys_path(dashboard_app["id"], gone["id"])).status_code == 204

    assert_error(probe(dashboard_app["id"], gone["key"]), 401, "UNAUTHORIZED")
    assert probe(dashboard_app["id"], keep["key"]).status_code == 200
    assert [k["id"] for k in dashboard_account.get(keys_path(dashboard_app["id"])).json["data"]] == [keep["id"]]
    assert_error(dashboard_account.delete(keys_path(dashboard_app["id"], gone["id"])), 404, "NOT_FOUND")


def test_revoke_unknown_or_other_applications_key_is_404(dashboard_account, dashboard_app, make_dashboard_app,
                                                         probe):
    other = make_dashboard_app(dashboard_account, name="Other")
    other_key = create_key(dashboard_account, other["id"]).json["data"]
    for key_id in (new_id(), "not-a-uuid", other_key["id"]):
        assert_error(dashboard_account.delete(keys_path(dashboard_app["id"], key_id)), 404, "NOT_FOUND")
    assert probe(other["id"], other_key["key"]).status_code == 200


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_cannot_revoke(dashboard_account, dashboard_app, make_dashboard_account, role, probe):
    key = create_key(dashboard_account, dashboard_app["id"]).json["data"]
    colleague = make_dashboard_account()
    dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                           json={"email": colleague.email, "role": role})
    assert_error(colleague.delete(keys_path(dashboard_app["id"], key["id"])), 403, "FORBIDDEN")
    assert probe(dashboard_app["id"], key["key"]).status_code == 200


def test_another_account_cannot_revoke(dashboard_account, dashboard_app, make_dashboard_account, probe):
    key = create_key(dashboard_account, dashboard_app["id"]).json["data"]
    intruder = make_dashboard_account()
    assert_error(intruder.delete(keys_path(dashboard_app["id"], key["id"])), 404, "NOT_FOUND")
    assert probe(dashboard_app["id"], key["key"]).status_code == 200


# ---------------------------------------------------------------- delete cascade


def test_delete_cascades_to_every_tenant_collection(dashboard_account, dashboard_app, make_dashboard_app, ctx, probe):
    app_id = dashboard_app["id"]
    survivor = make_dashboard_app(dashboard_account, name="Survivor")
    key = create_key(dashboard_account, app_id).json["data"]["key"]
    survivor_key = create_key(dashboard_account, survivor["id"]).json["data"]["key"]
    tenant_collections = ("users", "roles", "permissions", "role_assignments", "webhooks", "refresh_tokens")
    for target in (app_id, survivor["id"]):
        for name in tenant_collections:
            ctx.store[name].insert_one({"_id": new_id(), "app_id": target})

    assert dashboard_account.delete(f"{APPS}/{app_id}").status_code == 204

    for name in (*tenant_collections, "api_keys"):
        assert ctx.store[name].count_documents({"app_id": app_id}) == 0, name
        assert ctx.store[name].count_documents({"app_id": survivor["id"]}) == 1, name
    assert ctx.store["applications"].find_one({"_id": app_id}) is None
    assert ctx.api_keys.authenticate(key) is None
    assert_error(probe(app_id, key), 404, "NOT_FOUND")
    assert probe(survivor["id"], survivor_key).status_code == 200
    org = ctx.store["organizations"].find_one({"_id": dashboard_account.organization_id})
    assert org["applications_count"] == 1
