"""The control plane's check cache and the decision service's cache drop the same entries
for every kind of the event catalogue: both apply shared/invalidation.py, the control
plane directly, the decision service through the change stream's frames. A policy set
marked for a patch (the policies an event named) counts as dropped: both read again what
the event changed, and both mark rather than drop for the same kinds."""
from __future__ import annotations

import json

import pytest

from controlplane.authz.service import _CachedPolicies
from controlplane.events import Event
from controlplane.internal.service import change_frame
from decision.cache import DecisionCache, GrantsEntry, KeyRing, PolicySet
from shared import invalidation
from shared.abac import CompiledPolicies
from shared.event_types import EVENT_TYPES
from shared.invalidation import API_KEY_KINDS, APPLICATION_KINDS, POLICY_KINDS
from shared.rbac import Grants

APP, OTHER_APP = "app-1", "app-2"
SUBJECT, LISTED, BYSTANDER = "u-subject", "u-listed", "u-bystander"
POLICY = "p-subject"
USERS = (SUBJECT, LISTED, BYSTANDER)
FILLED_AT, EVENT_SEQ = 1, 5


def change(kind: str, clock) -> Event:
    """An event of ``kind`` naming a user each way an event can, as its subject and in
    ``user_ids``, and a policy as its subject."""
    return Event(EVENT_SEQ, APP, kind, {"user_id": SUBJECT, "policy_id": POLICY}, {"user_id": SUBJECT}, (LISTED,),
                 clock())


def read_again(entry) -> bool:
    """Dropped, or marked for a patch."""
    return entry is None or bool(entry.stale)


def dropped_by_the_control_plane(ctx, event: Event) -> set:
    authz = ctx.authz
    for app_id in (APP, OTHER_APP):
        for user_id in USERS:
            assert authz.grants_cache.put((app_id, user_id), "cached", FILLED_AT)
        assert authz.policies_cache.put((app_id,), _CachedPolicies(CompiledPolicies(()), FILLED_AT), FILLED_AT)
    authz.apply_event(event)
    dropped = {("grants", app_id, user_id) for app_id in (APP, OTHER_APP) for user_id in USERS
               if authz.grants_cache.get((app_id, user_id)) is None}
    return dropped | {("policies", app_id) for app_id in (APP, OTHER_APP)
                      if read_again(authz.policies_cache.get((app_id,)))}


def dropped_by_the_decision_service(event: Event, clock) -> set:
    cache = DecisionCache(ttl=3600, maxsize=100, timer=lambda: clock().timestamp())
    cache.resync(0)
    for app_id in (APP, OTHER_APP):
        for user_id in USERS:
            assert cache.store_grants(app_id, user_id, GrantsEntry(Grants.unknown(user_id), FILLED_AT))
        assert cache.store_policies(app_id, PolicySet(FILLED_AT, CompiledPolicies(())))
        assert cache.store_keys(app_id, KeyRing(FILLED_AT, {}))
    data = json.loads(change_frame(event).decode().split("data: ", 1)[1])  # what the sidecar receives
    cache.apply(data["seq"], data["app_id"], data["type"], data["user_ids"], data.get("policy_ids"))
    dropped = {("grants", app_id, user_id) for app_id in (APP, OTHER_APP) for user_id in USERS
               if cache.grants(app_id, user_id) is None}
    dropped |= {("policies", app_id) for app_id in (APP, OTHER_APP) if read_again(cache.policies(app_id))}
    return dropped | {("api_keys", app_id) for app_id in (APP, OTHER_APP) if cache.keys(app_id) is None}


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_both_caches_drop_the_same_entries(ctx, clock, kind):
    event = change(kind, clock)
    control_plane = dropped_by_the_control_plane(ctx, event)
    decision_service = dropped_by_the_decision_service(event, clock)
    # API key digests are cached by decision services only.
    api_keys = {entry for entry in decision_service if entry[0] == "api_keys"}
    assert decision_service - api_keys == control_plane
    assert api_keys == ({("api_keys", APP)} if kind in API_KEY_KINDS | APPLICATION_KINDS else set())
    assert not {entry for entry in decision_service if OTHER_APP in entry}
    assert ("grants", APP, BYSTANDER) not in control_plane or kind in APPLICATION_KINDS


@pytest.mark.parametrize("kind", sorted(POLICY_KINDS))
def test_both_caches_mark_the_named_policy_for_a_patch(ctx, clock, kind):
    event = change(kind, clock)
    dropped_by_the_control_plane(ctx, event)
    assert ctx.authz.policies_cache.get((APP,)).stale == {POLICY}
    cache = DecisionCache(ttl=3600, maxsize=100, timer=lambda: clock().timestamp())
    cache.resync(0)
    cache.store_policies(APP, PolicySet(FILLED_AT, CompiledPolicies(())))
    data = json.loads(change_frame(event).decode().split("data: ", 1)[1])
    assert data["policy_ids"] == [POLICY]
    cache.apply(data["seq"], data["app_id"], data["type"], data["user_ids"], data["policy_ids"])
    assert cache.policies(APP).stale == {POLICY}


def test_the_rule_is_not_vacuous(ctx, clock):
    """Each kind of cached data is dropped by some kind of the catalogue."""
    dropped = set().union(*(dropped_by_the_decision_service(change(kind, clock), clock) for kind in EVENT_TYPES))
    assert {("grants", APP, user_id) for user_id in USERS} | {("policies", APP), ("api_keys", APP)} <= dropped


def test_the_rule_names_only_kinds_of_the_catalogue():
    kinds = set().union(*(getattr(invalidation, name) for name in dir(invalidation) if name.endswith("_KINDS")))
    assert kinds and kinds <= set(EVENT_TYPES)


def named_each_way(kind: str, clock):
    """Events of ``kind`` naming nobody, a subject user, a listed user, a policy, or several."""
    for subject in ({}, {"user_id": SUBJECT}, {"policy_id": POLICY}, {"user_id": SUBJECT, "policy_id": POLICY}):
        for listed in ((), (LISTED,)):
            yield Event(EVENT_SEQ, APP, kind, subject, {}, listed, clock())


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_the_change_stream_leaves_out_exactly_the_events_that_drop_nothing(clock, kind):
    """The stream sends a frame only for an event ``concerns_decisions`` accepts: every event
    that would drop or mark something in a decision service's cache is one of them, and
    none that would not (the control plane's cache drops the same, by the tests above)."""
    for event in named_each_way(kind, clock):
        assert invalidation.concerns_decisions(event) is bool(dropped_by_the_decision_service(event, clock)), event
