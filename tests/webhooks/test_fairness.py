"""Per-application fairness of delivery (docs/webhooks.md, "Delivery", "In flight per
application"): at most IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION attempts of one
application are in flight at once, across every worker, so one tenant's slow receiver
cannot hold every delivery thread while the other tenants' deliveries wait.

The first two tests run real delivery threads against real receivers in the test
process, one of which never answers while the test runs; the others claim from the
store directly, on the FakeClock.
"""
from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from datetime import timedelta

import pytest

from controlplane.oidc.backchannel import KIND as BACKCHANNEL_KIND
from controlplane.webhooks.delivery import DeliveryMetrics, DeliveryWorker, Sender
from controlplane.webhooks.targets import TargetPolicy
from shared.config import Config, ConfigError
from shared.metrics import HttpMetrics
from shared.timeutil import utcnow
from tests.conftest import TEST_SECRET, in_parallel, make_config
from tests.e2e.processes import wait_until
from tests.webhooks.conftest import LEASE, Receiver, claim

CAP = 4  # IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION's default


@pytest.fixture
def config_overrides():
    # A receiver that hangs holds its attempt for the whole timeout: longer than the tests
    # wait, so what they see happens while the noisy application is saturated.
    return {"webhook_allow_private_targets": True, "webhook_timeout": 10, "webhook_retry_delays": (30, 300, 1800)}


@pytest.fixture
def hanging():
    """A receiver that never answers until the test ends."""
    local = Receiver()
    local.hold = threading.Event()
    yield local
    local.close()


def noisy_application(ctx, application, make_webhook, make_role, receiver, events=24):
    """``application`` with ``events`` deliveries queued to ``receiver``, the oldest in the queue."""
    make_webhook(receiver.url, events=["role.created"])
    for i in range(events):
        make_role(application, f"noisy{i}")
    ctx.webhooks.dispatcher.catch_up()


def test_a_healthy_tenant_is_delivered_while_another_saturates_its_slots(ctx, clock, application, make_application,
                                                                          make_webhook, make_role, hanging, receiver):
    noisy_application(ctx, application, make_webhook, make_role, hanging)
    clock.advance(1)
    healthy = make_application()
    ctx.webhooks.management.create(healthy["_id"], {"url": receiver.url, "events": ["role.created"]})
    make_role(healthy, "editor")
    ctx.webhooks.dispatcher.catch_up()
    worker = ctx.webhooks.worker  # IAMGATE_WEBHOOK_WORKER_THREADS (8) threads, from the configuration
    assert worker.threads == 8
    worker.start()
    try:
        assert wait_until(lambda: receiver.requests and len(hanging.requests) >= CAP, timeout=8), \
            "the healthy tenant's delivery waited"
        assert len(hanging.requests) == CAP
        # Every attempt of the noisy tenant is still in flight: none has even timed out.
        assert ctx.store["webhook_deliveries"].count_documents({"app_id": application["_id"],
                                                                "attempts": {"$gt": 0}}) == 0
    finally:
        hanging.hold.set()
        worker.stop()


def test_the_cap_holds_across_two_workers_sharing_the_store(ctx, application, make_webhook, make_role, hanging):
    noisy_application(ctx, application, make_webhook, make_role, hanging)
    store = ctx.webhooks.worker.store
    workers = [DeliveryWorker(store, ctx.box, TargetPolicy(allow_private=True), Sender(10), utcnow,
                              DeliveryMetrics(HttpMetrics("iamgate"), store), retry_delays=(30,), threads=8,
                              idle_wait=0.05).start() for _ in range(2)]
    try:
        assert wait_until(lambda: len(hanging.requests) >= CAP, timeout=10)
        time.sleep(0.5)  # 16 threads are free to claim more: none may
        assert len(hanging.requests) == CAP
        assert ctx.store["webhook_slots"].count_documents({"app_id": application["_id"]}) == CAP
    finally:
        hanging.hold.set()
        for worker in workers:
            worker.stop()


# --- claims, step by step on the FakeClock


def test_a_claim_passes_over_an_application_at_its_cap(ctx, clock, queue):
    store = queue("noisy", 50)
    queue("quiet", 1)
    claimed = [claim(store, clock, 2) for _ in range(4)]
    assert [d and d["app_id"] for d in claimed] == ["noisy", "noisy", "quiet", None]
    store.finish(claimed[0], {"status": "delivered"})  # a slot frees: the noisy application is served again
    assert claim(store, clock, 2)["app_id"] == "noisy"
    assert claim(store, clock, 2) is None


def test_below_the_cap_the_most_overdue_delivery_goes_first(ctx, clock, queue):
    store = queue("a")
    queue("b")
    queue("a")
    queue("c")
    order = [claim(store, clock, 4) for _ in range(5)]
    assert [d and d["app_id"] for d in order] == ["a", "b", "a", "c", None]
    assert [d["event_seq"] for d in order[:4]] == [1, 2, 3, 4]


def test_a_back_channel_logout_goes_out_while_another_application_is_at_its_cap(ctx, clock, queue):
    store = queue("noisy", 10)
    store.insert_delivery({"_id": "logout-1", "kind": BACKCHANNEL_KIND, "app_id": "other", "webhook_id": None,
                           "event": BACKCHANNEL_KIND, "url": "https://rp.example/logout", "body": None,
                           "status": "pending", "lease": None, "attempts": 0, "retry_count": 0,
                           "created_at": clock(), "expires_at": clock() + timedelta(days=1)})
    assert [claim(store, clock, 1)["_id"] for _ in range(2)][1] == "logout-1"


def test_a_lapsed_lease_frees_its_slot(ctx, clock, queue):
    store = queue("noisy", 3)
    stale = claim(store, clock, 1)
    assert claim(store, clock, 1) is None  # its one slot is held
    clock.advance(LEASE.total_seconds())    # the holder died: its lease, and so its slot, lapse
    taken = claim(store, clock, 1)
    assert taken is not None and taken["lease"] != stale["lease"]
    store.finish(stale, {"status": "delivered"})  # the slow worker's late result...
    assert claim(store, clock, 1) is None         # ...frees no slot it no longer holds
    assert store.finish(taken, {"status": "delivered"})
    assert claim(store, clock, 1) is not None


def test_a_slot_whose_holder_died_mid_claim_lapses_too(ctx, clock, queue):
    store = queue("noisy", 2)
    now = clock()
    # A claim that took the slot and died before it leased a queue entry.
    ctx.store["webhook_slots"].insert_one({"_id": "noisy:0", "app_id": "noisy", "k": 0, "lease": "dead",
                                           "until": now + LEASE})
    assert claim(store, clock, 1) is None
    clock.advance(LEASE.total_seconds())
    assert claim(store, clock, 1) is not None


@pytest.mark.parametrize("cap", [1, 3])
def test_claims_racing_never_put_more_than_the_cap_in_flight(ctx, clock, queue, cap):
    store = queue("a", 40)
    queue("b", 40)
    for _ in range(8):
        claimed = [d for d in in_parallel(12, lambda _i: claim(store, clock, cap)) if d is not None]
        assert Tally(d["app_id"] for d in claimed) == {"a": cap, "b": cap}
        assert len({d["_id"] for d in claimed}) == len(claimed)
        for delivery in claimed:
            assert store.finish(delivery, {"status": "delivered"})
    assert ctx.store["webhook_slots"].count_documents({}) == 0


def test_a_lane_lost_with_its_process_is_restored(ctx, clock, queue):
    store = queue("a", 2)
    ctx.store["webhook_lanes"].delete_many({})  # deliveries queued before lanes, or a lane write lost
    store.restore_lanes()
    assert claim(store, clock, 4)["app_id"] == "a"


def test_the_cap_is_a_setting_of_at_least_one():
    assert make_config().webhook_max_in_flight_per_application == CAP
    env = {"IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION": "2"}
    assert Config.from_env(env, secret_key=TEST_SECRET).webhook_max_in_flight_per_application == 2
    with pytest.raises(ConfigError):
        Config.from_env({"IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION": "0"}, secret_key=TEST_SECRET)
