"""POST checks and check-bulk against policies and attributes written through the API:
every operator (missing attributes and type mismatches are false, never an error), the
order deny > RBAC > allow, inactive policies, ``policies_checked``, and invalidation of
the control plane's cache on policy and attribute events."""
from __future__ import annotations

import pytest


@pytest.fixture
def subject(application, stored_user, make_role, assign_role):
    """A user whose role grants posts:read only."""
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["posts:read"]))
    return user


def a(path):
    return {"attr": path}


def v(value):
    return {"value": value}


# (condition, resource, context, attributes, holds)
OPERATOR_CASES = [
    ({"op": "eq", "left": a("resource.owner_id"), "right": a("user.id")}, {"owner_id": "SELF"}, {}, {}, True),
    ({"op": "eq", "left": a("resource.owner_id"), "right": a("user.id")}, {"owner_id": "other"}, {}, {}, False),
    ({"op": "eq", "left": a("resource.n"), "right": v(1)}, {"n": 1.0}, {}, {}, True),
    ({"op": "eq", "left": a("resource.n"), "right": v(1)}, {"n": True}, {}, {}, False),
    ({"op": "eq", "left": a("resource.n"), "right": v(1)}, {"n": "1"}, {}, {}, False),
    ({"op": "ne", "left": a("user.attributes.team"), "right": v("red")}, {}, {}, {"team": "blue"}, True),
    ({"op": "ne", "left": a("user.attributes.team"), "right": v("red")}, {}, {}, {}, False),  # missing
    ({"op": "gt", "left": a("context.hour"), "right": v(17)}, {}, {"hour": 18}, {}, True),
    ({"op": "gt", "left": a("context.hour"), "right": v(17)}, {}, {"hour": "18"}, {}, False),  # mismatch
    ({"op": "gte", "left": a("user.attributes.level"), "right": v(3)}, {}, {}, {"level": 3}, True),
    ({"op": "lt", "left": a("resource.title"), "right": v("m")}, {"title": "apple"}, {}, {}, True),
    ({"op": "lte", "left": a("resource.size"), "right": v(10)}, {"size": 10.5}, {}, {}, False),
    ({"op": "lt", "left": a("resource.size"), "right": v(10)}, {}, {}, {}, False),  # missing
    ({"op": "in", "left": a("user.attributes.role"), "right": v(["admin", "owner"])}, {}, {}, {"role": "owner"}, True),
    ({"op": "in", "left": a("user.attributes.role"), "right": v(["admin"])}, {}, {}, {"role": ["admin"]}, False),
    ({"op": "in", "left": a("user.id"), "right": a("resource.editors")}, {"editors": ["x", "SELF"]}, {}, {}, True),
    ({"op": "in", "left": a("user.id"), "right": a("resource.editors")}, {"editors": "SELF"}, {}, {}, False),
    ({"op": "not_in", "left": a("context.country"), "right": v(["kp", "ir"])}, {}, {"country": "fr"}, {}, True),
    ({"op": "not_in", "left": a("context.country"), "right": v(["kp"])}, {}, {}, {}, False),  # missing
    ({"op": "contains", "left": a("resource.tags"), "right": v("public")}, {"tags": ["public", "x"]}, {}, {}, True),
    ({"op": "contains", "left": a("resource.title"), "right": v("draft")}, {"title": "a draft"}, {}, {}, True),
    ({"op": "contains", "left": a("resource.n"), "right": v("1")}, {"n": 10}, {}, {}, False),
    ({"op": "starts_with", "left": a("resource.path"), "right": v("/docs/")}, {"path": "/docs/a"}, {}, {}, True),
    ({"op": "starts_with", "left": a("resource.path"), "right": v("/docs/")}, {"path": ["/docs/a"]}, {}, {}, False),
    ({"op": "exists", "left": a("user.attributes.badge")}, {}, {}, {"badge": None}, True),
    ({"op": "exists", "left": a("user.attributes.badge")}, {}, {}, {}, False),
    ({"op": "exists", "left": a("user.attributes.badge"), "right": v(False)}, {}, {}, {}, True),
    ({"op": "ip_in_cidr", "left": a("context.ip"), "right": v("10.0.0.0/8")}, {}, {"ip": "10.2.3.4"}, {}, True),
    ({"op": "ip_in_cidr", "left": a("context.ip"), "right": v(["192.168.0.0/16", "2001:db8::/32"])}, {},
     {"ip": "2001:db8::1"}, {}, True),
    ({"op": "ip_in_cidr", "left": a("context.ip"), "right": v("10.0.0.0/8")}, {}, {"ip": "not an ip"}, {}, False),
    ({"op": "ip_in_cidr", "left": a("context.ip"), "right": v("10.0.0.0/8")}, {}, {"ip": 167772161}, {}, False),
    ({"op": "eq", "left": a("user.attributes.org.unit"), "right": v("emea")}, {}, {}, {"org.unit": "emea"}, True),
    ({"all": [{"op": "eq", "left": a("context.a"), "right": v(1)},
              {"not": {"op": "eq", "left": a("context.b"), "right": v(1)}}]}, {}, {"a": 1, "b": 2}, {}, True),
    ({"any": [{"op": "eq", "left": a("context.a"), "right": v(1)},
              {"op": "eq", "left": a("context.b"), "right": v(1)}]}, {}, {"b": 2}, {}, False),
]


@pytest.mark.parametrize("condition, resource, context, attributes, holds", OPERATOR_CASES)
def test_every_operator_through_an_allow_policy(abac, subject, condition, resource, context, attributes, holds):
    """posts:update is not granted by RBAC, so the allow policy decides alone."""
    for key, value in attributes.items():
        abac.set(subject["_id"], key, value)
    resource = {k: (subject["_id"] if val == "SELF" else val) for k, val in resource.items()}
    if "editors" in resource and isinstance(resource["editors"], list):
        resource["editors"] = [subject["_id"] if e == "SELF" else e for e in resource["editors"]]
    abac.create(effect="allow", permissions=["posts:update"], condition=condition)
    answer = abac.check(subject["_id"], "posts:update", resource=resource, context=context)
    assert answer == {"allowed": holds, "permission": "posts:update", "cached": False, "abac_evaluated": True,
                      "policies_checked": 1}


def test_a_matching_deny_overrides_rbac(abac, subject):
    abac.create(name="no reads after hours", effect="deny", permissions=["posts:*"],
                condition={"op": "gte", "left": a("context.hour"), "right": v(18)})
    assert abac.check(subject["_id"], "posts:read", context={"hour": 19})["allowed"] is False
    assert abac.check(subject["_id"], "posts:read", context={"hour": 9})["allowed"] is True
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True  # missing: the deny does not hold


def test_an_allow_grants_without_rbac_and_a_deny_still_wins(abac, subject):
    abac.create(name="owners", effect="allow", permissions=["posts:delete"],
                condition={"op": "eq", "left": a("resource.owner_id"), "right": a("user.id")})
    mine = {"owner_id": subject["_id"]}
    assert abac.check(subject["_id"], "posts:delete", resource=mine)["allowed"] is True
    assert abac.check(subject["_id"], "posts:delete", resource={"owner_id": "x"})["allowed"] is False
    abac.create(name="frozen", effect="deny", permissions=["*:delete"],
                condition={"op": "eq", "left": a("resource.frozen"), "right": v(True)})
    assert abac.check(subject["_id"], "posts:delete", resource={**mine, "frozen": True}) == {
        "allowed": False, "permission": "posts:delete", "cached": False, "abac_evaluated": True,
        "policies_checked": 2}


def test_an_unconditional_allow_does_not_help_a_suspended_user(abac, application, stored_user):
    user = stored_user(application, status="suspended")
    abac.create(effect="allow", permissions=["posts:read"])
    assert abac.check(user["_id"], "posts:read")["allowed"] is False


def test_inactive_policies_are_ignored(abac, subject):
    policy = abac.create(effect="deny", permissions=["posts:read"], is_active=False)
    assert abac.check(subject["_id"], "posts:read") == {"allowed": True, "permission": "posts:read",
                                                        "cached": False, "abac_evaluated": False,
                                                        "policies_checked": 0}
    abac.request("PUT", f"/abac/policies/{policy['id']}", json={"is_active": True})
    assert abac.check(subject["_id"], "posts:read")["allowed"] is False
    abac.request("PUT", f"/abac/policies/{policy['id']}", json={"is_active": False})
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True


def test_policies_checked_counts_the_active_policies_covering_the_permission(abac, subject):
    abac.create(name="1", permissions=["posts:read"])
    abac.create(name="2", permissions=["posts:*", "comments:read"])
    abac.create(name="3", permissions=["*:read"])
    abac.create(name="4", permissions=["*:*"], effect="deny",
                condition={"op": "eq", "left": a("context.never"), "right": v(1)})
    abac.create(name="5", permissions=["posts:read"], is_active=False)
    abac.create(name="6", permissions=["comments:write"])
    assert abac.check(subject["_id"], "posts:read")["policies_checked"] == 4
    assert abac.check(subject["_id"], "comments:read")["policies_checked"] == 3
    assert abac.check(subject["_id"], "billing:write")["policies_checked"] == 1
    answer = abac.check(subject["_id"], "comments:write")
    assert (answer["policies_checked"], answer["abac_evaluated"]) == (2, True)


@pytest.mark.parametrize("held, denied, checked", [
    ("posts:*", "posts:delete", "posts:*"),       # every action on posts, one of them denied
    ("*:*", "posts:read", "*:read"),              # reading everything, posts denied
    ("*:*", "posts:read", "*:*"),
    ("*:*", "*:delete", "posts:*"),               # a deny of a wildcard that overlaps one
])
def test_a_wildcard_check_is_denied_by_a_deny_of_a_name_it_covers(abac, application, stored_user, make_role,
                                                                  assign_role, held, denied, checked):
    """Checking posts:* asks whether the user may do every action on posts: a deny of one
    of them that holds makes the answer no, in a POST check and in check-bulk."""
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=[held]))
    assert abac.check(user["_id"], checked)["allowed"] is True
    abac.create(name="the deny", effect="deny", permissions=[denied],
                condition={"op": "eq", "left": a("context.frozen"), "right": v(True)})
    for frozen in (False, True):
        answer = abac.check(user["_id"], checked, context={"frozen": frozen})
        assert {**answer, "cached": None} == {"allowed": not frozen, "permission": checked, "cached": None,
                                              "abac_evaluated": True, "policies_checked": 1}
    bulk = abac.request("POST", "/authz/check-bulk", json={"user_id": user["_id"], "permissions": [checked],
                                                           "context": {"frozen": True}})
    assert bulk.json["results"] == {checked: False}


def test_a_wildcard_check_is_not_allowed_by_an_allow_of_one_name_it_covers(abac, subject):
    abac.create(effect="allow", permissions=["posts:delete"])
    assert abac.check(subject["_id"], "posts:*") == {
        "allowed": False, "permission": "posts:*", "cached": False, "abac_evaluated": False, "policies_checked": 0}


def test_get_checks_ignore_policies(abac, subject):
    abac.create(effect="deny", permissions=["posts:read"])
    response = abac.request("GET", "/authz/check", params={"user_id": subject["_id"], "permission": "posts:read"})
    assert response.json == {"allowed": True, "permission": "posts:read", "cached": False}


def test_check_bulk_with_resource_and_context(abac, subject):
    abac.set(subject["_id"], "department", "editorial")
    abac.create(name="editors edit", effect="allow", permissions=["posts:update", "posts:publish"],
                condition={"all": [{"op": "eq", "left": a("user.attributes.department"), "right": v("editorial")},
                                   {"op": "eq", "left": a("resource.state"), "right": v("draft")}]})
    abac.create(name="office only", effect="deny", permissions=["posts:publish"],
                condition={"not": {"op": "ip_in_cidr", "left": a("context.ip"), "right": v("10.0.0.0/8")}})
    body = {"user_id": subject["_id"], "permissions": ["posts:read", "posts:update", "posts:publish", "posts:delete"],
            "resource": {"state": "draft"}, "context": {"ip": "10.1.1.1"}}
    response = abac.request("POST", "/authz/check-bulk", json=body)
    assert response.json == {"user_id": subject["_id"], "results": {
        "posts:read": True, "posts:update": True, "posts:publish": True, "posts:delete": False}}
    away = abac.request("POST", "/authz/check-bulk", json={**body, "context": {"ip": "8.8.8.8"}}).json["results"]
    assert away == {"posts:read": True, "posts:update": True, "posts:publish": False, "posts:delete": False}
    published = abac.request("POST", "/authz/check-bulk", json={**body, "resource": {"state": "published"}})
    assert published.json["results"]["posts:update"] is False


# --- the control plane's cache follows the events -------------------------------------------


def test_a_policy_write_drops_the_applications_cached_policies(abac, ctx, subject):
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True
    assert abac.check(subject["_id"], "posts:read")["cached"] is True
    policy = abac.create(effect="deny", permissions=["posts:read"])
    assert abac.check(subject["_id"], "posts:read")["allowed"] is False
    abac.request("PUT", f"/abac/policies/{policy['id']}", json={"permissions": ["posts:write"]})
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True
    abac.request("PUT", f"/abac/policies/{policy['id']}", json={"permissions": ["posts:*"]})
    assert abac.check(subject["_id"], "posts:read")["allowed"] is False
    abac.request("DELETE", f"/abac/policies/{policy['id']}")
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True


def test_an_attribute_write_drops_only_that_users_grants(abac, ctx, application, subject, stored_user, make_role,
                                                          assign_role):
    other = stored_user(application)
    assign_role(application, other, make_role(application, permissions=["posts:read"]))
    abac.create(effect="deny", permissions=["posts:read"],
                condition={"op": "eq", "left": a("user.attributes.blocked"), "right": v(True)})
    for user in (subject, other):
        assert abac.check(user["_id"], "posts:read")["allowed"] is True
        assert abac.check(user["_id"], "posts:read")["cached"] is True
    abac.set(subject["_id"], "blocked", True)
    assert abac.check(subject["_id"], "posts:read") == {"allowed": False, "permission": "posts:read",
                                                        "cached": False, "abac_evaluated": True,
                                                        "policies_checked": 1}
    assert abac.check(other["_id"], "posts:read")["cached"] is True  # another user's answer stays cached
    abac.request("DELETE", f"/users/{subject['_id']}/attributes/blocked")
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True


def test_events_from_another_replica_invalidate_too(abac, ctx, subject):
    """Another replica's write reaches this one through the tailer: apply_event does the work."""
    assert abac.check(subject["_id"], "posts:read")["cached"] in (False, True)
    assert abac.check(subject["_id"], "posts:read")["cached"] is True
    listeners = list(ctx.events._listeners)
    ctx.events._listeners.clear()  # as if written elsewhere: no synchronous invalidation
    try:
        abac.set(subject["_id"], "blocked", True)
        abac.create(effect="deny", permissions=["posts:read"],
                    condition={"op": "eq", "left": a("user.attributes.blocked"), "right": v(True)})
    finally:
        ctx.events._listeners.extend(listeners)
    assert abac.check(subject["_id"], "posts:read")["allowed"] is True  # still the cached answer
    for event in ctx.events.read_after(0, 1000):
        ctx.authz.apply_event(event)
    assert abac.check(subject["_id"], "posts:read")["allowed"] is False
