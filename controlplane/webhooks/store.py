"""MongoDB access for webhooks and their delivery queue and log.

Collections (every tenant document carries ``app_id``, so deleting an application
deletes its webhooks, queue entries and deliveries with the rest of its documents):

- ``webhooks``: {_id, app_id, url, events: [kinds], secret (SecretBox ciphertext),
  created_seq (the change-log head at creation), is_active, consecutive_failures, disabled_at, created_at, updated_at}.
- ``webhook_deliveries``, the delivery log: one per (webhook, change-log event), its
  ``_id`` derived from the pair (``delivery_id``), so a dispatcher that runs again, or a
  second one, never duplicates: {_id (the X-Service-Delivery-Id), app_id, webhook_id,
  event_seq, event, body (the exact JSON text sent, the same on every attempt, but for
  the email and name an account deletion replaces: ``WebhookService.forget_user``),
  status (pending, delivered, failed, cancelled), lease (token of the current claim or None),
  attempts, retry_count, response_status, delivered_at, last_error, created_at, expires_at,
  and ``redelivery_of``, the delivery a redelivery repeats}.  A redelivery (``POST
  .../deliveries/{id}/redeliver``) has a random ``_id``: the same event sent again.
  A delivery of another kind (``kind``, e.g. ``back-channel``: an OIDC back-channel
  logout) has a random ``_id``, ``webhook_id`` None, its target ``url`` and what its
  kind needs to build each attempt's body instead of ``body`` and ``event_seq``.
- ``webhook_queue``: one small document per *pending* delivery, same ``_id``:
  {_id, app_id, webhook_id, due_at, lease}.  ``due_at`` is both "next
  attempt" and "lease expiry": claiming moves it ``lease_seconds`` ahead, so a worker
  that dies mid-send hands the delivery to the next worker once that time passes, under
  the same id.  Workers claim here, not in the log, so a claim costs the same however
  long the log grows (benchmarks/NOTES.md, "Webhook delivery").
- ``webhook_lanes``: one per application with queued deliveries, {_id: app_id, app_id,
  ready_at, version}: when the application may next have a delivery to claim (no later
  than its oldest queued ``due_at``, later while all its slots are held), so a claim
  finds the next application to serve without reading past the deliveries of one that
  is at its cap.  ``version`` is a new random id at every write (the write that makes
  the lane again after a delete included, so no version ever comes back): a claim that
  read the lane writes it back only if nothing changed it since (compare-and-set).
- ``webhook_slots``: the attempts in flight, at most IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION
  per application: {_id: "<app_id>:<k>" (k below the cap), app_id, k, lease, until}.  A
  claim takes a slot under its lease token before it leases a queue entry; the slot is
  freed when the result is written, or lapses with the lease (``until`` is the lease
  expiry), so a worker that dies mid-send holds it no longer than its delivery.
- ``webhook_dispatch``: the dispatcher's cursor, {_id: "cursor", seq} (global).
- ``webhook_writers``: {_id: app_id, app_id, holder, expires_at}; the guard that makes an
  application's webhook creates, each counted against IAMGATE_MAX_WEBHOOKS_PER_APPLICATION,
  one at a time (held for a count and an insert, reclaimed once expired, removed by the
  TTL index after that).

Write order, so that a crash between two writes leaves a state the next step repairs:
the dispatcher writes the log record, then the queue entry (a dispatch of the same
event again, by a restarted or a second dispatcher, queues a pending record that has no
entry); a claim leases the queue entry, then stamps the log record with the same lease
token, only while it is pending; a result is written to the log first, guarded by that
token (a stale worker's result is discarded), then the queue entry is rescheduled or
removed; a deactivation's cancel (``cancel_queued``) writes the same way, log record
first.  A claimed entry whose log record is no longer pending (a worker died between
its two writes, a late second dispatch queued it again, or a deactivation cancelled it)
is removed unsent.  A queue entry is written before its lane is brought forward, and a
slot freed before it, so a claim that read the lane earlier fails its compare-and-set
instead of parking the lane past them; an entry whose lane write was lost is found
again by a second dispatch, by ``restore_lanes`` at start, or by an idle claim
(``_adopt``).

Retention: ``expires_at`` (created_at + IAMGATE_WEBHOOK_DELIVERY_RETENTION) carries a TTL
index, which only reclaims space.
"""
from __future__ import annotations

import uuid

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane.collection import AppCollection, WriteGuard, write_guard_indexes
from shared.ids import new_id
from shared.timeutil import aware

INDEXES = {
    "webhooks": [
        IndexModel([("app_id", ASCENDING), ("created_at", ASCENDING)]),  # also the dispatcher's read
    ],
    "webhook_deliveries": [
        IndexModel([("app_id", ASCENDING), ("webhook_id", ASCENDING), ("created_at", DESCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
        IndexModel([("app_id", ASCENDING), ("event_seq", ASCENDING)]),  # an account deletion's rewrite
    ],
    "webhook_queue": [
        IndexModel([("due_at", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("webhook_id", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("due_at", ASCENDING)]),  # an application's next delivery
    ],
    "webhook_lanes": [
        IndexModel([("ready_at", ASCENDING)]),
    ],
    "webhook_slots": [
        IndexModel([("app_id", ASCENDING), ("k", ASCENDING)]),
        IndexModel([("until", ASCENDING)], expireAfterSeconds=0),  # slots whose holder died
    ],
    "webhook_writers": write_guard_indexes(),
}

_CURSOR = "cursor"
_DELIVERY_IDS = uuid.UUID("6f0c1c8e-4f4e-4d0b-9a57-2b1f3c0d9e11")  # namespace of delivery ids
_CLAIM_TRIES = 20
_CANCEL_BATCH = 1000  # queued deliveries cancelled per write (``cancel_queued``)
INACTIVE = "webhook inactive"  # the last_error of a delivery cancelled because its webhook was deactivated


def unsubscribed(event: str) -> str:
    """The last_error of a delivery cancelled because its webhook's events no longer name its kind."""
    return f"webhook no longer subscribed to {event}"


def _upsert(collection, filter_, update):
    """``update_one`` with ``upsert``; of two racing upserts of one ``_id`` the one that
    loses the insert applies as an update."""
    try:
        return collection.update_one(filter_, update, upsert=True)
    except DuplicateKeyError:
        return collection.update_one(filter_, update, upsert=True)


def new_event_delivery(delivery_id: str, app_id: str, webhook_id: str, event_seq: int, event: str, body: str, *,
                       now, expires_at, redelivery_of: str | None = None) -> dict:
    """A new pending delivery record of a webhook's event."""
    return {
        "_id": delivery_id, "app_id": app_id, "webhook_id": webhook_id, "event_seq": event_seq, "event": event,
        "body": body, "status": "pending", "lease": None, "attempts": 0, "retry_count": 0, "response_status": None,
        "delivered_at": None, "last_error": None, "created_at": now, "expires_at": expires_at,
        "redelivery_of": redelivery_of,
    }


def delivery_id(webhook_id: str, event_seq: int) -> str:
    """The id of the delivery of event ``event_seq`` to ``webhook_id``: a UUID derived from
    the pair (RFC 9562 version 5), so dispatching an event twice names the same delivery."""
    return str(uuid.uuid5(_DELIVERY_IDS, f"{webhook_id}:{event_seq}"))


class WebhookStore(AppCollection):
    name, indexes = "webhooks", INDEXES

    def __init__(self, store):
        super().__init__(store)
        self._deliveries = store["webhook_deliveries"]
        self._queue = store["webhook_queue"]
        self._dispatch = store["webhook_dispatch"]
        self._writers = store["webhook_writers"]
        self._lanes = store["webhook_lanes"]
        self._slots = store["webhook_slots"]

    def write_guard(self, clock) -> WriteGuard:
        """The guard of the creates counted against the cap (``webhook_writers``)."""
        return WriteGuard(self._writers, clock)

    # --- webhooks

    def count(self, app_id: str) -> int:
        return self._docs.count_documents({"app_id": app_id})

    def active_webhooks(self, app_id: str) -> list[dict]:
        """The application's active webhooks: the events each subscribes to and the seq
        of the change log's head at its creation (``created_seq``)."""
        return list(self._docs.find({"app_id": app_id, "is_active": True},
                                    {"_id": 1, "app_id": 1, "events": 1, "created_seq": 1}))

    def record_success(self, app_id: str, webhook_id: str) -> None:
        self._docs.update_one({"_id": webhook_id, "app_id": app_id, "consecutive_failures": {"$ne": 0}},
                              {"$set": {"consecutive_failures": 0}})

    def record_failure(self, app_id: str, webhook_id: str) -> tuple[int, bool]:
        """Count one more failure in a row; returns the new count and whether the webhook
        is active ((0, False) when it is gone), read in the same write."""
        doc = self._docs.find_one_and_update({"_id": webhook_id, "app_id": app_id},
                                             {"$inc": {"consecutive_failures": 1}},
                                             projection={"consecutive_failures": 1, "is_active": 1},
                                             return_document=ReturnDocument.AFTER)
        return (doc["consecutive_failures"], bool(doc.get("is_active"))) if doc else (0, False)

    def disable(self, app_id: str, webhook_id: str, now) -> bool:
        """Set is_active false once; True for the call that did it."""
        result = self._docs.update_one({"_id": webhook_id, "app_id": app_id, "is_active": True},
                                       {"$set": {"is_active": False, "disabled_at": now, "updated_at": now}})
        return result.modified_count == 1

    # --- deliveries

    def insert_delivery(self, doc: dict) -> bool:
        """Queue a new delivery (``doc`` is its log record, ``_id`` from ``delivery_id``);
        False when this (webhook, event) already has its delivery.  A second dispatch
        also queues a delivery whose first dispatch died between its two writes."""
        try:
            self._deliveries.insert_one(doc)
            created = True
        except DuplicateKeyError:
            logged = self._deliveries.find_one({"_id": doc["_id"]}, {"status": 1})
            if logged is None or logged["status"] != "pending":
                return False
            created = False
        entry = {"_id": doc["_id"], "app_id": doc["app_id"], "webhook_id": doc["webhook_id"],
                 "due_at": doc["created_at"], "lease": None}
        self._queue.update_one({"_id": doc["_id"]}, {"$setOnInsert": entry}, upsert=True)
        self._bring_forward(doc["app_id"], doc["created_at"])
        return created

    def recent_deliveries(self, app_id: str, webhook_id: str, limit: int) -> list[dict]:
        cursor = self._deliveries.find({"app_id": app_id, "webhook_id": webhook_id})
        return list(cursor.sort([("created_at", DESCENDING), ("event_seq", DESCENDING)]).limit(limit))

    def delete_deliveries(self, app_id: str, webhook_id: str) -> None:
        self._queue.delete_many({"app_id": app_id, "webhook_id": webhook_id})
        self._deliveries.delete_many({"app_id": app_id, "webhook_id": webhook_id})

    def claim(self, now, lease_until, *, per_application: int) -> dict | None:
        """Lease the most overdue queued delivery of an application with fewer than
        ``per_application`` attempts in flight, and return its log record: the
        application's slot, the queue entry (its ``due_at`` moves to the lease expiry) and
        the log record all get a fresh ``lease`` token that the result must match.

        The application comes from the lanes (oldest ``ready_at`` first), its delivery
        from its own queue entries (oldest ``due_at`` first), so a claim reads a few
        documents however many deliveries an application at its cap has queued."""
        for _ in range(_CLAIM_TRIES):
            lane = self._lanes.find_one({"ready_at": {"$lte": now}}, sort=[("ready_at", ASCENDING)])
            if lane is None:
                if self._adopt(now):
                    continue
                return None
            app_id = lane["_id"]
            if self._queue.find_one({"app_id": app_id, "due_at": {"$lte": now}}, {"_id": 1}) is None:
                self._settle(lane)  # nothing due: the lane waits for its next delivery, or goes
                continue
            token = new_id()
            free_at = self._take_slot(app_id, token, now, lease_until, per_application)
            if free_at is not None:
                # At its cap: parked until a held slot's lease ends; a finish brings it back sooner.
                self._lanes.update_one({"_id": app_id, "version": lane["version"]},
                                       {"$set": {"ready_at": free_at, "version": new_id()}})
                continue
            entry = self._queue.find_one_and_update(
                {"app_id": app_id, "due_at": {"$lte": now}}, {"$set": {"due_at": lease_until, "lease": token}},
                sort=[("due_at", ASCENDING)], return_document=ReturnDocument.AFTER,
            )
            if entry is None:  # another worker took the last due one meanwhile
                self._release(app_id, token)
                continue
            self._settle(lane)
            delivery = self._deliveries.find_one_and_update({"_id": entry["_id"], "status": "pending"},
                                                            {"$set": {"lease": token}},
                                                            return_document=ReturnDocument.AFTER)
            if delivery is not None:
                return delivery
            # Finished already (or deleted with its webhook): a leftover entry, removed unsent.
            self._queue.delete_one({"_id": entry["_id"], "lease": token})
            self._release(app_id, token)
        return None

    def finish(self, delivery: dict, changes: dict, retry_at=None) -> bool:
        """Write an attempt's outcome if this worker still holds the lease; then queue the
        retry at ``retry_at``, or remove the finished delivery from the queue; and free
        the application's slot."""
        key = {"_id": delivery["_id"], "lease": delivery["lease"]}
        # False: the lease lapsed and another worker owns the delivery now.
        written = self._deliveries.update_one(key, {"$set": {**changes, "lease": None}}).modified_count == 1
        if written and retry_at is not None:
            self._queue.update_one(key, {"$set": {"due_at": retry_at, "lease": None}})
        elif written:
            self._queue.delete_one(key)
        self._release(delivery["app_id"], delivery["lease"])
        return written

    def cancel_queued(self, app_id: str, webhook_id: str, now, reason: str) -> int:
        """Cancel the webhook's queued deliveries that no worker holds (status cancelled,
        ``last_error`` ``reason``, kept in the log) and remove their queue entries; the
        number cancelled.  Called once the webhook is inactive, so that turning it on again
        brings none of them back.

        Held ones (a lease that has not lapsed) are left to their worker, which reads the
        webhook before it sends and again when it queues a retry.  The others are those
        whose queue entry has no lease, or one that lapsed: each is cancelled only while
        its log record is pending under the lease read here (none, or that lapsed one), and
        its entry removed only while it holds that lease, the log first, as every result
        is written.  So a claim racing the cancel either stamped the record first (the
        cancel passes it by; its worker cancels it) or finds it no longer pending and
        removes the entry unsent, freeing its slot.  No slot is taken here; the lane goes
        when nothing is left queued (a claim would settle it anyway)."""
        entries = list(self._queue.find({"app_id": app_id, "webhook_id": webhook_id,
                                         "$or": [{"lease": None}, {"due_at": {"$lte": now}}]}, {"lease": 1}))
        cancelled = 0
        for start in range(0, len(entries), _CANCEL_BATCH):
            batch = entries[start:start + _CANCEL_BATCH]
            ids, leases = [e["_id"] for e in batch], list({e["lease"] for e in batch} | {None})
            cancelled += self._deliveries.update_many(
                {"_id": {"$in": ids}, "status": "pending", "lease": {"$in": leases}},
                {"$set": {"status": "cancelled", "last_error": reason, "lease": None}}).modified_count
            self._queue.delete_many({"_id": {"$in": ids}, "lease": {"$in": leases}})
        if entries:
            self._drop_empty_lane(app_id)
        return cancelled

    def drop_delivery(self, delivery: dict) -> None:
        key = {"_id": delivery["_id"], "lease": delivery["lease"]}
        self._deliveries.delete_one(key)
        self._queue.delete_one(key)
        self._release(delivery["app_id"], delivery["lease"])

    def restore_lanes(self) -> None:
        """Give every application with queued deliveries a lane that is due no later than
        its oldest one (deliveries queued before lanes existed, or whose lane write was
        lost with its process)."""
        for app_id in self._queue.distinct("app_id"):
            head = self._head(app_id)
            if head is not None:
                self._bring_forward(app_id, head["due_at"])

    def _take_slot(self, app_id: str, token: str, now, until, cap: int):
        """Hold one of the application's ``cap`` slots for the lease ``token`` until
        ``until``: None when taken, else when the first held slot's lease ends.  Each
        slot is one document (``_id`` "<app_id>:<k>", k below the cap), taken by an insert
        or, once its lease has lapsed, by a compare-and-set on ``until``: two claims never
        hold one slot, so never more than ``cap`` attempts are in flight.  Every slot whose
        lease has not lapsed counts, those above a cap lowered since (held by workers on
        the old setting) too; only claims racing while such slots are held may still each
        take one below the new cap, for as long as those leases last."""
        slots = list(self._slots.find({"app_id": app_id}, {"k": 1, "until": 1}))
        live = [aware(slot["until"]) for slot in slots if aware(slot["until"]) > now]
        if len(live) >= cap:  # every one counts, k above a lowered cap too
            return min(live)
        held = {slot["k"]: slot for slot in slots if slot["k"] < cap}
        for k in range(cap):
            slot = held.get(k)
            if slot is None:
                try:
                    self._slots.insert_one({"_id": f"{app_id}:{k}", "app_id": app_id, "k": k, "lease": token,
                                            "until": until})
                    return None
                except DuplicateKeyError:
                    continue  # another claim took it just now
            if aware(slot["until"]) <= now and self._slots.update_one(
                    {"_id": slot["_id"], "until": slot["until"]},
                    {"$set": {"lease": token, "until": until}}).modified_count == 1:
                return None  # its holder's lease had lapsed
        return min((aware(slot["until"]) for slot in held.values()), default=now)

    def _release(self, app_id: str, token: str) -> None:
        """Free the slot the lease ``token`` holds (if the lease has not been taken over)
        and bring the lane forward to the application's next delivery (a claim may have
        parked it while the slot was held), or remove it when there is none."""
        self._slots.delete_one({"app_id": app_id, "lease": token})
        lane = self._lanes.find_one({"_id": app_id}, {"version": 1})  # read before the queue: see _settle
        head = self._head(app_id)
        if head is not None:
            self._bring_forward(app_id, head["due_at"])
        elif lane is not None:
            self._lanes.delete_one({"_id": app_id, "version": lane["version"]})

    def _drop_empty_lane(self, app_id: str) -> None:
        """Remove the application's lane if it has nothing queued.  The lane is read
        before the queue (see ``_settle``): a delivery queued meanwhile changed its version."""
        lane = self._lanes.find_one({"_id": app_id}, {"version": 1})
        if lane is not None and self._head(app_id) is None:
            self._lanes.delete_one({"_id": app_id, "version": lane["version"]})

    def _settle(self, lane: dict) -> None:
        """Move the lane to its application's next delivery, or remove it when it has
        none, unless the lane was written since it was read: a delivery queued after
        that read has brought it forward since, so the compare-and-set fails."""
        head = self._head(lane["_id"])
        key = {"_id": lane["_id"], "version": lane["version"]}
        if head is None:
            self._lanes.delete_one(key)
        else:
            self._lanes.update_one(key, {"$set": {"ready_at": head["due_at"], "version": new_id()}})

    def _adopt(self, now) -> bool:
        """With no lane ready: give every application with a due queue entry and no lane
        one (its lane write was lost, or it was queued by a release without lanes); True
        when one was made.  Applications whose lane is parked at their cap are passed over,
        so a lane-less delivery is not held back behind another tenant's backlog."""
        due = self._queue.distinct("app_id", {"due_at": {"$lte": now}})
        if not due:
            return False
        laned = {lane["_id"] for lane in self._lanes.find({"_id": {"$in": due}}, {"_id": 1})}
        made = False
        for app_id in due:
            if app_id in laned:
                continue
            head = self._head(app_id)
            if head is not None:
                result = _upsert(self._lanes, {"_id": app_id},
                                 {"$setOnInsert": {"app_id": app_id, "ready_at": head["due_at"], "version": new_id()}})
                made = made or result.upserted_id is not None
        return made

    def _bring_forward(self, app_id: str, ready_at) -> None:
        """The application's lane is ready at ``ready_at`` at the latest (made if missing)."""
        _upsert(self._lanes, {"_id": app_id},
                {"$min": {"ready_at": ready_at}, "$set": {"version": new_id()}, "$setOnInsert": {"app_id": app_id}})

    def _head(self, app_id: str) -> dict | None:
        """The application's queue entry due first (leased ones included)."""
        return self._queue.find_one({"app_id": app_id}, {"due_at": 1}, sort=[("due_at", ASCENDING)])

    def queue_depth(self) -> int:
        return self._queue.count_documents({})

    def get_delivery(self, delivery_id: str) -> dict | None:
        return self._deliveries.find_one({"_id": delivery_id})

    def deliveries_of_events(self, app_id: str, event_seqs: list[int]) -> list[dict]:
        """The ``_id`` and ``body`` of every delivery (redeliveries included) of these
        events of the application, to any of its webhooks."""
        return list(self._deliveries.find({"app_id": app_id, "event_seq": {"$in": list(event_seqs)}, "kind": None},
                                          {"_id": 1, "body": 1}))

    def replace_body(self, delivery_id: str, before: str, after: str) -> None:
        """Write ``after`` as the delivery's body, if it still is ``before``."""
        self._deliveries.update_one({"_id": delivery_id, "body": before}, {"$set": {"body": after}})

    def find_event_delivery(self, app_id: str, webhook_id: str, delivery_id: str) -> dict | None:
        """The delivery of an event to this webhook of this application (never one of
        another kind, another webhook or another application)."""
        return self._deliveries.find_one({"_id": delivery_id, "app_id": app_id, "webhook_id": webhook_id,
                                          "kind": None})

    # --- dispatcher cursor

    def cursor(self, initial: int) -> int:
        """The last change-log seq dispatched; ``initial`` on the very first start."""
        doc = self._dispatch.find_one_and_update({"_id": _CURSOR}, {"$setOnInsert": {"seq": initial}}, upsert=True,
                                                 return_document=ReturnDocument.AFTER)
        return doc["seq"]

    def advance_cursor(self, seq: int) -> None:
        self._dispatch.update_one({"_id": _CURSOR}, {"$max": {"seq": seq}}, upsert=True)
