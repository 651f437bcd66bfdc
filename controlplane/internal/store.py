"""MongoDB access for the internal API: the leases that count each credential's open
change streams across every replica.

Collection ``stream_leases``: {_id, credential, expires_at}; the TTL index only reclaims
space, a lease's expiry is decided in code against the clock.
"""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel

from shared.ids import new_id
from shared.timeutil import seconds

LEASE_INDEXES = {"stream_leases": [IndexModel([("credential", ASCENDING), ("expires_at", ASCENDING)]),
                                   IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)]}


class StreamLeases:
    """One lease document per open change stream (``stream_leases`` {_id, credential,
    expires_at}), renewed at every credential check, so every replica counts the same
    streams and a stream whose process died stops counting when its lease lapses."""

    def __init__(self, store, clock, *, ttl: float):
        store.declare_indexes(LEASE_INDEXES)
        self._leases = store["stream_leases"]
        self._clock = clock
        self._ttl = ttl

    def take(self, credential: str, cap: int) -> str | None:
        """A lease id, or None when ``credential`` holds ``cap`` live leases already.
        Inserted first, counted after: two racing opens may both be refused at the cap,
        never both let past it."""
        now = self._clock()
        lease_id = new_id()
        self._leases.insert_one({"_id": lease_id, "credential": credential, "expires_at": now + seconds(self._ttl)})
        if self._leases.count_documents({"credential": credential, "expires_at": {"$gt": now}}) > cap:
            self._leases.delete_one({"_id": lease_id})
            return None
        return lease_id

    def renew(self, lease_id: str) -> None:
        self._leases.update_one({"_id": lease_id}, {"$set": {"expires_at": self._clock() + seconds(self._ttl)}})

    def give_back(self, lease_id: str) -> None:
        self._leases.delete_one({"_id": lease_id})
