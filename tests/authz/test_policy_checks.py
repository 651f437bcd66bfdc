"""A check evaluates the active policies covering its permission as docs/authorization.md
("Authorization checks") describes: a deny whose condition holds denies (a malformed one
holds: fail closed), else RBAC allows, else an allow whose condition holds (a malformed
one does not), else deny; a user who is not active is denied with the covering policies
still counted.

The reference below evaluates each condition by walking its document
(tests/authz/test_compiled_conditions.py ``walk``), over the environment
``condition_environment`` builds, so it shares no compiled program with the checks.
"""
from __future__ import annotations

import itertools
from collections import UserDict
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.abac import ALLOW, DENY, CompiledPolicies, Policy, compile_condition, condition_environment, condition_nodes
from shared.abac.evaluator import ALWAYS
from shared.abac.evaluator import CompiledCache as _CompiledCache
from shared.abac.language import COMPARISONS as _COMPARISONS
from shared.abac.language import MAX_CONDITION_DEPTH
from shared.abac.language import Malformed as _Malformed
from shared.authorization import Decision, decide_compiled
from shared.rbac import CompiledGrants
from tests.authz.test_compiled_conditions import CONDITIONS, ENV_VALUES, LITERALS, PATHS, SCALARS, walk

PERMISSIONS = ["docs:read", "docs:write", "billing:read"]
PATTERNS = ["docs:read", "docs:*", "*:read", "*:*", "billing:read", "nope", "x:y:z"]
KEYS = st.sampled_from(["x", "y"])
MAPPINGS = st.dictionaries(KEYS, ENV_VALUES, min_size=1, max_size=2) | st.just({})
# resource, context and attributes: plain objects (most of the time), read-only mappings,
# other mappings, and values that are not objects at all
ODD = st.sampled_from([None, "text", 5, ["x"], ()])
VALUES = MAPPINGS | MAPPINGS.map(MappingProxyType) | MAPPINGS.map(UserDict) | ODD
# Besides the random conditions (many of them malformed), well-formed comparisons of the
# paths the values below hold, and combinations of them.
ATTRS = st.sampled_from(PATHS).map(lambda path: {"attr": path})
WELL_FORMED = st.recursive(st.builds(
    lambda op, left, right: {"op": op, "left": left, "right": right},
    st.sampled_from(sorted(_COMPARISONS)), ATTRS, ATTRS | SCALARS.map(lambda value: {"value": value})),
    lambda inner: st.lists(inner, max_size=3).map(lambda items: {"all": items})
    | st.lists(inner, max_size=3).map(lambda items: {"any": items}) | inner.map(lambda item: {"not": item}),
    max_leaves=4)
POLICIES = st.lists(st.builds(
    lambda index, effect, patterns, condition, active: Policy(
        id=f"p{index}", name=f"p{index}", effect=effect, permissions=tuple(patterns), condition=condition,
        is_active=active),
    st.integers(0, 99), st.sampled_from([ALLOW, DENY]), st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2),
    st.none() | CONDITIONS | WELL_FORMED, st.booleans() | st.just(True)), max_size=6)


def reference(policies, permission, grants: CompiledGrants, resource, context) -> Decision:
    covering = CompiledPolicies(policies).covering(permission)
    if not covering:
        return Decision(grants.user_active and grants.allows(permission))
    environment = condition_environment(grants.user_id, grants.attributes, resource, context)

    def holds(policy, malformed: bool) -> bool:
        if policy.condition is None:
            return True
        try:
            return walk(policy.condition, environment)
        except _Malformed:
            return malformed

    allowed = (grants.user_active
               and not any(holds(policy, True) for policy in covering if policy.effect == DENY)
               and (grants.allows(permission) or any(holds(policy, False) for policy in covering
                                                     if policy.effect == ALLOW)))
    return Decision(allowed, abac_evaluated=True, policies_checked=len(covering))


def grants_of(active: bool, patterns, attributes, user_id="u1") -> CompiledGrants:
    return CompiledGrants(user_id, active, None, frozenset(patterns if active else ()), attributes, None)


CHECKS = dict(policies=POLICIES, active=st.booleans() | st.just(True),
              rbac=st.lists(st.sampled_from(PATTERNS[:5]), max_size=2), attributes=VALUES, resource=VALUES,
              context=VALUES, user_id=st.sampled_from(["u1", "x"]) | SCALARS)


@settings(max_examples=1500, deadline=None)
@given(**CHECKS)
def test_a_check_of_one_permission_gives_the_policy_by_policy_answer(policies, active, rbac, attributes, resource,
                                                                      context, user_id):
    grants = grants_of(active, rbac, attributes, user_id)
    compiled = CompiledPolicies(policies)
    for permission in PERMISSIONS:
        expected = reference(policies, permission, grants, resource, context)
        got = decide_compiled(grants, [permission], policies=compiled, resource=resource, context=context)
        assert got == {permission: expected}, (permission, policies)
        assert compiled.effects(permission)[0] == expected.policies_checked


@settings(max_examples=500, deadline=None)
@given(**CHECKS)
def test_a_bulk_check_gives_each_permission_the_policy_by_policy_answer(policies, active, rbac, attributes, resource,
                                                                       context, user_id):
    grants = grants_of(active, rbac, attributes, user_id)
    got = decide_compiled(grants, PERMISSIONS, policies=CompiledPolicies(policies), resource=resource,
                          context=context)
    assert got == {permission: reference(policies, permission, grants, resource, context)
                   for permission in PERMISSIONS}


def deny(condition, index=0):
    return Policy(f"d{index}", f"d{index}", DENY, ("docs:read",), condition)


def allow(condition, index=0):
    return Policy(f"a{index}", f"a{index}", ALLOW, ("docs:read",), condition)


def check(policies, *, rbac=True, active=True, attributes=None, resource=None, context=None) -> Decision:
    grants = grants_of(active, ["docs:read"] if rbac else [], {} if attributes is None else attributes)
    return decide_compiled(grants, ["docs:read"], policies=CompiledPolicies(policies), resource=resource,
                           context=context)["docs:read"]


BAD = {"op": "nope", "left": {"value": 1}, "right": {"value": 1}}
FALSE = {"op": "eq", "left": {"value": 1}, "right": {"value": 2}}


def test_malformed_conditions_fail_closed_policy_by_policy():
    assert check([deny(BAD)]).allowed is False
    assert check([allow(BAD)], rbac=False).allowed is False
    assert check([allow(BAD), allow(None, 1)], rbac=False).allowed is True  # the malformed allow is passed over
    # reached only past a comparison that does not hold: never reached, so never malformed
    assert check([deny({"all": [FALSE, BAD]})]).allowed is True
    assert check([deny({"any": [FALSE, BAD]})]).allowed is False
    # exists with an attribute that reads a non-boolean: malformed when evaluated
    exists = {"op": "exists", "left": {"attr": "resource.x"}, "right": {"attr": "context.w"}}
    assert check([deny(exists)], resource={"x": 1}, context={"w": False}).allowed is True
    assert check([deny(exists)], resource={"x": 1}, context={"w": "no"}).allowed is False
    assert check([allow(exists)], rbac=False, context={"w": True}).allowed is False


def test_a_user_who_is_not_active_is_denied_and_the_policies_still_counted():
    assert check([allow(None), deny(FALSE, 1)], active=False) == Decision(False, True, 2)
    assert check([allow(None), deny(FALSE, 1)]) == Decision(True, True, 2)


def test_paths_read_from_the_checks_values():
    same = {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"attr": "user.id"}}
    assert check([allow(same)], rbac=False, resource={"owner": "u1"}).allowed is True
    assert check([allow(same)], rbac=False, resource=MappingProxyType({"owner": "u1"})).allowed is True
    assert check([allow(same)], rbac=False, resource="u1").allowed is False  # not an object: read as empty
    team = {"op": "eq", "left": {"attr": "user.attributes.team"}, "right": {"value": "red"}}
    assert check([allow(team)], rbac=False, attributes=MappingProxyType({"team": "red"})).allowed is True
    assert check([allow(team)], rbac=False, attributes={"team": "blue"}).allowed is False
    whole = {"op": "eq", "left": {"attr": "user"}, "right": {"value": {"id": "u1", "attributes": {"a": 1}}}}
    assert check([allow(whole)], rbac=False, attributes={"a": 1}).allowed is True
    deep = {"op": "eq", "left": {"attr": "context.a.b.c"}, "right": {"value": 1}}
    assert check([allow(deep)], rbac=False, context={"a": {"b": {"c": 1}}}).allowed is True
    assert check([allow(deep)], rbac=False, context={"a": {"b": 5}}).allowed is False
    other = {"op": "exists", "left": {"attr": "session.id"}}
    assert check([allow(other)], rbac=False, context={"session": {"id": 1}}).allowed is False


def test_programs_are_shared_by_content_and_literals_stay_data():
    sneaky = {"op": "eq", "left": {"attr": "resource.x"}, "right": {"value": "') or True or ('"}}
    policies = CompiledPolicies([deny(sneaky), allow(None)])
    count, denies, _ = policies.effects("docs:read")
    assert count == 2 and policies.effects("docs:read")[1] is denies
    assert CompiledPolicies([deny(dict(sneaky)), allow(None)]).effects("docs:read")[1][0][1] is denies[0][1]
    assert check([deny(sneaky), allow(None)], rbac=True, resource={"x": "') or True or ('"}).allowed is False
    assert check([deny(sneaky), allow(None)], rbac=False, resource={"x": "x"}).allowed is True
    for literal in LITERALS:
        condition = {"op": "eq", "left": {"attr": "resource.__class__"}, "right": {"value": literal}}
        assert check([deny(condition)], resource={}).allowed is True


def test_every_comparison_of_two_attributes_present_or_missing():
    missing = object()
    values = [missing, "a", "10.1.2.3", "10.0.0.0/8", 1, 2.5, True, None, ["a"], {"a": 1}]
    for op in [*sorted(_COMPARISONS), "exists"]:
        condition = {"op": op, "left": {"attr": "resource.x"}, "right": {"attr": "context.y"}}
        for left, right in itertools.product(values, repeat=2):
            resource = {} if left is missing else {"x": left}
            context = {} if right is missing else {"y": right}
            grants = grants_of(True, [], {})
            for policies in ([deny(condition), allow(None)], [allow(condition)]):
                expected = reference(policies, "docs:read", grants, resource, context)
                assert check(policies, rbac=False, resource=resource, context=context) == expected, (op, left, right)
                written = decide_compiled(grants, ["docs:read", "docs:write"], policies=CompiledPolicies(policies),
                                          resource=resource, context=context)["docs:read"]
                assert written == expected, (op, left, right)


def comparisons(n, value="x"):
    return {"any": [{"op": "eq", "left": {"attr": f"resource.k{i}"}, "right": {"value": value}} for i in range(n)]}


def test_condition_nodes_counts_groups_and_comparisons():
    assert condition_nodes(comparisons(3)) == 4
    assert condition_nodes({"not": {"all": [FALSE, {"any": []}]}}) == 4
    assert condition_nodes(comparisons(100), limit=10) == 11  # stops once past the limit
    deep = FALSE
    for _ in range(5000):
        deep = {"not": deep}
    assert condition_nodes(deep) == MAX_CONDITION_DEPTH  # not walked below the depth evaluation refuses


def test_programs_are_kept_by_content_with_types_spelled_out():
    assert compile_condition(comparisons(3)) is compile_condition(comparisons(3))
    for other in (1, True, 1.0, ["x"], ("x",)):
        assert compile_condition(comparisons(3, other)) is not compile_condition(comparisons(3))
    assert compile_condition(comparisons(3, 1)) is not compile_condition(comparisons(3, True))


def test_a_policy_is_a_value_that_gives_its_condition_back():
    condition = {"any": [{"op": "in", "left": {"attr": "resource.x"}, "right": {"value": ["a", 1.0, True]}}]}
    policy = deny(condition)
    assert policy.condition is condition  # as given, until compiled
    assert policy.program and policy.condition == condition and policy.condition is not policy.condition
    assert deny(None) == deny(None) and deny(None) != deny({"all": []}) and deny(None).program == ALWAYS
    assert policy == deny(json_copy(condition)) and hash(policy) == hash(deny(json_copy(condition)))
    assert policy != deny({"any": [{"op": "in", "left": {"attr": "resource.x"}, "right": {"value": ["a", 1, True]}}]})
    assert Policy.from_json(policy.to_json()) == policy
    odd = deny({"op": "eq", "left": {"attr": "resource.x"}, "right": {"value": MappingProxyType({"a": 1})}})
    assert type(odd.condition["right"]["value"]) is MappingProxyType  # not plain data: kept as given


def json_copy(value):
    import json

    return json.loads(json.dumps(value))


def test_the_caches_of_compiled_conditions_are_bounded_by_bytes_least_recently_used_first():
    cache = _CompiledCache(1000)
    for key in ("a", "b", "c"):
        cache.put(key, key.upper(), 299)
    assert len(cache) == 3 and cache.bytes == 900
    assert cache.get("a") == "A"  # now the most recently used
    cache.put("d", "D", 299)
    assert cache.get("b") is None and [cache.get(key) for key in "acd"] == ["A", "C", "D"]
    assert cache.bytes == 900 <= cache.max_bytes
    cache.put("huge", "H", 5000)  # larger than the whole bound: not kept, nothing evicted
    assert cache.get("huge") is None and len(cache) == 3
    cache.put("big", "B", 900)
    assert [cache.get(key) for key in ("a", "c", "d", "big")] == [None, None, None, "B"] and cache.bytes == 903


def test_a_tenant_at_the_caps_leaves_the_garbage_collector_a_few_objects_a_policy():
    """Issue "security round 2", item 2: a full collection walks every tracked object with
    the worker's requests waiting, and a tenant at every cap (conditions of 32 nodes and 4 KiB)
    used to leave ~260 a policy (a function per node, the parsed documents). Through the
    public API only: the policies as a process's cache holds them, half of them compiled
    by checks and half on permissions nobody checks."""
    import gc
    import json

    from tests.security.test_abac_policy_cost import condition_at_the_caps

    documents = [json.dumps({"id": f"p{i}", "name": f"p{i}", "effect": DENY, "permissions": [f"docs{i}:read"],
                             "condition": condition_at_the_caps(i, 4096, 32)}) for i in range(100)]
    gc.collect()
    before = len(gc.get_objects())
    compiled = CompiledPolicies(Policy.from_json(json.loads(document)) for document in documents)
    for i in range(50):
        assert compiled.effects(f"docs{i}:read")[0] == 1
    for _ in range(10):  # what a long-running worker's collections have untracked by then
        gc.collect()
    per_policy = (len(gc.get_objects()) - before) / 100
    assert per_policy <= 5, per_policy
