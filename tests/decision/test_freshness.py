"""The two rules that keep answers fresh beyond plain invalidation: no stale re-fill (a
fetch racing a revocation never leaves the old answer cached) and ``min_revision``
(read-your-writes from a write's X-Iamgate-Revision)."""
from __future__ import annotations

import threading

from tests.decision.conftest import wait_for


class Gate:
    """Holds grants responses of one user after the control plane read them."""

    def __init__(self, user_id):
        self.user_id = user_id
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, app_id, user_id):
        if user_id == self.user_id:
            self.reached.set()
            assert self.release.wait(5)


def _check_in_background(tenant, user, permission):
    result = {}
    thread = threading.Thread(target=lambda: result.update(response=tenant.get(user, permission)))
    thread.start()
    return thread, result


def test_a_fill_racing_a_revocation_answers_once_and_is_not_stored(tenant, fake_cp):
    user = tenant.user_with()
    role = fake_cp.add_role(tenant.app_id, ["posts:read"])
    fake_cp.assign(tenant.app_id, user, role)
    service = tenant.client.app.service
    assert wait_for(lambda: service.cache.applied >= fake_cp.head)
    assert service.cache.grants(tenant.app_id, user) is None

    fake_cp.grants_gate = gate = Gate(user)
    thread, result = _check_in_background(tenant, user, "posts:read")
    assert gate.reached.wait(5)  # the control plane has read the grants (still allowing)
    revoked = fake_cp.unassign(tenant.app_id, user, role)
    assert wait_for(lambda: service.cache.applied >= revoked)
    gate.release.set()
    thread.join(5)

    # The racing fill answers the request that asked for it...
    assert result["response"].json == {"allowed": True, "permission": "posts:read", "cached": False}
    # ...but is not stored: the next check fetches again and sees the revocation.
    fake_cp.grants_gate = None
    assert service.cache.grants(tenant.app_id, user) is None
    assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}
    assert tenant.get(user, "posts:read").json["cached"] is True
    assert service.metrics.stale_fills.value() == 1


def test_a_fill_racing_an_unrelated_event_is_stored(tenant, fake_cp):
    user, other = tenant.user_with("posts:read"), tenant.user_with("posts:read")
    service = tenant.client.app.service
    assert wait_for(lambda: service.cache.applied >= fake_cp.head)

    fake_cp.grants_gate = gate = Gate(user)
    thread, result = _check_in_background(tenant, user, "posts:read")
    assert gate.reached.wait(5)
    unrelated = fake_cp.set_status(tenant.app_id, other, "suspended")
    assert wait_for(lambda: service.cache.applied >= unrelated)
    gate.release.set()
    thread.join(5)

    assert result["response"].json["allowed"] is True
    assert tenant.get(user, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": True}
    assert service.metrics.stale_fills.value() == 0


def test_min_revision_answers_from_data_at_least_that_fresh(tenant, fake_cp):
    user = tenant.user_with()
    role = fake_cp.add_role(tenant.app_id, ["posts:read"])
    granted = fake_cp.assign(tenant.app_id, user, role)
    service = tenant.client.app.service
    assert wait_for(lambda: service.cache.applied >= granted)
    assert tenant.allowed(user, "posts:read") is True

    fake_cp.stream_paused = True  # the revocation's event is delayed on the way
    revision = fake_cp.unassign(tenant.app_id, user, role)
    # Without min_revision the cached answer stands until the event arrives...
    assert tenant.get(user, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": True}
    # ...with it, the answer reflects the write at once, by query or body, single or bulk.
    assert tenant.get(user, "posts:read", min_revision=revision).json == {
        "allowed": False, "permission": "posts:read", "cached": False}
    post = tenant.post({"user_id": user, "permission": "posts:read", "min_revision": revision})
    assert post.json["allowed"] is False and post.json["cached"] is False
    bulk = tenant.bulk({"user_id": user, "permissions": ["posts:read"], "min_revision": revision})
    assert bulk.json["results"] == {"posts:read": False}

    fake_cp.stream_paused = False
    assert wait_for(lambda: service.cache.applied >= revision)
    assert tenant.get(user, "posts:read", min_revision=revision).json == {
        "allowed": False, "permission": "posts:read", "cached": True}


def test_a_revision_already_applied_is_answered_from_the_cache(tenant, fake_cp):
    user = tenant.user_with("posts:read")
    service = tenant.client.app.service
    assert wait_for(lambda: service.cache.applied >= fake_cp.head)
    assert tenant.allowed(user, "posts:read")
    assert tenant.get(user, "posts:read", min_revision=fake_cp.head).json["cached"] is True
    assert tenant.get(user, "posts:read", min_revision=0).json["cached"] is True


def test_min_revision_also_refreshes_policies(tenant, fake_cp):
    from tests.decision.fakecp import policy

    user = tenant.user_with("docs:read")
    service = tenant.client.app.service
    assert tenant.post({"user_id": user, "permission": "docs:read"}).json["allowed"] is True
    fake_cp.stream_paused = True
    revision = fake_cp.set_policies(tenant.app_id, [policy("deny", ["docs:read"])])
    assert tenant.post({"user_id": user, "permission": "docs:read"}).json["allowed"] is True
    fresh = tenant.post({"user_id": user, "permission": "docs:read", "min_revision": revision})
    assert fresh.json == {"allowed": False, "permission": "docs:read", "cached": False, "abac_evaluated": True,
                          "policies_checked": 1}
    fake_cp.stream_paused = False
    assert wait_for(lambda: service.cache.applied >= revision)


def test_a_min_revision_ahead_of_the_log_is_refused_not_a_cache_bypass_per_check(tenant, fake_cp):
    """An absurd min_revision costs one control-plane read a second at
    most, then 400 AUTHZ_REVISION_AHEAD, as the control plane answers."""
    user = tenant.user_with("posts:read")
    service = tenant.client.app.service
    assert wait_for(lambda: service.cache.applied >= fake_cp.head)
    assert tenant.allowed(user, "posts:read")
    reads = []
    fake_cp.grants_gate = lambda app_id, user_id: reads.append(user_id)
    absurd = fake_cp.head + 10**9
    for _ in range(20):
        response = tenant.get(user, "posts:read", min_revision=absurd)
        assert response.status_code == 400, response.text
        error = response.json["error"]
        assert error["code"] == "AUTHZ_REVISION_AHEAD" and error["details"]["head"] <= fake_cp.head
    bulk = tenant.bulk({"user_id": user, "permissions": ["posts:read"], "min_revision": absurd})
    assert bulk.json["error"]["code"] == "AUTHZ_REVISION_AHEAD"
    assert len(reads) == 1
    # The head it holds is the control plane's own: a real revision is still answered.
    assert tenant.get(user, "posts:read", min_revision=fake_cp.head).json["allowed"] is True
