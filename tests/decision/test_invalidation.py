"""Change events drop exactly what they name (contract item 5), so a revocation stops
allowing as soon as its event arrives, and unrelated entries stay cached."""
from __future__ import annotations

from tests.conftest import assert_error
from tests.decision.conftest import wait_for
from tests.decision.fakecp import policy


def applied(tenant, seq) -> bool:
    return wait_for(lambda: tenant.client.app.service.cache.applied >= seq)


def test_removing_a_role_stops_allowing_once_the_event_arrives(tenant, fake_cp):
    user = tenant.user_with()
    role = fake_cp.add_role(tenant.app_id, ["posts:read"])
    assert applied(tenant, fake_cp.assign(tenant.app_id, user, role))
    assert tenant.allowed(user, "posts:read") is True
    assert tenant.get(user, "posts:read").json["cached"] is True
    assert applied(tenant, fake_cp.unassign(tenant.app_id, user, role))
    assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}


def test_an_event_for_one_user_leaves_the_others_cached(tenant, fake_cp):
    alice, bob = tenant.user_with("posts:read"), tenant.user_with("posts:read")
    assert tenant.allowed(alice, "posts:read") and tenant.allowed(bob, "posts:read")
    assert applied(tenant, fake_cp.set_status(tenant.app_id, alice, "suspended"))
    assert tenant.get(alice, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}
    assert tenant.get(bob, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": True}
    metrics = tenant.client.app.service.metrics
    assert metrics.invalidations.value(("grants",)) == 1


def test_a_role_change_drops_every_holder(tenant, fake_cp):
    role = fake_cp.add_role(tenant.app_id, ["posts:read"])
    holders = [tenant.user_with() for _ in range(3)]
    for user in holders:
        fake_cp.assign(tenant.app_id, user, role)
    assert applied(tenant, fake_cp.head)
    assert all(tenant.allowed(user, "posts:read") for user in holders)
    assert applied(tenant, fake_cp.set_role_permissions(tenant.app_id, role, ["posts:write"]))
    for user in holders:
        assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}
        assert tenant.allowed(user, "posts:write") is True


def test_unsuspending_allows_again(tenant, fake_cp):
    user = tenant.user_with("posts:read", status="suspended")
    assert tenant.allowed(user, "posts:read") is False
    assert applied(tenant, fake_cp.set_status(tenant.app_id, user, "active"))
    assert tenant.allowed(user, "posts:read") is True


def test_an_attribute_change_reaches_abac_conditions(tenant, fake_cp):
    user = tenant.user_with(attributes={"level": 1})
    fake_cp.set_policies(tenant.app_id, [policy("allow", ["vault:open"], {
        "op": "gte", "left": {"attr": "user.attributes.level"}, "right": {"value": 5}})])
    assert tenant.post({"user_id": user, "permission": "vault:open"}).json["allowed"] is False
    assert applied(tenant, fake_cp.set_attribute(tenant.app_id, user, "level", 7))
    response = tenant.post({"user_id": user, "permission": "vault:open"})
    assert response.json["allowed"] is True and response.json["cached"] is False


def test_a_policy_change_drops_the_applications_policies(tenant, fake_cp):
    user = tenant.user_with("docs:read")
    assert tenant.post({"user_id": user, "permission": "docs:read"}).json["policies_checked"] == 0
    assert tenant.post({"user_id": user, "permission": "docs:read"}).json["cached"] is True
    assert applied(tenant, fake_cp.set_policies(tenant.app_id, [policy("deny", ["docs:*"])]))
    response = tenant.post({"user_id": user, "permission": "docs:read"})
    assert response.json == {"allowed": False, "permission": "docs:read", "cached": False,
                             "abac_evaluated": True, "policies_checked": 1}
    assert tenant.client.app.service.metrics.invalidations.value(("policies",)) == 1


def test_other_applications_events_do_not_touch_this_one(tenant, fake_cp):
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read")
    other = fake_cp.add_app()
    other_user = fake_cp.add_user(other)
    assert applied(tenant, fake_cp.set_status(other, other_user, "suspended"))
    assert tenant.get(user, "posts:read").json["cached"] is True


def test_deleting_the_application_drops_all_of_it(tenant, fake_cp):
    users = [tenant.user_with("posts:read") for _ in range(2)]
    assert all(tenant.allowed(user, "posts:read") for user in users)
    assert applied(tenant, fake_cp.delete_app(tenant.app_id))
    cache = tenant.client.app.service.cache
    assert all(cache.grants(tenant.app_id, user) is None for user in users)
    assert cache.keys(tenant.app_id) is None
    assert_error(tenant.get(users[0], "posts:read"), 404, "NOT_FOUND")
