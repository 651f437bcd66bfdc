"""Rate limits and counters kept in MongoDB, so every replica sees the same count.

Fixed windows: one document per (key, window start) incremented with ``$inc`` in an
upsert, which is atomic on one document; the increment happens before the guarded
work, so N parallel requests can never all slip under the limit.  Documents expire
through a TTL index (expiry is still decided in code from the window).  A limit of one
request per window is an exact cooldown instead (``_cooldown``).
"""
from __future__ import annotations

import math

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from shared.errors import RateLimited
from shared.timeutil import aware, seconds

INDEXES = {"rate_limits": [IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)]}


class RateLimiter:
    def __init__(self, store, clock):
        store.declare_indexes(INDEXES)
        self._counters = store["rate_limits"]
        self._clock = clock

    def _window(self, window: int):
        now = self._clock().timestamp()
        start = math.floor(now / window) * window
        return int(start), int(start + window), now

    def hit(self, key: str, rate, *, error: type[RateLimited] = RateLimited, cost: int = 1) -> int:
        """Count one request against ``rate`` (a ``shared.config.Rate``) and return how
        many remain; raise ``error`` (a ``RateLimited``: 429 with the X-RateLimit headers)
        past it.  A limit of 0 means unlimited."""
        if rate.limit <= 0:
            return 1 << 30
        if rate.limit == 1 and cost == 1:
            return self._cooldown(key, rate, error=error)
        start, reset_at, now = self._window(rate.window)
        doc = self._counters.find_one_and_update(
            {"_id": f"{key}|{start}"},
            {"$inc": {"n": cost}, "$setOnInsert": {"expires_at": self._clock() + seconds(rate.window + 5)}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        if doc["n"] > rate.limit:
            raise error(limit=rate.limit, reset_at=reset_at, retry_after=math.ceil(reset_at - now))
        return rate.limit - doc["n"]

    def _cooldown(self, key: str, rate, *, error) -> int:
        """One request per ``rate.window`` seconds, measured from the last one allowed.

        Fixed windows would let a request at 10:59 and another at 11:00 through a "1 per
        hour" limit; this is exact.  The upsert matches only an elapsed cooldown, so two
        racing requests cannot both start one: the loser hits the unique ``_id``."""
        now = self._clock()
        until = now + seconds(rate.window)
        try:
            self._counters.find_one_and_update(
                {"_id": f"{key}|cooldown", "until": {"$lte": now}},
                {"$set": {"until": until, "expires_at": until}},
                upsert=True,
            )
            return 0
        except DuplicateKeyError:
            current = self._counters.find_one({"_id": f"{key}|cooldown"}) or {"until": until}
            blocked_until = aware(current["until"])
            raise error(limit=1, reset_at=math.ceil(blocked_until.timestamp()),
                        retry_after=math.ceil((blocked_until - now).total_seconds())) from None

    def reset(self, key: str, rate) -> None:
        start, _, _ = self._window(rate.window)
        self._counters.delete_many({"_id": {"$in": [f"{key}|{start}", f"{key}|cooldown"]}})
