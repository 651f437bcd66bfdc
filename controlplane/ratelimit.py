"""Rate limits and counters kept in MongoDB, so every replica sees the same count.

Fixed windows: one document per (key, window start) incremented with ``$inc`` in an
upsert, which is atomic on one document; the increment happens before the guarded
work, so N parallel requests can never all slip under the limit.  Documents expire
through a TTL index (expiry is still decided in code from the window).
"""
from __future__ import annotations

import math

from pymongo import ASCENDING, IndexModel, ReturnDocument

from shared.errors import RateLimited
from shared.timeutil import seconds

INDEXES = {"rate_limits": [IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)]}


class RateLimiter:
    def __init__(self, store, clock):
        self._counters = store["rate_limits"]
        self._clock = clock

    def _window(self, window: int):
        now = self._clock().timestamp()
        start = math.floor(now / window) * window
        return int(start), int(start + window), now

    def hit(self, key: str, rate, *, code="RATE_LIMIT_EXCEEDED", message=None, cost: int = 1) -> int:
        """Count one request against ``rate`` (a ``shared.config.Rate``) and return how
        many remain; raise ``RateLimited`` (429 with the X-RateLimit headers) past it.
        A limit of 0 means unlimited."""
        if rate.limit <= 0:
            return 1 << 30
        start, reset_at, now = self._window(rate.window)
        doc = self._counters.find_one_and_update(
            {"_id": f"{key}|{start}"},
            {"$inc": {"n": cost}, "$setOnInsert": {"expires_at": self._clock() + seconds(rate.window + 5)}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        if doc["n"] > rate.limit:
            raise RateLimited(
                limit=rate.limit, reset_at=reset_at, retry_after=math.ceil(reset_at - now), code=code, message=message
            )
        return rate.limit - doc["n"]

    def reset(self, key: str, rate) -> None:
        start, _, _ = self._window(rate.window)
        self._counters.delete_one({"_id": f"{key}|{start}"})
