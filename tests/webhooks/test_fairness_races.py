"""The per-application cap on deliveries in flight (controlplane/webhooks/store.py: lanes
and slots) under the interleavings a review found to break it.  Each test drives one
interleaving of store calls deterministically on the FakeClock; the ones that need a step to happen in
the middle of another worker's ``claim`` give that worker its own ``WebhookStore`` over
the same collections, whose lanes collection runs the other steps at a chosen call.
"""
from __future__ import annotations

from controlplane.webhooks.store import WebhookStore
from tests.webhooks.conftest import claim


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
