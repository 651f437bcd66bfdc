"""The base of a store that owns one collection (docs/architecture.md, "The shape of an
area": stores own their collections and declare their indexes).

A subclass names its collection and its area's ``INDEXES``
(``name, indexes = "oidc_codes", INDEXES``) and writes its queries against
``self._docs``; inserting a document and reading one by ``_id`` are the same for all.
``insert_unique`` is the insert of any store whose unique index stands for a rule
(a name taken in the application...).
"""
from __future__ import annotations

from collections.abc import Callable

from pymongo import ASCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError


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
