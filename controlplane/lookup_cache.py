"""A short per-worker cache for what every authenticated request looks up: the
application named by ``{applicationId}`` and the API key behind a bearer secret.

Without it each V1 request made two store reads before doing its work (a profile of a
cached ``GET authz/check`` put them at three quarters of the middleware's time; see
docs/performance.md, "Control-plane request cost").  The cached documents are the
store's answers and stay correct because:

- a write of this process drops the entries it touches synchronously (``EventLog.listen``
  and the owning service), before the write's response is sent;
- writes of other workers and replicas arrive through the change-log tailer
  (``application.deleted``, ``api_keys.changed``), within its poll interval;
- every entry expires after ``ttl`` seconds whatever happens, so a missed event (or a
  change that emits none, such as another replica's application settings update) is
  served stale for at most that long;
- no stale re-fill: a load that started before an invalidation is answered but not
  stored (a generation counter), so a read racing a revocation cannot keep the revoked
  document cached;
- misses are not cached: an unknown secret or application id costs a store read each
  time, as before, and cannot fill the cache.

Cached documents are shared between requests: callers must not modify them.
"""
from __future__ import annotations

import threading

from cachetools import TTLCache


class LookupCache:
    def __init__(self, *, ttl: float, maxsize: int, timer):
        self._data = TTLCache(maxsize, ttl, timer=timer) if ttl > 0 else None
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key, load):
        """The cached value of ``key``, else ``load()`` (stored unless None or raced by an
        invalidation)."""
        if self._data is None:
            return load()
        with self._lock:
            try:
                value = self._data[key]  # TTLCache.get costs twice as much as a lookup
            except KeyError:
                value = None
            generation = self._generation
        if value is not None:
            return value
        value = load()
        if value is not None:
            with self._lock:
                if generation == self._generation:
                    self._data[key] = value
        return value

    def drop(self, key) -> None:
        with self._lock:
            self._generation += 1
            if self._data is not None:
                self._data.pop(key, None)

    def drop_where(self, predicate) -> None:
        """Drop every entry whose value satisfies ``predicate`` (rare: revocations, deletions)."""
        with self._lock:
            self._generation += 1
            if self._data is not None:
                for key in [k for k, v in self._data.items() if predicate(v)]:
                    self._data.pop(key, None)
