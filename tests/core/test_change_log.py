"""The change log: strictly increasing seq, one tailer waking every consumer in order."""
import threading
import time

import pytest

from controlplane.events import EventLog, Tailer, current_revision, reset_revision
from controlplane.services import build_services
from tests.conftest import make_config


def test_emit_assigns_strictly_increasing_seq_and_records_the_revision(ctx):
    reset_revision()
    first = ctx.events.emit("app-1", "user.created", {"user_id": "u1"}, subject={"user_id": "u1"})
    second = ctx.events.emit("app-1", "role.assigned", {}, subject={"user_id": "u1"}, user_ids=["u1"])
    assert second == first + 1
    assert current_revision() == second
    assert ctx.events.head() == second
    stored = ctx.events.read_after(first - 1)
    assert [(e.seq, e.type, e.user_ids) for e in stored] == [(first, "user.created", ()),
                                                            (second, "role.assigned", ("u1",))]
    assert [e.type for e in ctx.events.for_user("app-1", "u1")] == ["user.created", "role.assigned"]


def test_parallel_emits_never_share_a_seq(ctx):
    seqs, lock = [], threading.Lock()

    def work():
        for _ in range(25):
            seq = ctx.events.emit("app", "role.assigned")
            with lock:
                seqs.append(seq)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seqs)) == 200


def test_listeners_run_synchronously(ctx):
    seen = []
    ctx.events.listen(lambda e: seen.append(e.type))
    ctx.events.emit("app", "role.updated")
    assert seen == ["role.updated"]


def test_tailer_delivers_in_order_to_subscribers_and_waiters(ctx):
    tailer = ctx.tailer
    base = tailer.last_seq
    delivered = []
    tailer.subscribe(lambda e: delivered.append(e.seq))
    seqs = [ctx.events.emit("app", "role.assigned") for _ in range(3)]
    assert tailer.poll_once() == 3
    assert delivered == seqs
    assert [e.seq for e in tailer.wait_after(base, timeout=0)] == seqs
    assert [e.seq for e in tailer.wait_after(seqs[0], timeout=0)] == seqs[1:]
    assert tailer.wait_after(seqs[-1], timeout=0.01) == []


def test_waiter_wakes_when_an_event_arrives(ctx):
    tailer = ctx.tailer.start()
    try:
        head = tailer.last_seq
        result = {}
        waiter = threading.Thread(target=lambda: result.setdefault("events", tailer.wait_after(head, timeout=5)))
        waiter.start()
        ctx.events.emit("app", "role.assigned")
        waiter.join(5)
        assert [e.type for e in result["events"]] == ["role.assigned"]
    finally:
        tailer.stop()


def test_a_waiter_for_one_application_sleeps_through_the_others_changes(ctx):
    """Hundreds of tenant streams per replica: one tenant's change wakes its own streams only
    (docs/performance.md, "Change-stream fan-out")."""
    tailer = ctx.tailer.start()
    try:
        head = tailer.last_seq
        woken = []
        waiter = threading.Thread(target=lambda: woken.append((time.monotonic(),
                                                               tailer.wait_after(head, timeout=5, app_id="mine"))))
        waiter.start()
        time.sleep(0.05)
        for _ in range(3):
            ctx.events.emit("other", "role.assigned")
        time.sleep(0.2)  # the tailer has read them: the waiter must still sleep
        assert woken == []
        mine = ctx.events.emit("mine", "role.assigned")
        waiter.join(5)
        assert [(e.app_id, e.seq) for e in woken[0][1]][-1] == ("mine", mine)
        assert [e.app_id for e in woken[0][1]] == ["other"] * 3 + ["mine"]  # the caller moves past the others
    finally:
        tailer.stop()


@pytest.mark.parametrize("app_id", [None, "mine"])
def test_a_waiter_for_decisions_sleeps_through_changes_that_concern_none(ctx, app_id):
    """A change stream that owes its client only a heartbeat is not woken by every token's
    event (``decisions_only``); the events it slept through come with the one that woke it."""
    tailer = ctx.tailer.start()
    try:
        head = tailer.last_seq
        woken = []
        waiter = threading.Thread(target=lambda: woken.append(
            tailer.wait_after(head, timeout=5, app_id=app_id, decisions_only=True)))
        waiter.start()
        time.sleep(0.05)
        tokens = [ctx.events.emit("mine", "connection.refreshed", {"client_id": "oc_1"}) for _ in range(3)]
        time.sleep(0.2)  # the tailer has read them: the waiter must still sleep
        assert woken == []
        revoked = ctx.events.emit("mine", "role.removed", subject={"user_id": "u-1", "role_id": "r-1"})
        waiter.join(5)
        assert [e.seq for e in woken[0]] == tokens + [revoked]
    finally:
        tailer.stop()


def test_a_waiter_for_decisions_gets_the_others_at_its_timeout(ctx):
    tailer = ctx.tailer
    head = tailer.last_seq
    seq = ctx.events.emit("mine", "connection.refreshed", {"client_id": "oc_1"})
    tailer.poll_once()
    assert [e.seq for e in tailer.wait_after(head, timeout=0.05, decisions_only=True)] == [seq]
    assert [e.seq for e in tailer.wait_after(head, timeout=5)] == [seq]  # any change: at once


def test_a_waiter_for_one_application_gets_the_others_changes_at_its_timeout(ctx):
    tailer = ctx.tailer
    head = tailer.last_seq
    seqs = [ctx.events.emit("other", "role.assigned") for _ in range(2)]
    tailer.poll_once()
    assert [e.seq for e in tailer.wait_after(head, timeout=0.05, app_id="mine")] == seqs


def test_seq_older_than_the_buffer_asks_the_caller_to_read_the_log(ctx):
    old = ctx.events.emit("app", "role.assigned")
    fresh = Tailer(ctx.events)  # a process that started after that event
    ctx.events.emit("app", "role.assigned")
    fresh.poll_once()
    assert fresh.wait_after(old - 1, timeout=0) is None
    assert [e.seq for e in ctx.events.read_after(old - 1)] == [old, old + 1]


def test_a_tailer_without_a_buffer_feeds_its_consumers_and_keeps_no_event(ctx):
    """The webhook worker's tailer (it serves no change streams): every event still reaches
    the consumers in order, and none is kept for ``wait_after``."""
    head = ctx.events.head()
    tailer = Tailer(ctx.events, buffered=False)
    seen = []
    tailer.subscribe(lambda event: seen.append(event.seq))
    seqs = [ctx.events.emit("app", "role.assigned") for _ in range(3)]
    assert tailer.poll_once() == 3 and seen == seqs and tailer.last_seq == seqs[-1]
    assert tailer.wait_after(head, timeout=0) is None  # read the log instead
    buffered = Tailer(ctx.events)
    buffered.last_seq = head
    buffered.poll_once()
    assert [e.seq for e in buffered.wait_after(head, timeout=0)] == seqs


def test_only_a_process_that_serves_change_streams_keeps_recent_events():
    for streams in (True, False):
        services = build_services(make_config(), streams=streams)
        services.startup.run_once()
        head = services.tailer.last_seq
        services.events.emit("app", "role.assigned")
        services.tailer.poll_once()
        assert (services.tailer.wait_after(head, timeout=0) is None) is not streams


def test_a_gap_is_waited_for_then_skipped(ctx, monkeypatch):
    log = EventLog(ctx.store, ctx.clock)
    tailer = Tailer(log, gap_timeout=0.0)
    start = tailer.last_seq
    ctx.store.next_seq("events")  # a seq taken by a writer that never inserted (crashed)
    later = log.emit("app", "role.assigned")
    waiting = Tailer(log, gap_timeout=60)
    waiting.last_seq = start
    assert waiting.poll_once() == 0  # still waiting for the missing seq
    assert tailer.poll_once() == 1 and tailer.last_seq == later
