"""Dashboard session cookies: opaque random ids, stored as SHA-256 digests, expiring.

The cookie is HttpOnly, SameSite=Lax and Secure when IAMGATE_PUBLIC_URL is https.
Logout deletes the stored session, so a copied cookie stops working at once.
"""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel

from shared.ids import digest, random_token
from shared.timeutil import aware, seconds

INDEXES = {
    "dashboard_sessions": [
        IndexModel([("account_id", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ]
}


class DashboardSessions:
    def __init__(self, store, clock, ttl: int):
        store.declare_indexes(INDEXES)
        self._sessions = store["dashboard_sessions"]
        self._clock = clock
        self.ttl = ttl

    def create(self, account_id: str) -> str:
        raw = random_token()
        now = self._clock()
        self._sessions.insert_one({
            "_id": digest(raw), "account_id": account_id, "created_at": now, "expires_at": now + seconds(self.ttl),
        })
        return raw

    def live(self, raw: str) -> dict | None:
        """The unexpired session of cookie ``raw``: ``account_id`` and ``expires_at``
        (the console shows the expiry before it happens), or None."""
        doc = self._sessions.find_one({"_id": digest(raw)})
        if doc is None or aware(doc["expires_at"]) <= self._clock():
            return None
        return {"account_id": doc["account_id"], "expires_at": aware(doc["expires_at"])}

    def revoke(self, raw: str) -> None:
        self._sessions.delete_one({"_id": digest(raw)})

    def revoke_account(self, account_id: str) -> None:
        self._sessions.delete_many({"account_id": account_id})

    def revoke_others(self, account_id: str, keep_raw: str | None) -> None:
        """End every session of the account but the one of ``keep_raw``."""
        query: dict = {"account_id": account_id}
        if keep_raw:
            query["_id"] = {"$ne": digest(keep_raw)}
        self._sessions.delete_many(query)
