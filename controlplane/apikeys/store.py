"""MongoDB access for application API keys (collection ``api_keys``)."""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel

INDEXES = {
    "api_keys": [
        IndexModel([("key_digest", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("created_at", ASCENDING)]),
    ]
}


class ApiKeyStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._keys = store["api_keys"]

    def insert(self, doc: dict) -> None:
        self._keys.insert_one(doc)

    def active(self, app_id: str) -> list[dict]:
        """The application's keys that are not revoked, oldest first."""
        return list(self._keys.find({"app_id": app_id, "revoked_at": None}).sort("created_at", ASCENDING))

    def revoke(self, app_id: str, key_id: str, now) -> bool:
        result = self._keys.update_one({"_id": key_id, "app_id": app_id, "revoked_at": None},
                                       {"$set": {"revoked_at": now}})
        return result.modified_count == 1

    def by_digest(self, key_digest: str) -> dict | None:
        """The live key with this digest, or None."""
        return self._keys.find_one({"key_digest": key_digest, "revoked_at": None})

    def touch(self, key_id: str, now) -> None:
        self._keys.update_one({"_id": key_id}, {"$set": {"last_used_at": now}})
