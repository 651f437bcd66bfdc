"""The change log: one stream, three readers (webhooks, decision invalidation, audit).

``EventLog.emit`` is the single entry point every state change calls.  It appends
``{seq, app_id, type, subject, data, user_ids, at}`` with ``seq`` from an atomic
counter, and records the seq as the request's revision (``X-Iamgate-Revision``).  The
kinds it accepts are the catalogue in ``shared.event_types``.

Each event is also its change's audit record (docs/audit.md): ``emit`` adds the
action, target, result and who did it from where (the request's
``controlplane.audit.context``).  Audit records that are not changes of an application's
data (attempts, dashboard actions: ``EventLog.record``) live in the same collection,
numbered by the same counter so an application's records have one order, with ``type``
None: the change log's readers (the tailer's consumers, the decision stream's replay,
webhook dispatch) skip them (``Event.is_change``).

``Tailer`` is the one reader of the ``events`` collection per process.  It follows
the log (a MongoDB change stream would do on a replica set; the indexed ``seq > last``
poll every few tens of milliseconds works everywhere, and an in-process poke makes
writes of this process visible at once, handed over without reading them back while no
other process's event comes first), keeps the recent events in a ring buffer and
wakes every consumer, so N streaming clients cost one poll, not N.
"""
from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

from pymongo import ASCENDING, IndexModel

from controlplane.audit import context as audit_context
from controlplane.audit.actions import ACTIONS, change_action, target_of
from controlplane.store import UNREACHABLE, one_line
from shared.concurrency import BackgroundLoop
from shared.event_types import EVENT_TYPES
from shared.ids import new_id
from shared.invalidation import concerns_decisions
from shared.timeutil import aware

log = logging.getLogger("iamgate.events")

INDEXES = {
    "events": [
        IndexModel([("seq", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("seq", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("subject.user_id", ASCENDING), ("seq", ASCENDING)]),
    ]
}
DEFAULT_RETENTION_DAYS = 90
ORGANIZATIONS_KNOWN = 10_000  # application -> organization pairs a process remembers

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

    @property
    def is_change(self) -> bool:
        """A change-log event; False for an audit record of its own (an attempt)."""
        return self.type is not None

    @classmethod
    def from_doc(cls, doc) -> Event:
        return cls(doc["seq"], doc.get("app_id"), doc["type"], doc.get("subject") or {},
                   doc.get("data") or {}, tuple(doc.get("user_ids") or ()), doc["at"])


class EventLog:
    def __init__(self, store, clock, *, organization_of=lambda _app_id: None,
                 retention_days: int = DEFAULT_RETENTION_DAYS):
        """``organization_of(app_id)``: the organization an application belongs to (read
        once per application and process: an application never changes organization)."""
        store.declare_indexes(INDEXES)
        store.declare_indexes({"events": [
            IndexModel([("at", ASCENDING)], expireAfterSeconds=retention_days * 24 * 3600)]})
        self._events = store["events"]
        self._store = store
        self._clock = clock
        self._organization_of = organization_of
        self._organizations: dict[str, str | None] = {}
        self.tailer: Tailer | None = None
        self._listeners = []

    @property
    def records(self):
        """The collection, for the audit log's reads (``controlplane.audit.store``)."""
        return self._events

    def listen(self, callback) -> None:
        """Call ``callback(event)`` synchronously for every event this process emits
        (in-process caches drop entries before the write's response is sent; other
        replicas learn through their tailer)."""
        self._listeners.append(callback)

    def emit(self, app_id, type_, data=None, *, subject=None, user_ids=(), target=None) -> int:
        """Append one event and return its seq (also the request's revision).

        ``type_`` must be a kind of the catalogue (``shared.event_types``; ValueError
        otherwise, before anything is written). ``subject`` names the entities it is about
        (``{"user_id": ...}``), ``user_ids`` lists users whose authorization answers may
        have changed. ``target`` (``{type, id, display}``) is the audit record's, when the
        event's ids do not say it (``controlplane.audit.actions.target_of``).
        """
        if type_ not in EVENT_TYPES:
            raise ValueError(f"event type {type_!r} is not in the catalogue (shared/event_types.py)")
        subject, data = subject or {}, data or {}
        seq, doc = self._append(app_id, type_, change_action(type_, data),
                                target or target_of(type_, app_id, subject, data), audit_context.success(), data,
                                subject=subject, user_ids=list(user_ids))
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

    def record(self, action: str, *, result: dict, target: dict, data=None, app_id=None, organization_id=None,
               actor=None) -> int:
        """Append an audit record that is not a change-log event (an attempt, a dashboard
        action) and return its seq; see ``controlplane.audit.service.AuditLog.record``."""
        if action not in ACTIONS:
            raise ValueError(f"audit action {action!r} is not in the catalogue (controlplane/audit/actions.py)")
        seq, _ = self._append(app_id, None, action, target, result, data or {}, organization_id=organization_id,
                              actor=actor)
        return seq

    def _append(self, app_id, type_, action, target, result, data, *, subject=None, user_ids=(),
                organization_id=None, actor=None) -> tuple[int, dict]:
        context = audit_context.current()
        if actor is None:
            actor = _actor(context, subject)
        if organization_id is None and app_id is not None:
            organization_id = (context.organization_id if context is not None and context.app_id == app_id
                               else self._organization(app_id))
        seq = self._store.next_seq("events")
        doc = {
            "_id": new_id(),
            "seq": seq,
            "app_id": app_id,
            "type": type_,
            "subject": subject or {},
            "data": data,
            "user_ids": list(user_ids),
            "at": self._clock(),
            "action": action,
            "result": result,
            "actor": actor,
            "target": target,
            "organization_id": organization_id,
            "request_id": context.request_id if context is not None else None,
            "ip": context.ip if context is not None else None,
            "user_agent": context.user_agent if context is not None else None,
            "sealed": False,  # controlplane.audit.chain seals it into its application's chain
        }
        self._events.insert_one(doc)
        if self.tailer is not None:
            self.tailer.wrote(doc)
        return seq, doc

    def _organization(self, app_id: str) -> str | None:
        try:
            return self._organizations[app_id]
        except KeyError:
            if len(self._organizations) >= ORGANIZATIONS_KNOWN:
                self._organizations.clear()
            organization_id = self._organizations[app_id] = self._organization_of(app_id)
            return organization_id

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

    def logged(self, app_id, user_id, type_) -> bool:
        """Whether the log holds an event of kind ``type_`` about ``user_id`` (its subject):
        how a repeated operation that happens once per user (an account deletion) tells
        whether the attempt that made the change wrote its event before it failed. One
        read of the (application, subject user) index."""
        return self._events.find_one({"app_id": app_id, "subject.user_id": user_id, "type": type_},
                                     projection={"_id": 1}) is not None

    def logged_for_application(self, app_id, type_) -> bool:
        """Whether the log holds an event of kind ``type_`` of the application: how the
        finish of an interrupted application deletion tells whether its
        ``application.deleted`` was written.  Read through the (application, seq) index,
        newest first: the event is among the application's last."""
        return self._events.find_one({"app_id": app_id, "type": type_}, projection={"_id": 1},
                                     sort=[("seq", -1)]) is not None

    def for_user(self, app_id, user_id, limit=1000) -> list[Event]:
        cursor = self._events.find({"app_id": app_id, "subject.user_id": user_id}).sort("seq", ASCENDING).limit(limit)
        return [Event.from_doc(d) for d in cursor]


_PLAIN = (str, int, float, bool, type(None))


def _plain(value) -> bool:
    """Whether the store gives ``value`` back as it is (JSON's values)."""
    if type(value) in _PLAIN:
        return True
    if type(value) is dict:
        return all(type(key) is str and _plain(item) for key, item in value.items())
    if type(value) is list:
        return all(_plain(item) for item in value)
    return False


def _as_read_back(doc: dict) -> Event | None:
    """The ``Event`` reading ``doc`` back from the store would give, or None when the
    store would give back something else than what ``doc`` holds."""
    at, user_ids = doc.get("at"), doc.get("user_ids")
    if type(at) is not datetime or type(user_ids) is not list or not _plain([doc.get("subject"), doc.get("data"),
                                                                                user_ids]):
        return None
    at = aware(at).astimezone(UTC)
    read_back = {**doc, "at": at.replace(microsecond=at.microsecond - at.microsecond % 1000)}
    # Copies: the emitter's dicts are its own to change later; the store's are not.
    read_back["subject"], read_back["data"] = _copy(doc.get("subject")), _copy(doc.get("data"))
    return Event.from_doc(read_back)


def _copy(value):
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    return value


def _actor(context, subject) -> dict:
    """Who a record's change is by: the request's authenticated principal; on a public
    route (a registration, a login, a reset by emailed token) the user the change is about;
    outside any request, the system."""
    if context is None:
        return audit_context.SYSTEM
    if context.actor is not None:
        return context.actor
    if subject and subject.get("user_id"):
        return audit_context.actor("user", subject["user_id"])
    return audit_context.actor("system", None)


class Tailer(BackgroundLoop):
    """Follows the events collection for this process and wakes its consumers.

    Consumers either register a callback (``subscribe``; called on the tailer's thread
    for every event, in seq order) or block in ``wait_after`` (streams).  A missing seq
    (an insert in flight on another replica) is waited for up to ``gap_timeout`` before
    it is skipped, so consumers see events in order.
    """

    BUFFER = 20000
    thread_name = "iamgate-tailer"

    def __init__(self, log_: EventLog, *, interval_ms: int = 25, gap_timeout: float = 2.0, deferred: bool = False,
                 buffered: bool = True):
        """``deferred``: read the log's head at ``begin()`` rather than now, so building the
        services needs no store (the start-up step calls ``begin`` once MongoDB answers).
        ``buffered``: keep the last ``BUFFER`` events for ``wait_after`` (the change streams
        a web process serves: about 1 KB an event); a process that serves none, the
        webhook worker, keeps none, and its ``wait_after`` always sends the caller to the
        log."""
        super().__init__()
        self._log = log_
        self._interval = interval_ms / 1000.0
        self._gap_timeout = gap_timeout
        self._buffer: deque[Event] = deque(maxlen=self.BUFFER if buffered else 0)
        self._lock = threading.Lock()
        # One signal per application that has waiters (None: waiters for every application)
        # and per kind of wake-up (any change, or only a change that concerns decision
        # services), fired and replaced when such events arrive: a stream of one tenant does
        # not wake for the other tenants' changes, and the woken waiters do not queue on a
        # lock the poller still holds (a Condition's notify_all did both; benchmarks/NOTES.md).
        self._signals: dict[tuple[str | None, bool], threading.Event] = {}
        self._poke = threading.Event()
        self._callbacks = []
        self._batch_callbacks = []
        self.last_seq = None if deferred else log_.head()
        self._gap_since = None
        self._polled_at: float | None = None  # time.monotonic() of the last poll that did not fail
        # Events this process wrote, by seq, for the next poll (``wrote``); kept while the
        # tailer runs (``start``), or when a test sets it.
        self.keep_written = False
        self._written: dict[int, Event] = {}
        log_.tailer = self

    def begin(self) -> None:
        """Start from the log's current head (once; a no-op when already positioned)."""
        if self.last_seq is None:
            self.last_seq = self._log.head()

    def subscribe(self, callback) -> None:
        """``callback(event)`` for every change, in seq order, on the tailer's thread."""
        self._callbacks.append(callback)

    def subscribe_batches(self, callback) -> None:
        """``callback(events)`` once per poll with the changes it read, in seq order (after
        the per-event callbacks): for a consumer that reads once for many events."""
        self._batch_callbacks.append(callback)

    def start(self) -> Tailer:
        self.keep_written = True
        return super().start()

    def stop(self) -> None:
        super().stop()
        self._poke.set()
        with self._lock:
            fired, self._signals = list(self._signals.values()), {}
        for signal in fired:
            signal.set()

    def poke(self) -> None:
        self._poke.set()

    def wrote(self, doc: dict) -> None:
        """An event this process has just written (it is in the store): kept for the next
        poll, which then takes it from here rather than reading it back while no event of
        another process comes before it (a token answer's event, at every refresh, is
        otherwise read back at once, the poke's poll). Only an event the store would give
        back as it is: plain values in its subject and data (a datetime there comes back
        to the millisecond), and ``at`` as the store gives it back (UTC, to the
        millisecond)."""
        if not self.keep_written:
            return
        event = _as_read_back(doc)
        if event is None:
            return
        if len(self._written) >= self.BUFFER:  # a tailer that stopped polling: start over
            self._written.clear()
        self._written[event.seq] = event

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
        fresh = self._written_after(self.last_seq)
        if not fresh:
            fresh = self._log.read_after(self.last_seq)
            for event in fresh:  # the store's event at a seq, not one kept here
                self._written.pop(event.seq, None)
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
        last = ordered[-1].seq
        changes = [event for event in ordered if event.is_change]  # attempts are the audit log's alone
        for event in changes:
            for callback in self._callbacks:
                try:
                    callback(event)
                except Exception:
                    log.exception("event consumer failed", extra={"event_type": event.type})
        for batch_callback in self._batch_callbacks if changes else ():
            try:
                batch_callback(changes)
            except Exception:
                log.exception("event consumer failed", extra={"events": len(changes)})
        with self._lock:
            self._buffer.extend(ordered)  # attempts too: the buffer covers every seq, without gaps
            self.last_seq = last
            fired = self._fired(changes) if changes and self._signals else ()
        for signal in fired:
            signal.set()
        return len(changes)

    def _fired(self, changes: list[Event]) -> list[threading.Event]:
        """The signals ``changes`` fire, taken out (called with the lock held)."""
        apps, deciding = {None}, set()
        for event in changes:
            apps.add(event.app_id)
            if concerns_decisions(event):
                deciding.update((None, event.app_id))
        keys = [(app, False) for app in apps] + [(app, True) for app in deciding]
        return [self._signals.pop(key) for key in keys if key in self._signals]

    def _written_after(self, seq: int) -> list[Event]:
        """The events written by this process from ``seq + 1`` on, while their seqs follow
        one another (empty when the next one is not ours: the store is read)."""
        written = self._written
        if not written:
            return []
        events = []
        while (event := written.pop(seq + 1, None)) is not None:
            events.append(event)
            seq += 1
        if not events:  # drop what a read delivered meanwhile (a copy: requests add as it goes)
            for old in [old for old in list(written) if old <= seq]:
                written.pop(old, None)
        return events

    def wait_after(self, seq: int, timeout: float, app_id: str | None = None, *,
                   decisions_only: bool = False) -> list[Event] | None:
        """Events with seq > ``seq``, blocking up to ``timeout`` seconds for the first one
        of ``app_id`` (of any application when None); with ``decisions_only``, for the
        first one that concerns decision services (``shared.invalidation.concerns_decisions``).

        Every newer change is returned, other applications' too, so the caller moves past
        them (records that are not changes, attempts, never wake a waiter); a waiter for
        one application is woken only by its own application's events (and by the
        timeout), never by the others', and a waiter for decisions only by those.
        Returns None when ``seq`` is older than the ring buffer holds; the caller then
        reads from the log itself (``EventLog.read_after``) or answers ``reset``.
        """
        deadline = time.monotonic() + timeout
        key = (app_id, decisions_only)
        while True:
            with self._lock:
                newer = []
                if self.last_seq > seq:
                    if not self._buffer or self._buffer[0].seq > seq + 1:
                        return None
                    newer = self._newer(seq)
                    if any((app_id is None or event.app_id == app_id)
                           and (not decisions_only or concerns_decisions(event)) for event in newer):
                        return newer
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    return newer
                signal = self._signals.get(key)
                if signal is None:
                    signal = self._signals[key] = threading.Event()
            signal.wait(remaining)  # set by poll_once after the buffer moved: no wake-up is lost

    def _newer(self, seq: int) -> list[Event]:
        newer = []
        for event in reversed(self._buffer):  # the new events sit at the right end
            if event.seq <= seq:
                break
            if event.is_change:
                newer.append(event)
        newer.reverse()
        return newer
