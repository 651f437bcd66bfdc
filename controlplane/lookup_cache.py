"""A short per-worker cache for what every authenticated request looks up: the
application named by ``{applicationId}`` and the API key behind a bearer secret.

Without it each V1 request made two store reads before doing its work (a profile of a
cached ``GET authz/check`` put them at three quarters of the middleware's time; see
benchmarks/NOTES.md, "Control-plane request cost").  The cached documents are the
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
from itertools import islice


class TtlDict:
    """``key -> value`` for ``ttl`` seconds from when it was stored (by ``timer()``), at
    most ``maxsize`` entries; what ``LookupCache`` and the authorization caches
    (``controlplane.authz.service.SeqCache``) keep their entries in.

    A dict of ``key -> (expires_at, value)`` in the order the entries were stored: with
    one ``ttl`` for all, that is the order they expire in, so the first entries are the
    expired ones and, when it is full, the ones to drop (cachetools' ``TTLCache`` keeps
    the same bound, at about four times the cost of a hit). ``get`` is one dict read and
    one comparison and needs no lock; callers serialise the writes."""

    def __init__(self, *, ttl: float, maxsize: int, timer):
        self._ttl = ttl
        self._maxsize = maxsize
        self._timer = timer
        self._data: dict = {}

    def get(self, key, default=None):
        entry = self._data.get(key)
        if entry is not None and self._timer() < entry[0]:
            return entry[1]
        return default

    def __setitem__(self, key, value) -> None:
        data = self._data
        now = self._timer()
        data.pop(key, None)  # stored again: last in the order
        for first in list(islice(data, 8)):  # the expired entries are first: a few at each store
            if data[first][0] > now:
                break
            del data[first]
        while len(data) >= self._maxsize:
            del data[next(iter(data))]  # full: the one that expires soonest goes
        data[key] = (now + self._ttl, value)

    def replace(self, key, value) -> None:
        """Give a stored key a new value that keeps its expiry and its place."""
        expires_at, _ = self._data[key]
        self._data[key] = (expires_at, value)

    def pop(self, key, default=None):
        entry = self._data.pop(key, None)
        return default if entry is None else entry[1]

    def drop_where(self, predicate) -> None:
        """Drop every entry whose key and value satisfy ``predicate(key, value)``."""
        for key in [key for key, (_, value) in self._data.items() if predicate(key, value)]:
            del self._data[key]

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self):
        return iter(self._data)


class LookupCache:
    def __init__(self, *, ttl: float, maxsize: int, timer):
        self._data = TtlDict(ttl=ttl, maxsize=maxsize, timer=timer) if ttl > 0 else None
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key, load):
        """The cached value of ``key``, else ``load()`` (stored unless None or raced by an
        invalidation). A hit takes no lock: only stores and drops do."""
        data = self._data
        if data is None:
            return load()
        value = data.get(key)
        if value is not None:
            return value
        generation = self._generation  # read before the load: a drop during it refuses the fill
        value = load()
        if value is not None:
            with self._lock:
                if generation == self._generation:
                    data[key] = value
        return value

    def drop(self, key) -> None:
        with self._lock:
            self._generation += 1
            if self._data is not None:
                self._data.pop(key)

    def drop_where(self, predicate) -> None:
        """Drop every entry whose value satisfies ``predicate`` (rare: revocations, deletions)."""
        with self._lock:
            self._generation += 1
            if self._data is not None:
                self._data.drop_where(lambda _key, value: predicate(value))
