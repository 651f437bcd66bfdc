"""MongoDB access for application API keys (collection ``api_keys``: {_id, app_id, name,
key_prefix, key_digest, permissions, created_at, last_used_at, revoked_at, created_by}).
``created_by`` is the dashboard account that minted the key (absent on keys older than
the field, and on keys made outside the dashboard)."""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel

INDEXES = {
    "api_keys": [
        IndexModel([("key_digest", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("created_at", ASCENDING)]),
        IndexModel([("created_by", ASCENDING)]),
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

    def active_created_by(self, account_ids: list[str], app_ids=None) -> list[dict]:
        """Live keys minted by these accounts, on these applications when given."""
        query = {"created_by": {"$in": account_ids}, "revoked_at": None}
        if app_ids is not None:
            query["app_id"] = {"$in": list(app_ids)}
        return list(self._keys.find(query, {"app_id": 1}))

    def revoke(self, app_id: str, key_id: str, now) -> bool:
        result = self._keys.update_one({"_id": key_id, "app_id": app_id, "revoked_at": None},
                                       {"$set": {"revoked_at": now}})
        return result.modified_count == 1

    def by_digest(self, key_digest: str) -> dict | None:
        """The live key with this digest, or None."""
        return self._keys.find_one({"key_digest": key_digest, "revoked_at": None})

    def touch(self, key_id: str, now) -> None:
        self._keys.update_one({"_id": key_id}, {"$set": {"last_used_at": now}})
