"""Rate limits and counters kept in MongoDB, so every replica sees the same count.

Fixed windows: one document per (key, window start) incremented with ``$inc`` in an
upsert, which is atomic on one document; the increment happens before the guarded
work, so N parallel requests can never all slip under the limit.  Documents expire
through a TTL index (expiry is still decided in code from the window).  A limit of one
request per window is an exact cooldown instead (``_cooldown``).

``ApiThrottle`` is the one exception (docs/architecture.md, "Authentication and gates"): the
general per-credential API throttle counts locally in each worker and reconciles with
the same shared counter in batches, so an API request costs no store write.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from shared.concurrency import native_lock
from shared.errors import RateLimited
from shared.http import client_ip
from shared.timeutil import aware, seconds, seconds_of

INDEXES = {"rate_limits": [IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)]}


class RateLimiter:
    def __init__(self, store, clock):
        store.declare_indexes(INDEXES)
        self._counters = store["rate_limits"]
        self._clock = clock
        self._seconds = seconds_of(clock)

    def window(self, window: int) -> tuple[int, int, float]:
        """(start, end, now) of the current fixed window of ``window`` seconds."""
        now = self._seconds()
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
        start, reset_at, now = self.window(rate.window)
        count = self.add(key, start, rate.window, cost)
        if count > rate.limit:
            raise error(limit=rate.limit, reset_at=reset_at, retry_after=math.ceil(reset_at - now))
        return rate.limit - count

    def add(self, key: str, start: int, window: int, n: int) -> int:
        """Add ``n`` to the counter of ``key`` in the window starting at ``start`` and
        return its new total (atomic ``$inc`` in an upsert)."""
        doc = self._counters.find_one_and_update(
            {"_id": f"{key}|{start}"},
            {"$inc": {"n": n}, "$setOnInsert": {"expires_at": self._clock() + seconds(window + 5)}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        return doc["n"]

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
        start, _, _ = self.window(rate.window)
        self._counters.delete_many({"_id": {"$in": [f"{key}|{start}", f"{key}|cooldown"]}})

    def unit(self, key: str, rate, *, error: type[RateLimited] = RateLimited) -> Unit:
        """One request's unit of ``key``'s budget (``Unit``), not drawn yet; refused with
        ``error``, as ``hit``."""
        return Unit(self, key, rate, error)

    def page_unit(self, sign_in_key: str, rate, *, error: type[RateLimited] = RateLimited) -> Unit:
        """One showing's unit of the page budget that goes with the sign-in budget of
        ``sign_in_key`` (``<name>:<scope>``): ``<name>-page:<scope>``, at ``rate``.

        A sign-in page that stores a passkey challenge each time it is shown needs a
        bound, but not the sign-in's own: a GET needs no cookie, no CSRF token and no
        click, so any web page a browser visits can make it load a sign-in page
        (``<img src=...>``), and showings drawn on the sign-in budget would let that
        page refuse the browser's IP its sign-ins.  Once the page budget is spent the
        page shows no passkey button (``Unit.allows``); nothing is refused."""
        name, _, scope = sign_in_key.partition(":")
        return self.unit(f"{name}-page:{scope}", rate, error=error)


class Unit:
    """One unit of a budget, drawn for one request (``RateLimiter.unit``).

    The first ``take`` counts it (``RateLimiter.hit``); later ones answer as that one
    did, allowed or ``RateLimited``, without counting again.  A request whose steps each
    draw on the same budget (a console sign-in that checks a password, then shows the
    page again with a passkey challenge) passes them one ``Unit`` and costs one."""

    def __init__(self, limiter: RateLimiter, key: str, rate, error: type[RateLimited] = RateLimited):
        self._limiter = limiter
        self._key = key
        self._rate = rate
        self._error = error
        self._taken = False
        self._refusal: RateLimited | None = None

    def take(self) -> None:
        if self._refusal is not None:
            raise self._refusal
        if self._taken:
            return
        try:
            self._limiter.hit(self._key, self._rate, error=self._error)
        except RateLimited as refusal:
            self._refusal = refusal
            raise
        self._taken = True

    def allows(self) -> bool:
        """``take`` as a question: whether the unit is drawn (False once the budget is
        spent), for a page that leaves out what the unit pays for rather than refuse."""
        try:
            self.take()
        except RateLimited:
            return False
        return True


@dataclass
class _LocalCount:
    start: int          # the window these counts belong to
    known: int = 0      # the shared total at the last reconcile
    pending: int = 0    # hits admitted here since then
    synced: float = 0.0


class ApiThrottle:
    """The general per-credential throttle (IAMGATE_RATE_LIMIT_API), batched.

    Each worker admits hits locally and adds them to the shared window counter every
    ``batch`` hits or every ``interval`` seconds, whichever comes first, learning the
    total of every worker at each reconcile.  The batch is ``min_batch`` hits, or
    ``batch_share`` of the limit when that is more (a limit of a million a minute
    reconciles every 5,000 hits rather than every 50, so a busy credential costs about
    ``1 / interval`` store writes a second, not hundreds).  Near the limit (when fewer than
    ``batch`` hits remain by what this worker knows) and for limits under ``2 * batch``
    every hit is counted in the store first, exactly as ``RateLimiter.hit`` does.

    Tolerance: a worker batches only while its known total plus its pending hits stay
    ``batch`` below the limit, so W workers sharing the store admit at most
    ``(W - 1) * batch`` requests over the limit in one window: ``(W - 1) * 50``, or
    ``(W - 1) * 0.5 %`` of the limit above 10,000 per window, and only within
    ``interval`` of each other's reconciles.  A worker that dies loses at most its
    pending hits (they are never counted: the error is in the caller's favour).
    """

    def __init__(self, limiter: RateLimiter, rate, *, min_batch: int = 50, batch_share: float = 0.005,
                 interval: float = 0.25, monotonic=time.monotonic, max_keys: int = 100_000):
        self._limiter = limiter
        self._rate = rate
        self._batch = max(min_batch, int(rate.limit * batch_share))
        self._interval = interval
        self._monotonic = monotonic
        self._counts: dict[str, _LocalCount] = {}  # in the order they were started
        self._max_keys = max_keys
        self._pruned_for = None  # the window whose start last cleared the counts of ended windows
        self._lock = native_lock()  # the sections under it never yield

    def hit(self, key: str) -> None:
        """Admit one request of ``key`` or raise ``RateLimited``.  A limit of 0 means unlimited."""
        rate = self._rate
        if rate.limit <= 0:
            return
        start, reset_at, now = self._limiter.window(rate.window)
        with self._lock:
            count = self._counts.get(key)
            if count is None or count.start != start:
                count = self._start_count(key, start)
            exact = rate.limit < 2 * self._batch or count.known + count.pending + 1 > rate.limit - self._batch
            if not exact:
                count.pending += 1
                if count.pending < self._batch and self._monotonic() - count.synced < self._interval:
                    return
            flush, count.pending = count.pending + (1 if exact else 0), 0
        total = self._limiter.add(key, start, rate.window, flush)
        with self._lock:
            count.known, count.synced = max(count.known, total), self._monotonic()
        if exact and total > rate.limit:
            raise RateLimited(limit=rate.limit, reset_at=reset_at, retry_after=math.ceil(reset_at - now))

    def _start_count(self, key: str, start: int) -> _LocalCount:
        """(Under the lock.) A new count of ``key`` for the window at ``start``. At most
        ``max_keys`` counts are kept: when full, the counts of ended windows go (once per
        window), then the oldest. A dropped count's pending hits are never added, in the
        caller's favour, as when a worker dies."""
        counts = self._counts
        counts.pop(key, None)
        if len(counts) >= self._max_keys:
            if self._pruned_for != start:
                self._pruned_for = start
                for ended in [k for k, c in counts.items() if c.start < start]:
                    del counts[ended]
            while len(counts) >= self._max_keys:
                del counts[next(iter(counts))]
        count = counts[key] = _LocalCount(start, synced=self._monotonic())
        return count


class PasswordWorkLimit:
    """IAMGATE_RATE_LIMIT_IP: password work (logins, registrations, password changes and
    resets, end users and dashboard alike) per client IP across every application.

    The per-application throttles let one address spread bcrypt work over many
    applications (and an application may raise its own); this budget is shared, so one
    address cannot spend the service's CPU.  A Falcon middleware: a resource names the
    methods that hash or check a password in ``password_work`` (``("POST",)``), and the
    request is counted before the responder runs, so before any bcrypt work."""

    def __init__(self, rate_limiter: RateLimiter, rate, trusted_proxies=()):
        self._limiter = rate_limiter
        self._rate = rate
        self._trusted = trusted_proxies

    def process_resource(self, req, _resp, resource, _params):
        if resource is not None and req.method in getattr(resource, "password_work", ()):
            self._limiter.hit(f"password-ip:{client_ip(req, self._trusted)}", self._rate)
