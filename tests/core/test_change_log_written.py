"""The tailer takes the events this process wrote from memory, not from the store, and
delivers exactly what reading them back delivers (controlplane/events.py, ``Tailer.wrote``;
docs/performance.md, "OIDC token endpoint").

Two worlds, built the same way on the same clock (microseconds that the store keeps only
to the millisecond): one tailer keeping what its process writes, one reading everything
back (the reference). The same scenario runs in both: events of this process, events of
another replica (a second ``EventLog`` on the same store) before, between and after them,
an insert still in flight when the poll comes, an audit record of an attempt, an event
whose data holds a datetime, an emitter changing its data after the event. After every
poll the two must agree on what it returned, every event each subscriber received (all
fields: ``Event`` equality), the ring buffer and ``last_seq`` (polling until a poll moves
nothing on: the keeping tailer takes its own events first and another replica's that
follow them at its next poll); and the keeping tailer must have read fewer events back from the store.
"""
from __future__ import annotations

import threading
from datetime import UTC, datetime

from controlplane.app import create_app
from controlplane.events import EventLog
from shared.timeutil import isoformat
from tests.conftest import FakeClock, make_config

START = datetime(2100, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


class World:
    def __init__(self, *, keep: bool):
        self.clock = FakeClock(START)
        app = create_app(make_config(), clock=self.clock, start_background=False)
        self.ctx = ctx = app.services
        self.log, self.tailer = ctx.events, ctx.tailer
        self.tailer.begin()
        self.tailer.keep_written = keep
        self.other = EventLog(ctx.store, self.clock)  # another replica: its writes are not this process's
        self.delivered: list = []
        self.tailer.subscribe(self.delivered.append)
        self.read_back = 0  # events the tailer read from the store
        read_after = self.log.read_after

        def counting(*args, **kwargs):
            events = read_after(*args, **kwargs)
            self.read_back += len(events)
            return events

        self.log.read_after = counting

    def tick(self):
        self.clock.advance(0.000777)

    def poll(self):
        """Poll until a poll moves nothing on; how many changes were delivered. (A poll
        that takes this process's events from memory leaves another replica's after them
        to the next poll, where a read takes them all at once.)"""
        delivered = 0
        self.tick()
        while True:
            last = self.tailer.last_seq
            delivered += self.tailer.poll_once()
            if self.tailer.last_seq == last:
                return delivered

    def state(self):
        return (list(self.delivered), list(self.tailer._buffer), self.tailer.last_seq)


def _scenario(world: World):
    mine, theirs = world.log, world.other
    data = {"user_id": "u1", "nested": {"list": [1, 2.5, True, None, "x"]}}

    def steps():
        for _ in range(3):
            mine.emit("app-1", "role.assigned", {"role_id": "r1"}, subject={"user_id": "u1"}, user_ids=["u1"])
            world.tick()
        mine.emit("app-2", "user.created", data, subject={"user_id": "u1"})
        data["nested"]["list"].append("changed after the event")  # the emitter's to change
        yield world.poll()
        yield world.poll()  # nothing new
        theirs.emit("app-1", "role.updated", {"role_id": "r2"})
        mine.emit("app-2", "role.created", {"role_id": "r6"})
        yield world.poll()
        mine.emit("app-1", "role.deleted", {"role_id": "r1"})
        theirs.emit("app-1", "role.created", {"role_id": "r3"})
        mine.emit("app-1", "role.created", {"role_id": "r4"})
        yield world.poll()
        yield world.poll()
        in_flight = world.ctx.store.next_seq("events")  # another replica's insert, not there yet
        mine.emit("app-1", "role.updated", {"role_id": "r4"})
        yield world.poll()  # the gap is waited for
        world.other._events.insert_one({
            "_id": "in-flight", "seq": in_flight, "app_id": "app-1", "type": "role.updated", "subject": {},
            "data": {"role_id": "r5"}, "user_ids": [], "at": world.clock(), "sealed": False})
        yield world.poll()
        mine.emit("app-1", "user.updated", {"user_id": "u2", "at": world.clock()}, subject={"user_id": "u2"})
        mine.record("user.login", result={"result": "failure", "reason": "INVALID_CREDENTIALS"},
                    target={"type": "user", "id": "u2", "display": None}, app_id="app-1")
        mine.emit("app-1", "role.assigned", {}, subject={"user_id": "u2"}, user_ids=["u2"])
        yield world.poll()

    for answer in steps():
        yield answer, world.state()


def test_a_tailer_keeping_its_writes_delivers_what_reading_them_back_delivers():
    keeping, reading = World(keep=True), World(keep=False)
    steps = list(zip(_scenario(keeping), _scenario(reading), strict=True))
    for (kept, kept_state), (read, read_state) in steps:
        assert kept == read
        assert kept_state == read_state
    delivered = keeping.delivered
    assert len(delivered) == 13 and {event.type for event in delivered} >= {"role.updated", "user.created"}
    assert [isoformat(event.at) for event in delivered] == [isoformat(event.at) for event in reading.delivered]
    assert all(event.at.microsecond % 1000 == 0 for event in delivered)
    created = next(event for event in delivered if event.type == "user.created")
    assert created.data["nested"]["list"] == [1, 2.5, True, None, "x"]
    # Read back: every event (and the one after the gap twice) against the other replica's
    # events and what followed them, the gap, and the event holding a datetime onwards.
    assert (reading.read_back, keeping.read_back) == (15, 10)


def test_a_tailer_that_does_not_run_keeps_nothing(ctx):
    tailer = ctx.tailer
    tailer.begin()
    ctx.events.emit("app", "role.assigned")
    assert not tailer.keep_written and tailer._written == {}
    assert tailer.poll_once() == 1


def test_events_written_by_many_threads_while_it_polls_are_each_delivered_once_in_order(ctx):
    tailer = ctx.tailer
    tailer.begin()
    tailer.keep_written = True
    other = EventLog(ctx.store, ctx.clock)  # another replica, writing too
    delivered = []
    tailer.subscribe(lambda event: delivered.append(event.seq))
    start = tailer.last_seq

    def write(log):
        for _ in range(100):
            log.emit("app", "role.assigned")

    writers = [threading.Thread(target=write, args=(ctx.events if i % 4 else other,)) for i in range(8)]
    for writer in writers:
        writer.start()
    while any(writer.is_alive() for writer in writers):
        tailer.poll_once()
    while tailer.poll_once():
        pass
    assert delivered == list(range(start + 1, start + 801))
