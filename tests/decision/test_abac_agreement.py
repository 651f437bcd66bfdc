"""ABAC written through the control plane's API, answered by both the control plane and a
decision service following it.

- Agreement: hypothesis generates policies (every operator, nested conditions, wildcard
  patterns, inactive ones), user attributes and checks with resource and context; the
  policies and attributes are written through ``V1/abac/policies`` and
  ``V1/users/{userId}/attributes``, and both processes must give the same POST check and
  check-bulk answers.
- Freshness: after a policy or attribute write, a decision-service check with the write's
  ``X-Iamgate-Revision`` as ``min_revision`` sees it at once, even while the change stream
  is held; without it, within the propagation bound (1 s on loopback).
- Invalidation: a policy event drops the application's policies, an attribute event the
  one user's grants.
"""
from __future__ import annotations

import time

import falcon.testing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import bearer
from tests.decision.conftest import wait_for
from tests.decision.test_agreement import Both, app, config_overrides, sidecar

# The real control plane (tailer on) and a decision service following it, as in test_agreement.
SHARED_FIXTURES = (app, config_overrides, sidecar)

PROPAGATION_BOUND = 1.0  # seconds: docs/decision-service.md, "The stream, staleness and failing closed"

PERMISSIONS = ("posts:read", "posts:delete", "docs:read", "billing:write")
PATTERNS = ("posts:read", "posts:*", "*:read", "*:*", "docs:read", "billing:write", "docs:*")
ATTRIBUTE_KEYS = ("team", "level", "tags", "ip", "org.unit")
PATHS = ("user.id", "user.attributes.team", "user.attributes.level", "user.attributes.tags", "user.attributes.ip",
         "user.attributes.org.unit", "user.attributes.absent", "resource.owner", "resource.level", "resource.tags",
         "resource.state", "resource.absent", "context.ip", "context.hour", "context.absent")
SCALARS = st.sampled_from(["a", "b", "draft", "10.1.2.3", "", 0, 1, 3, 2.5, -1, True, False, None])
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))
CIDRS = st.sampled_from(["10.0.0.0/8", "10.1.2.0/24", "192.168.0.0/16", "2001:db8::/32", "0.0.0.0/0"])
ATTR = st.sampled_from(PATHS).map(lambda path: {"attr": path})


def _right(op):
    if op in ("in", "not_in"):
        return st.one_of(ATTR, st.lists(SCALARS, max_size=4).map(lambda v: {"value": v}))
    if op == "ip_in_cidr":
        return st.one_of(ATTR, st.one_of(CIDRS, st.lists(CIDRS, min_size=1, max_size=2)).map(lambda v: {"value": v}))
    if op in ("gt", "gte", "lt", "lte"):
        return st.one_of(ATTR, st.sampled_from([0, 1, 3, 2.5, "a", "m"]).map(lambda v: {"value": v}))
    if op == "starts_with":
        return st.one_of(ATTR, st.sampled_from(["", "a", "dr", "10."]).map(lambda v: {"value": v}))
    return st.one_of(ATTR, VALUES.map(lambda v: {"value": v}))


@st.composite
def comparisons(draw):
    op = draw(st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "starts_with",
                               "exists", "ip_in_cidr"]))
    node = {"op": op, "left": draw(ATTR)}
    if op == "exists":
        presence = draw(st.sampled_from([None, True, False]))
        if presence is not None:
            node["right"] = {"value": presence}
    else:
        node["right"] = draw(_right(op))
    return node


CONDITIONS = st.recursive(
    comparisons(),
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda c: {"all": c}),
        st.lists(children, min_size=1, max_size=3).map(lambda c: {"any": c}),
        children.map(lambda c: {"not": c})),
    max_leaves=6)

POLICIES = st.lists(st.fixed_dictionaries({
    "effect": st.sampled_from(["allow", "deny"]),
    "permissions": st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2, unique=True),
    "condition": st.one_of(st.none(), CONDITIONS),
    "is_active": st.booleans() | st.just(True),
}), min_size=1, max_size=5)

ATTRIBUTES = st.dictionaries(st.sampled_from(ATTRIBUTE_KEYS), VALUES, max_size=4)
RESOURCES = st.fixed_dictionaries({}, optional={"owner": st.sampled_from(["SELF", "other"]), "level": SCALARS,
                                                "tags": st.lists(SCALARS, max_size=3), "state": SCALARS})
CONTEXTS = st.fixed_dictionaries({}, optional={"ip": st.sampled_from(["10.1.2.3", "192.168.4.4", "2001:db8::7",
                                                                      "::ffff:10.1.2.3", "bogus", 7]),
                                               "hour": st.integers(0, 23) | SCALARS})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(policies=POLICIES, attributes=ATTRIBUTES, rbac=st.lists(st.sampled_from(PATTERNS), max_size=2, unique=True),
       checks=st.lists(st.tuples(RESOURCES, CONTEXTS), min_size=1, max_size=3), status=st.sampled_from(
           ["active"] * 4 + ["suspended"]))
def test_random_policies_and_attributes_get_the_same_answers(ctx, client, make_application, make_api_key, stored_user,
                                                             make_role, assign_role, sidecar,
                                                             policies, attributes, rbac, checks, status):
    application = make_application()
    key = make_api_key(application)
    both = Both(client, sidecar, application["_id"], key)
    user = stored_user(application, status=status)
    if rbac:
        assign_role(application, user, make_role(application, permissions=rbac))
    v1 = f"/api/v1/applications/{application['_id']}"
    for name, value in attributes.items():
        response = client.simulate_put(f"{v1}/users/{user['_id']}/attributes/{name}", json={"value": value},
                                       headers=bearer(key))
        assert response.status_code == 200, response.text
    for index, policy in enumerate(policies):
        response = client.simulate_post(f"{v1}/abac/policies", json={"name": f"p{index}", **policy},
                                        headers=bearer(key))
        assert response.status_code == 201, (policy, response.text)
    head = ctx.events.head()
    assert wait_for(lambda: sidecar.service.cache.applied >= head, timeout=5)

    for resource, context in checks:
        resource = {k: (user["_id"] if value == "SELF" else value) for k, value in resource.items()}
        body = {"user_id": user["_id"], "resource": resource, "context": context}
        for permission in PERMISSIONS:
            both.same_answer("POST", "check", json={**body, "permission": permission})
        both.same_answer("POST", "check-bulk", json={**body, "permissions": list(PERMISSIONS)})


# --- freshness and invalidation ------------------------------------------------------------------


@pytest.fixture
def tenant(ctx, client, application, make_api_key, stored_user, make_role, assign_role, sidecar):
    key = make_api_key(application)
    users = [stored_user(application) for _ in range(2)]
    role = make_role(application, permissions=["posts:read"])
    for user in users:
        assign_role(application, user, role)
    return Tenant(ctx, client, falcon.testing.TestClient(sidecar), sidecar, application["_id"], key, users)


class Tenant:
    def __init__(self, ctx, control_plane, sidecar_client, sidecar, app_id, key, users):
        self.ctx, self.control_plane, self.sidecar_client, self.sidecar = ctx, control_plane, sidecar_client, sidecar
        self.headers = bearer(key)
        self.v1 = f"/api/v1/applications/{app_id}"
        self.app_id, self.users = app_id, users

    def write(self, method, path, **kwargs) -> int:
        response = self.control_plane.simulate_request(method, self.v1 + path, headers=self.headers, **kwargs)
        assert response.status_code in (200, 201, 204), response.text
        return int(response.headers["X-Iamgate-Revision"])

    def check(self, user, **body):
        response = self.sidecar_client.simulate_post(f"{self.v1}/authz/check", headers=self.headers, json={
            "user_id": user["_id"], "permission": "posts:read", **body})
        assert response.status_code == 200, response.text
        return response.json

    def settled(self):
        head = self.ctx.events.head()
        assert wait_for(lambda: self.sidecar.service.cache.applied >= head, timeout=5)


@pytest.fixture
def held_stream(ctx, monkeypatch):
    """``hold()`` stops the control plane's change streams from delivering events (they
    still heartbeat); ``release()`` lets them catch up."""
    real = ctx.tailer.wait_after
    held = {"on": False}

    def wait_after(last, timeout, *rest, **options):
        if held["on"]:
            time.sleep(min(timeout, 0.05))
            return []
        events = real(last, min(timeout, 0.05), *rest, **options)
        # A stream already waiting when hold() came must not deliver either: it asks
        # again from the same seq once released.
        return [] if held["on"] else events

    monkeypatch.setattr(ctx.tailer, "wait_after", wait_after)

    class Control:
        def hold(self):
            held["on"] = True

        def release(self):
            held["on"] = False

    return Control()


def test_min_revision_sees_a_policy_write_at_once(tenant, held_stream):
    user = tenant.users[0]
    tenant.settled()
    assert tenant.check(user)["allowed"] is True
    assert tenant.check(user)["cached"] is True
    held_stream.hold()
    revision = tenant.write("POST", "/abac/policies", json={"name": "deny", "effect": "deny",
                                                            "permissions": ["posts:read"]})
    assert tenant.check(user)["allowed"] is True  # the stream is held: the cache still answers
    fresh = tenant.check(user, min_revision=revision)
    assert fresh == {"allowed": False, "permission": "posts:read", "cached": False, "abac_evaluated": True,
                     "policies_checked": 1}
    held_stream.release()
    started = time.monotonic()
    assert wait_for(lambda: tenant.check(user)["allowed"] is False, timeout=PROPAGATION_BOUND)
    assert time.monotonic() - started < PROPAGATION_BOUND


def test_min_revision_sees_an_attribute_write_at_once(tenant, held_stream):
    user = tenant.users[0]
    tenant.write("POST", "/abac/policies", json={
        "name": "blocked", "effect": "deny", "permissions": ["posts:*"],
        "condition": {"op": "eq", "left": {"attr": "user.attributes.blocked"}, "right": {"value": True}}})
    tenant.settled()
    assert tenant.check(user)["allowed"] is True
    held_stream.hold()
    revision = tenant.write("PUT", f"/users/{user['_id']}/attributes/blocked", json={"value": True})
    assert tenant.check(user)["allowed"] is True
    assert tenant.check(user, min_revision=revision)["allowed"] is False
    held_stream.release()
    revision = tenant.write("DELETE", f"/users/{user['_id']}/attributes/blocked")
    assert tenant.check(user, min_revision=revision)["allowed"] is True


def test_without_min_revision_writes_arrive_within_the_propagation_bound(tenant):
    user = tenant.users[0]
    tenant.settled()
    assert tenant.check(user)["allowed"] is True
    started = time.monotonic()
    policy_revision = tenant.write("POST", "/abac/policies", json={"name": "deny", "effect": "deny",
                                                                   "permissions": ["posts:read"]})
    assert wait_for(lambda: tenant.check(user)["allowed"] is False, timeout=PROPAGATION_BOUND, interval=0.005)
    assert time.monotonic() - started < PROPAGATION_BOUND
    assert tenant.sidecar.service.cache.applied >= policy_revision


def test_a_policy_event_marks_the_policy_and_an_attribute_event_drops_one_users_grants(tenant):
    first, second = tenant.users
    cache = tenant.sidecar.service.cache
    tenant.write("POST", "/abac/policies", json={
        "name": "blocked", "effect": "deny", "permissions": ["posts:*"],
        "condition": {"op": "eq", "left": {"attr": "user.attributes.blocked"}, "right": {"value": True}}})
    tenant.settled()
    for user in (first, second):
        tenant.check(user)
        assert tenant.check(user)["cached"] is True
    tenant.write("PUT", f"/users/{first['_id']}/attributes/blocked", json={"value": True})
    tenant.settled()
    assert cache.grants(tenant.app_id, first["_id"]) is None
    assert cache.grants(tenant.app_id, second["_id"]) is not None  # another user's grants stay
    assert cache.policies(tenant.app_id) is not None  # an attribute changes no policy
    assert tenant.check(first)["allowed"] is False and tenant.check(second)["allowed"] is True

    tenant.write("POST", "/abac/policies", json={"name": "other", "effect": "allow", "permissions": ["x:y"]})
    tenant.settled()
    assert len(cache.policies(tenant.app_id).stale) == 1  # the new policy, to be patched in
    assert cache.grants(tenant.app_id, second["_id"]) is not None  # a policy changes nobody's grants


def test_a_check_after_a_policy_edit_fetches_only_the_edited_policy(tenant, monkeypatch):
    """The change frame names the policy (``policy_ids``); the sidecar fetches just it by
    id and patches it into its cached set, and answers as the control plane does."""
    user, _ = tenant.users
    client = tenant.sidecar.service.client
    fetched, real = [], client.policies
    monkeypatch.setattr(client, "policies", lambda app_id, policy_ids=None, **kw: fetched.append(policy_ids)
                        or real(app_id, policy_ids))
    blocked = {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"value": "blocked"}}
    for index in range(5):
        tenant.write("POST", "/abac/policies", json={"name": f"deny{index}", "effect": "deny",
                                                     "permissions": ["posts:*"], "condition": blocked})
    tenant.settled()
    assert tenant.check(user, resource={"owner": "me"})["allowed"] is True
    assert fetched == [None]  # read whole once
    listed = tenant.control_plane.simulate_get(f"{tenant.v1}/abac/policies", headers=tenant.headers).json["data"]
    edited = listed[2]["id"]
    revision = tenant.write("PUT", f"/abac/policies/{edited}", json={"condition": None})
    tenant.settled()
    fetched.clear()
    answer = tenant.check(user, resource={"owner": "me"}, min_revision=revision)
    assert answer["allowed"] is False and answer["policies_checked"] == 5
    assert fetched == [[edited]]
    fetched.clear()
    assert tenant.check(user, resource={"owner": "me"})["cached"] is True and fetched == []
