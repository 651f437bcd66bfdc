"""The per-worker caches of the authentication path (controlplane.lookup_cache): an
application and an API key are looked up once per TTL, and still a deleted application or
a revoked key stops working at once in the worker that handled the change, at the next
tailer poll in every other worker, and within the TTL (2 s) even without any event.

Two apps on one store stand for two workers (or replicas) of the same deployment."""
from __future__ import annotations

from datetime import timedelta

import falcon.testing
import pytest

from controlplane.app import create_app
from controlplane.lookup_cache import LookupCache
from tests.conftest import assert_error, bearer


@pytest.fixture
def other(config, clock, ctx):
    """A second worker on the same store, with its own caches and tailer."""
    app = create_app(config, store=ctx.store, clock=clock, start_background=False)
    return falcon.testing.TestClient(app), app.services


def roles_url(application):
    return f"/api/v1/applications/{application['_id']}/roles"


def warm(client, application, key):
    """Two calls: the first use of a key records last_used_at and drops the copy it read."""
    for _ in range(2):
        response = client.simulate_get(roles_url(application), headers=bearer(key))
        assert response.status_code == 200
    return response


def test_a_warm_key_and_application_cost_no_store_read(client, ctx, application, make_api_key, monkeypatch):
    key = make_api_key(application)
    warm(client, application, key)
    reads = []
    for service, name in ((ctx.api_keys.store, "by_digest"), (ctx.applications.store, "get")):
        real = getattr(service, name)
        monkeypatch.setattr(service, name, lambda *a, _real=real, _name=name: reads.append(_name) or _real(*a))
    for _ in range(5):
        warm(client, application, key)
    assert reads == []


def test_a_revocation_in_this_worker_stops_the_key_at_once(client, ctx, application, make_api_key):
    key = make_api_key(application)
    warm(client, application, key)
    ctx.api_keys.revoke(application["_id"], ctx.api_keys.authenticate(key)["_id"])
    assert_error(client.simulate_get(roles_url(application), headers=bearer(key)), 401, "UNAUTHORIZED")


def test_a_revocation_in_another_worker_stops_the_key_at_its_next_tailer_poll(client, ctx, other, application,
                                                                              make_api_key):
    key = make_api_key(application)
    warm(client, application, key)
    other_client, other_ctx = other
    warm(other_client, application, key)
    ctx.api_keys.revoke(application["_id"], ctx.api_keys.authenticate(key)["_id"])
    assert other_ctx.tailer.poll_once() >= 1
    assert_error(other_client.simulate_get(roles_url(application), headers=bearer(key)), 401, "UNAUTHORIZED")


def test_a_deletion_in_another_worker_stops_the_application_at_its_next_tailer_poll(ctx, other, application,
                                                                                    make_api_key):
    key = make_api_key(application)
    other_client, other_ctx = other
    warm(other_client, application, key)
    ctx.applications.delete(application["_id"])
    other_ctx.tailer.poll_once()
    assert_error(other_client.simulate_get(roles_url(application), headers=bearer(key)), 404)


def test_without_any_event_a_copy_lives_at_most_the_ttl(client, ctx, clock, application, make_api_key):
    """A change that reaches this worker through no event (a missed poll, a write by hand)."""
    key = make_api_key(application)
    warm(client, application, key)
    ctx.store["api_keys"].update_many({}, {"$set": {"revoked_at": clock()}})
    assert client.simulate_get(roles_url(application), headers=bearer(key)).status_code == 200  # the copy
    clock.advance(2.1)
    assert_error(client.simulate_get(roles_url(application), headers=bearer(key)), 401, "UNAUTHORIZED")


def test_a_deleting_application_is_refused_once_its_copy_expires(client, ctx, clock, application, make_api_key):
    key = make_api_key(application)
    warm(client, application, key)
    ctx.applications.store.mark_deleting(application["_id"])  # by hand: no event, no service
    clock.advance(2.1)
    assert_error(client.simulate_get(roles_url(application), headers=bearer(key)), 404)


def test_a_settings_update_in_this_worker_is_seen_at_once(client, ctx, application, make_api_key):
    key = make_api_key(application)
    warm(client, application, key)
    ctx.applications.update(application["_id"], {"name": "Renamed"})
    assert ctx.applications.live(application["_id"])["name"] == "Renamed"


def test_unknown_secrets_are_not_cached(client, ctx, application, monkeypatch):
    reads = []
    real = ctx.api_keys.store.by_digest
    monkeypatch.setattr(ctx.api_keys.store, "by_digest", lambda d: reads.append(d) or real(d))
    for _ in range(3):
        assert_error(client.simulate_get(roles_url(application), headers=bearer("sk_live_nope")), 401)
    assert len(reads) == 3


def test_a_load_raced_by_an_invalidation_is_answered_but_not_kept():
    """No stale re-fill: the document read before a revocation must not outlive it."""
    cache = LookupCache(ttl=60, maxsize=10, timer=lambda: 0)

    def load_then_revoked():
        cache.drop_where(lambda doc: True)  # the revocation's event lands while we read
        return {"app_id": "a", "state": "before"}

    assert cache.get("k", load_then_revoked) == {"app_id": "a", "state": "before"}
    assert cache.get("k", lambda: {"app_id": "a", "state": "after"}) == {"app_id": "a", "state": "after"}
    assert cache.get("k", lambda: pytest.fail("cached")) == {"app_id": "a", "state": "after"}


class Timer:
    now = 0.0

    def __call__(self):
        return self.now


def test_an_entry_lives_for_the_ttl_from_when_it_was_stored():
    timer = Timer()
    cache = LookupCache(ttl=2, maxsize=10, timer=timer)
    assert cache.get("k", lambda: "first") == "first"
    timer.now = 1.999
    assert cache.get("k", lambda: pytest.fail("cached")) == "first"
    timer.now = 2.0
    assert cache.get("k", lambda: "second") == "second"
    timer.now = 3.9
    assert cache.get("k", lambda: pytest.fail("cached")) == "second"


def test_a_full_cache_drops_what_expires_first_and_expired_entries_leave():
    timer = Timer()
    cache = LookupCache(ttl=10, maxsize=3, timer=timer)
    for key in "abc":
        cache.get(key, lambda key=key: key.upper())
        timer.now += 1
    cache.get("a", lambda: pytest.fail("cached"))
    cache.get("d", lambda: "D")  # full: "a" was stored first, so it expires first and goes
    assert list(cache._data) == ["b", "c", "d"]
    assert cache.get("a", lambda: "A again") == "A again"
    assert list(cache._data) == ["c", "d", "a"]
    timer.now = 100  # everything expired: the next store clears the old entries
    cache.get("e", lambda: "E")
    assert list(cache._data) == ["e"]


def test_a_zero_ttl_disables_the_cache():
    cache = LookupCache(ttl=0, maxsize=10, timer=lambda: 0)
    loads = []
    for _ in range(2):
        cache.get("k", lambda: loads.append(1) or {"x": 1})
    assert len(loads) == 2


@pytest.mark.parametrize("permissions, status", [
    (["roles:read"], 200), (["roles:*"], 200), (["*:read"], 200), (["*:*"], 200),
    (["roles:manage", "users:read"], 403), (["role:read"], 403), (["*:manage"], 403),
])
def test_an_api_keys_permission_gate_answers_as_pattern_matching_does(client, application, make_api_key,
                                                                      permissions, status):
    """The gate checks a key's permissions by set lookups of the covering patterns; the
    answers are those of ``shared.rbac.matches`` over the list."""
    key = make_api_key(application, permissions=permissions)
    assert client.simulate_get(roles_url(application), headers=bearer(key)).status_code == status


def test_a_keys_last_use_is_written_at_most_once_a_minute(ctx, clock, application, make_api_key, monkeypatch):
    secret = make_api_key(application)
    writes = []
    real = ctx.api_keys.store.touch
    monkeypatch.setattr(ctx.api_keys.store, "touch", lambda key_id, now: writes.append(now) or real(key_id, now))
    first = clock()
    ctx.api_keys.authenticate(secret)
    assert writes == [first]
    for step in (30, 29.999):  # the store keeps milliseconds: a minute after the stored time, at most
        clock.advance(step)
        ctx.api_keys.authenticate(secret)
    assert writes == [first]
    clock.advance(0.002)
    doc = ctx.api_keys.authenticate(secret)
    assert writes == [first, clock()] and doc["key_prefix"] == secret[:12]
    stored = ctx.api_keys.authenticate(secret)["last_used_at"]  # the next read carries the new last use
    assert abs(stored.replace(tzinfo=None) - clock().replace(tzinfo=None)) < timedelta(milliseconds=1)
    assert writes == [first, clock()]
