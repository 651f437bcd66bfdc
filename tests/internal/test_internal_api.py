"""The internal API decision services read: grants, policies, API key digests, whoami,
and the change stream endpoints (headers, credentials, parameters)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from falcon.testing import create_environ

from shared.abac import Policy
from shared.ids import digest, new_id
from shared.invalidation import MAX_PATCHED_POLICIES
from shared.rbac import Grants
from tests.conftest import assert_error, bearer

INTERNAL_TOKEN = "internal-token-for-tests-0123456789"
BASE = "/internal/v1"


@pytest.fixture
def config_overrides():
    return {"internal_token": INTERNAL_TOKEN, "stream_heartbeat": 1}


@pytest.fixture
def internal():
    return bearer(INTERNAL_TOKEN)


def app_url(app, suffix):
    return f"{BASE}/applications/{app['_id']}{suffix}"


# --- grants ------------------------------------------------------------------------------------


def test_grants_of_a_user(client, ctx, clock, internal, application, stored_user, make_role, assign_role):
    user = stored_user(application, attributes={"department": "sales"})
    editor = make_role(application, "editor", ["posts:read", "posts:*"])
    viewer = make_role(application, "viewer", ["posts:read"])
    assign_role(application, user, editor)
    clock.advance(1)
    expiry = clock() + timedelta(hours=1)
    assign_role(application, user, viewer, scope="org:1", expires_at=expiry)
    assign_role(application, user, make_role(application, "temp"), expires_at=clock() + timedelta(seconds=5))
    clock.advance(5)
    head = ctx.events.head()
    response = client.simulate_get(app_url(application, f"/users/{user['_id']}/grants"), headers=internal)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json
    assert set(body) == {"seq", "grants"} and body["seq"] == head
    grants = Grants.from_json(body["grants"])
    assert grants.user_id == user["_id"] and grants.status == "active" and grants.seq == head
    assert dict(grants.attributes) == {"department": "sales"}
    assert [(a.role_name, a.permissions, a.scope) for a in grants.assignments] == [
        ("editor", ("posts:read", "posts:*"), None), ("viewer", ("posts:read",), "org:1")]
    assert grants.assignments[1].expires_at == expiry.replace(microsecond=expiry.microsecond // 1000 * 1000)
    assert grants.assignments[0].role_id == editor["_id"] and grants.assignments[1].role_id == viewer["_id"]


def test_grants_carry_the_roles_current_permissions(client, ctx, internal, application, stored_user, make_role,
                                                    assign_role):
    user = stored_user(application)
    assign_role(application, user, make_role(application, "editor", ["posts:read"]))
    ctx.roles.update(application["_id"], "editor", {"permissions": ["posts:write"]})
    body = client.simulate_get(app_url(application, f"/users/{user['_id']}/grants"), headers=internal).json
    assert body["grants"]["assignments"][0]["permissions"] == ["posts:write"]


def test_seq_is_read_before_the_data(client, ctx, internal, application, stored_user, monkeypatch):
    """A write landing between the head read and the data read is in the data, so the
    answer is at least as fresh as seq (never older)."""
    user = stored_user(application)
    order = []
    original_head = ctx.events.head
    original_user = ctx.roles.users.status_and_attributes
    monkeypatch.setattr(ctx.events, "head", lambda: order.append("head") or original_head())
    monkeypatch.setattr(ctx.roles.users, "status_and_attributes", lambda *a: order.append("data") or original_user(*a))
    client.simulate_get(app_url(application, f"/users/{user['_id']}/grants"), headers=internal)
    assert order[:2] == ["head", "data"]


@pytest.mark.parametrize("status", ["suspended", "deleted"])
def test_grants_report_the_users_status(client, ctx, internal, application, stored_user, make_role, assign_role,
                                        status):
    user = stored_user(application)
    assign_role(application, user, make_role(application, "editor"))
    ctx.store["users"].update_one({"_id": user["_id"]}, {"$set": {"status": status}})
    body = client.simulate_get(app_url(application, f"/users/{user['_id']}/grants"), headers=internal).json
    assert body["grants"]["status"] == status


@pytest.mark.parametrize("user_id", ["0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61", "not-a-uuid"])
def test_an_unknown_user_has_status_unknown(client, ctx, internal, application, user_id):
    response = client.simulate_get(app_url(application, f"/users/{user_id}/grants"), headers=internal)
    assert response.status_code == 200
    assert response.json == {"seq": ctx.events.head(), "grants": Grants.unknown(user_id, ctx.events.head()).to_json()}


def test_a_user_of_another_application_is_unknown(client, internal, application, make_application, stored_user):
    foreign = stored_user(make_application())
    body = client.simulate_get(app_url(application, f"/users/{foreign['_id']}/grants"), headers=internal).json
    assert body["grants"]["status"] == "unknown"


# --- policies and API keys -----------------------------------------------------------------------


def test_policies_are_the_active_ones_of_the_application(client, ctx, clock, internal, application,
                                                        make_application):
    def add(app, name, effect, is_active=True):
        ctx.store["abac_policies"].insert_one({
            "_id": new_id(), "app_id": app["_id"], "name": name, "description": "", "effect": effect,
            "permissions": ["docs:*"], "condition": {"op": "eq", "left": {"attr": "resource.x"}, "right": {"value": 1}},
            "is_active": is_active, "created_at": ctx.clock()})

    add(application, "first", "deny")
    add(application, "off", "allow", is_active=False)
    add(make_application(), "foreign", "allow")
    clock.advance(1)
    add(application, "second", "allow")
    response = client.simulate_get(app_url(application, "/policies"), headers=internal)
    assert response.status_code == 200
    body = response.json
    assert body["seq"] == ctx.events.head()
    policies = [Policy.from_json(p) for p in body["policies"]]
    assert [(p.name, p.effect) for p in policies] == [("first", "deny"), ("second", "allow")]
    assert policies[0].condition == {"op": "eq", "left": {"attr": "resource.x"}, "right": {"value": 1}}


def test_policies_by_id_are_those_of_them_that_are_active_in_the_application(client, ctx, clock, internal,
                                                                            application, make_application):
    """What a decision service patches into its cached set after a change frame's policy_ids."""
    def add(app, name, is_active=True):
        policy_id = new_id()
        ctx.store["abac_policies"].insert_one({
            "_id": policy_id, "app_id": app["_id"], "name": name, "description": "", "effect": "allow",
            "permissions": ["docs:*"], "condition": None, "is_active": is_active, "created_at": ctx.clock()})
        return policy_id

    wanted, off, foreign = add(application, "wanted"), add(application, "off", False), add(make_application(), "x")
    add(application, "not asked for")
    gone = new_id()
    response = client.simulate_get(app_url(application, "/policies"), headers=internal,
                                   params={"ids": ",".join([wanted, off, foreign, gone])})
    assert response.status_code == 200, response.text
    assert response.json["seq"] == ctx.events.head()
    assert [p["id"] for p in response.json["policies"]] == [wanted]


@pytest.mark.parametrize("ids", ["not-an-id", ",", ",".join(new_id() for _ in range(MAX_PATCHED_POLICIES + 1))])
def test_policies_by_id_refuse_what_is_not_a_short_list_of_ids(client, internal, application, ids):
    response = client.simulate_get(app_url(application, "/policies"), headers=internal, params={"ids": ids})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert "ids" in response.json["error"]["details"]["fields"]


def test_policies_may_be_empty(client, internal, application):
    assert client.simulate_get(app_url(application, "/policies"), headers=internal).json["policies"] == []


def test_api_key_digests(client, ctx, internal, application, make_api_key, make_application):
    key = make_api_key(application, permissions=["authz:check"])
    revoked = make_api_key(application)
    ctx.api_keys.revoke(application["_id"], ctx.api_keys.authenticate(revoked)["_id"])
    make_api_key(make_application())
    response = client.simulate_get(app_url(application, "/api-keys"), headers=internal)
    body = response.json
    assert body["seq"] == ctx.events.head()
    assert [(k["key_digest"], k["permissions"]) for k in body["keys"]] == [(digest(key), ["authz:check"])]
    assert set(body["keys"][0]) == {"id", "key_digest", "permissions"}
    assert response.headers["Cache-Control"] == "no-store"


# --- credentials ---------------------------------------------------------------------------------

JSON_ROUTES = ["/users/0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61/grants", "/policies", "/api-keys"]


@pytest.mark.parametrize("suffix", JSON_ROUTES)
def test_an_api_key_of_the_application_holding_decision_sync_is_accepted(client, application, make_api_key, suffix):
    for permissions in (["decision:sync"], ["decision:*"], None):
        key = make_api_key(application, permissions=permissions)
        assert client.simulate_get(app_url(application, suffix), headers=bearer(key)).status_code == 200


@pytest.mark.parametrize("suffix", JSON_ROUTES + ["/changes"])
def test_an_api_key_without_decision_sync_is_403(client, application, make_api_key, suffix):
    key = make_api_key(application, permissions=["roles:read", "webhooks:manage", "authz:check"])
    error = assert_error(client.simulate_get(app_url(application, suffix), headers=bearer(key)), 403, "FORBIDDEN")
    assert error["details"]["required_permission"] == "decision:sync"


@pytest.mark.parametrize("suffix", JSON_ROUTES + ["/changes"])
def test_bad_credentials_are_401(client, ctx, application, make_application, make_api_key, stored_user, suffix):
    user = stored_user(application)
    user_token, _ = ctx.tokens.issue_access_token(application["_id"], user["_id"], None)
    for headers in ({}, bearer("wrong-token"), bearer(make_api_key(make_application())), bearer(user_token),
                    {"Authorization": "Basic " + INTERNAL_TOKEN}):
        assert_error(client.simulate_get(app_url(application, suffix), headers=headers), 401, "UNAUTHORIZED")


@pytest.mark.parametrize("suffix", JSON_ROUTES + ["/changes"])
def test_an_unknown_application_is_404(client, internal, suffix):
    response = client.simulate_get(f"{BASE}/applications/0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61{suffix}",
                                   headers=internal)
    assert_error(response, 404, "NOT_FOUND")


class TestWithoutAnInternalToken:
    @pytest.fixture
    def config_overrides(self):
        return {"internal_token": ""}

    def test_an_empty_token_opens_nothing(self, client, application):
        for headers in (bearer(""), bearer(" ")):
            assert_error(client.simulate_get(app_url(application, "/policies"), headers=headers), 401)
        assert_error(client.simulate_get(f"{BASE}/whoami", headers={"Authorization": "Bearer x"}), 401)


# --- whoami --------------------------------------------------------------------------------------


def test_whoami_tells_an_api_key_its_application(client, ctx, application, make_api_key):
    key = make_api_key(application, permissions=["authz:check"])
    response = client.simulate_get(f"{BASE}/whoami", headers=bearer(key))
    assert response.status_code == 200
    assert response.json == {"kind": "api_key", "application_id": application["_id"],
                             "key_id": ctx.api_keys.authenticate(key)["_id"], "permissions": ["authz:check"]}


def test_whoami_of_the_internal_token(client, internal):
    assert client.simulate_get(f"{BASE}/whoami", headers=internal).json == {
        "kind": "internal", "application_id": None, "key_id": None, "permissions": []}


def test_whoami_refuses_anything_else(client, ctx, application, make_api_key):
    revoked = make_api_key(application)
    ctx.api_keys.revoke(application["_id"], ctx.api_keys.authenticate(revoked)["_id"])
    for headers in ({}, bearer("nope"), bearer("sk_live_unknown"), bearer(revoked)):
        assert_error(client.simulate_get(f"{BASE}/whoami", headers=headers), 401, "UNAUTHORIZED")


def test_whoami_refuses_a_key_of_a_deleted_application(client, ctx, application, make_api_key):
    key = make_api_key(application)
    ctx.applications.store.mark_deleting(application["_id"])  # deletion in progress
    assert_error(client.simulate_get(f"{BASE}/whoami", headers=bearer(key)), 401, "UNAUTHORIZED")


# --- the stream endpoints ------------------------------------------------------------------------


def open_stream(app, path, headers, query=""):
    """Call the WSGI app directly and return (status, headers, body iterator) without
    draining the endless body."""
    seen = {}

    def start_response(status, response_headers, exc_info=None):
        seen["status"] = status
        seen["headers"] = {k.lower(): v for k, v in response_headers}

    body = app(create_environ(path=path, query_string=query, headers=headers), start_response)
    return seen["status"], seen["headers"], body


def test_the_application_stream_is_server_sent_events(app, ctx, internal, application):
    ctx.tailer.start()
    try:
        status, headers, body = open_stream(app, app_url(application, "/changes"), internal)
        assert status.startswith("200")
        assert headers["content-type"] == "text/event-stream"
        assert headers["cache-control"] == "no-cache"
        chunks = iter(body)
        assert next(chunks) == (f'event: hello\ndata: {{"seq":{ctx.events.head()},'
                                f'"epoch":"{ctx.events.epoch()}"}}\n\n').encode()
        seq = ctx.events.emit(application["_id"], "role.assigned", {}, user_ids=["u"])
        assert next(chunks).startswith(f"event: change\nid: {seq}\n".encode())
        body.close()
    finally:
        ctx.tailer.stop()


def test_since_and_last_event_id_resume(app, ctx, internal, application):
    first = ctx.events.emit(application["_id"], "role.assigned", {}, user_ids=["u"])
    second = ctx.events.emit(application["_id"], "role.assigned", {}, user_ids=["u"])
    ctx.tailer.start()
    try:
        for query, headers in ((f"since={first}", internal), ("", {**internal, "Last-Event-ID": str(first)})):
            _, _, body = open_stream(app, app_url(application, "/changes"), headers, query)
            chunks = iter(body)
            next(chunks)
            assert next(chunks).startswith(f"event: change\nid: {second}\n".encode())
            body.close()
    finally:
        ctx.tailer.stop()


def test_the_all_applications_stream_takes_only_the_internal_token(app, client, ctx, internal, application,
                                                                   make_api_key):
    assert_error(client.simulate_get(f"{BASE}/changes", headers=bearer(make_api_key(application))), 401,
                 "UNAUTHORIZED")
    assert_error(client.simulate_get(f"{BASE}/changes"), 401, "UNAUTHORIZED")
    ctx.tailer.start()
    try:
        status, headers, body = open_stream(app, f"{BASE}/changes", internal)
        assert status.startswith("200") and headers["content-type"] == "text/event-stream"
        assert next(iter(body)).startswith(b"event: hello\n")
        body.close()
    finally:
        ctx.tailer.stop()


@pytest.mark.parametrize("since", ["abc", "-1", "1.5"])
def test_a_bad_since_is_400(client, internal, application, since):
    for path in (app_url(application, "/changes"), f"{BASE}/changes"):
        error = assert_error(client.simulate_get(path, params={"since": since}, headers=internal), 400,
                             "VALIDATION_INVALID_FORMAT")
        assert list(error["details"]["fields"]) == ["since"]


def test_every_internal_route_is_documented(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    for path in ("/internal/v1/applications/{applicationId}/users/{userId}/grants",
                 "/internal/v1/applications/{applicationId}/policies",
                 "/internal/v1/applications/{applicationId}/api-keys",
                 "/internal/v1/applications/{applicationId}/changes", "/internal/v1/changes", "/internal/v1/whoami"):
        assert paths[path]["get"]["summary"] != "(undocumented)"
