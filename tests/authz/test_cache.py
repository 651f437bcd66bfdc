"""The permission check cache: 1 hour, invalidated by role, permission and assignment
changes (this process at once, other replicas through the tailer), read-your-writes with
min_revision, and the no-stale-re-fill rule."""
from __future__ import annotations

import falcon.testing
import pytest

from controlplane.app import create_app
from controlplane.authz import service as authz_service
from controlplane.authz.service import SeqCache
from tests.conftest import bearer

V1 = "/api/v1/applications/{}"


@pytest.fixture
def setup(application, make_api_key, stored_user, make_role, assign_role):
    user = stored_user(application)
    role = make_role(application, "editor", ["posts:read"])
    assign_role(application, user, role)
    return application, bearer(make_api_key(application, permissions=["authz:check", "roles:manage"])), user, role


def check(client, app, headers, user, permission="posts:read", **params):
    response = client.simulate_get(V1.format(app["_id"]) + "/authz/check",
                                   params={"user_id": user["_id"], "permission": permission, **params},
                                   headers=headers)
    assert response.status_code == 200, response.text
    return response.json["allowed"], response.json["cached"]


def test_second_check_is_cached(client, setup):
    app, headers, user, _ = setup
    assert check(client, app, headers, user) == (True, False)
    assert check(client, app, headers, user) == (True, True)
    assert check(client, app, headers, user, "posts:write") == (False, True)  # same user, same grants


def test_removing_the_assignment_denies_at_once(client, setup):
    app, headers, user, role = setup
    assert check(client, app, headers, user) == (True, False)
    assert check(client, app, headers, user) == (True, True)
    url = V1.format(app["_id"]) + f"/users/{user['_id']}/roles/{role['_id']}"
    assert client.simulate_delete(url, headers=headers).status_code == 204
    assert check(client, app, headers, user) == (False, False)
    assert check(client, app, headers, user) == (False, True)


def test_changing_the_roles_permissions_denies_at_once(client, setup):
    app, headers, user, _ = setup
    check(client, app, headers, user)
    response = client.simulate_patch(V1.format(app["_id"]) + "/roles/editor", headers=headers,
                                     json={"permissions": ["posts:write"]})
    assert response.status_code == 200
    assert check(client, app, headers, user) == (False, False)
    assert check(client, app, headers, user, "posts:write") == (True, True)


def test_a_new_assignment_allows_at_once(client, setup, make_role):
    app, headers, user, _ = setup
    assert check(client, app, headers, user, "billing:read") == (False, False)
    role = make_role(app, "billing", ["billing:read"])
    response = client.simulate_post(V1.format(app["_id"]) + f"/users/{user['_id']}/roles", headers=headers,
                                    json={"role_id": role["_id"]})
    assert response.status_code == 201
    assert check(client, app, headers, user, "billing:read") == (True, False)


def test_other_users_stay_cached(client, setup, stored_user, assign_role):
    app, headers, user, role = setup
    other = stored_user(app)
    assign_role(app, other, role)
    check(client, app, headers, user)
    check(client, app, headers, other)
    client.simulate_delete(V1.format(app["_id"]) + f"/users/{user['_id']}/roles/{role['_id']}", headers=headers)
    assert check(client, app, headers, other) == (True, True)


def test_suspension_event_drops_the_user(client, ctx, setup):
    app, headers, user, _ = setup
    check(client, app, headers, user)
    ctx.store["users"].update_one({"_id": user["_id"]}, {"$set": {"status": "suspended"}})
    ctx.events.emit(app["_id"], "user.suspended", {"user_id": user["_id"]}, subject={"user_id": user["_id"]},
                    user_ids=[user["_id"]])
    assert check(client, app, headers, user) == (False, False)


def test_an_unknown_user_who_registers_is_not_stuck_as_unknown(client, ctx, setup, stored_user):
    app, headers, _, _ = setup
    user = {"_id": "0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61"}
    assert check(client, app, headers, user) == (False, False)
    ctx.events.emit(app["_id"], "user.created", {"user_id": user["_id"]}, subject={"user_id": user["_id"]})
    assert check(client, app, headers, user) == (False, False)


def test_application_deleted_drops_the_application(ctx, setup):
    app, _, user, _ = setup
    ctx.authz.compiled_grants(app["_id"], user["_id"], None)
    assert ctx.authz.compiled_grants(app["_id"], user["_id"], None)[1] is True
    ctx.events.emit(app["_id"], "application.deleted", {})
    assert ctx.authz.compiled_grants(app["_id"], user["_id"], None)[1] is False


def test_entries_expire_after_the_ttl(client, clock, setup):
    app, headers, user, _ = setup
    check(client, app, headers, user)
    clock.advance(3599)
    assert check(client, app, headers, user) == (True, True)
    clock.advance(1)
    assert check(client, app, headers, user) == (True, False)


class TestCacheDisabled:
    @pytest.fixture
    def config_overrides(self):
        return {"authz_cache_ttl": 0}

    def test_nothing_is_cached(self, client, setup):
        app, headers, user, _ = setup
        assert check(client, app, headers, user) == (True, False)
        assert check(client, app, headers, user) == (True, False)


# --- other replicas ----------------------------------------------------------------------------


@pytest.fixture
def replica(config, clock, ctx):
    """A second control-plane process over the same store (its own cache, its own tailer)."""
    return create_app(config, store=ctx.store, clock=clock, start_background=False)


def test_another_replicas_write_reaches_this_cache_through_the_tailer(client, ctx, replica, setup):
    app, headers, user, role = setup
    ctx.tailer.poll_once()
    assert check(client, app, headers, user) == (True, False)
    replica.services.roles.unassign(app["_id"], user["_id"], role["_id"], None)
    # Until this process's tailer sees the event, its cache still answers the old grants...
    assert check(client, app, headers, user) == (True, True)
    ctx.tailer.poll_once()
    # ...and once it has, the user is dropped.
    assert check(client, app, headers, user) == (False, False)


def test_min_revision_reads_past_a_cache_older_than_the_write(client, ctx, replica, setup):
    app, headers, user, role = setup
    assert check(client, app, headers, user) == (True, False)
    replica_client = falcon.testing.TestClient(replica)
    response = replica_client.simulate_delete(V1.format(app["_id"]) + f"/users/{user['_id']}/roles/{role['_id']}",
                                              headers=headers)
    assert response.status_code == 204
    revision = int(response.headers["X-Iamgate-Revision"])
    assert check(client, app, headers, user, min_revision=revision) == (False, False)
    # The fresh read was stored; a revision it already covers is served from the cache.
    assert check(client, app, headers, user, min_revision=revision) == (False, True)
    response = client.simulate_post(V1.format(app["_id"]) + "/authz/check", headers=headers, json={
        "user_id": user["_id"], "permission": "posts:read", "min_revision": revision + 1000})
    # Ahead of every write: refused, not an unbounded cache bypass (tests/security/test_min_revision.py).
    assert response.status_code == 400 and response.json["error"]["code"] == "AUTHZ_REVISION_AHEAD"


def test_a_fill_racing_an_invalidation_is_used_once_but_not_stored(client, ctx, setup, monkeypatch):
    """The grants read happens, then the write and its invalidation, then the fill would be
    stored: it must not be, or the pre-write answer would stay cached for an hour."""
    app, headers, user, role = setup
    original = ctx.roles.grants
    raced = []

    def read_then_write(app_id, user_id):
        grants = original(app_id, user_id)  # read at seq S, before the write
        if not raced:
            raced.append(True)
            ctx.roles.unassign(app_id, user_id, role["_id"], None)  # emits E > S: invalidates
        return grants

    monkeypatch.setattr(ctx.roles, "grants", read_then_write)
    assert check(client, app, headers, user) == (True, False)  # the racing read answers once
    assert check(client, app, headers, user) == (False, False)  # but was not kept
    assert check(client, app, headers, user) == (False, True)


def test_a_fill_newer_than_the_invalidation_is_stored(ctx, setup):
    app, _, user, _ = setup
    ctx.events.emit(app["_id"], "role.assigned", {}, user_ids=[user["_id"]])
    assert ctx.authz.compiled_grants(app["_id"], user["_id"], None)[1] is False
    assert ctx.authz.compiled_grants(app["_id"], user["_id"], None)[1] is True


# --- SeqCache ----------------------------------------------------------------------------------


def make_cache():
    return SeqCache(ttl=60, maxsize=100, timer=lambda: 0.0)


def test_seq_cache_refuses_fills_older_than_an_invalidation_of_the_key_or_application():
    cache = make_cache()
    cache.invalidate(("a", "u1"), 10)
    assert cache.put(("a", "u1"), "old", 9) is False and cache.get(("a", "u1")) is None
    assert cache.put(("a", "u1"), "new", 10) is True and cache.get(("a", "u1")) == "new"
    cache.invalidate_app("a", 20)
    assert cache.get(("a", "u1")) is None
    assert cache.put(("a", "u2"), "old", 19) is False
    assert cache.put(("b", "u2"), "other app", 1) is True
    cache.clear(30)
    assert cache.put(("b", "u2"), "old", 29) is False and cache.put(("b", "u2"), "x", 30) is True


def test_seq_cache_forgetting_a_mark_raises_the_floor(monkeypatch):
    monkeypatch.setattr(authz_service, "INVALIDATION_MARKS", 2)
    cache = make_cache()
    cache.invalidate(("a", "u1"), 5)
    cache.invalidate(("a", "u2"), 6)
    cache.invalidate(("a", "u3"), 7)  # forgets u1's mark (5): fills older than 5 are refused everywhere
    assert cache.put(("a", "u1"), "old", 4) is False
    assert cache.put(("a", "u9"), "old", 4) is False
    assert cache.put(("a", "u1"), "fresh", 5) is True
    assert cache.put(("a", "u3"), "old", 6) is False
