"""The webhook dispatcher: the change-log reader that turns events into delivery records
(spec "Events": "A delivery record is created for each dispatch"; docs/webhooks.md,
"Dispatch").

It is a ``Tailer`` consumer: ``on_event`` runs on the tailer's thread for every event,
in seq order.  For an event of a deliverable kind it writes one delivery per active
webhook of the application subscribed to that kind; its id, derived from
(webhook_id, event_seq) (``store.delivery_id``), makes a second dispatch of the same event
(a restart, or two dispatching processes) a no-op.  (A redelivery, asked for by hand,
has an id of its own: ``WebhookService.redeliver``.)  The last seq handled is persisted, so after a restart
``catch_up`` replays what the process missed from there: at most every ``CURSOR_EVERY``
seconds while events flow (and at the end of every catch-up), not at every event, since
what a restart replays twice is a no-op by those ids.

Deliverable kinds are a constructor argument (the spec's catalogue): new kinds need no
change here, only an emitter.
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
    return json.dumps({"event": event.type, "timestamp": isoformat(event.at), "data": event.data},
                      separators=(",", ":"), ensure_ascii=False, default=str)


class Dispatcher:
    def __init__(self, store: WebhookStore, events, clock, *, kinds, retention_seconds: int, on_dispatched=None):
        self.store = store
        self._events = events
        self._clock = clock
        self._kinds = frozenset(kinds)
        self._retention = timedelta(seconds=retention_seconds)
        self._on_dispatched = on_dispatched or (lambda: None)
        self._lock = threading.Lock()
        self._cursor: int | None = None
        self._saved = None  # the cursor as last persisted
        self._saved_at = float("-inf")  # time.monotonic() of that write

    def attach(self, tailer) -> None:
        """Catch up from the persisted cursor to where ``tailer`` starts, then follow it."""
        self.catch_up(tailer.last_seq)
        tailer.subscribe(self.on_event)

    def on_event(self, event) -> None:
        with self._lock:
            cursor = self._load_cursor()
            if event.seq <= cursor:
                return
            if event.seq > cursor + 1:
                self._replay(event.seq - 1)
            self._handle(event)

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
            for event in batch:
                created += self._handle(event)
        return created

    def _handle(self, event) -> int:
        created = 0
        if event.type in self._kinds and event.app_id:
            body = None
            for webhook in self.store.subscribers(event.app_id, event.type, event.seq):
                body = body or payload(event)
                now = self._clock()
                created += self.store.insert_delivery(new_event_delivery(
                    delivery_id(webhook["_id"], event.seq), event.app_id, webhook["_id"], event.seq, event.type,
                    body, now=now, expires_at=now + self._retention))
            # Persisted only for deliverable kinds: replaying internal events after a crash is free.
            self._advance(event.seq, persist=True)
        else:
            self._advance(event.seq, persist=False)
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
