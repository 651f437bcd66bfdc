"""Fail closed, recover without restart (docs/decision-service.md, "The stream, staleness and failing closed").

The control plane stops: cached answers stand for at most IAMGATE_DECISION_MAX_STALENESS
(5 s here, moved with a fake monotonic clock), then every check answers 503
DECISION_UNAVAILABLE, never a stale allow. It returns: the sidecar reconnects from its
last seq (or is told to reset, or sees a change log that restarted) and serves again.
"""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.decision.conftest import Tenant, wait_for

STALENESS = 5


def _lost_stream(sidecar):
    return wait_for(lambda: not sidecar.service.follower.connected)


def _trusted(sidecar):
    """Reconnected and caught up (within the bound the cache is trusted while disconnected)."""
    follower = sidecar.service.follower
    return wait_for(lambda: follower.connected and follower.trusted(), timeout=5)


def test_control_plane_down_cached_answers_stand_for_the_bound_then_503(tenant, fake_cp, sidecar, sidecar_client,
                                                                        monotonic):
    known, unknown = tenant.user_with("posts:read"), tenant.user_with("posts:read")
    assert tenant.allowed(known, "posts:read")
    assert tenant.allowed(known, "posts:write") is False
    assert sidecar_client.simulate_get("/readyz").status_code == 200

    fake_cp.stop()
    assert _lost_stream(sidecar)
    assert sidecar_client.simulate_get("/readyz").json == {"status": "unavailable", "stream": "disconnected"}
    # Within the bound: cached answers stand; anything not cached cannot be answered.
    assert tenant.get(known, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": True}
    error = assert_error(tenant.get(unknown, "posts:read"), 503, "DECISION_UNAVAILABLE")
    assert tenant.get(unknown, "posts:read").headers["Retry-After"] == "1"
    assert error["details"]["reason"]

    monotonic.advance(STALENESS + 0.1)
    # Beyond it: nothing from the cache, allow or deny, single, POST or bulk.
    assert_error(tenant.get(known, "posts:read"), 503, "DECISION_UNAVAILABLE")
    assert_error(tenant.get(known, "posts:write"), 503, "DECISION_UNAVAILABLE")
    assert_error(tenant.post({"user_id": known, "permission": "posts:read"}), 503, "DECISION_UNAVAILABLE")
    assert_error(tenant.bulk({"user_id": known, "permissions": ["posts:read"]}), 503, "DECISION_UNAVAILABLE")
    assert sidecar.service.metrics.unavailable.value() >= 5

    fake_cp.restart(wipe=False)
    assert _trusted(sidecar)
    assert sidecar_client.simulate_get("/readyz").status_code == 200
    assert tenant.get(known, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": True}
    assert tenant.allowed(unknown, "posts:read") is True


def test_changes_made_while_disconnected_are_replayed(tenant, fake_cp, sidecar):
    user = tenant.user_with()
    role = fake_cp.add_role(tenant.app_id, ["posts:read"])
    fake_cp.assign(tenant.app_id, user, role)
    assert tenant.allowed(user, "posts:read")
    fake_cp.stop()
    assert _lost_stream(sidecar)
    revoked = fake_cp.unassign(tenant.app_id, user, role)  # the log keeps it for the replay
    fake_cp.restart(wipe=False)
    assert _trusted(sidecar)
    assert sidecar.service.cache.applied >= revoked
    assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}
    assert sidecar.service.metrics.resets.value() == 0


def test_a_reset_drops_everything(tenant, fake_cp, sidecar):
    alice, bob = tenant.user_with("posts:read"), tenant.user_with("posts:read")
    assert tenant.allowed(alice, "posts:read") and tenant.allowed(bob, "posts:read")
    fake_cp.stop()
    assert _lost_stream(sidecar)
    fake_cp.set_status(tenant.app_id, alice, "suspended")
    fake_cp.forget_events_through(fake_cp.head)  # retention: the log cannot replay from our seq
    fake_cp.restart(wipe=False)
    assert _trusted(sidecar)
    assert sidecar.service.metrics.resets.value() == 1
    assert tenant.get(alice, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}
    assert tenant.get(bob, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": False}


def test_a_control_plane_that_lost_its_data_is_followed_from_scratch(tenant, fake_cp, sidecar, sidecar_client):
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read")
    fake_cp.stop()
    assert _lost_stream(sidecar)
    fake_cp.restart(wipe=True)  # memory:// restarted: no applications, the log starts over
    assert _trusted(sidecar)
    assert sidecar.service.metrics.resets.value() == 1
    assert sidecar.service.cache.grants(tenant.app_id, user) is None
    assert_error(tenant.get(user, "posts:read"), 404, "NOT_FOUND")

    fresh = Tenant(fake_cp, sidecar_client)
    granted, plain = fresh.user_with("posts:read"), fresh.user_with()
    assert fresh.allowed(granted, "posts:read") is True
    assert fresh.allowed(plain, "posts:read") is False
    role = fake_cp.add_role(fresh.app_id, ["posts:write"])
    seq = fake_cp.assign(fresh.app_id, plain, role)
    assert wait_for(lambda: sidecar.service.cache.applied >= seq)
    assert fresh.allowed(plain, "posts:write") is True


def test_a_replaced_log_whose_head_passed_ours_is_not_taken_for_the_old_one(tenant, fake_cp, sidecar):
    """A memory:// control plane restarts and takes more writes than the sidecar had
    applied before it reconnects: the head is at or past the sidecar's seq, so only the
    hello's epoch shows that the seqs it applied belong to another log."""
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read")
    assert tenant.get(user, "posts:read").json["cached"] is True
    applied = sidecar.service.cache.applied
    fake_cp.stop()
    assert _lost_stream(sidecar)
    fake_cp.wipe()
    # The new data holds the same application, key and user, but the user has no role
    # now; the events naming them come first, then writes elsewhere push the head past
    # the sidecar's seq, so the replay after that seq never names the user.
    fake_cp.add_app(tenant.app_id)
    fake_cp.add_key(tenant.app_id, secret=tenant.key)
    fake_cp.add_user(tenant.app_id, user_id=user)
    fake_cp.emit(tenant.app_id, "role.removed", [user])
    elsewhere = fake_cp.add_app()
    while fake_cp.head <= applied + 2:
        fake_cp.add_user(elsewhere)
    fake_cp.start()
    assert _trusted(sidecar)
    assert sidecar.service.metrics.resets.value() == 1
    assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}


def test_failing_lookups_fail_closed_but_cached_answers_stand(tenant, fake_cp):
    known, unknown = tenant.user_with("posts:read"), tenant.user_with("posts:read")
    assert tenant.allowed(known, "posts:read")
    fake_cp.lookup_status = 500
    assert tenant.get(known, "posts:read").json["cached"] is True
    assert_error(tenant.get(unknown, "posts:read"), 503, "DECISION_UNAVAILABLE")
    assert_error(tenant.get(known, "posts:read", min_revision=fake_cp.head + 1), 503, "DECISION_UNAVAILABLE")
    fake_cp.lookup_status = None
    assert tenant.allowed(unknown, "posts:read") is True


def test_a_silent_stream_stops_the_cache_being_trusted(tenant, fake_cp, sidecar, sidecar_client, monotonic):
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read")
    fake_cp.stream_silent = True  # the connection stays open, nothing arrives
    monotonic.advance(STALENESS + 0.1)
    assert sidecar_client.simulate_get("/readyz").status_code == 503
    # Every check now asks the control plane (which still answers lookups).
    assert tenant.get(user, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": False}
    fake_cp.stream_silent = False
    assert _trusted(sidecar)
    assert tenant.get(user, "posts:read").json["cached"] is True


@pytest.mark.parametrize("wipe", [False, True])
def test_a_cache_never_serves_before_the_first_connection(make_sidecar, fake_cp, wipe):
    import falcon.testing

    fake_cp.stop()
    app = make_sidecar(wait=False)
    tenant_client = falcon.testing.TestClient(app)
    assert tenant_client.simulate_get("/readyz").status_code == 503
    fake_cp.restart(wipe=wipe)
    tenant = Tenant(fake_cp, tenant_client)
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read")  # answered by fetching, connected or not
    assert _trusted(app)
    assert tenant.allowed(user, "posts:read")
