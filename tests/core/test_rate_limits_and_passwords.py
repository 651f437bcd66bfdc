import threading

import pytest

from controlplane.mfa.errors import MfaLocked
from controlplane.passwords import PasswordHasher, require_strong, strength_failures
from shared.config import Rate
from shared.errors import RateLimited
from shared.http import error_headers, status_of


def test_rate_limit_counts_per_key_and_window(ctx, clock):
    rate = Rate(2, 60)
    assert ctx.rate_limiter.hit("k", rate) == 1
    assert ctx.rate_limiter.hit("k", rate) == 0
    with pytest.raises(RateLimited) as info:
        ctx.rate_limiter.hit("k", rate, error=MfaLocked)
    assert isinstance(info.value, MfaLocked) and status_of(MfaLocked) == 429
    headers = error_headers(info.value)
    assert headers["X-RateLimit-Limit"] == "2" and headers["X-RateLimit-Remaining"] == "0"
    assert 1 <= int(headers["Retry-After"]) <= 60
    assert int(headers["X-RateLimit-Reset"]) > clock().timestamp()
    assert ctx.rate_limiter.hit("other", rate) == 1
    clock.advance(60)
    assert ctx.rate_limiter.hit("k", rate) == 1


def parallel_passes(ctx, key, rate, attempts) -> int:
    """How many of ``attempts`` simultaneous hits get past the limit."""
    passed, lock = [], threading.Lock()

    def attempt():
        try:
            ctx.rate_limiter.hit(key, rate)
        except RateLimited:
            return
        with lock:
            passed.append(1)

    threads = [threading.Thread(target=attempt) for _ in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(passed)


def test_rate_limit_is_atomic_under_parallel_hits(ctx):
    assert parallel_passes(ctx, "burst", Rate(5, 60), 30) == 5


def test_zero_limit_means_unlimited(ctx):
    for _ in range(50):
        ctx.rate_limiter.hit("free", Rate(0, 60))


def test_a_unit_counts_once_however_often_it_is_taken(ctx):
    rate = Rate(2, 60)
    unit = ctx.rate_limiter.unit("steps", rate)
    for _ in range(3):
        unit.take()  # one request's steps: one unit
    assert ctx.rate_limiter.hit("steps", rate) == 0  # the second unit of two
    refused = ctx.rate_limiter.unit("steps", rate)
    for _ in range(3):
        with pytest.raises(RateLimited):
            refused.take()
    start, _, _ = ctx.rate_limiter.window(rate.window)
    assert ctx.store["rate_limits"].find_one({"_id": f"steps|{start}"})["n"] == 3  # the refusal counted once


def test_password_hash_and_verify():
    hasher = PasswordHasher(4)
    hashed = hasher.hash("Correct-Horse-9")
    assert hashed.startswith("$2b$04$")
    assert hasher.verify("Correct-Horse-9", hashed)
    assert not hasher.verify("correct-horse-9", hashed)
    assert not hasher.verify("Correct-Horse-9", None)


def test_long_passwords_are_prehashed_not_truncated():
    hasher = PasswordHasher(4)
    base = "A1" + "x" * 80
    hashed = hasher.hash(base + "tail-one")
    assert hasher.verify(base + "tail-one", hashed)
    assert not hasher.verify(base + "tail-two", hashed)  # plain bcrypt would accept this


@pytest.mark.parametrize("password, email, rules", [
    ("Sh0rt!", None, ["min_length"]),
    ("alllowercaseletters", None, ["character_classes"]),
    ("12345678901", None, ["character_classes"]),
    ("Password1", None, ["not_common"]),
    ("Alice@Example.com", "alice@example.com", ["not_email"]),
    ("a" * 129 + "B", None, ["max_length"]),
    ("Tr0ub4dor&3x", "bob@example.com", []),
])
def test_strength_rules(password, email, rules):
    assert strength_failures(password, email=email) == rules


def test_weak_password_is_422_naming_the_rules():
    with pytest.raises(Exception) as info:
        require_strong("password")
    error = info.value
    assert (status_of(type(error)), error.code) == (422, "VALIDATION_PASSWORD_TOO_WEAK")
    assert set(error.details["rules"]) == {"character_classes", "not_common"}


def test_a_limit_of_one_is_an_exact_cooldown_not_a_fixed_window(ctx, clock):
    rate = Rate(1, 3600)
    # Just before a fixed window's boundary: a second request right after it is still refused.
    clock.now = clock.now.replace(minute=59, second=59, microsecond=0)
    ctx.rate_limiter.hit("export", rate)
    clock.advance(2)
    with pytest.raises(RateLimited) as info:
        ctx.rate_limiter.hit("export", rate)
    assert error_headers(info.value)["X-RateLimit-Limit"] == "1"
    assert int(error_headers(info.value)["Retry-After"]) == 3598
    clock.advance(3597)
    with pytest.raises(RateLimited):
        ctx.rate_limiter.hit("export", rate)
    clock.advance(1)
    ctx.rate_limiter.hit("export", rate)


def test_parallel_requests_cannot_both_start_a_cooldown(ctx):
    assert parallel_passes(ctx, "once", Rate(1, 60), 20) == 1
