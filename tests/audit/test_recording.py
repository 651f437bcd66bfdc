"""Change-log events are their changes' audit records: who did it, from where, to what,
with which result; attempts are records of their own that the change log's readers skip."""
from __future__ import annotations

import pytest

from controlplane.audit import context as audit
from tests.conftest import bearer

V1 = "/api/v1/applications/{}"
HEADERS = {"X-Request-Id": "req-audit-0001", "User-Agent": "audit-test/1.0"}


def record_of(ctx, action):
    docs = list(ctx.store["events"].find({"action": action}).sort("seq", -1).limit(1))
    assert docs, f"no {action} record"
    return docs[0]


def test_a_role_created_by_an_api_key_names_the_key_the_request_and_the_role(client, ctx, application, make_api_key):
    secret = make_api_key(application, permissions=["roles:manage"], name="CI deploy")
    key_id = ctx.store["api_keys"].find_one({"app_id": application["_id"]})["_id"]
    body = {"name": "editor", "display_name": "Editor", "permissions": ["posts:read"]}
    response = client.simulate_post(V1.format(application["_id"]) + "/roles", json=body,
                                    headers={**bearer(secret), **HEADERS}, remote_addr="203.0.113.7")
    assert response.status_code == 201, response.text
    doc = record_of(ctx, "role.created")
    assert doc["type"] == "role.created"  # one document: the change-log event is the record
    assert doc["actor"] == {"type": "api_key", "id": key_id, "display": "CI deploy"}
    assert doc["target"] == {"type": "role", "id": response.json["data"]["id"], "display": "editor"}
    assert doc["result"] == {"status": "success"}
    assert (doc["request_id"], doc["ip"], doc["user_agent"]) == ("req-audit-0001", "203.0.113.7", "audit-test/1.0")
    assert doc["app_id"] == application["_id"]


def test_a_user_suspended_from_the_dashboard_names_the_account(ctx, dashboard_account, dashboard_app, stored_user):
    user = stored_user({"_id": dashboard_app["id"]})
    response = dashboard_account.post(f"/api/dashboard/applications/{dashboard_app['id']}/users/{user['_id']}/suspend",
                                      json={}, headers=HEADERS)
    assert response.status_code in (200, 204), response.text
    doc = record_of(ctx, "user.suspended")
    assert doc["actor"] == {"type": "dashboard_account", "id": dashboard_account.id, "display": None}
    assert doc["target"]["type"] == "user" and doc["target"]["id"] == user["_id"]
    assert (doc["request_id"], doc["ip"]) == ("req-audit-0001", dashboard_account.remote_addr)
    assert doc["organization_id"] == dashboard_account.organization_id


def test_an_api_key_created_is_recorded_under_its_audit_name(ctx, application, make_api_key):
    make_api_key(application)
    doc = record_of(ctx, "api_key.created")
    assert doc["type"] == "api_keys.changed" and doc["target"]["type"] == "api_key"
    assert doc["actor"] == audit.SYSTEM  # made outside any request


def test_an_attempt_is_a_record_the_change_logs_readers_skip(ctx, application):
    ctx.tailer.begin()
    seen = []
    ctx.tailer.subscribe(seen.append)
    head = ctx.events.head()
    seq = ctx.audit.record("user.login", result=audit.failure("invalid_credentials"),
                           target=audit.actor("user", "u-1", "ann@example.com"), application_id=application["_id"])
    assert seq == head + 1
    assert ctx.tailer.poll_once() == 0 and ctx.tailer.last_seq == seq and seen == []
    assert ctx.tailer.wait_after(head, 0.05, None) == []
    doc = record_of(ctx, "user.login")
    assert doc["type"] is None and doc["result"] == {"status": "failure", "reason": "invalid_credentials"}


def test_an_action_outside_the_catalogue_is_refused_before_anything_is_written(ctx):
    head = ctx.events.head()
    with pytest.raises(ValueError):
        ctx.audit.record("user.teleported", result=audit.success(), target=audit.actor("user", "u-1"))
    assert ctx.events.head() == head


def test_a_login_is_the_users_own_record_from_their_address(client, ctx, application, make_user):
    user = make_user(application)
    response = client.simulate_post(V1.format(application["_id"]) + "/users/login", headers=HEADERS,
                                    remote_addr="198.51.100.23",
                                    json={"email": user["email"], "password": user["password"]})
    assert response.status_code == 200, response.text
    doc = record_of(ctx, "user.login")
    assert doc["actor"] == {"type": "user", "id": user["id"], "display": None}
    assert doc["target"]["type"] == "user" and doc["target"]["id"] == user["id"]
    assert (doc["ip"], doc["request_id"], doc["result"]) == ("198.51.100.23", "req-audit-0001", {"status": "success"})


def test_a_role_assigned_by_an_end_user_names_the_user(client, ctx, role_admin, stored_user, make_role):
    app, admin, token = role_admin
    target = stored_user(app)
    role = make_role(app, "viewer", ["posts:read"])
    response = client.simulate_post(V1.format(app["_id"]) + f"/users/{target['_id']}/roles",
                                    json={"role_id": role["_id"]}, headers={**bearer(token), **HEADERS})
    assert response.status_code == 201, response.text
    doc = record_of(ctx, "role.assigned")
    assert doc["actor"]["type"] == "user" and doc["actor"]["id"] == admin["_id"]
    assert doc["target"] == {"type": "user", "id": target["_id"], "display": None}


def test_a_long_user_agent_is_cut_in_the_record(client, ctx, application, make_api_key):
    """The caller chooses its User-Agent: a record keeps its first 256 characters."""
    secret = make_api_key(application, permissions=["roles:manage"])
    agent = "a" * 256 + "b" * 4000
    response = client.simulate_post(V1.format(application["_id"]) + "/roles",
                                    json={"name": "long-agent", "display_name": "Long", "permissions": ["posts:read"]},
                                    headers={**bearer(secret), "User-Agent": agent})
    assert response.status_code == 201, response.text
    assert record_of(ctx, "role.created")["user_agent"] == "a" * 256
