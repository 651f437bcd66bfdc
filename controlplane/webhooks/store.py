"""MongoDB access for webhooks and their delivery queue and log.

Collections (every tenant document carries ``app_id``, so deleting an application
deletes its webhooks and deliveries with the rest of its documents):

- ``webhooks``: {_id, app_id, url, events: [kinds], secret (SecretBox ciphertext),
  created_seq (the change-log head at creation), is_active, consecutive_failures, disabled_at, created_at, updated_at}.
- ``webhook_deliveries``: one per (webhook, change-log event), unique on
  (webhook_id, event_seq) so a dispatcher that runs again never duplicates:
  {_id (the X-Service-Delivery-Id), app_id, webhook_id, event_seq, event, body (the exact
  JSON text sent, the same on every attempt), status (pending, delivered, failed,
  cancelled), due_at, lease (token of the current claim or None), attempts, retry_count,
  response_status, delivered_at, last_error, created_at, expires_at}.
  ``due_at`` is both "next attempt" and "lease expiry": claiming a delivery moves it
  ``lease_seconds`` ahead, so a worker that dies mid-send hands it to the next worker
  once that time passes, under the same id.
- ``webhook_dispatch``: the dispatcher's cursor, {_id: "cursor", seq} (global).

Retention: ``expires_at`` (created_at + IAMGATE_WEBHOOK_DELIVERY_RETENTION) carries a TTL
index, which only reclaims space.
"""
from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from shared.ids import new_id

INDEXES = {
    "webhooks": [
        IndexModel([("app_id", ASCENDING), ("created_at", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("events", ASCENDING), ("is_active", ASCENDING)]),
    ],
    "webhook_deliveries": [
        IndexModel([("webhook_id", ASCENDING), ("event_seq", ASCENDING)], unique=True),
        IndexModel([("status", ASCENDING), ("due_at", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("webhook_id", ASCENDING), ("created_at", DESCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
}

_CURSOR = "cursor"


class WebhookStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._webhooks = store["webhooks"]
        self._deliveries = store["webhook_deliveries"]
        self._dispatch = store["webhook_dispatch"]

    # --- webhooks

    def insert(self, doc: dict) -> None:
        self._webhooks.insert_one(doc)

    def get(self, app_id: str, webhook_id: str) -> dict | None:
        return self._webhooks.find_one({"_id": webhook_id, "app_id": app_id})

    def list(self, app_id: str) -> list[dict]:
        return list(self._webhooks.find({"app_id": app_id}).sort([("created_at", ASCENDING), ("_id", ASCENDING)]))

    def update(self, app_id: str, webhook_id: str, changes: dict) -> dict | None:
        return self._webhooks.find_one_and_update({"_id": webhook_id, "app_id": app_id}, {"$set": changes},
                                                  return_document=ReturnDocument.AFTER)

    def delete(self, app_id: str, webhook_id: str) -> bool:
        return self._webhooks.delete_one({"_id": webhook_id, "app_id": app_id}).deleted_count == 1

    def subscribers(self, app_id: str, kind: str, seq: int) -> list[dict]:
        """Active webhooks of the application subscribed to ``kind`` that existed before
        event ``seq`` (a webhook never receives what happened before it was created)."""
        return list(self._webhooks.find({"app_id": app_id, "events": kind, "is_active": True,
                                         "created_seq": {"$lt": seq}}, {"_id": 1, "app_id": 1}))

    def record_success(self, app_id: str, webhook_id: str) -> None:
        self._webhooks.update_one({"_id": webhook_id, "app_id": app_id, "consecutive_failures": {"$ne": 0}},
                                  {"$set": {"consecutive_failures": 0}})

    def record_failure(self, app_id: str, webhook_id: str) -> int:
        """Count one more failure in a row; returns the new count (0 when the webhook is gone)."""
        doc = self._webhooks.find_one_and_update({"_id": webhook_id, "app_id": app_id},
                                                 {"$inc": {"consecutive_failures": 1}},
                                                 projection={"consecutive_failures": 1},
                                                 return_document=ReturnDocument.AFTER)
        return doc["consecutive_failures"] if doc else 0

    def disable(self, app_id: str, webhook_id: str, now) -> bool:
        """Set is_active false once; True for the call that did it."""
        result = self._webhooks.update_one({"_id": webhook_id, "app_id": app_id, "is_active": True},
                                           {"$set": {"is_active": False, "disabled_at": now, "updated_at": now}})
        return result.modified_count == 1

    # --- deliveries

    def insert_delivery(self, doc: dict) -> bool:
        """False when this (webhook, event) already has its delivery."""
        try:
            self._deliveries.insert_one(doc)
            return True
        except DuplicateKeyError:
            return False

    def recent_deliveries(self, app_id: str, webhook_id: str, limit: int) -> list[dict]:
        cursor = self._deliveries.find({"app_id": app_id, "webhook_id": webhook_id})
        return list(cursor.sort([("created_at", DESCENDING), ("event_seq", DESCENDING)]).limit(limit))

    def delete_deliveries(self, app_id: str, webhook_id: str) -> None:
        self._deliveries.delete_many({"app_id": app_id, "webhook_id": webhook_id})

    def claim(self, now, lease_until) -> dict | None:
        """Lease the most overdue pending delivery: ``due_at`` moves to the lease expiry
        and ``lease`` gets a fresh token that the result must match."""
        return self._deliveries.find_one_and_update(
            {"status": "pending", "due_at": {"$lte": now}},
            {"$set": {"due_at": lease_until, "lease": new_id()}},
            sort=[("due_at", ASCENDING)],
            return_document=ReturnDocument.AFTER,
        )

    def finish(self, delivery: dict, changes: dict, unset_lease: bool = True) -> bool:
        """Write an attempt's outcome if this worker still holds the lease."""
        changes = {**changes, "lease": None} if unset_lease else changes
        result = self._deliveries.update_one({"_id": delivery["_id"], "lease": delivery["lease"]}, {"$set": changes})
        return result.modified_count == 1

    def drop_delivery(self, delivery: dict) -> None:
        self._deliveries.delete_one({"_id": delivery["_id"], "lease": delivery["lease"]})

    def queue_depth(self) -> int:
        return self._deliveries.count_documents({"status": "pending"})

    def get_delivery(self, delivery_id: str) -> dict | None:
        return self._deliveries.find_one({"_id": delivery_id})

    # --- dispatcher cursor

    def cursor(self, initial: int) -> int:
        """The last change-log seq dispatched; ``initial`` on the very first start."""
        doc = self._dispatch.find_one_and_update({"_id": _CURSOR}, {"$setOnInsert": {"seq": initial}}, upsert=True,
                                                 return_document=ReturnDocument.AFTER)
        return doc["seq"]

    def advance_cursor(self, seq: int) -> None:
        self._dispatch.update_one({"_id": _CURSOR}, {"$max": {"seq": seq}}, upsert=True)
