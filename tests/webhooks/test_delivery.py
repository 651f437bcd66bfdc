"""Deliveries to a real HTTP receiver in the test process (spec "Events": payload,
headers, retries; docs/webhooks.md: HMAC key, retry_count, auto-disable, inactive
webhooks).  Dispatch and delivery run one step at a time (``pump``) on the FakeClock."""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime

import pytest

from controlplane.webhooks.delivery import DISABLE_AFTER
from tests.dashboard.test_application_deletion import Crash, interrupt_the_purge
from tests.webhooks.conftest import verify


def test_signature_and_headers(ctx, application, make_webhook, receiver, make_user, pump):
    hook = make_webhook(receiver.url, events=["user.created"])
    user = make_user(application, email="ada@example.com", name="Ada")
    assert pump() == 1
    [request] = receiver.requests
    headers, body = request["headers"], request["body"]
    assert verify(hook["secret"], body, headers["X-Service-Signature"])
    assert not verify(hook["secret"], body + b" ", headers["X-Service-Signature"])
    assert headers["X-Service-Event"] == "user.created"
    assert headers["Content-Type"] == "application/json"
    assert abs(int(headers["X-Service-Timestamp"]) - ctx.clock().timestamp()) <= 1
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert headers["X-Service-Delivery-Id"] == delivery["_id"]
    payload = json.loads(body)
    assert set(payload) == {"event", "timestamp", "data"}
    assert payload["event"] == "user.created"
    assert datetime.fromisoformat(payload["timestamp"]).utcoffset() is not None
    assert payload["data"] == {"user_id": user["id"], "email": "ada@example.com", "name": "Ada"}


def test_rotated_secret_signs_later_deliveries(client, manager, hooks_url, make_webhook, receiver, make_role,
                                               application, pump):
    hook = make_webhook(receiver.url, events=["role.created"])
    secret = client.simulate_post(f"{hooks_url}/{hook['id']}/rotate-secret", json={},
                                  headers=manager).json["data"]["secret"]
    make_role(application, "editor", ["posts:edit"])
    pump()
    [request] = receiver.requests
    assert verify(secret, request["body"], request["headers"]["X-Service-Signature"])
    assert not verify(hook["secret"], request["body"], request["headers"]["X-Service-Signature"])


def test_only_subscribed_active_webhooks_of_the_application_receive(ctx, client, manager, hooks_url, make_webhook,
                                                                    make_application, make_role, application, pump):
    from tests.webhooks.conftest import Receiver

    receivers = [Receiver() for _ in range(4)]
    try:
        subscribed = make_webhook(receivers[0].url, events=["role.created"])
        make_webhook(receivers[1].url, events=["role.deleted"])
        inactive = make_webhook(receivers[2].url, events=["role.created"])
        client.simulate_put(f"{hooks_url}/{inactive['id']}", json={"is_active": False}, headers=manager)
        other = make_application()
        ctx.webhooks.management.create(other["_id"], {"url": receivers[3].url, "events": ["role.created"]})
        make_role(application, "editor", ["posts:edit"])
        pump()
        assert [len(r.requests) for r in receivers] == [1, 0, 0, 0]
        assert ctx.store["webhook_deliveries"].count_documents({}) == 1  # none for the inactive one
        assert ctx.store["webhook_deliveries"].find_one({})["webhook_id"] == subscribed["id"]
    finally:
        for r in receivers:
            r.close()


def test_events_before_the_webhook_existed_are_not_delivered(ctx, make_webhook, receiver, make_role, application,
                                                              pump):
    make_role(application, "before", ["a:b"])
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "after", ["a:b"])
    pump()
    assert [json.loads(r["body"])["data"]["name"] for r in receiver.requests] == ["after"]


def test_redispatch_never_duplicates(ctx, make_webhook, receiver, make_role, application, pump):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    # A restarted dispatcher whose cursor was lost goes over the same events again.
    ctx.store["webhook_dispatch"].delete_many({})
    from controlplane.webhooks.dispatcher import Dispatcher

    again = Dispatcher(ctx.webhooks.dispatcher.store, ctx.events, ctx.clock, kinds=["role.created"],
                       retention_seconds=3600)
    assert again.catch_up() == 0
    assert pump() == 0
    assert len(receiver.requests) == 1


def _redispatch(ctx):
    """A dispatcher that lost its cursor goes over the whole change log again."""
    from controlplane.webhooks.dispatcher import Dispatcher

    ctx.store["webhook_dispatch"].delete_many({})
    return Dispatcher(ctx.webhooks.dispatcher.store, ctx.events, ctx.clock, kinds=["role.created"],
                      retention_seconds=3600).catch_up()


def test_a_dispatch_that_died_between_its_writes_is_queued_by_the_next(ctx, make_webhook, receiver, make_role,
                                                                       application, pump):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    ctx.webhooks.dispatcher.catch_up()
    ctx.store["webhook_queue"].delete_many({})  # the log record was written, the queue entry never was
    assert pump() == 0
    assert _redispatch(ctx) == 0  # no new delivery: the same one, queued again
    assert pump() == 1
    [request] = receiver.requests
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert request["headers"]["X-Service-Delivery-Id"] == delivery["_id"] and delivery["status"] == "delivered"


def test_a_queue_entry_of_a_finished_delivery_is_removed_unsent(ctx, make_webhook, receiver, make_role, application,
                                                                pump):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    delivery = ctx.store["webhook_deliveries"].find_one({})
    # A worker that died between writing the result and removing the queue entry.
    ctx.store["webhook_queue"].insert_one({"_id": delivery["_id"], "app_id": delivery["app_id"],
                                           "webhook_id": delivery["webhook_id"], "due_at": ctx.clock(),
                                           "lease": None})
    assert pump() == 0
    assert len(receiver.requests) == 1 and ctx.store["webhook_queue"].count_documents({}) == 0
    assert ctx.store["webhook_deliveries"].find_one({})["status"] == "delivered"


def test_claims_run_on_the_queue_not_the_log(ctx, make_webhook, receiver, make_role, application, pump):
    make_webhook(receiver.url, events=["role.created"])
    for name in ("one", "two", "three"):
        make_role(application, name, ["a:b"])
    ctx.webhooks.dispatcher.catch_up()
    assert ctx.store["webhook_queue"].count_documents({}) == 3
    pump()
    assert ctx.store["webhook_queue"].count_documents({}) == 0  # finished deliveries stay in the log only
    assert ctx.store["webhook_deliveries"].count_documents({"status": "delivered"}) == 3


def test_a_restarted_dispatcher_catches_up_from_its_cursor(ctx, make_webhook, receiver, make_role, application):
    from controlplane.webhooks.dispatcher import Dispatcher

    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "one", ["a:b"])
    ctx.webhooks.dispatcher.catch_up()
    make_role(application, "two", ["a:b"])  # emitted while no dispatcher runs
    make_role(application, "three", ["a:b"])
    restarted = Dispatcher(ctx.webhooks.dispatcher.store, ctx.events, ctx.clock, kinds=["role.created"],
                           retention_seconds=3600)
    ctx.tailer.last_seq = ctx.events.head()
    restarted.attach(ctx.tailer)
    names = [json.loads(d["body"])["data"]["name"]
             for d in ctx.store["webhook_deliveries"].find({}).sort("event_seq", 1)]
    assert names == ["one", "two", "three"]
    make_role(application, "four", ["a:b"])
    ctx.tailer.poll_once()  # the tailer hands new events to the attached dispatcher
    assert ctx.store["webhook_deliveries"].count_documents({}) == 4


def test_retry_schedule_on_500(ctx, clock, make_webhook, receiver, make_role, application, pump):
    receiver.statuses = [500, 500, 503, 500, 200]
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    start = clock()
    assert pump() == 1
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["status"] == "pending" and delivery["retry_count"] == 0 and delivery["response_status"] == 500
    seen = [0]
    for delay in (30, 300, 1800):
        clock.advance(delay - 1)
        assert pump() == 0  # not due yet
        clock.advance(1)
        assert pump() == 1
        seen.append((clock() - start).total_seconds())
    assert seen == [0, 30, 330, 2130]
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["status"] == "failed" and delivery["retry_count"] == 3
    assert delivery["delivered_at"] is None and delivery["response_status"] == 500
    ids = {r["headers"]["X-Service-Delivery-Id"] for r in receiver.requests}
    assert ids == {delivery["_id"]} and len(receiver.requests) == 4
    clock.advance(100000)
    assert pump() == 0  # exhausted: three retries, no fourth
    metrics = ctx.metrics.render()[0].decode()
    assert "iamgate_webhook_delivery_failures_total 4.0" in metrics
    assert "iamgate_webhook_delivery_retries_total 3.0" in metrics


def test_a_retry_that_succeeds_is_delivered(ctx, clock, make_webhook, receiver, make_role, application, pump):
    receiver.statuses = [500, 204]
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    clock.advance(30)
    pump()
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["status"] == "delivered" and delivery["response_status"] == 204 and delivery["retry_count"] == 1
    assert delivery["delivered_at"] is not None
    assert "iamgate_webhook_deliveries_sent_total 1.0" in ctx.metrics.render()[0].decode()


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True, "webhook_timeout": 1,
                                               "webhook_retry_delays": (2, 4)}])
def test_timeouts_are_failures_retried_on_the_configured_schedule(ctx, clock, make_webhook, receiver, make_role,
                                                                   application, pump):
    receiver.delay = 2.5  # longer than IAMGATE_WEBHOOK_TIMEOUT=1
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    started = time.monotonic()
    pump()
    assert time.monotonic() - started < 2.4
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["response_status"] is None and delivery["last_error"] == "timeout"
    queued = ctx.store["webhook_queue"].find_one({"_id": delivery["_id"]})
    assert abs((queued["due_at"] - clock()).total_seconds() - 2) < 0.01
    receiver.delay = 0
    clock.advance(2)
    pump()
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["status"] == "delivered" and delivery["retry_count"] == 1


def test_redirects_are_not_followed(ctx, make_webhook, receiver, make_role, application, pump):
    from tests.webhooks.conftest import Receiver

    inner = Receiver()
    try:
        receiver.statuses = [302]
        receiver.redirect_to = inner.url
        make_webhook(receiver.url, events=["role.created"])
        make_role(application, "editor", ["posts:edit"])
        pump()
        assert inner.requests == []
        delivery = ctx.store["webhook_deliveries"].find_one({})
        assert delivery["response_status"] == 302 and delivery["status"] == "pending"  # a failure, retried
    finally:
        inner.close()


def test_no_cookie_rides_from_one_delivery_to_another(ctx, make_webhook, receiver, make_application, make_role,
                                                     application, pump):
    """Deliveries keep no cookies: one a receiver sets in its answer to this tenant's
    delivery is not sent back, neither with the next delivery nor with another tenant's to
    the same host."""
    receiver.headers = {"Set-Cookie": "planted=by-the-receiver; Path=/"}
    make_webhook(receiver.url, events=["role.created"])
    other = make_application()
    ctx.webhooks.management.create(other["_id"], {"url": receiver.url + "?other", "events": ["role.created"]})
    make_role(application, "first", ["a:b"])
    pump()
    make_role(other, "second", ["a:b"])
    make_role(application, "third", ["a:b"])
    pump()
    assert len(receiver.requests) == 3
    assert [r["headers"].get("Cookie") for r in receiver.requests] == [None, None, None]


def test_deleting_the_webhook_cancels_pending_retries(ctx, clock, client, manager, hooks_url, make_webhook, receiver,
                                                      make_role, application, pump):
    receiver.statuses = [500]
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    assert client.simulate_delete(f"{hooks_url}/{hook['id']}", headers=manager).status_code == 204
    clock.advance(3600)
    assert pump() == 0
    assert len(receiver.requests) == 1
    assert ctx.store["webhook_deliveries"].count_documents({}) == 0


def test_a_worker_holding_a_delivery_of_a_deleted_webhook_drops_it(ctx, make_webhook, receiver, make_role,
                                                                   application):
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    ctx.webhooks.dispatcher.catch_up()
    claimed = ctx.webhooks.worker.store.claim(ctx.clock(), ctx.clock(), per_application=1)
    ctx.store["webhooks"].delete_one({"_id": hook["id"]})  # deleted between claim and send
    ctx.webhooks.worker.attempt(claimed)
    assert receiver.requests == [] and ctx.store["webhook_deliveries"].count_documents({}) == 0


def test_deactivating_cancels_pending_retries(ctx, clock, client, manager, hooks_url, make_webhook, receiver,
                                              make_role, application, pump):
    receiver.statuses = [500]
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    client.simulate_put(f"{hooks_url}/{hook['id']}", json={"is_active": False}, headers=manager)
    clock.advance(3600)
    pump()
    assert len(receiver.requests) == 1
    [delivery] = client.simulate_get(f"{hooks_url}/{hook['id']}/deliveries", headers=manager).json["data"]
    assert delivery["status"] == "cancelled"


def deliveries_of(client, manager, hooks_url, hook_id) -> list[dict]:
    response = client.simulate_get(f"{hooks_url}/{hook_id}/deliveries", headers=manager)
    assert response.status_code == 200, response.text
    return response.json["data"]


def set_active(client, manager, hooks_url, hook_id, active: bool) -> None:
    response = client.simulate_put(f"{hooks_url}/{hook_id}", json={"is_active": active}, headers=manager)
    assert response.status_code == 200 and response.json["data"]["is_active"] is active, response.text


def test_deactivating_cancels_pending_retries_even_if_reactivated_before_they_fall_due(
        ctx, clock, client, manager, hooks_url, make_webhook, receiver, make_role, application, pump):
    """docs/webhooks.md, "Delivery": deactivating a webhook cancels its pending deliveries
    (status cancelled, kept in the log) when it is deactivated, not when the worker
    reaches them: switched off and on again before a retry falls due (an endpoint fixed
    and re-enabled), the webhook gets no retry of what was queued before, and the
    application is left no queue entry or lane for them."""
    receiver.statuses = [500, 200]
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    assert len(receiver.requests) == 1  # the first attempt failed; a retry is pending
    set_active(client, manager, hooks_url, hook["id"], False)
    [delivery] = ctx.store["webhook_deliveries"].find({})
    assert (delivery["status"], delivery["last_error"]) == ("cancelled", "webhook inactive")
    for leftover in ("webhook_queue", "webhook_lanes", "webhook_slots"):
        assert ctx.store[leftover].count_documents({}) == 0, leftover
    set_active(client, manager, hooks_url, hook["id"], True)
    clock.advance(3600)
    pump()
    [delivery] = deliveries_of(client, manager, hooks_url, hook["id"])
    assert (len(receiver.requests), delivery["status"]) == (1, "cancelled"), (
        f"the retry queued before the deactivation was sent after it: {len(receiver.requests)} requests, "
        f"status {delivery['status']}")


def test_a_retry_queued_by_an_attempt_in_flight_at_the_deactivation_is_cancelled(
        ctx, clock, client, manager, hooks_url, make_webhook, receiver, make_role, application, monkeypatch):
    """An attempt already sending when the webhook is deactivated read it active; the
    deactivation's cancel passes its held delivery by.  When that attempt fails, the
    retry it queues is cancelled there and then, so re-enabling the webhook before the
    retry falls due does not bring it back."""
    receiver.statuses = [500, 200]
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    ctx.webhooks.dispatcher.catch_up()
    worker = ctx.webhooks.worker
    post = worker.sender.post

    def deactivated_while_sending(*args, **kwargs):
        set_active(client, manager, hooks_url, hook["id"], False)
        return post(*args, **kwargs)

    monkeypatch.setattr(worker.sender, "post", deactivated_while_sending)
    assert worker.run_once()
    monkeypatch.setattr(worker.sender, "post", post)
    set_active(client, manager, hooks_url, hook["id"], True)
    clock.advance(3600)
    while worker.run_once():
        pass
    [delivery] = deliveries_of(client, manager, hooks_url, hook["id"])
    assert (len(receiver.requests), delivery["status"]) == (1, "cancelled")
    assert ctx.store["webhook_queue"].count_documents({}) == 0


def test_a_webhook_unsubscribed_from_an_event_kind_gets_no_more_attempts_of_it(
        ctx, clock, client, manager, hooks_url, make_webhook, receiver, make_role, application, pump):
    """docs/webhooks.md, "Unsubscribing": a webhook subscribed to role.created, then
    changed (PUT events replaces them) to role.deleted only, gets no retry of a
    role.created queued before: the delivery ends cancelled, unsent, saying why, rather
    than being sent for up to IAMGATE_WEBHOOK_RETRY_DELAYS (35 min by default) with no
    way for the receiver to stop it short of deleting the webhook."""
    receiver.statuses = [500, 200]
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    assert receiver.events() == ["role.created"]
    changed = client.simulate_put(f"{hooks_url}/{hook['id']}", json={"events": ["role.deleted"]}, headers=manager)
    assert changed.status_code == 200 and changed.json["data"]["events"] == ["role.deleted"]
    clock.advance(3600)
    pump()
    later = [json.loads(r["body"])["event"] for r in receiver.requests[1:]]
    assert "role.created" not in later, f"after unsubscribing from role.created the webhook still received {later}"
    [delivery] = ctx.store["webhook_deliveries"].find({})
    assert (delivery["status"], delivery["attempts"], delivery["last_error"]) == (
        "cancelled", 1, "webhook no longer subscribed to role.created")
    assert ctx.store["webhook_queue"].count_documents({}) == 0


def test_auto_disable_cancels_the_webhooks_pending_deliveries(ctx, clock, client, manager, hooks_url, make_webhook,
                                                              receiver, application, make_role, pump):
    """The auto-disable deactivates the webhook as a PUT does: the retry of the attempt
    that disabled it and the other deliveries queued for it are cancelled at once, so an
    endpoint fixed and re-enabled before they fall due gets none of them."""
    receiver.statuses = [500, 200]
    hook = make_webhook(receiver.url, events=["role.created"])
    ctx.store["webhooks"].update_one({"_id": hook["id"]}, {"$set": {"consecutive_failures": DISABLE_AFTER - 1}})
    make_role(application, "first", ["a:b"])
    make_role(application, "second", ["a:b"])
    ctx.webhooks.dispatcher.catch_up()
    assert ctx.webhooks.worker.run_once()  # the first's attempt: the 100th failure in a row
    assert ctx.store["webhooks"].find_one({"_id": hook["id"]})["is_active"] is False
    set_active(client, manager, hooks_url, hook["id"], True)
    clock.advance(3600)
    pump()
    assert len(receiver.requests) == 1
    assert [(d["status"], d["last_error"]) for d in ctx.store["webhook_deliveries"].find({})] == [
        ("cancelled", "webhook inactive")] * 2


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True, "webhook_retry_delays": ()}])
def test_auto_disable_after_100_failures_in_a_row(ctx, client, manager, hooks_url, make_webhook, receiver,
                                                  application, make_role, pump, capsys):
    receiver.statuses = [500]
    hook = make_webhook(receiver.url, events=["role.created"])
    for i in range(DISABLE_AFTER - 1):
        make_role(application, f"r{i}", ["a:b"])
    pump()
    assert client.simulate_get(f"{hooks_url}/{hook['id']}", headers=manager).json["data"]["is_active"] is True
    make_role(application, "last", ["a:b"])
    pump()
    assert client.simulate_get(f"{hooks_url}/{hook['id']}", headers=manager).json["data"]["is_active"] is False
    make_role(application, "after", ["a:b"])
    pump()
    assert len(receiver.requests) == DISABLE_AFTER  # an inactive webhook gets no more deliveries
    assert ctx.store["webhook_deliveries"].count_documents({}) == DISABLE_AFTER
    # Re-enabling starts a new streak.
    client.simulate_put(f"{hooks_url}/{hook['id']}", json={"is_active": True}, headers=manager)
    assert ctx.store["webhooks"].find_one({"_id": hook["id"]})["consecutive_failures"] == 0


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True, "webhook_retry_delays": ()}])
def test_the_auto_disable_warning_names_the_host_not_the_url(ctx, make_webhook, receiver, application, make_role,
                                                             pump, caplog):
    """A webhook URL may carry the receiver's token (docs/security.md): audit records and
    traces leave it out, and so does the log."""
    receiver.statuses = [500]
    hook = make_webhook(receiver.url + "?token=s3cr3t-receiver-token", events=["role.created"])
    ctx.store["webhooks"].update_one({"_id": hook["id"]}, {"$set": {"consecutive_failures": DISABLE_AFTER - 1}})
    make_role(application, "last", ["a:b"])
    with caplog.at_level(logging.INFO):
        pump()
    assert ctx.store["webhooks"].find_one({"_id": hook["id"]})["is_active"] is False
    for record in caplog.records:
        assert "s3cr3t-receiver-token" not in json.dumps(record.__dict__, default=str), record.getMessage()
    [warning] = [r for r in caplog.records if r.getMessage().startswith("webhook disabled")]
    assert warning.host == "127.0.0.1" and warning.webhook_id == hook["id"]


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True, "webhook_retry_delays": ()}])
def test_a_success_resets_the_failure_streak(ctx, make_webhook, receiver, application, make_role, pump):
    receiver.statuses = [500] * (DISABLE_AFTER - 1) + [200] + [500] * 5
    hook = make_webhook(receiver.url, events=["role.created"])
    for i in range(DISABLE_AFTER + 5):
        make_role(application, f"r{i}", ["a:b"])
    pump()
    stored = ctx.store["webhooks"].find_one({"_id": hook["id"]})
    assert stored["is_active"] is True and stored["consecutive_failures"] == 5


def test_delivery_log_order_and_fields(ctx, clock, client, manager, hooks_url, make_webhook, receiver, make_role,
                                       application, pump):
    hook = make_webhook(receiver.url, events=["role.created"])
    receiver.statuses = [200] * 54 + [500]
    for i in range(55):
        make_role(application, f"role{i:02d}", ["a:b"])
        clock.advance(1)
    pump()
    resp = client.simulate_get(f"{hooks_url}/{hook['id']}/deliveries", headers=manager)
    assert resp.status_code == 200
    log = resp.json["data"]
    assert len(log) == 50
    assert set(log[0]) == {"id", "webhook_id", "event", "status", "response_status", "delivered_at", "retry_count",
                           "created_at", "redelivery_of"}
    created = [d["created_at"] for d in log]
    assert created == sorted(created, reverse=True)
    seqs = [ctx.store["webhook_deliveries"].find_one({"_id": d["id"]})["event_seq"] for d in log]
    assert seqs == sorted(seqs, reverse=True)
    newest = log[0]
    assert newest["status"] == "pending" and newest["response_status"] == 500 and newest["delivered_at"] is None
    assert newest["retry_count"] == 0
    assert all(d["status"] == "delivered" and d["response_status"] == 200 and d["delivered_at"] for d in log[1:])
    assert all(d["event"] == "role.created" and d["webhook_id"] == hook["id"] for d in log)


def test_queue_depth_metric(ctx, make_webhook, receiver, make_role, application, pump):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "a", ["a:b"])
    make_role(application, "b", ["a:b"])
    ctx.webhooks.dispatcher.catch_up()
    assert "iamgate_webhook_queue_depth 2.0" in ctx.metrics.render()[0].decode()
    pump()
    assert "iamgate_webhook_queue_depth 0.0" in ctx.metrics.render()[0].decode()


def test_deliveries_expire_after_the_retention_period(ctx, make_webhook, receiver, make_role, application):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "a", ["a:b"])
    ctx.webhooks.dispatcher.catch_up()
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert (delivery["expires_at"] - delivery["created_at"]).total_seconds() == ctx.config.webhook_delivery_retention
    ttl = [i for i in ctx.store["webhook_deliveries"].list_indexes() if i.get("expireAfterSeconds") == 0]
    assert ttl and list(ttl[0]["key"]) == ["expires_at"]


class _Dribbler:
    """A receiver that answers one byte at a time, each well within the per-read timeout:
    the head (``part="head"``) or the body after a complete head (``part="body"``)."""

    def __init__(self, part, every=0.2, seconds=6.0):
        import socket

        self._part, self._every, self._seconds = part, every, seconds
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/hook"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        try:
            conn, _ = self._sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nX-Slow: " + b"a" * 100 + b"\r\n\r\n"
            if self._part == "body":
                conn.sendall(head)
                trickle = b"x" * 1000
            else:
                trickle = head
            deadline = time.monotonic() + self._seconds
            for byte in trickle:
                if self._stop.wait(self._every) or time.monotonic() > deadline:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self):
        self._stop.set()
        self._sock.close()
        self._thread.join(5)


@pytest.mark.parametrize("part", ["head", "body"])
def test_the_timeout_is_a_total_deadline_for_a_dribbling_receiver(ctx, make_webhook, make_role, application, pump,
                                                                  part):
    dribbler = _Dribbler(part)  # a byte every 0.2 s: no single read waits 1 s (IAMGATE_WEBHOOK_TIMEOUT)
    try:
        make_webhook(dribbler.url, events=["role.created"])
        make_role(application, "editor", ["posts:edit"])
        started = time.monotonic()
        pump()
        elapsed = time.monotonic() - started
    finally:
        dribbler.close()
    assert elapsed < 2.5
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["status"] == "pending" and delivery["attempts"] == 1  # a failed attempt, retried later
    assert delivery["response_status"] is None and delivery["last_error"] == "timeout"


def test_the_cursor_is_written_at_most_every_cursor_every_while_events_flow(ctx, make_webhook, receiver, make_role,
                                                                            application, pump, monkeypatch):
    """One write of the cursor per burst, not per event; a restart from the lagging cursor
    goes over the burst again and queues nothing twice."""
    from controlplane.webhooks import dispatcher as dispatch

    make_webhook(receiver.url, events=["role.created"])
    ctx.tailer.last_seq = ctx.events.head()
    ctx.webhooks.dispatcher.attach(ctx.tailer)  # as a running process follows the log
    store, writes = ctx.webhooks.dispatcher.store, []
    advance = store.advance_cursor
    monkeypatch.setattr(store, "advance_cursor", lambda seq: writes.append(seq) or advance(seq))
    monkeypatch.setattr(dispatch, "CURSOR_EVERY", 3600.0)  # the whole burst within one interval
    ctx.webhooks.dispatcher._saved_at = float("-inf")
    for name in ("one", "two", "three", "four"):
        make_role(application, name, ["a:b"])
    ctx.tailer.poll_once()
    assert len(writes) == 1  # the burst's first event only
    assert ctx.store["webhook_deliveries"].count_documents({}) == 4
    assert pump() == 4
    restarted = dispatch.Dispatcher(store, ctx.events, ctx.clock, kinds=["role.created"], retention_seconds=3600)
    assert restarted.catch_up() == 0  # from the lagging cursor: the same deliveries, already sent
    assert pump() == 0 and len(receiver.requests) == 4
    assert store.cursor(0) == ctx.events.head()  # a catch-up ends with its cursor written


def test_a_poll_reads_each_applications_webhooks_once(ctx, make_webhook, receiver, make_role, application,
                                                      make_application, pump, monkeypatch):
    """The dispatcher reads an application's active webhooks once for a poll's events; a
    webhook created after that poll gets the events that follow it, none before."""
    other = make_application("Other")
    make_webhook(receiver.url, events=["role.created"])
    ctx.tailer.last_seq = ctx.events.head()
    ctx.webhooks.dispatcher.attach(ctx.tailer)
    store, reads = ctx.webhooks.dispatcher.store, []
    active = store.active_webhooks
    monkeypatch.setattr(store, "active_webhooks", lambda app_id: reads.append(app_id) or active(app_id))
    for name in ("one", "two", "three"):
        make_role(application, name, ["a:b"])
        make_role(other, name, ["a:b"])
    ctx.tailer.poll_once()
    assert sorted(reads) == sorted([application["_id"], other["_id"]])
    assert pump() == 3
    late = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "four", ["a:b"])
    ctx.tailer.poll_once()
    pump()
    by_webhook = {}
    for delivery in ctx.store["webhook_deliveries"].find({}):
        by_webhook.setdefault(delivery["webhook_id"], []).append(json.loads(delivery["body"])["data"]["name"])
    assert sorted(by_webhook.pop(late["id"])) == ["four"]
    assert sorted(by_webhook.popitem()[1]) == ["four", "one", "three", "two"]


def test_a_retry_after_account_deletion_sends_the_id_not_the_email_and_name(ctx, clock, make_webhook, receiver,
                                                                            make_user, application, pump):
    receiver.statuses = [500, 200]
    make_webhook(receiver.url, events=["user.created"])
    user = make_user(application, email="erase.me@example.com", name="Erase Me")
    assert pump() == 1
    ctx.selfservice.delete_account(application["_id"], user["id"])
    clock.advance(30)
    assert pump() == 1
    first, retry = receiver.requests
    assert json.loads(first["body"])["data"]["email"] == "erase.me@example.com"
    assert json.loads(retry["body"])["data"] == {"user_id": user["id"], "email": user["id"], "name": user["id"]}
    assert retry["headers"]["X-Service-Delivery-Id"] == first["headers"]["X-Service-Delivery-Id"]
    assert ctx.store["webhook_deliveries"].find_one({})["status"] == "delivered"


def test_a_delivery_written_just_after_the_account_deletion_forgets_the_person_at_user_deleted(
        ctx, make_webhook, receiver, make_user, application, pump):
    """The dispatcher read user.created before the deletion rewrote it and writes its
    delivery after the deletion rewrote the log: the user.deleted event that follows
    rewrites it."""
    make_webhook(receiver.url, events=["user.created"])
    ctx.webhooks.dispatcher.catch_up()
    head = ctx.events.head()
    user = make_user(application, email="erase.me@example.com", name="Erase Me")
    read_before = ctx.events.read_after(head)
    ctx.selfservice.delete_account(application["_id"], user["id"])

    ctx.webhooks.dispatcher.on_events([e for e in read_before if e.type == "user.created"])
    assert "erase.me@example.com" in ctx.store["webhook_deliveries"].find_one({})["body"]
    assert pump() == 1
    [request] = receiver.requests
    assert json.loads(request["body"])["data"] == {"user_id": user["id"], "email": user["id"], "name": user["id"]}


def test_no_delivery_goes_out_for_an_application_whose_deletion_began(ctx, application, make_webhook, receiver,
                                                                     make_role, pump, monkeypatch):
    """From the moment an application's deletion begins it is invisible everywhere, even
    when its purge is cut short and finished at the next start: its queued deliveries
    (the tenant's events, its users' data among them) are cancelled unsent, as the
    back-channel notices of such an application are."""
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    ctx.webhooks.dispatcher.catch_up()  # the delivery is queued
    interrupt_the_purge(ctx, monkeypatch)
    with pytest.raises(Crash):
        ctx.applications.delete(application["_id"])

    pump()
    assert receiver.requests == []
    [delivery] = ctx.store["webhook_deliveries"].find({"app_id": application["_id"]})
    assert delivery["status"] == "cancelled" and delivery["last_error"] == "application deleted"
