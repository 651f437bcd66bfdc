"""The change stream's frames, driven directly through ChangeFeed.frames with the real
tailer running: hello (and the change log's epoch), replay, live changes, reset,
heartbeats, paging, disconnects."""
from __future__ import annotations

import json
import threading
import time

import pytest

from controlplane import embedded
from controlplane import store as store_module
from controlplane.events import EventLog, Tailer
from controlplane.internal import service as feed_module
from controlplane.internal.service import ChangeFeed, frame
from controlplane.store import Store

HEARTBEAT = 0.3


@pytest.fixture
def running_tailer(ctx):
    ctx.tailer.start()
    yield ctx.tailer
    ctx.tailer.stop()


@pytest.fixture
def feed(ctx, running_tailer):
    return ChangeFeed(ctx.events, running_tailer, heartbeat=HEARTBEAT)


def parse(chunk: bytes) -> dict:
    assert chunk.endswith(b"\n\n"), chunk
    fields = dict(line.split(": ", 1) for line in chunk.decode().strip().split("\n"))
    out = {"event": fields["event"], "data": json.loads(fields["data"])}
    if "id" in fields:
        out["id"] = int(fields["id"])
    return out


def take(stream, n) -> list[dict]:
    return [parse(next(stream)) for _ in range(n)]


def emit(ctx, app_id, type_="role.assigned", user_ids=("u-1",)):
    """An event that concerns decision services (it names a user), unless told otherwise."""
    return ctx.events.emit(app_id, type_, {}, user_ids=list(user_ids))


def caught_up(ctx, tailer):
    """Wait until the tailer has read the whole log (before a test deletes old events)."""
    deadline = time.monotonic() + 2
    while tailer.last_seq < ctx.events.head() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tailer.last_seq == ctx.events.head()


def test_frame_encoding():
    assert frame("hello", {"seq": 3, "epoch": "e"}) == b'event: hello\ndata: {"seq":3,"epoch":"e"}\n\n'
    assert frame("change", {"seq": 4}, 4) == b'event: change\nid: 4\ndata: {"seq":4}\n\n'


def test_hello_comes_first_then_live_changes(ctx, feed, application):
    head = ctx.events.head()
    stream = feed.frames(None, None)
    assert parse(next(stream)) == {"event": "hello", "data": {"seq": head, "epoch": ctx.events.epoch()}}
    seq = emit(ctx, application["_id"], user_ids=["u1"])
    assert parse(next(stream)) == {"event": "change", "id": seq, "data": {
        "seq": seq, "app_id": application["_id"], "type": "role.assigned", "user_ids": ["u1"]}}
    stream.close()


def test_replay_after_since_in_order_then_live(ctx, feed, application, make_application):
    other = make_application()
    since = ctx.events.head()
    mine = [emit(ctx, application["_id"], user_ids=[f"u{i}"]) for i in range(3)]
    emit(ctx, other["_id"])
    head = ctx.events.head()
    stream = feed.frames(application["_id"], since)
    frames = take(stream, 4)
    assert frames[0] == {"event": "hello", "data": {"seq": head, "epoch": ctx.events.epoch()}}
    assert [f["id"] for f in frames[1:]] == mine
    assert [f["data"]["user_ids"] for f in frames[1:]] == [["u0"], ["u1"], ["u2"]]
    live = emit(ctx, application["_id"])
    assert parse(next(stream))["id"] == live
    stream.close()


def test_the_all_applications_stream_has_every_application(ctx, feed, application, make_application):
    other = make_application()
    since = ctx.events.head()
    seqs = [emit(ctx, application["_id"]), emit(ctx, other["_id"]), emit(ctx, application["_id"])]
    frames = take(feed.frames(None, since), 4)
    assert [f["id"] for f in frames[1:]] == seqs
    assert [f["data"]["app_id"] for f in frames[1:]] == [application["_id"], other["_id"], application["_id"]]


def test_a_role_assignment_shows_as_a_live_change_for_the_user(ctx, feed, application, stored_user, make_role):
    user = stored_user(application)
    role = make_role(application, "editor")
    stream = feed.frames(application["_id"], None)
    next(stream)  # hello
    ctx.roles.assign(application["_id"], user["_id"], {"role_id": role["_id"]})
    change = parse(next(stream))
    assert change["event"] == "change"
    assert change["data"]["type"] == "role.assigned" and change["data"]["user_ids"] == [user["_id"]]
    stream.close()


def test_since_older_than_the_log_gives_reset_then_live_from_head(ctx, feed, running_tailer, application):
    for _ in range(5):
        emit(ctx, application["_id"])
    caught_up(ctx, running_tailer)
    oldest = ctx.events.oldest_retained()
    ctx.store["events"].delete_many({"seq": {"$lt": oldest + 3}})  # retention removed the oldest three
    head = ctx.events.head()
    stream = feed.frames(application["_id"], oldest)
    assert take(stream, 2) == [{"event": "hello", "data": {"seq": head, "epoch": ctx.events.epoch()}},
                               {"event": "reset", "data": {"seq": head}}]
    live = emit(ctx, application["_id"])
    assert parse(next(stream))["id"] == live  # nothing retained is replayed after a reset
    stream.close()


def test_since_just_before_the_oldest_retained_event_is_replayed(ctx, feed, running_tailer, application):
    seqs = [emit(ctx, application["_id"]) for _ in range(4)]
    caught_up(ctx, running_tailer)
    ctx.store["events"].delete_many({"seq": {"$lt": seqs[2]}})
    frames = take(feed.frames(application["_id"], seqs[1]), 3)
    assert [f["event"] for f in frames] == ["hello", "change", "change"]
    assert [f["id"] for f in frames[1:]] == seqs[2:]


def test_since_ahead_of_the_log_gives_reset(ctx, feed, application):
    head = ctx.events.head()
    stream = feed.frames(application["_id"], head + 100)  # e.g. the store was reset
    assert take(stream, 2) == [{"event": "hello", "data": {"seq": head, "epoch": ctx.events.epoch()}},
                               {"event": "reset", "data": {"seq": head}}]
    stream.close()


def test_since_equal_to_head_replays_nothing(ctx, feed, application):
    head = ctx.events.head()
    stream = feed.frames(application["_id"], head)
    next(stream)
    started = time.monotonic()
    assert parse(next(stream)) == {"event": "heartbeat", "data": {"seq": head}}
    assert time.monotonic() - started >= HEARTBEAT * 0.8
    stream.close()


def test_heartbeat_when_idle_carries_the_last_seq_covered(ctx, feed, application, make_application):
    other = make_application()
    stream = feed.frames(application["_id"], None)
    next(stream)
    skipped = emit(ctx, other["_id"])  # another application's event: not sent, but covered
    assert parse(next(stream)) == {"event": "heartbeat", "data": {"seq": skipped}}
    assert parse(next(stream)) == {"event": "heartbeat", "data": {"seq": skipped}}
    stream.close()


def test_heartbeats_continue_while_other_applications_are_busy(ctx, feed, application, make_application):
    other = make_application()
    stream = feed.frames(application["_id"], None)
    next(stream)
    deadline = time.monotonic() + HEARTBEAT * 3

    def busy():
        while time.monotonic() < deadline:
            emit(ctx, other["_id"])
            time.sleep(0.02)

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        beat = parse(next(stream))
        assert beat["event"] == "heartbeat" and beat["data"]["seq"] > 0
    finally:
        worker.join()
        stream.close()


def test_replay_reads_the_log_in_pages(ctx, feed, application, monkeypatch):
    monkeypatch.setattr(feed_module, "REPLAY_PAGE", 2)
    since = ctx.events.head()
    seqs = [emit(ctx, application["_id"]) for _ in range(7)]
    frames = take(feed.frames(application["_id"], since), 8)
    assert [f["id"] for f in frames[1:]] == seqs


def test_a_client_behind_the_tailers_buffer_catches_up_from_the_log(ctx, application, monkeypatch):
    monkeypatch.setattr(Tailer, "BUFFER", 3)
    tailer = Tailer(ctx.events, interval_ms=10).start()  # this process's tailer now: a small buffer
    try:
        since = ctx.events.head()
        seqs = [emit(ctx, application["_id"]) for _ in range(8)]
        deadline = time.monotonic() + 2
        while tailer.last_seq < seqs[-1] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tailer.wait_after(since, 0) is None  # the buffer no longer reaches back to since
        feed = ChangeFeed(ctx.events, tailer, heartbeat=HEARTBEAT)
        frames = take(feed.frames(application["_id"], since), 9)
        assert [f["id"] for f in frames[1:]] == seqs
    finally:
        tailer.stop()


def test_a_stopped_tailer_does_not_make_the_stream_spin(ctx, application):
    tailer = ctx.tailer
    tailer.stop()  # wait_after now returns [] at once
    calls = []
    original = tailer.wait_after

    def counting(seq, timeout, app_id=None, **options):
        calls.append(timeout)
        return original(seq, timeout, app_id, **options)

    tailer.wait_after = counting
    stream = ChangeFeed(ctx.events, tailer, heartbeat=0.2).frames(application["_id"], None)
    next(stream)
    assert parse(next(stream))["event"] == "heartbeat"
    assert len(calls) <= 3
    stream.close()


def test_closing_the_stream_ends_it_cleanly(ctx, feed, application):
    streams = [feed.frames(application["_id"], None) for _ in range(3)]
    for stream in streams:
        next(stream)
    assert feed.open_streams._value.get() == 3
    for stream in streams:
        stream.close()
    assert feed.open_streams._value.get() == 0
    with pytest.raises(StopIteration):
        next(streams[0])


def test_resets_are_counted(ctx, feed, application):
    stream = feed.frames(application["_id"], ctx.events.head() + 5)
    take(stream, 2)
    stream.close()
    assert feed.resets._value.get() == 1


# --- the change log's epoch ------------------------------------------------------------------


def test_every_stream_of_one_store_announces_the_same_epoch(ctx, feed, application, clock):
    epoch = ctx.events.epoch()
    assert isinstance(epoch, str) and epoch
    first = feed.frames(application["_id"], None)
    assert parse(next(first))["data"]["epoch"] == epoch
    emit(ctx, application["_id"])  # the log moves on: still the same log
    second = feed.frames(None, 0)
    assert parse(next(second))["data"]["epoch"] == epoch
    first.close()
    second.close()
    assert EventLog(ctx.store, clock).epoch() == epoch  # another process on the same store


def test_a_fresh_or_wiped_store_has_another_epoch(ctx, application, clock):
    epoch = ctx.events.epoch()
    assert EventLog(Store("memory://"), clock).epoch() != epoch
    ctx.store["counters"].delete_many({})  # the log starts over
    ctx.store["events"].delete_many({})
    assert emit(ctx, application["_id"]) == 1
    assert ctx.events.epoch() not in (epoch, None)


def test_the_first_event_fixes_the_epoch():
    store = Store("memory://")
    store.next_seq("events")
    epoch = store["counters"].find_one({"_id": "events"})["epoch"]
    assert store.counter_epoch("events") == epoch
    store.next_seq("events")
    assert store.counter_epoch("events") == epoch and store.current_seq("events") == 2


def test_reading_the_epoch_before_any_event_creates_the_counter_and_fixes_it():
    store = Store("memory://")
    epoch = store.counter_epoch("events")
    assert isinstance(epoch, str) and epoch
    assert store["counters"].find_one({"_id": "events"}) == {"_id": "events", "seq": 0, "epoch": epoch}
    assert store.next_seq("events") == 1
    assert store.counter_epoch("events") == epoch
    assert store.counter_epoch("other") != epoch  # each counter has its own


@pytest.mark.parametrize("loser_raises", [False, True])
def test_an_upsert_that_loses_the_race_takes_the_winners_epoch(monkeypatch, loser_raises):
    """Another replica creates the counter between our read and our upsert: our
    ``$setOnInsert`` does not apply (or, on a server that does not retry the upsert, it
    fails on the unique ``_id``) and the winner's epoch is the one."""
    store = Store("memory://")

    def racing_upsert(self, query, update, *args, **kwargs):
        with self._lock:
            self._collection.insert_one({"_id": query["_id"], "seq": 0, "epoch": "winner"})
            if loser_raises:
                raise store_module.DuplicateKeyError("E11000 duplicate key error")
            return self._collection.find_one_and_update(query, update, *args, **kwargs)

    monkeypatch.setattr(embedded._SerialisedCollection, "find_one_and_update", racing_upsert, raising=False)
    assert store.counter_epoch("events") == "winner"
    assert store.counter_epoch("events") == "winner"


def test_concurrent_callers_all_get_the_same_epoch():
    store = Store("memory://")
    barrier = threading.Barrier(16)
    seen = []

    def call():
        barrier.wait()
        seen.append(store.counter_epoch("events"))

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 16 and len(set(seen)) == 1
    assert store.counter_epoch("events") == seen[0]


def test_every_stream_sends_the_same_encoded_frame_and_a_reused_seq_is_encoded_anew(ctx, feed, application):
    """A change is encoded once per process (500 streams send one bytes object), keyed by
    what the frame says: a wiped store that reuses a seq gets its own frame."""
    from controlplane.events import Event

    first = Event(7, application["_id"], "role.assigned", {}, {}, ("u1",), None)
    again = Event(7, application["_id"], "role.assigned", {}, {}, ("u1",), None)
    reused = Event(7, application["_id"], "role.assigned", {}, {}, ("u2",), None)
    assert feed.change_frame(first) is feed.change_frame(again)
    assert parse(feed.change_frame(reused))["data"]["user_ids"] == ["u2"]
    assert feed.change_frame(first) == feed_module.change_frame(first)


def attempt(ctx, app_id):
    """An audit record that is not a change (a failed login): never a change frame."""
    from controlplane.audit import context as audit
    return ctx.audit.record("user.login", result=audit.failure("invalid_credentials"),
                            target=audit.actor("user", "u-1"), application_id=app_id)


@pytest.mark.parametrize("scope", ["application", "all"])
def test_audit_attempts_are_never_sent_replayed_or_live(ctx, feed, application, monkeypatch, scope):
    monkeypatch.setattr(feed_module, "REPLAY_PAGE", 2)  # replay crosses pages made of attempts too
    app_id = application["_id"] if scope == "application" else None
    since = ctx.events.head()
    attempt(ctx, application["_id"])
    first = emit(ctx, application["_id"])
    attempt(ctx, application["_id"])
    attempt(ctx, application["_id"])
    second = emit(ctx, application["_id"])
    stream = feed.frames(app_id, since)
    frames = take(stream, 3)
    assert [f["event"] for f in frames] == ["hello", "change", "change"]
    assert [f["id"] for f in frames[1:]] == [first, second]
    attempt(ctx, application["_id"])
    live = emit(ctx, application["_id"])
    assert parse(next(stream))["id"] == live
    stream.close()


def token_event(ctx, app_id):
    """What every token answer writes: an event that changes no cached decision."""
    return emit(ctx, app_id, "connection.refreshed", user_ids=())


@pytest.mark.parametrize("scope", ["application", "all"])
def test_events_that_concern_no_decision_are_covered_by_a_heartbeat_not_sent(ctx, running_tailer, application,
                                                                             scope):
    feed = ChangeFeed(ctx.events, running_tailer, heartbeat=60)  # a heartbeat below is the prompt one
    stream = feed.frames(application["_id"] if scope == "application" else None, None)
    next(stream)
    token = token_event(ctx, application["_id"])
    assert parse(next(stream)) == {"event": "heartbeat", "data": {"seq": token}}
    for _ in range(100):
        token_event(ctx, application["_id"])
    assigned = emit(ctx, application["_id"])
    frames = [parse(next(stream))]
    while frames[-1]["event"] != "change":
        frames.append(parse(next(stream)))
    assert frames[-1]["id"] == assigned
    # A hundred token events cost a few heartbeats (one per ADVANCE_AFTER), not a frame each.
    assert all(f["event"] == "heartbeat" for f in frames[:-1]) and len(frames) < 20
    stream.close()


def test_a_replay_sends_only_what_concerns_decisions(ctx, feed, application):
    since = ctx.events.head()
    token_event(ctx, application["_id"])
    assigned = emit(ctx, application["_id"])
    token = token_event(ctx, application["_id"])
    frames = take(feed.frames(application["_id"], since), 3)
    assert [f["event"] for f in frames] == ["hello", "change", "heartbeat"]
    assert frames[1]["id"] == assigned and frames[2]["data"] == {"seq": token}
