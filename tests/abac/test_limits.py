"""The caps on an application's ABAC policies: IAMGATE_MAX_POLICIES_PER_APPLICATION,
IAMGATE_MAX_POLICIES_PER_PERMISSION, IAMGATE_MAX_CONDITION_BYTES and
IAMGATE_MAX_CONDITION_NODES, each with its error code; a refused write stores nothing
and emits nothing."""
from __future__ import annotations

import pytest

from controlplane.collection import WriteGuard
from shared.timeutil import seconds
from tests.conftest import assert_error, events_of, in_parallel

LIMITS = {"max_policies_per_application": 5, "max_policies_per_permission": 3, "max_condition_bytes": 300,
          "max_condition_nodes": 4}


@pytest.fixture
def config_overrides():
    return LIMITS


def comparison(i=0):
    return {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"value": f"u{i}"}}


def body(name, permissions=("docs:read",), condition=None):
    return {"name": name, "effect": "allow", "permissions": list(permissions), "condition": condition}


def stored(ctx):
    return ctx.store["abac_policies"].count_documents({})


@pytest.mark.parametrize("condition, details", [
    ({"op": "in", "left": {"attr": "context.a"}, "right": {"value": ["x" * 50] * 6}},
     {"path": "condition", "bytes": 377, "max_bytes": 300}),
    ({"any": [comparison(i) for i in range(4)]}, {"path": "condition", "nodes": 5, "max_nodes": 4}),
])
def test_a_condition_over_a_size_cap_is_400_and_stores_nothing(abac, ctx, condition, details):
    error = assert_error(abac.request("POST", "/abac/policies", json=body("big", condition=condition)), 400,
                         "ABAC_CONDITION_TOO_LARGE")
    assert error["details"] == details
    assert stored(ctx) == 0 and not events_of(ctx, "policy.created")

    policy = abac.create(name="small", condition=comparison())
    error = assert_error(abac.request("PUT", f"/abac/policies/{policy['id']}", json={"condition": condition}),
                         400, "ABAC_CONDITION_TOO_LARGE")
    assert error["details"] == details
    assert abac.request("GET", f"/abac/policies/{policy['id']}").json["data"]["condition"] == comparison()
    assert not events_of(ctx, "policy.updated")

    inline = {"user_id": "u", "permission": "docs:read", "policy": body("inline", condition=condition)}
    error = assert_error(abac.request("POST", "/abac/evaluate", json=inline), 400, "ABAC_CONDITION_TOO_LARGE")
    assert error["details"]["path"] == "policy.condition"


def test_a_condition_at_the_caps_is_accepted(abac):
    abac.create(name="four nodes", condition={"any": [comparison(i) for i in range(3)]})


def test_the_policy_count_of_an_application_is_capped(abac, ctx, client, make_application, make_api_key):
    from tests.abac.conftest import Abac

    created = [abac.create(name=f"p{i}", permissions=[f"r{i}:read"]) for i in range(5)]
    abac.request("PUT", f"/abac/policies/{created[0]['id']}", json={"is_active": False})  # inactive ones count
    error = assert_error(abac.request("POST", "/abac/policies", json=body("one too many", ["other:read"])), 409,
                         "ABAC_POLICY_LIMIT_EXCEEDED")
    assert error["details"] == {"limit": 5}
    assert stored(ctx) == 5 and len(events_of(ctx, "policy.created")) == 5

    other = make_application()
    Abac(client, other, make_api_key(other)).create(name="another tenant")  # a cap per application

    assert abac.request("DELETE", f"/abac/policies/{created[1]['id']}").status_code == 204
    abac.create(name="after a delete", permissions=["other:read"])


def test_the_policies_naming_a_permission_pattern_are_capped(abac, ctx):
    for i in range(3):
        abac.create(name=f"p{i}", permissions=["docs:read", f"r{i}:read"])
    error = assert_error(abac.request("POST", "/abac/policies", json=body("fourth", ["x:y", "docs:read"])), 409,
                         "ABAC_POLICIES_PER_PERMISSION_EXCEEDED")
    assert error["details"] == {"permission": "docs:read", "limit": 3}
    assert stored(ctx) == 3
    # Each pattern counts apart: docs:* covers docs:read but is another pattern.
    other = abac.create(name="wildcard", permissions=["docs:*"])

    error = assert_error(abac.request("PUT", f"/abac/policies/{other['id']}",
                                      json={"permissions": ["docs:*", "docs:read"], "name": "renamed"}), 409,
                         "ABAC_POLICIES_PER_PERMISSION_EXCEEDED")
    after = abac.request("GET", f"/abac/policies/{other['id']}").json["data"]
    assert after["permissions"] == ["docs:*"] and after["name"] == "wildcard"
    assert not events_of(ctx, "policy.updated")


def test_an_update_keeping_a_full_pattern_is_fine(abac):
    policies = [abac.create(name=f"p{i}", permissions=["docs:read"]) for i in range(3)]
    response = abac.request("PUT", f"/abac/policies/{policies[0]['id']}",
                            json={"permissions": ["docs:read", "docs:list"]})
    assert response.status_code == 200, response.text


def test_parallel_creates_cannot_pass_the_cap(abac, ctx):
    responses = in_parallel(12, lambda i: abac.request("POST", "/abac/policies",
                                                       json=body(f"p{i}", [f"r{i}:read"])))
    codes = sorted(r.status_code for r in responses)
    assert codes.count(201) <= 5 and set(codes) <= {201, 409}
    assert stored(ctx) == codes.count(201) == len(events_of(ctx, "policy.created"))
    for response in responses:
        if response.status_code == 409:
            assert response.json["error"]["code"] in ("ABAC_POLICY_LIMIT_EXCEEDED", "CONFLICT")


def test_a_held_write_guard_answers_409_conflict_and_an_expired_one_is_taken_over(abac, ctx, clock, monkeypatch):
    monkeypatch.setattr(WriteGuard, "WAIT", 0)
    guards = ctx.store["abac_policy_writers"]
    guards.insert_one({"_id": abac.app["_id"], "app_id": abac.app["_id"], "holder": "a writer that died",
                       "expires_at": clock() + seconds(WriteGuard.SECONDS)})
    assert_error(abac.request("POST", "/abac/policies", json=body("p")), 409, "CONFLICT")
    assert stored(ctx) == 0

    clock.advance(WriteGuard.SECONDS)
    abac.create(name="p")
    assert guards.count_documents({}) == 0  # released after the write
