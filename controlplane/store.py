"""The one small layer over MongoDB.

``memory://`` gives mongomock inside the process (the embedded default: nothing
persists); ``mongodb://`` a real MongoDB through pymongo.  Both are used through the
same pymongo API, so domain stores never branch on the backend.  Areas declare their
indexes in ``INDEXES`` lists; ``Store.ensure_indexes`` creates them idempotently.
"""
from __future__ import annotations

import contextlib
import logging
import threading

import mongomock
import pymongo
from pymongo import IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError  # noqa: F401  (re-exported for stores)

log = logging.getLogger("iamgate.store")


class Store:
    def __init__(self, uri: str = "memory://"):
        self.uri = uri
        if uri == "memory://":
            self.client = mongomock.MongoClient(tz_aware=True)
            self.db = self.client["iamgate"]
        else:
            self.client = pymongo.MongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=5000, appname="iamgate")
            self.db = self.client.get_default_database("iamgate")
        self._indexes: dict[str, list[IndexModel]] = {}
        self._seq_lock = threading.Lock() if uri == "memory://" else contextlib.nullcontext()

    @property
    def is_memory(self) -> bool:
        return self.uri == "memory://"

    def __getitem__(self, name: str):
        return self.db[name]

    def declare_indexes(self, indexes: dict[str, list[IndexModel]]) -> None:
        for collection, models in indexes.items():
            self._indexes.setdefault(collection, []).extend(models)

    def ensure_indexes(self) -> None:
        for collection, models in self._indexes.items():
            if models:
                self.db[collection].create_indexes(models)

    def ping(self) -> bool:
        try:
            self.client.admin.command("ping")
        except Exception:  # any driver failure means "not ready"
            log.warning("store ping failed", exc_info=True)
            return False
        return True

    def next_seq(self, name: str) -> int:
        """A strictly increasing counter (atomic ``$inc`` on one document)."""
        # MongoDB makes the $inc atomic; mongomock's read-modify-write is not under real
        # threads, so the embedded store serialises it (it lives in this one process).
        with self._seq_lock:
            doc = self.db["counters"].find_one_and_update(
                {"_id": name}, {"$inc": {"seq": 1}}, upsert=True, return_document=ReturnDocument.AFTER
            )
        return doc["seq"]

    def current_seq(self, name: str) -> int:
        doc = self.db["counters"].find_one({"_id": name})
        return doc["seq"] if doc else 0

    def supports_change_streams(self) -> bool:
        if self.is_memory:
            return False
        try:
            return bool(self.client.admin.command("hello").get("setName"))
        except Exception:
            return False
