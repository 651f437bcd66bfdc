"""The change log: one stream, three readers (webhooks, decision invalidation, audit).

``EventLog.emit`` is the single entry point every state change calls.  It appends
``{seq, app_id, type, subject, data, user_ids, at}`` with ``seq`` from an atomic
counter, and records the seq as the request's revision (``X-Iamgate-Revision``).  The
kinds it accepts are the catalogue in ``shared.event_types``.

``Tailer`` is the one reader of the ``events`` collection per process.  It follows
the log (a MongoDB change stream would do on a replica set; the indexed ``seq > last``
poll every few tens of milliseconds works everywhere, and an in-process poke makes
writes of this process visible at once), keeps the recent events in a ring buffer and
wakes every consumer, so N streaming clients cost one poll, not N.
"""
from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from pymongo import ASCENDING, IndexModel

from controlplane.store import UNREACHABLE, one_line
from shared.event_types import EVENT_TYPES
from shared.ids import new_id

log = logging.getLogger("iamgate.events")

INDEXES = {
    "events": [
        IndexModel([("seq", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("seq", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("subject.user_id", ASCENDING), ("seq", ASCENDING)]),
        IndexModel([("at", ASCENDING)], expireAfterSeconds=90 * 24 * 3600),
    ]
}

_revision: contextvars.ContextVar[int | None] = contextvars.ContextVar("iamgate_revision", default=None)


def reset_revision() -> None:
    _revision.set(None)


def current_revision() -> int | None:
    """The seq of the last event the current request emitted, if any."""
    return _revision.get()


@dataclass(frozen=True)
class Event:
    seq: int
    app_id: str | None
    type: str
    subject: dict
    data: dict
    user_ids: tuple
    at: object

    @classmethod
    def from_doc(cls, doc) -> Event:
        return cls(doc["seq"], doc.get("app_id"), doc["type"], doc.get("subject") or {},
                   doc.get("data") or {}, tuple(doc.get("user_ids") or ()), doc["at"])


class EventLog:
    def __init__(self, store, clock):
        store.declare_indexes(INDEXES)
        self._events = store["events"]
        self._store = store
        self._clock = clock
        self.tailer: Tailer | None = None
        self._listeners = []

    def listen(self, callback) -> None:
        """Call ``callback(event)`` synchronously for every event this process emits
        (in-process caches drop entries before the write's response is sent; other
        replicas learn through their tailer)."""
        self._listeners.append(callback)

    def emit(self, app_id, type_, data=None, *, subject=None, user_ids=()) -> int:
        """Append one event and return its seq (also the request's revision).

        ``type_`` must be a kind of the catalogue (``shared.event_types``; ValueError
        otherwise, before anything is written). ``subject`` names the entities it is about
        (``{"user_id": ...}``), ``user_ids`` lists users whose authorization answers may
        have changed.
        """
        if type_ not in EVENT_TYPES:
            raise ValueError(f"event type {type_!r} is not in the catalogue (shared/event_types.py)")
        seq = self._store.next_seq("events")
        doc = {
            "_id": new_id(),
            "seq": seq,
            "app_id": app_id,
            "type": type_,
            "subject": subject or {},
            "data": data or {},
            "user_ids": list(user_ids),
            "at": self._clock(),
        }
        self._events.insert_one(doc)
        _revision.set(max(seq, _revision.get() or 0))
        if self._listeners:
            event = Event.from_doc(doc)
            for callback in self._listeners:
                try:
                    callback(event)
                except Exception:
                    log.exception("event listener failed", extra={"event_type": type_})
        if self.tailer is not None:
            self.tailer.poke()
        return seq

    def head(self) -> int:
        return self._store.current_seq("events")

    def epoch(self) -> str:
        """The id of this change log: the same for every process on one store, new when
        the log starts over (a fresh or wiped store), so a reader holding a seq can tell
        "the log moved on" from "this is another log" (see ``Store.counter_epoch``)."""
        return self._store.counter_epoch("events")

    def oldest_retained(self) -> int | None:
        doc = self._events.find_one({}, sort=[("seq", ASCENDING)], projection={"seq": 1})
        return doc["seq"] if doc else None

    def read_after(self, seq: int, limit: int = 1000, app_id=None) -> list[Event]:
        query = {"seq": {"$gt": seq}}
        if app_id is not None:
            query["app_id"] = app_id
        return [Event.from_doc(d) for d in self._events.find(query).sort("seq", ASCENDING).limit(limit)]

    def for_user(self, app_id, user_id, limit=1000) -> list[Event]:
        cursor = self._events.find({"app_id": app_id, "subject.user_id": user_id}).sort("seq", ASCENDING).limit(limit)
        return [Event.from_doc(d) for d in cursor]


class Tailer:
    """Follows the events collection for this process and wakes its consumers.

    Consumers either register a callback (``subscribe``; called on the tailer's thread
    for every event, in seq order) or block in ``wait_after`` (streams).  A missing seq
    (an insert in flight on another replica) is waited for up to ``gap_timeout`` before
    it is skipped, so consumers see events in order.
    """

    BUFFER = 20000

    def __init__(self, log_: EventLog, *, interval_ms: int = 25, gap_timeout: float = 2.0, deferred: bool = False):
        """``deferred``: read the log's head at ``begin()`` rather than now, so building the
        services needs no store (the start-up step calls ``begin`` once MongoDB answers)."""
        self._log = log_
        self._interval = interval_ms / 1000.0
        self._gap_timeout = gap_timeout
        self._buffer: deque[Event] = deque(maxlen=self.BUFFER)
        self._lock = threading.Lock()
        # One signal per application that has waiters (None: waiters for every application),
        # fired and replaced when its events arrive: a stream of one tenant does not wake
        # for the other tenants' changes, and the woken waiters do not queue on a lock the
        # poller still holds (a Condition's notify_all did both; benchmarks/NOTES.md).
        self._signals: dict[str | None, threading.Event] = {}
        self._poke = threading.Event()
        self._callbacks = []
        self._stop = threading.Event()
        self._thread = None
        self.last_seq = None if deferred else log_.head()
        self._gap_since = None
        self._polled_at: float | None = None  # time.monotonic() of the last poll that did not fail
        log_.tailer = self

    def begin(self) -> None:
        """Start from the log's current head (once; a no-op when already positioned)."""
        if self.last_seq is None:
            self.last_seq = self._log.head()

    def subscribe(self, callback) -> None:
        self._callbacks.append(callback)

    def start(self) -> Tailer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="iamgate-tailer", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._poke.set()
        with self._lock:
            fired, self._signals = list(self._signals.values()), {}
        for signal in fired:
            signal.set()

    def poke(self) -> None:
        self._poke.set()

    def polling(self, within: float) -> bool:
        """Whether the tailer runs and its last poll, less than ``within`` seconds ago,
        succeeded (the webhook worker's readiness)."""
        polled_at = self._polled_at
        return (self._thread is not None and self._thread.is_alive() and polled_at is not None
                and time.monotonic() - polled_at < within)

    def _run(self) -> None:
        unreachable = False  # the store stopped answering: said once, not at every poll
        while not self._stop.is_set():
            try:
                self.poll_once()
                self._polled_at = time.monotonic()
                if unreachable:
                    log.info("event tailer: the store answers again")
                    unreachable = False
            except UNREACHABLE as exc:
                if not unreachable:
                    log.warning("event tailer: the store does not answer; polling on", extra={"error": one_line(exc)})
                    unreachable = True
                time.sleep(0.5)
            except Exception:
                log.exception("event tailer poll failed")
                time.sleep(0.5)
            self._poke.wait(self._interval)
            self._poke.clear()

    def poll_once(self) -> int:
        """Read new events once; returns how many were delivered."""
        fresh = self._log.read_after(self.last_seq)
        ordered = []
        expected = self.last_seq + 1
        for event in fresh:
            if event.seq != expected:
                if self._gap_since is None:
                    self._gap_since = time.monotonic()
                if time.monotonic() - self._gap_since < self._gap_timeout:
                    break  # an earlier insert is still in flight: wait for it
                log.warning("event seq gap skipped", extra={"from": expected, "to": event.seq - 1})
            self._gap_since = None
            ordered.append(event)
            expected = event.seq + 1
        if not ordered:
            return 0
        for event in ordered:
            for callback in self._callbacks:
                try:
                    callback(event)
                except Exception:
                    log.exception("event consumer failed", extra={"event_type": event.type})
        with self._lock:
            self._buffer.extend(ordered)
            self.last_seq = ordered[-1].seq
            fired = [self._signals.pop(key) for key in {None, *(event.app_id for event in ordered)}
                     if key in self._signals]
        for signal in fired:
            signal.set()
        return len(ordered)

    def wait_after(self, seq: int, timeout: float, app_id: str | None = None) -> list[Event] | None:
        """Events with seq > ``seq``, blocking up to ``timeout`` seconds for the first one
        of ``app_id`` (of any application when None).

        Every newer event is returned, other applications' too, so the caller moves past
        them; a waiter for one application is woken only by its own application's events
        (and by the timeout), never by the others'.  Returns None when ``seq`` is older than
        the ring buffer holds; the caller then reads from the log itself
        (``EventLog.read_after``) or answers ``reset``.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                newer = []
                if self.last_seq > seq:
                    if not self._buffer or self._buffer[0].seq > seq + 1:
                        return None
                    newer = self._newer(seq)
                    if app_id is None or any(event.app_id == app_id for event in newer):
                        return newer
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    return newer
                signal = self._signals.get(app_id)
                if signal is None:
                    signal = self._signals[app_id] = threading.Event()
            signal.wait(remaining)  # set by poll_once after the buffer moved: no wake-up is lost

    def _newer(self, seq: int) -> list[Event]:
        newer = []
        for event in reversed(self._buffer):  # the new events sit at the right end
            if event.seq <= seq:
                break
            newer.append(event)
        newer.reverse()
        return newer
