"""The general per-credential throttle counts locally and reconciles in batches
(controlplane/ratelimit.py: ApiThrottle), within its documented tolerance."""
from __future__ import annotations

import itertools

import pytest

from controlplane.ratelimit import ApiThrottle
from shared.config import Rate
from shared.errors import RateLimited

BATCH = 50


class Ticker:
    """A monotonic clock tests move by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def admitted(throttle, key, attempts) -> int:
    passed = 0
    for _ in range(attempts):
        try:
            throttle.hit(key)
            passed += 1
        except RateLimited:
            pass
    return passed


def counting_writes(ctx, monkeypatch) -> list:
    writes, real_add = [], ctx.rate_limiter.add

    def add(*args):
        writes.append(args)
        return real_add(*args)

    monkeypatch.setattr(ctx.rate_limiter, "add", add)
    return writes


def test_far_from_the_limit_hits_cost_one_store_write_per_batch(ctx, monkeypatch):
    writes = counting_writes(ctx, monkeypatch)
    throttle = ApiThrottle(ctx.rate_limiter, Rate(6000, 60), min_batch=BATCH, monotonic=Ticker())
    assert admitted(throttle, "api:k", 1000) == 1000
    assert len(writes) == 1000 // BATCH


def test_pending_hits_are_reconciled_after_the_interval(ctx, monkeypatch):
    writes, ticker = counting_writes(ctx, monkeypatch), Ticker()
    throttle = ApiThrottle(ctx.rate_limiter, Rate(6000, 60), min_batch=BATCH, interval=0.25, monotonic=ticker)
    admitted(throttle, "api:k", 3)
    assert writes == []
    ticker.now += 0.3
    admitted(throttle, "api:k", 1)
    assert [w[3] for w in writes] == [4]


def test_a_high_limit_reconciles_every_half_percent_of_it(ctx, monkeypatch):
    writes = counting_writes(ctx, monkeypatch)
    throttle = ApiThrottle(ctx.rate_limiter, Rate(1_000_000, 60), min_batch=BATCH, monotonic=Ticker())
    assert admitted(throttle, "api:k", 20_000) == 20_000
    assert [w[3] for w in writes] == [5000] * 4
    assert ctx.store["rate_limits"].find_one()["n"] == 20_000


@pytest.mark.parametrize("workers, limit, batch", [(2, 1000, BATCH), (4, 1000, BATCH), (3, 40_000, 200)])
def test_the_limit_holds_across_workers_within_the_tolerance(ctx, workers, limit, batch):
    throttles = [ApiThrottle(ctx.rate_limiter, Rate(limit, 60), min_batch=BATCH, monotonic=Ticker())
                 for _ in range(workers)]
    passed = 0
    for throttle in itertools.islice(itertools.cycle(throttles), 3 * limit):
        passed += admitted(throttle, "api:shared", 1)
    assert limit - batch <= passed <= limit + (workers - 1) * batch


def test_a_burst_across_a_reconcile_boundary_stays_within_the_tolerance(ctx):
    limit, ticker = 400, Ticker()
    first = ApiThrottle(ctx.rate_limiter, Rate(limit, 60), min_batch=BATCH, interval=0.25, monotonic=ticker)
    second = ApiThrottle(ctx.rate_limiter, Rate(limit, 60), min_batch=BATCH, interval=0.25, monotonic=ticker)
    passed = admitted(first, "api:k", limit - 10)  # reconciled only every 50 hits
    ticker.now += 0.24
    passed += admitted(second, "api:k", BATCH - 1)  # the second worker knows nothing yet
    ticker.now += 0.02  # across the interval: both reconcile on their next hit
    passed += admitted(first, "api:k", 200) + admitted(second, "api:k", 200)
    assert passed <= limit + BATCH


def test_a_burst_across_a_reconcile_boundary_of_a_high_limit_stays_within_half_a_percent(ctx):
    limit, ticker = 100_000, Ticker()
    batch = limit // 200
    first = ApiThrottle(ctx.rate_limiter, Rate(limit, 60), min_batch=BATCH, interval=0.25, monotonic=ticker)
    second = ApiThrottle(ctx.rate_limiter, Rate(limit, 60), min_batch=BATCH, interval=0.25, monotonic=ticker)
    passed = admitted(first, "api:k", limit - 10)
    ticker.now += 0.24
    passed += admitted(second, "api:k", batch - 1)
    ticker.now += 0.02
    passed += admitted(first, "api:k", 2 * batch) + admitted(second, "api:k", 2 * batch)
    assert limit <= passed <= limit + batch


def test_near_the_limit_every_hit_is_exact_and_refusals_carry_the_headers(ctx, clock):
    throttle = ApiThrottle(ctx.rate_limiter, Rate(120, 60), min_batch=BATCH, monotonic=Ticker())
    assert admitted(throttle, "api:k", 120) == 120
    with pytest.raises(RateLimited) as refused:
        throttle.hit("api:k")
    assert refused.value.limit == 120 and refused.value.reset_at > clock().timestamp()


def test_a_new_window_starts_from_zero(ctx, clock):
    throttle = ApiThrottle(ctx.rate_limiter, Rate(10, 60), min_batch=BATCH, monotonic=Ticker())
    assert admitted(throttle, "api:k", 15) == 10
    clock.advance(60)
    assert admitted(throttle, "api:k", 10) == 10


def test_keys_are_counted_apart_and_zero_means_unlimited(ctx):
    throttle = ApiThrottle(ctx.rate_limiter, Rate(5, 60), min_batch=BATCH, monotonic=Ticker())
    assert admitted(throttle, "api:a", 6) == 5 and admitted(throttle, "api:b", 5) == 5
    unlimited = ApiThrottle(ctx.rate_limiter, Rate(0, 60), min_batch=BATCH, monotonic=Ticker())
    assert admitted(unlimited, "api:a", 500) == 500


def test_a_worker_keeps_at_most_max_keys_counts_and_ended_windows_go_first(ctx, clock):
    throttle = ApiThrottle(ctx.rate_limiter, Rate(6000, 60), min_batch=BATCH, monotonic=Ticker(), max_keys=3)
    for key in ("a", "b", "c", "d"):
        admitted(throttle, key, 2)
    assert list(throttle._counts) == ["b", "c", "d"]  # full: the oldest went
    clock.advance(60)
    admitted(throttle, "c", 1)  # a new window: the count starts again
    assert list(throttle._counts) == ["b", "d", "c"]
    admitted(throttle, "e", 1)  # full: the counts of the ended window go
    assert list(throttle._counts) == ["c", "e"]
    assert admitted(throttle, "c", 10) == 10
