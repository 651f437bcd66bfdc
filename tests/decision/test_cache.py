"""The cache's bookkeeping: no stale re-fill, resync, and what each event drops."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from decision import cache as cache_module
from decision.cache import DecisionCache, GrantsEntry, KeyRing, PolicySet, ScopedGrants
from shared.abac import CompiledPolicies
from shared.rbac import Assignment, Grants, compile_grants

APP, OTHER_APP = "app-1", "app-2"


@pytest.fixture
def cache(clock):
    cache = DecisionCache(ttl=3600, maxsize=1000, timer=lambda: clock().timestamp())
    cache.resync(10)
    return cache


def entry(seq, user="u1", status="active", permissions=("posts:read",)):
    return GrantsEntry(Grants(user, status, [Assignment("r", "role", permissions)]), seq)


def test_nothing_is_stored_before_the_stream_first_synced(clock):
    fresh = DecisionCache(ttl=3600, maxsize=10, timer=lambda: clock().timestamp())
    with fresh.filling():
        assert fresh.store_grants(APP, "u1", entry(10 ** 9)) is False
    assert fresh.grants(APP, "u1") is None


def test_a_fill_older_than_the_last_resync_is_not_stored(cache):
    with cache.filling():
        assert cache.store_grants(APP, "u1", entry(9)) is False
        assert cache.store_grants(APP, "u1", entry(10)) is True
    assert cache.grants(APP, "u1").seq == 10


def test_a_fill_racing_an_invalidation_of_its_key_is_refused(cache):
    with cache.filling():  # the fetch is in flight (read at seq 11) ...
        cache.apply(12, APP, "role.removed", ["u1"])  # ... when the revocation arrives
        assert cache.store_grants(APP, "u1", entry(11)) is False
        assert cache.store_grants(APP, "u2", entry(11, "u2")) is True  # another user: fine
        assert cache.store_grants(APP, "u1", entry(12)) is True  # read after the change: fine
    assert cache.grants(APP, "u1").seq == 12


def test_invalidations_are_forgotten_once_no_fill_is_in_flight(cache):
    cache.apply(11, APP, "role.removed", ["u1"])
    with cache.filling():
        # A fetch started after the event was applied reads at a seq >= 11.
        assert cache.store_grants(APP, "u1", entry(11)) is True
    assert cache._invalidated == {}


def test_remembered_invalidations_are_bounded_by_raising_the_floor(cache, monkeypatch):
    monkeypatch.setattr(cache_module, "MAX_REMEMBERED_INVALIDATIONS", 3)
    with cache.filling():
        for seq, user in enumerate(["a", "b", "c", "d"], start=11):
            cache.apply(seq, APP, "role.removed", [user])
        assert len(cache._invalidated) == 1
        assert cache.floor == 14  # whatever was forgotten is covered by the floor
        assert cache.store_grants(APP, "a", entry(12, "a")) is False
        assert cache.store_grants(APP, "x", entry(13, "x")) is False
        assert cache.store_grants(APP, "d", entry(14, "d")) is True


def test_an_application_deletion_refuses_every_fill_of_that_application(cache):
    with cache.filling():
        cache.apply(11, APP, "application.deleted", [])
        assert cache.store_grants(APP, "u9", entry(10)) is False
        assert cache.store_policies(APP, PolicySet(10, CompiledPolicies(()))) is False
        assert cache.store_keys(APP, KeyRing(10, {})) is False
        assert cache.store_grants(OTHER_APP, "u9", entry(10)) is True


def test_policy_and_key_events_refuse_only_their_kind(cache):
    with cache.filling():
        cache.apply(11, APP, "policy.updated", [])
        cache.apply(12, APP, "api_keys.changed", [])
        assert cache.store_policies(APP, PolicySet(10, CompiledPolicies(()))) is False
        assert cache.store_keys(APP, KeyRing(11, {})) is False
        assert cache.store_grants(APP, "u1", entry(10)) is True
        assert cache.store_policies(APP, PolicySet(11, CompiledPolicies(()))) is True


def test_events_drop_their_entries_and_report_them(cache):
    with cache.filling():
        cache.store_grants(APP, "u1", entry(10))
        cache.store_grants(APP, "u2", entry(10, "u2"))
        cache.store_grants(OTHER_APP, "u1", entry(10))
        cache.store_policies(APP, PolicySet(10, CompiledPolicies(())))
        cache.store_keys(APP, KeyRing(10, {}))
    dropped = cache.apply(11, APP, "role.updated", ["u1", "u2", "nobody"])
    assert (dropped.grants, dropped.policies, dropped.api_keys) == (2, 0, 0)
    assert cache.grants(OTHER_APP, "u1") is not None
    assert cache.apply(12, APP, "policy.updated", []).policies == 1
    assert cache.apply(13, APP, "api_keys.changed", []).api_keys == 1
    assert cache.apply(14, APP, "user.login", []).total == 0
    assert cache.applied == 14


def test_an_event_already_applied_is_ignored(cache):
    assert cache.apply(11, APP, "role.removed", ["u1"]) is not None
    assert cache.apply(11, APP, "role.removed", ["u1"]) is None
    assert cache.apply(5, APP, "role.removed", ["u1"]) is None
    assert cache.applied == 11


def test_an_entry_read_after_the_event_survives_it(cache):
    with cache.filling():
        cache.store_grants(APP, "u1", entry(12))  # fetched past the cache (min_revision)
    assert cache.apply(12, APP, "role.removed", ["u1"]).grants == 0
    assert cache.grants(APP, "u1").seq == 12
    assert cache.apply(13, APP, "role.removed", ["u1"]).grants == 1


def test_an_event_forgets_that_an_application_was_missing(cache):
    cache.store_missing(APP)
    assert cache.is_missing(APP)
    cache.apply(11, APP, "api_keys.changed", [])
    assert not cache.is_missing(APP)


def test_missing_applications_are_forgotten_after_two_seconds(cache, clock):
    cache.store_missing(APP)
    clock.advance(2.1)
    assert not cache.is_missing(APP)


def test_resync_drops_everything_and_restarts_the_count(cache):
    with cache.filling():
        cache.store_grants(APP, "u1", entry(10))
        cache.store_keys(APP, KeyRing(10, {}))
    cache.apply(20, APP, "user.login", [])
    cache.resync(3)
    assert (cache.applied, cache.head, cache.floor, len(cache)) == (3, 3, 3, 0)
    assert cache.keys(APP) is None


def test_heartbeats_advance_and_lag_is_head_minus_applied(cache):
    cache.saw_head(15)
    assert cache.lag == 5
    cache.advance(15)
    assert (cache.applied, cache.lag) == (15, 0)
    cache.advance(12)
    assert cache.applied == 15
    assert cache.fresh_through(15) and not cache.fresh_through(16)


def test_entries_expire_with_the_ttl(clock):
    short = DecisionCache(ttl=60, maxsize=10, timer=lambda: clock().timestamp())
    short.resync(1)
    with short.filling():
        short.store_grants(APP, "u1", entry(1))
    clock.advance(59)
    assert short.grants(APP, "u1") is not None
    clock.advance(1)
    assert short.grants(APP, "u1") is None


def test_the_cache_holds_at_most_its_size(clock):
    small = DecisionCache(ttl=3600, maxsize=100, timer=lambda: clock().timestamp())
    small.resync(1)
    with small.filling():
        for i in range(150):
            small.store_grants(APP, f"u{i}", entry(1, f"u{i}"))
    assert len(small) == 100


def test_compiled_scopes_follow_assignment_expiry(clock):
    now = clock()
    grants = Grants("u1", "active", [Assignment("r", "role", ("posts:read",), expires_at=now + timedelta(seconds=10)),
                                     Assignment("s", "scoped", ("projects:edit",), scope="p1")])
    item = GrantsEntry(grants, 1)
    assert item.at(None, now).allows("posts:read") is True
    assert item.at(None, now).allows("projects:edit") is False
    assert item.at("p1", now).allows("projects:edit") is True
    assert item.at(None, now) is item.at(None, now)  # compiled once
    later = now + timedelta(seconds=10)
    assert item.at(None, later).allows("posts:read") is False


def test_remembered_answers_are_bounded(clock, monkeypatch):
    monkeypatch.setattr(cache_module, "MAX_ANSWERS_PER_SCOPE", 2)
    scoped = ScopedGrants(compile_grants(Grants("u", "active", [Assignment("r", "n", ("a:*",))]), None, clock()))
    assert [scoped.allows(p) for p in ("a:1", "a:2", "b:1", "a:3")] == [True, True, False, True]
    assert len(scoped._decisions) <= 2
    assert {p: d.allowed for p, d in scoped.decide_many(["a:1", "b:1", "a:9"]).items()} == {
        "a:1": True, "b:1": False, "a:9": True}


def test_an_inactive_users_answers_are_all_no(clock):
    scoped = ScopedGrants(compile_grants(Grants("u", "suspended", [Assignment("r", "n", ("*:*",))]), None, clock()))
    assert scoped.allows("posts:read") is False


def test_users_with_the_same_grants_share_their_parts(clock):
    """Entries hold shared structures, not per-user copies (each fetch parses
    fresh strings, as Grants.from_json of a control-plane answer does)."""
    def fetched(user_id, scope=None):
        role = {"role_id": "r1", "role_name": "editor", "permissions": ["posts:read", "posts:write"],
                "scope": scope, "expires_at": None}
        return Grants.from_json(json.loads(json.dumps(
            {"user_id": user_id, "status": "active", "assignments": [role], "attributes": {}})))

    first, second = GrantsEntry(fetched("u1"), 1, user_id="u1"), GrantsEntry(fetched("u2"), 1, user_id="u2")
    assert first.grants.assignments is second.grants.assignments
    assert first.grants.attributes is second.grants.attributes
    one, two = first.at(None, clock()), second.at(None, clock())
    assert one.compiled.patterns is two.compiled.patterns
    assert one.allows("posts:read") and two.allows("posts:read") and not two.allows("posts:delete")
    assert one._decisions is two._decisions
    assert first.grants.user_id == "u1" and one.compiled.user_id == "u1"  # still each user's own

    # Different grants share nothing that would change an answer.
    other = GrantsEntry(fetched("u3", scope="p"), 1, user_id="u3")
    assert other.grants.assignments is not first.grants.assignments
    assert not other.at(None, clock()).allows("posts:read") and other.at("p", clock()).allows("posts:read")
    suspended = GrantsEntry(Grants("u4", "suspended", first.grants.assignments), 1)
    assert not suspended.at(None, clock()).allows("posts:read")
    assert suspended.at(None, clock())._decisions is not one._decisions
