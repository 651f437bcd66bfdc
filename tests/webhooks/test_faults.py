"""Fault tests of delivery leases (docs/webhooks.md, "Leases": deliveries are leased,
never double-sent by two workers), step by step.

Two ``DeliveryWorker`` instances (with their own threads) over one store and a
FakeClock: every claim and every result goes through the store's single-document atomic
operations, and a "killed" worker is one whose request never returns (it holds its lease
and writes nothing) until the lease lapses, which the clock makes happen at once.  The
same guarantees with real worker processes, SIGKILL and a lease lapsing in real time are
in test_worker_processes.py.
"""
from __future__ import annotations

import threading
import time
from collections import Counter as Tally

from controlplane.webhooks.delivery import DeliveryMetrics, DeliveryWorker, Sender
from controlplane.webhooks.targets import TargetPolicy
from shared.metrics import HttpMetrics
from shared.timeutil import utcnow
from tests.e2e.processes import wait_until


def second_worker(ctx, clock, *, timeout=1.0, threads=1, per_application=4):
    """Another worker over the same store (its own sender, metrics and threads)."""
    store = ctx.webhooks.worker.store
    return DeliveryWorker(store, ctx.box, TargetPolicy(allow_private=True), Sender(timeout), clock,
                          DeliveryMetrics(HttpMetrics("iamgate"), store), retry_delays=ctx.config.webhook_retry_delays,
                          threads=threads, per_application=per_application, idle_wait=0.05)


def test_a_killed_worker_loses_nothing(ctx, clock, make_webhook, receiver, make_role, application):
    make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    ctx.webhooks.dispatcher.catch_up()
    held = threading.Event()
    receiver.hold = held
    doomed = second_worker(ctx, clock, timeout=60)  # its request never answers: as if killed mid-send
    threading.Thread(target=doomed.run_once, daemon=True).start()
    assert wait_until(lambda: len(receiver.requests) == 1, timeout=10)
    receiver.hold = None

    survivor = second_worker(ctx, clock)
    assert not survivor.run_once()  # the lease still holds
    clock.advance(60 + 30)          # past the doomed worker's lease (timeout + margin)
    assert survivor.run_once()
    delivery = ctx.store["webhook_deliveries"].find_one({})
    assert delivery["status"] == "delivered" and delivery["retry_count"] == 0
    first, second = (r["headers"]["X-Service-Delivery-Id"] for r in receiver.requests)
    assert first == second == delivery["_id"]  # the same delivery, same id, sent again

    held.set()  # the old request finally ends: its stale result must not overwrite anything
    assert wait_until(lambda: ctx.store["webhook_deliveries"].find_one({})["lease"] is None, timeout=5)
    time.sleep(0.2)
    after = ctx.store["webhook_deliveries"].find_one({})
    assert after["status"] == "delivered" and after["attempts"] == 1 and len(receiver.requests) == 2


def test_two_workers_over_200_events_never_send_one_delivery_twice(ctx, make_webhook, receiver, make_role,
                                                                   application):
    receiver.delay = 0.002
    make_webhook(receiver.url, events=["permission.granted"])
    for i in range(100):
        make_role(application, f"role{i}", ["a:b", "c:d"])  # two permission.granted each
    assert ctx.webhooks.dispatcher.catch_up() == 200
    # The per-application cap above both workers' threads, so that both race for every delivery.
    workers = [second_worker(ctx, utcnow, threads=4, per_application=8),
               second_worker(ctx, utcnow, threads=4, per_application=8)]
    for worker in workers:
        worker.start()
    try:
        assert wait_until(lambda: len(receiver.requests) >= 200, timeout=60)
        time.sleep(0.3)  # anything sent twice would arrive now
    finally:
        for worker in workers:
            worker.stop()
    ids = Tally(r["headers"]["X-Service-Delivery-Id"] for r in receiver.requests)
    assert len(ids) == 200 and max(ids.values()) == 1
    assert ctx.store["webhook_deliveries"].count_documents({"status": "delivered"}) == 200
    sent = [w.metrics.sent._value.get() for w in workers]  # noqa: SLF001 - both workers did work
    assert sum(sent) == 200 and all(sent)
