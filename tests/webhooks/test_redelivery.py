"""``POST V1/webhooks/{id}/deliveries/{deliveryId}/redeliver``: the event of a logged
delivery is queued again as a new delivery (same body, new id, signed afresh), which a
real HTTP receiver gets and the unmodified Standard Webhooks library verifies.  Ids of
another webhook, another application or another kind of delivery are 404 and queue
nothing; the permission is webhooks:manage."""
from __future__ import annotations

import json
import logging

import pytest
from standardwebhooks import Webhook

from controlplane.audit.service import APPLICATION
from tests.webhooks.conftest import V1, verify

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def redeliver_url(app_id: str, webhook_id: str, delivery_id: str) -> str:
    return f"{V1.format(app_id)}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"


def delivery_log(client, headers, app_id: str, webhook_id: str) -> list[dict]:
    response = client.simulate_get(f"{V1.format(app_id)}/webhooks/{webhook_id}/deliveries", headers=headers)
    assert response.status_code == 200, response.text
    return response.json["data"]


def queued(ctx) -> tuple[int, int]:
    """(delivery records, queue entries): what a refused redelivery must leave as it was."""
    return ctx.store["webhook_deliveries"].count_documents({}), ctx.store["webhook_queue"].count_documents({})


@pytest.fixture
def config_overrides():
    # No test here waits for a timeout: a receiver slow under a loaded machine must not fail a delivery.
    return {"webhook_allow_private_targets": True, "webhook_timeout": 10, "webhook_retry_delays": (30, 300, 1800)}


@pytest.fixture
def delivered(client, manager, application, make_webhook, make_role, receiver, pump):
    """A webhook of the application and the delivery of one role.created its receiver got."""
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    assert pump() == 1
    [original] = delivery_log(client, manager, application["_id"], hook["id"])
    assert original["status"] == "delivered" and original["redelivery_of"] is None
    return hook, original


def test_a_redelivery_is_the_same_body_under_a_new_id_and_a_fresh_signature(client, ctx, clock, manager, application,
                                                                             delivered, receiver, pump, caplog):
    hook, original = delivered
    clock.advance(2)  # a later attempt: its own timestamp
    with caplog.at_level(logging.INFO, logger="iamgate.webhooks"):
        response = client.simulate_post(redeliver_url(application["_id"], hook["id"], original["id"]), json={},
                                        headers=manager)
    assert response.status_code == 202, response.text
    new = response.json["data"]
    assert set(new) == set(original)  # the delivery log's shape
    assert new["id"] != original["id"]
    assert {k: new[k] for k in ("webhook_id", "event", "status", "redelivery_of", "retry_count")} == {
        "webhook_id": hook["id"], "event": "role.created", "status": "pending", "redelivery_of": original["id"],
        "retry_count": 0}
    [line] = [r for r in caplog.records if r.getMessage() == "webhook redelivery queued"]
    assert (line.app_id, line.webhook_id, line.delivery_id, line.redelivery_of) == (
        application["_id"], hook["id"], new["id"], original["id"])

    assert pump() == 1
    first, again = receiver.requests
    assert again["body"] == first["body"]
    headers = again["headers"]
    assert headers["webhook-id"] == headers["X-Service-Delivery-Id"] == new["id"]
    assert headers["webhook-timestamp"] == headers["X-Service-Timestamp"] == str(int(clock().timestamp()))
    assert headers["webhook-timestamp"] != first["headers"]["webhook-timestamp"]
    assert headers["webhook-signature"] != first["headers"]["webhook-signature"]
    assert Webhook(hook["secret"]).verify(again["body"], headers)["event"] == "role.created"
    assert verify(hook["secret"], again["body"], headers["X-Service-Signature"])
    assert headers["X-Service-Event"] == "role.created"

    log = delivery_log(client, manager, application["_id"], hook["id"])
    assert [(d["id"], d["status"], d["redelivery_of"]) for d in log] == [
        (new["id"], "delivered", original["id"]), (original["id"], "delivered", None)]


def test_a_redelivery_is_signed_with_the_current_secret(client, manager, hooks_url, application, delivered,
                                                        receiver, pump):
    hook, original = delivered
    rotated = client.simulate_post(f"{hooks_url}/{hook['id']}/rotate-secret", json={}, headers=manager)
    secret = rotated.json["data"]["secret"]
    response = client.simulate_post(redeliver_url(application["_id"], hook["id"], original["id"]), json={},
                                    headers=manager)
    assert response.status_code == 202, response.text
    assert pump() == 1
    Webhook(secret).verify(receiver.requests[-1]["body"], receiver.requests[-1]["headers"])


def test_ids_of_another_webhook_application_or_kind_are_404_and_queue_nothing(
        client, ctx, manager, application, make_application, make_api_key, make_webhook, make_role, delivered,
        receiver, pump):
    hook, original = delivered
    sibling = make_webhook(receiver.url, events=["role.created"])  # same application, no delivery of its own yet
    other_app = make_application()
    other_key = {"Authorization": f"Bearer {make_api_key(other_app, permissions=['webhooks:manage'])}"}
    other_hook = client.simulate_post(f"{V1.format(other_app['_id'])}/webhooks", headers=other_key,
                                      json={"url": receiver.url, "events": ["role.created"]}).json["data"]
    make_role(other_app, "editor", ["posts:edit"])
    pump()
    [foreign] = delivery_log(client, other_key, other_app["_id"], other_hook["id"])
    # A delivery of another kind filed, as no real one is, under this webhook: still not an event's delivery.
    ctx.store["webhook_deliveries"].insert_one({**ctx.store["webhook_deliveries"].find_one({"_id": original["id"]}),
                                                "_id": UNKNOWN, "kind": "back-channel"})
    before = queued(ctx)

    app_id = application["_id"]
    for webhook_id, delivery_id in ((sibling["id"], original["id"]),  # another webhook's delivery
                                    (hook["id"], foreign["id"]),  # another application's
                                    (hook["id"], UNKNOWN),  # of another kind
                                    (hook["id"], "00000000-0000-4000-8000-0000000000ff"), (hook["id"], "not-a-uuid")):
        response = client.simulate_post(redeliver_url(app_id, webhook_id, delivery_id), json={}, headers=manager)
        assert response.status_code == 404, (webhook_id, delivery_id, response.text)
        error = response.json["error"]
        assert error["code"] == "WEBHOOK_DELIVERY_NOT_FOUND"
        assert error["details"] == {"webhook_id": webhook_id, "delivery_id": delivery_id}
    # Another application's webhook, named under this application, is no webhook of it.
    response = client.simulate_post(redeliver_url(app_id, other_hook["id"], foreign["id"]), json={}, headers=manager)
    assert response.status_code == 404 and response.json["error"]["code"] == "WEBHOOK_NOT_FOUND"
    assert queued(ctx) == before
    assert pump() == 0


def test_a_disabled_webhook_is_409_and_queues_nothing(client, ctx, manager, hooks_url, application, delivered, pump):
    hook, original = delivered
    assert client.simulate_put(f"{hooks_url}/{hook['id']}", json={"is_active": False},
                               headers=manager).status_code == 200
    before = queued(ctx)
    response = client.simulate_post(redeliver_url(application["_id"], hook["id"], original["id"]), json={},
                                    headers=manager)
    assert response.status_code == 409, response.text
    assert response.json["error"]["code"] == "WEBHOOK_INACTIVE"
    assert response.json["error"]["details"] == {"webhook_id": hook["id"]}
    assert queued(ctx) == before


def test_a_delivery_of_a_kind_the_webhook_no_longer_subscribes_to_is_409_and_queues_nothing(
        client, ctx, manager, hooks_url, application, delivered, receiver, pump):
    """docs/webhooks.md, "Redelivery": the receiver opted out of the kind (PUT events
    replaced them) and the worker would cancel the redelivery unsent, so it is refused in
    the spec's envelope, naming the webhook and the event, and nothing is queued; with
    the kind added back (an explicit change of what the webhook receives) it is queued
    and sent.  The route's documented errors name the code."""
    hook, original = delivered
    url = redeliver_url(application["_id"], hook["id"], original["id"])
    assert client.simulate_put(f"{hooks_url}/{hook['id']}", json={"events": ["role.deleted"]},
                               headers=manager).status_code == 200
    before = queued(ctx)
    response = client.simulate_post(url, json={}, headers=manager)
    assert response.status_code == 409, response.text
    error = response.json["error"]
    assert error["code"] == "WEBHOOK_EVENT_NOT_SUBSCRIBED" and "role.created" in error["message"]
    assert error["details"] == {"webhook_id": hook["id"], "event": "role.created"}
    assert queued(ctx) == before and pump() == 0
    assert client.simulate_put(f"{hooks_url}/{hook['id']}", json={"events": ["role.deleted", "role.created"]},
                               headers=manager).status_code == 200
    assert client.simulate_post(url, json={}, headers=manager).status_code == 202
    assert pump() == 1 and receiver.events() == ["role.created", "role.created"]
    operation = client.simulate_get("/openapi.json").json["paths"][
        "/api/v1/applications/{applicationId}/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver"]["post"]
    assert "WEBHOOK_EVENT_NOT_SUBSCRIBED" in str(operation["responses"]["409"])


def test_the_permission_webhooks_manage_is_required(client, ctx, application, make_api_key, delivered, pump):
    hook, original = delivered
    before = queued(ctx)
    url = redeliver_url(application["_id"], hook["id"], original["id"])
    reader = {"Authorization": f"Bearer {make_api_key(application, permissions=['roles:read'])}"}
    response = client.simulate_post(url, json={}, headers=reader)
    assert response.status_code == 403, response.text
    assert response.json["error"]["details"]["required_permission"] == "webhooks:manage"
    assert client.simulate_post(url, json={}).status_code == 401
    assert queued(ctx) == before


def test_the_route_and_its_errors_are_in_the_openapi_document(client):
    document = client.simulate_get("/openapi.json").json
    operation = document["paths"]["/api/v1/applications/{applicationId}/webhooks/{webhookId}/deliveries/"
                                  "{deliveryId}/redeliver"]["post"]
    assert {"202", "401", "403", "404", "409"} <= set(operation["responses"])
    text = str(operation["responses"])
    for code in ("WEBHOOK_NOT_FOUND", "WEBHOOK_DELIVERY_NOT_FOUND", "WEBHOOK_INACTIVE"):
        assert code in text


def test_a_redelivery_is_audited(client, ctx, manager, application, delivered):
    hook, original = delivered
    response = client.simulate_post(redeliver_url(application["_id"], hook["id"], original["id"]), json={},
                                    headers=manager)
    assert response.status_code == 202, response.text
    [record] = ctx.audit.page(APPLICATION, application["_id"], {"action": "webhook.redelivered"}, None, 10)[0]
    assert record["target"]["id"] == hook["id"] and record["result"]["status"] == "success"
    assert record["data"] == {"delivery_id": response.json["data"]["id"], "redelivery_of": original["id"],
                              "event": "role.created"}


def test_a_redelivery_after_account_deletion_sends_the_id_not_the_email_and_name(client, ctx, manager, application,
                                                                              make_webhook, make_user, receiver, pump):
    """The delivery log keeps each body for IAMGATE_WEBHOOK_DELIVERY_RETENTION: account
    deletion forgets the person there as in the audit records, and a redelivery is still
    the logged body, byte for byte."""
    hook = make_webhook(receiver.url, events=["user.created"])
    user = make_user(application, email="erase.me@example.com", name="Erase Me")
    make_user(application, email="kept@example.com", name="Kept")
    assert pump() == 2
    [sent] = [r["body"] for r in receiver.requests if b"erase.me@example.com" in r["body"]]
    original = ctx.store["webhook_deliveries"].find_one({"body": sent.decode()})

    ctx.selfservice.delete_account(application["_id"], user["id"])
    assert "erase.me@example.com" not in ctx.store["webhook_deliveries"].find_one({"_id": original["_id"]})["body"]
    response = client.simulate_post(redeliver_url(application["_id"], hook["id"], original["_id"]), json={},
                                    headers=manager)
    assert response.status_code == 202, response.text
    assert pump() == 1

    pseudonym = f'"{user["id"]}"'.encode()
    again = receiver.requests[-1]["body"]
    assert again == sent.replace(b'"erase.me@example.com"', pseudonym).replace(b'"Erase Me"', pseudonym)
    assert json.loads(again)["data"] == {"user_id": user["id"], "email": user["id"], "name": user["id"]}
    bodies = [d["body"] for d in ctx.store["webhook_deliveries"].find({})]
    assert len(bodies) == 3 and not [b for b in bodies if "erase.me@example.com" in b or "Erase Me" in b]
    assert len([b for b in bodies if "kept@example.com" in b]) == 1  # another user's delivery is left as it was
