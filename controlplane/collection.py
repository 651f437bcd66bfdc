"""The base of a store that owns one collection (docs/architecture.md, "The shape of an
area": stores own their collections and declare their indexes).

A subclass names its collection and its area's ``INDEXES``
(``name, indexes = "oidc_codes", INDEXES``) and writes its queries against
``self._docs``; inserting a document and reading one by ``_id`` are the same for all.
``insert_unique`` is the insert of any store whose unique index stands for a rule
(a name taken in the application...). ``WriteGuard`` makes an application's writes of one
kind one at a time across replicas, where a count decides whether a write may happen (a
cap), which no index can say.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from shared.errors import Conflict
from shared.ids import new_id
from shared.timeutil import Clock, seconds


def insert_unique(collection, doc: dict, taken: Callable[[], Exception]) -> None:
    """Insert ``doc``; when a unique index refuses it, raise ``taken()``, the area's
    domain error for what is already there (a role's name, an account's email...)."""
    try:
        collection.insert_one(doc)
    except DuplicateKeyError:
        raise taken() from None


class Collection:
    name: str
    indexes: dict

    def __init__(self, store):
        store.declare_indexes(self.indexes)
        self._docs = store[self.name]

    def insert(self, doc: dict) -> None:
        self._docs.insert_one(doc)

    def get(self, doc_id: str) -> dict | None:
        return self._docs.find_one({"_id": doc_id})


class AppCollection(Collection):
    """A collection whose documents each belong to one application: a document is found,
    changed and removed by its application and ``_id`` together, never by ``_id`` alone."""

    def get(self, app_id: str, doc_id: str) -> dict | None:
        return self._docs.find_one({"_id": doc_id, "app_id": app_id})

    def list(self, app_id: str) -> list[dict]:
        """The application's documents in creation order."""
        return list(self._docs.find({"app_id": app_id}).sort([("created_at", ASCENDING), ("_id", ASCENDING)]))

    def update(self, app_id: str, doc_id: str, changes: dict) -> dict | None:
        """``$set`` the changes; the document after them, None when there is none."""
        return self._docs.find_one_and_update({"_id": doc_id, "app_id": app_id}, {"$set": changes},
                                              return_document=ReturnDocument.AFTER)

    def delete(self, app_id: str, doc_id: str) -> bool:
        return self._docs.delete_one({"_id": doc_id, "app_id": app_id}).deleted_count == 1


def write_guard_indexes() -> list:
    """The indexes of a ``WriteGuard``'s collection: a held guard expires, and the TTL
    monitor removes it some time after."""
    return [IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)]


class WriteGuard:
    """A lease per application, {_id: app_id, app_id, holder, expires_at}, held around a
    count and the write it allows (a cap): two replicas creating at once would otherwise
    both count below the cap and both insert. Held for ``SECONDS`` at most, so a holder
    that dies frees it; waited for ``ATTEMPTS`` times ``WAIT`` seconds, then 409
    ``CONFLICT`` (someone else is writing: try again)."""

    SECONDS = 5
    WAIT = 0.02
    ATTEMPTS = 25

    def __init__(self, collection, clock: Clock):
        self._writers = collection
        self._clock = clock

    @contextmanager
    def held(self, app_id: str):
        holder = new_id()
        for _ in range(self.ATTEMPTS):
            now = self._clock()
            if self.claim(app_id, holder, now, now + seconds(self.SECONDS)):
                break
            time.sleep(self.WAIT)  # under gevent, the other greenlets run meanwhile
        else:
            raise Conflict()
        try:
            yield
        finally:
            self._writers.delete_one({"_id": app_id, "holder": holder})

    def claim(self, app_id: str, holder: str, now, until) -> bool:
        """Take the application's guard for ``holder`` until ``until``; False while
        someone else holds it unexpired."""
        try:
            self._writers.insert_one({"_id": app_id, "app_id": app_id, "holder": holder, "expires_at": until})
            return True
        except DuplicateKeyError:
            taken = self._writers.find_one_and_update({"_id": app_id, "expires_at": {"$lte": now}},
                                                      {"$set": {"holder": holder, "expires_at": until}})
            return taken is not None
