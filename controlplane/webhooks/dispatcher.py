"""The webhook dispatcher: the change-log reader that turns events into delivery records
(spec "Events": "A delivery record is created for each dispatch"; docs/webhooks.md,
"Dispatch").

It is a ``Tailer`` consumer: ``on_events`` runs on the tailer's thread with every poll's
events, in seq order, and reads each application's active webhooks once for them.  For an
event of a deliverable kind it writes one delivery per active webhook of the application
subscribed to that kind and created before it (a webhook created after the poll read its
events has a ``created_seq`` at or above all of them, so a read per poll misses nothing
a read per event would find); its id, derived from
(webhook_id, event_seq) (``store.delivery_id``), makes a second dispatch of the same event
(a restart, or two dispatching processes) a no-op.  (A redelivery, asked for by hand,
has an id of its own: ``WebhookService.redeliver``.)  The last seq handled is persisted, so after a restart
``catch_up`` replays what the process missed from there: at most every ``CURSOR_EVERY``
seconds while events flow (and at the end of every catch-up), not at every event, since
what a restart replays twice is a no-op by those ids.

Deliverable kinds are a constructor argument (the spec's catalogue): new kinds need no
change here, only an emitter.

At a ``user.deleted`` event it calls ``forget_user`` (``WebhookService.forget_user``):
the account deletion rewrote the logged bodies of the user's events already, but a
delivery of one of them that this dispatcher read before that rewrite and wrote after it
holds the person's email and name; events are handled in seq order, so every such
delivery is written by the time ``user.deleted`` comes.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta

from controlplane.webhooks.store import WebhookStore, delivery_id, new_event_delivery
from shared.timeutil import isoformat

log = logging.getLogger("iamgate.webhooks")

_BATCH = 500
CURSOR_EVERY = 0.1  # seconds between two writes of the cursor while events flow


def payload(event) -> str:
    """The delivery body (spec "Delivery payload"): {event, timestamp, data}, the
    timestamp being when the change happened, in ISO 8601 with UTC offset."""
    return _json({"event": event.type, "timestamp": isoformat(event.at), "data": event.data})


def pseudonymized(body: str, user_id: str, fields) -> str:
    """A delivery body with each of ``fields`` its ``data`` holds set to ``user_id``, as
    account deletion sets them in the event (``AuditLog.forget_user``); every other byte
    is the body's, since ``payload`` wrote it."""
    document = json.loads(body)
    data = document.get("data")
    if isinstance(data, dict):
        data.update({key: user_id for key in fields if key in data})
    return _json(document)


def _json(document: dict) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str)


class Dispatcher:
    def __init__(self, store: WebhookStore, events, clock, *, kinds, retention_seconds: int, on_dispatched=None,
                 forget_user=None):
        self.store = store
        self._events = events
        self._clock = clock
        self._kinds = frozenset(kinds)
        self._retention = timedelta(seconds=retention_seconds)
        self._on_dispatched = on_dispatched or (lambda: None)
        self._forget_user = forget_user or (lambda _app_id, _user_id: None)
        self._lock = threading.Lock()
        self._cursor: int | None = None
        self._saved = None  # the cursor as last persisted
        self._saved_at = float("-inf")  # time.monotonic() of that write

    def attach(self, tailer) -> None:
        """Catch up from the persisted cursor to where ``tailer`` starts, then follow it."""
        self.catch_up(tailer.last_seq)
        tailer.subscribe_batches(self.on_events)

    def on_events(self, events) -> None:
        """A poll's events, in seq order."""
        with self._lock:
            webhooks: dict[str, list] = {}
            for event in events:
                cursor = self._load_cursor()
                if event.seq <= cursor:
                    continue
                if event.seq > cursor + 1:
                    self._replay(event.seq - 1)
                self._handle(event, webhooks)

    def catch_up(self, upto: int | None = None) -> int:
        """Dispatch every event after the cursor up to ``upto`` (default: the log's head);
        returns how many deliveries were created."""
        with self._lock:
            created = self._replay(self._events.head() if upto is None else upto)
            self._save()
            return created

    def _replay(self, upto: int) -> int:
        created = 0
        while self._load_cursor() < upto:
            batch = [e for e in self._events.read_after(self._cursor, limit=_BATCH) if e.seq <= upto]
            if not batch:
                self._advance(upto, persist=True)  # the rest expired or was skipped as a gap
                self._save()
                break
            webhooks: dict[str, list] = {}
            for event in batch:
                created += self._handle(event, webhooks)
        return created

    def _handle(self, event, webhooks: dict[str, list]) -> int:
        """Dispatch one event; ``webhooks``: the active webhooks of each application read so
        far for the events at hand (filled here)."""
        created = 0
        if event.type in self._kinds and event.app_id:
            body = None
            active = webhooks.get(event.app_id)
            if active is None:
                active = webhooks[event.app_id] = self.store.active_webhooks(event.app_id)
            for webhook in active:
                created_seq = webhook.get("created_seq")
                if event.type not in webhook["events"] or type(created_seq) is not int or created_seq >= event.seq:
                    continue  # not subscribed, or created after the event (it gets what follows its creation)
                body = body or payload(event)
                now = self._clock()
                created += self.store.insert_delivery(new_event_delivery(
                    delivery_id(webhook["_id"], event.seq), event.app_id, webhook["_id"], event.seq, event.type,
                    body, now=now, expires_at=now + self._retention))
            # Persisted only for deliverable kinds: replaying internal events after a crash is free.
            self._advance(event.seq, persist=True)
        else:
            self._advance(event.seq, persist=False)
        if event.type == "user.deleted" and event.app_id and event.subject.get("user_id"):
            self._forget_user(event.app_id, event.subject["user_id"])
        if created:
            self._on_dispatched()
        return created

    def _load_cursor(self) -> int:
        if self._cursor is None:
            # First start ever: from the beginning; webhooks only get events after their creation.
            self._cursor = self.store.cursor(0)
        return self._cursor

    def _advance(self, seq: int, *, persist: bool) -> None:
        self._cursor = max(self._cursor or 0, seq)
        if persist and time.monotonic() - self._saved_at >= CURSOR_EVERY:
            self._save()

    def _save(self) -> None:
        """Persist the cursor (``$max``: never moved back by a slower dispatcher)."""
        if self._cursor is not None and self._cursor != self._saved:
            self.store.advance_cursor(self._cursor)
            self._saved, self._saved_at = self._cursor, time.monotonic()
