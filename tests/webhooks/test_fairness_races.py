"""The per-application cap on deliveries in flight (controlplane/webhooks/store.py: lanes
and slots) under the interleavings a review found to break it.  Each test drives one
interleaving of store calls deterministically on the FakeClock; the ones that need a step to happen in
the middle of another worker's ``claim`` give that worker its own ``WebhookStore`` over
the same collections, whose lanes collection runs the other steps at a chosen call, or
(a deactivation's cancel racing a claim, each stopped half-way) pause each store's step
on a thread until the other's has run.
"""
from __future__ import annotations

import threading

from controlplane.webhooks.store import WebhookStore
from tests.webhooks.conftest import LEASE, claim


class _Lanes:
    """The lanes collection of one worker, running ``after_ready_read`` once just after
    that worker's claim read a ready lane, and ``before_delete`` once just before its
    first delete of a lane: the other workers' steps, at those points of its claim."""

    def __init__(self, lanes, *, after_ready_read, before_delete):
        self._lanes, self._after, self._before = lanes, after_ready_read, before_delete

    def find_one(self, *args, **kwargs):
        found = self._lanes.find_one(*args, **kwargs)
        if self._after is not None and "ready_at" in args[0]:
            step, self._after = self._after, None
            step()
        return found

    def delete_one(self, *args, **kwargs):
        if self._before is not None:
            step, self._before = self._before, None
            step()
        return self._lanes.delete_one(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._lanes, name)


def test_a_lane_deleted_and_made_again_is_not_deleted_by_a_claim_that_read_the_first(ctx, clock, queue):
    """A lane's version is a new id at every write, so one made again after a delete never
    matches a version read before it.  With a counter that restarted at 1, a claim that
    read an application's fresh lane, found nothing due (another worker had claimed and
    finished its only delivery, deleting the lane) and meanwhile saw a new delivery make
    the lane again, deleted the new lane: the delivery sat due with no lane, behind
    every other tenant's backlog."""
    store = ctx.webhooks.worker.store  # the other worker and the dispatcher
    queue("noisy", 5)
    assert claim(store, clock, 1)["app_id"] == "noisy"
    assert claim(store, clock, 1) is None  # the noisy application is at its cap: its lane parked
    queue("quiet", 1)

    def other_worker_claims_and_finishes():
        taken = claim(store, clock, 1)
        assert taken["app_id"] == "quiet"
        assert store.finish(taken, {"status": "delivered"})  # its release deletes the quiet lane

    def dispatcher_queues_the_next_event():
        queue("quiet", 1)  # the lane is made again

    racing = WebhookStore(ctx.store)
    racing._lanes = _Lanes(racing._lanes, after_ready_read=other_worker_claims_and_finishes,
                           before_delete=dispatcher_queues_the_next_event)
    taken = claim(racing, clock, 1)  # its delete fails: it goes on and finds the new delivery's lane
    fresh = ctx.store["webhook_queue"].find_one({"app_id": "quiet"})["_id"]
    if taken is None:
        assert ctx.store["webhook_lanes"].count_documents({"_id": "quiet"}) == 1, "the new delivery's lane was deleted"
        taken = claim(store, clock, 1)
    assert taken is not None and taken["_id"] == fresh


def test_a_due_delivery_without_a_lane_is_claimed_while_another_application_is_at_its_cap(ctx, clock, queue):
    """A queue entry can have no lane (queued by a release without lanes during a rolling
    deploy, or its lane write lost with its process).  With no lane ready, a claim gives
    every such application one, not just the most overdue entry's: that entry may be
    another application's, parked at its cap, and the lane-less delivery (here a
    back-channel logout) would wait out that tenant's backlog."""
    store = ctx.webhooks.worker.store
    queue("noisy", 20)
    assert claim(store, clock, 1)["app_id"] == "noisy"
    assert claim(store, clock, 1) is None  # at its cap, its lane parked until the lease ends
    queue("logouts", 1)
    ctx.store["webhook_lanes"].delete_one({"_id": "logouts"})  # queued without a lane
    taken = claim(store, clock, 1)
    assert taken is not None and taken["app_id"] == "logouts", "a due delivery with nothing in flight waits"


def test_lowering_the_cap_never_puts_more_than_the_new_cap_in_flight(ctx, clock, queue):
    """After IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION is lowered, slots above the new
    cap still held by workers on the old setting count against it: a worker on the new
    cap of 2 takes none while 2 of the old 4 are still sending."""
    store = ctx.webhooks.worker.store
    queue("a", 10)
    old = [claim(store, clock, 4) for _ in range(4)]  # a worker on the old cap: slots 0..3
    assert all(d is not None for d in old)
    for delivery in old[:2]:  # slots 0 and 1 free up; 2 and 3 are still sending
        store.finish(delivery, {"status": "delivered"})
    new = [claim(store, clock, 2) for _ in range(2)]  # a worker on the new cap of 2
    in_flight = ctx.store["webhook_slots"].count_documents({"app_id": "a"})
    assert in_flight <= 2, f"{in_flight} attempts in flight under a cap of 2 ({sum(d is not None for d in new)} new)"


class _Paused:
    """A collection of one store whose ``method`` first sets ``reached`` and waits for
    ``go``: that store's step stopped at this point while another runs."""

    def __init__(self, collection, method: str, reached: threading.Event, go: threading.Event):
        self._collection, self._method, self._reached, self._go = collection, method, reached, go

    def __getattr__(self, name):
        found = getattr(self._collection, name)
        if name != self._method:
            return found

        def paused(*args, **kwargs):
            self._reached.set()
            assert self._go.wait(10)
            return found(*args, **kwargs)

        return paused


def test_a_claim_racing_a_deactivation_sends_nothing_and_leaves_no_slot_lane_or_entry(ctx, clock, queue):
    """Deactivating a webhook cancels its pending deliveries (``cancel_queued``) while
    claims go on.  Here the cancel has read the queue entry, unleased, and a claim leases
    it before the cancel writes: the cancel marks the record cancelled but leaves the
    entry (its lease is the claim's now); the claim then finds the record no longer
    pending, removes the entry unsent and frees its slot, and the lane goes with the
    application's last entry.  Nothing is sent, and no slot, lane or entry is left to
    hold the application back."""
    store = ctx.webhooks.worker.store
    queue("a", 1)
    read, leased, cancelled = threading.Event(), threading.Event(), threading.Event()
    cancelling, claiming = WebhookStore(ctx.store), WebhookStore(ctx.store)
    cancelling._deliveries = _Paused(cancelling._deliveries, "update_many", read, leased)  # after its queue read
    claiming._deliveries = _Paused(claiming._deliveries, "find_one_and_update", leased, cancelled)  # before its stamp
    results = {}

    def cancel():
        results["cancelled"] = cancelling.cancel_queued("a", "hook-a", clock(), "webhook inactive")
        cancelled.set()

    thread = threading.Thread(target=cancel)
    thread.start()
    assert read.wait(10)
    assert claim(claiming, clock, 4) is None
    thread.join(10)
    assert results["cancelled"] == 1
    [delivery] = ctx.store["webhook_deliveries"].find({})
    assert (delivery["status"], delivery["lease"], delivery["attempts"]) == ("cancelled", None, 0)
    for leftover in ("webhook_queue", "webhook_slots", "webhook_lanes"):
        assert ctx.store[leftover].count_documents({}) == 0, leftover
    queue("a", 1)  # the application's next delivery is served as before
    assert claim(store, clock, 4)["app_id"] == "a"


def test_a_delivery_whose_worker_died_is_cancelled_and_its_late_result_discarded(ctx, clock, queue):
    """A queue entry whose lease lapsed (its worker died mid-send, or stalled) is no
    longer held: deactivating the webhook cancels it like an unleased one.  The stalled
    worker's late result is discarded (its lease is gone from the record) and its slot
    freed; a delivery held under a live lease is left to its worker."""
    store = ctx.webhooks.worker.store
    queue("a", 2)
    stalled = claim(store, clock, 4)
    clock.advance(LEASE.total_seconds())  # its lease lapses
    held = claim(store, clock, 4)         # the other one, claimed just now
    assert store.cancel_queued("a", "hook-a", clock(), "webhook inactive") == 1
    assert store.finish(stalled, {"status": "delivered"}) is False
    statuses = {d["_id"]: d["status"] for d in ctx.store["webhook_deliveries"].find({})}
    assert statuses == {stalled["_id"]: "cancelled", held["_id"]: "pending"}
    assert store.finish(held, {"status": "cancelled", "last_error": "webhook inactive"})  # its worker's own check
    for leftover in ("webhook_queue", "webhook_slots", "webhook_lanes"):
        assert ctx.store[leftover].count_documents({}) == 0, leftover
