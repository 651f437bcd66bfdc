"""V1/webhooks: create, list, get, update, delete, rotate-secret, the delivery log's
404, and their error paths (spec "Webhooks"; docs/webhooks.md, "Management")."""
from __future__ import annotations

import pytest

from controlplane.collection import WriteGuard
from shared.event_types import PUBLIC_EVENT_TYPES
from shared.timeutil import seconds
from tests.conftest import assert_error, in_parallel
from tests.webhooks.conftest import V1

UNKNOWN = "00000000-0000-4000-8000-000000000000"
CAPPED = {"webhook_allow_private_targets": True, "webhook_timeout": 1, "max_webhooks_per_application": 3}


def test_create_returns_the_secret_once_with_no_store(client, manager, hooks_url, receiver, ctx):
    resp = client.simulate_post(hooks_url, json={"url": receiver.url, "events": ["user.created", "role.created"]},
                                headers=manager)
    assert resp.status_code == 201
    data = resp.json["data"]
    assert set(data) == {"id", "url", "secret", "events", "is_active", "created_at", "updated_at"}
    assert data["events"] == ["user.created", "role.created"] and data["is_active"] is True
    assert "no-store" in resp.headers["Cache-Control"]
    stored = ctx.store["webhooks"].find_one({"_id": data["id"]})
    assert data["secret"] not in str(stored)  # encrypted at rest
    assert ctx.box.decrypt(stored["secret"]).decode() == data["secret"]
    listed = client.simulate_get(hooks_url, headers=manager).json["data"]
    assert [w["id"] for w in listed] == [data["id"]] and "secret" not in listed[0]
    got = client.simulate_get(f"{hooks_url}/{data['id']}", headers=manager).json["data"]
    assert "secret" not in got and got["url"] == receiver.url


@pytest.mark.parametrize("body, field", [
    ({"events": ["user.created"]}, "url"),
    ({"url": "https://hooks.example.com/x"}, "events"),
    ({"url": "https://hooks.example.com/x", "events": []}, "events"),
    ({"url": "https://hooks.example.com/x", "events": "user.created"}, "events"),
    ({"url": "not a url", "events": ["user.created"]}, "url"),
    ({"url": "https://hooks.example.com/" + "a" * 2030, "events": ["user.created"]}, "url"),
    ({"url": 42, "events": ["user.created"]}, "url"),
])
def test_invalid_bodies_are_validation_errors(client, manager, hooks_url, body, field, ctx):
    resp = client.simulate_post(hooks_url, json=body, headers=manager)
    assert resp.status_code == 400
    assert resp.json["error"]["code"] == "VALIDATION_INVALID_FORMAT"
    assert field in resp.json["error"]["details"]["fields"]
    assert ctx.store["webhooks"].count_documents({}) == 0


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": False}])
def test_http_urls_are_refused_in_production(client, manager, hooks_url):
    resp = client.simulate_post(hooks_url, json={"url": "http://hooks.example.com/x", "events": ["user.created"]},
                                headers=manager)
    assert resp.status_code == 400 and resp.json["error"]["code"] == "VALIDATION_INVALID_FORMAT"


def test_url_of_exactly_2048_characters_is_accepted(client, manager, hooks_url):
    url = "https://hooks.example.com/" + "a" * (2048 - len("https://hooks.example.com/"))
    resp = client.simulate_post(hooks_url, json={"url": url, "events": ["user.created"]}, headers=manager)
    assert resp.status_code == 201


def test_unsupported_event_is_refused(client, manager, hooks_url, ctx):
    resp = client.simulate_post(hooks_url, json={"url": "https://hooks.example.com/x",
                                                 "events": ["user.created", "user.suspended", "nope"]},
                                headers=manager)
    assert resp.status_code == 400
    assert resp.json["error"]["code"] == "WEBHOOK_EVENT_UNSUPPORTED"
    assert resp.json["error"]["details"]["events"] == ["user.suspended", "nope"]
    assert ctx.store["webhooks"].count_documents({}) == 0


def test_every_spec_event_kind_is_accepted(client, manager, hooks_url):
    resp = client.simulate_post(hooks_url, json={"url": "https://hooks.example.com/x",
                                                 "events": list(PUBLIC_EVENT_TYPES)}, headers=manager)
    assert resp.status_code == 201 and len(resp.json["data"]["events"]) == 23


def test_update_replaces_events_and_toggles_is_active(client, manager, hooks_url, make_webhook, receiver):
    hook = make_webhook(receiver.url)
    resp = client.simulate_put(f"{hooks_url}/{hook['id']}", json={"events": ["mfa.enabled"], "is_active": False},
                               headers=manager)
    assert resp.status_code == 200
    data = resp.json["data"]
    assert data["events"] == ["mfa.enabled"] and data["is_active"] is False and "secret" not in data
    bad = client.simulate_put(f"{hooks_url}/{hook['id']}", json={"events": ["x.y"]}, headers=manager)
    assert bad.status_code == 400 and bad.json["error"]["code"] == "WEBHOOK_EVENT_UNSUPPORTED"
    bad = client.simulate_put(f"{hooks_url}/{hook['id']}", json={"is_active": "yes"}, headers=manager)
    assert bad.status_code == 400 and bad.json["error"]["code"] == "VALIDATION_INVALID_FORMAT"


def test_rotate_secret_answers_200_with_a_new_secret_once(client, manager, hooks_url, make_webhook, receiver, ctx):
    hook = make_webhook(receiver.url)
    resp = client.simulate_post(f"{hooks_url}/{hook['id']}/rotate-secret", json={}, headers=manager)
    assert resp.status_code == 200 and "no-store" in resp.headers["Cache-Control"]
    secret = resp.json["data"]["secret"]
    assert secret != hook["secret"]
    stored = ctx.store["webhooks"].find_one({"_id": hook["id"]})
    assert ctx.box.decrypt(stored["secret"]).decode() == secret


@pytest.mark.parametrize("method, suffix", [
    ("GET", ""), ("PUT", ""), ("DELETE", ""), ("GET", "/deliveries"), ("POST", "/rotate-secret"),
    ("POST", f"/deliveries/{UNKNOWN}/redeliver"),
])
@pytest.mark.parametrize("webhook_id", [UNKNOWN, "not-a-uuid"])
def test_unknown_webhook_is_404(client, manager, hooks_url, method, suffix, webhook_id):
    resp = client.simulate_request(method, f"{hooks_url}/{webhook_id}{suffix}", json={}, headers=manager)
    assert resp.status_code == 404 and resp.json["error"]["code"] == "WEBHOOK_NOT_FOUND"


def test_cross_tenant_id_is_not_found(client, manager, hooks_url, make_application, make_api_key, receiver):
    other = make_application()
    other_key = {"Authorization": f"Bearer {make_api_key(other, permissions=['webhooks:manage'])}"}
    hook = client.simulate_post(f"/api/v1/applications/{other['_id']}/webhooks",
                                json={"url": receiver.url, "events": ["user.created"]}, headers=other_key).json["data"]
    assert client.simulate_get(f"{hooks_url}/{hook['id']}", headers=manager).status_code == 404
    assert client.simulate_delete(f"{hooks_url}/{hook['id']}", headers=manager).status_code == 404


def test_permission_webhooks_manage_is_required(client, hooks_url, application, make_api_key):
    key = make_api_key(application, permissions=["roles:read"])
    resp = client.simulate_get(hooks_url, headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 403
    assert resp.json["error"]["details"]["required_permission"] == "webhooks:manage"
    assert client.simulate_get(hooks_url).status_code == 401


def test_delete_answers_204_and_removes_the_webhook(client, manager, hooks_url, make_webhook, receiver):
    hook = make_webhook(receiver.url)
    assert client.simulate_delete(f"{hooks_url}/{hook['id']}", headers=manager).status_code == 204
    assert client.simulate_get(f"{hooks_url}/{hook['id']}", headers=manager).status_code == 404
    assert client.simulate_get(hooks_url, headers=manager).json["data"] == []


def test_deleting_the_application_deletes_webhooks_and_deliveries(ctx, application, make_webhook, receiver,
                                                                     make_role, pump):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    ctx.webhooks.dispatcher.catch_up()
    assert ctx.store["webhook_deliveries"].count_documents({"app_id": application["_id"]}) == 1
    ctx.applications.delete(application["_id"])
    assert ctx.store["webhooks"].count_documents({"app_id": application["_id"]}) == 0
    assert ctx.store["webhook_deliveries"].count_documents({"app_id": application["_id"]}) == 0
    assert pump() == 0 and receiver.requests == []


def test_an_application_holds_at_most_50_webhooks_by_default(client, manager, hooks_url, receiver, ctx):
    """One event is one POST per webhook subscribed to it, to the same URL too: the cap
    bounds what one event of one tenant costs a receiver and the shared queue."""
    for _ in range(50):
        created = client.simulate_post(hooks_url, json={"url": receiver.url, "events": ["role.created"]},
                                       headers=manager)
        assert created.status_code == 201, created.text
    refused = client.simulate_post(hooks_url, json={"url": receiver.url, "events": ["role.created"]}, headers=manager)
    assert assert_error(refused, 409, "WEBHOOK_LIMIT_EXCEEDED")["details"] == {"limit": 50}
    assert ctx.store["webhooks"].count_documents({}) == 50


@pytest.mark.parametrize("config_overrides", [CAPPED])
def test_a_create_over_the_cap_is_409_and_writes_nothing(client, manager, hooks_url, make_webhook, receiver, ctx,
                                                         make_application, make_api_key):
    hooks = [make_webhook(receiver.url) for _ in range(3)]
    assert client.simulate_put(f"{hooks_url}/{hooks[0]['id']}", json={"is_active": False},
                               headers=manager).status_code == 200  # inactive ones count
    audited = ctx.store["events"].count_documents({"action": "webhook.created"})

    refused = client.simulate_post(hooks_url, json={"url": receiver.url, "events": ["user.created"]}, headers=manager)
    error = assert_error(refused, 409, "WEBHOOK_LIMIT_EXCEEDED")
    assert error["details"] == {"limit": 3}
    assert error["message"] == "An application may hold at most 3 webhooks; delete one first."
    assert ctx.store["webhooks"].count_documents({}) == 3
    assert ctx.store["events"].count_documents({"action": "webhook.created"}) == audited
    assert ctx.store["webhook_writers"].count_documents({}) == 0  # the guard is released

    other = make_application()  # a cap per application
    other_key = {"Authorization": f"Bearer {make_api_key(other, permissions=['webhooks:manage'])}"}
    assert client.simulate_post(f"{V1.format(other['_id'])}/webhooks", headers=other_key,
                                json={"url": receiver.url, "events": ["user.created"]}).status_code == 201

    assert client.simulate_delete(f"{hooks_url}/{hooks[1]['id']}", headers=manager).status_code == 204
    make_webhook(receiver.url)


@pytest.mark.parametrize("config_overrides", [CAPPED])
def test_parallel_creates_cannot_pass_the_cap(client, manager, hooks_url, receiver, ctx):
    responses = in_parallel(10, lambda i: client.simulate_post(
        hooks_url, json={"url": f"{receiver.url}?n={i}", "events": ["user.created"]}, headers=manager))
    codes = sorted(r.status_code for r in responses)
    assert codes.count(201) <= 3 and set(codes) <= {201, 409}
    assert ctx.store["webhooks"].count_documents({}) == codes.count(201)
    for response in responses:
        if response.status_code == 409:
            assert response.json["error"]["code"] in ("WEBHOOK_LIMIT_EXCEEDED", "CONFLICT")


@pytest.mark.parametrize("config_overrides", [CAPPED])
def test_a_held_write_guard_answers_409_conflict_and_an_expired_one_is_taken_over(client, manager, hooks_url,
                                                                                  application, receiver, ctx, clock,
                                                                                  monkeypatch):
    monkeypatch.setattr(WriteGuard, "WAIT", 0)
    guards = ctx.store["webhook_writers"]
    guards.insert_one({"_id": application["_id"], "app_id": application["_id"], "holder": "a writer that died",
                       "expires_at": clock() + seconds(WriteGuard.SECONDS)})
    body = {"url": receiver.url, "events": ["user.created"]}
    assert_error(client.simulate_post(hooks_url, json=body, headers=manager), 409, "CONFLICT")
    assert ctx.store["webhooks"].count_documents({}) == 0

    clock.advance(WriteGuard.SECONDS)
    assert client.simulate_post(hooks_url, json=body, headers=manager).status_code == 201
    assert guards.count_documents({}) == 0  # released after the write


def test_the_create_route_documents_the_cap(client):
    operation = client.simulate_get("/openapi.json").json["paths"]["/api/v1/applications/{applicationId}/webhooks"]
    conflict = operation["post"]["responses"]["409"]["description"]
    assert "WEBHOOK_LIMIT_EXCEEDED" in conflict and "CONFLICT" in conflict


def test_allow_private_targets_logs_a_warning_at_start(monkeypatch, capsys):
    from controlplane import wsgi

    monkeypatch.setenv("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
    monkeypatch.setenv("IAMGATE_SECRET_KEY", "test-secret-key-0123456789abcdef")
    monkeypatch.setattr("controlplane.app.create_app", lambda config, **kwargs: None)
    wsgi.create()
    assert "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS is true" in capsys.readouterr().err
