"""Compiled conditions (``shared.abac.evaluator``) give what the language says.

Conditions are compiled once into programs of plain tuples, with special forms for a
comparison against a literal. These tests hold every special form to the general comparison
(``_COMPARISONS[op](value, literal) is True``) over values of every JSON type, and check that
a malformed node is only found when evaluation reaches it, as a walk of the tree finds it.
"""
from __future__ import annotations

import itertools

import pytest

from shared.abac import DENY, CompiledPolicies, Policy, any_holds, compile_condition, evaluate_condition, holds
from shared.abac.language import COMPARISONS as _COMPARISONS
from shared.abac.language import Malformed as _Malformed

LITERALS = ["a", "", "ab", "10.0.0.0/8", "::ffff:10.0.0.0/104", "nope", 0, 1, 1.0, 2.5, -3, True, False, None,
            ["a", "b"], ["10.0.0.0/8", "192.168.0.0/16"], ["x", 1], [], {"a": 1}, float("nan")]
VALUES = ["a", "ab", "ba", "b", "", "10.1.2.3", "::ffff:10.1.2.3", "192.168.1.1", "x", 0, 1, 1.0, 0.5, 2.5, 3, -3,
          True, False, None, ["a"], ["a", "b"], ("a",), [1, "a"], [True], {"a": 1}, 10 ** 40, float("nan")]
MISSING = object()


def program_of(condition):
    """The compiled condition as a function of the environment."""
    program = compile_condition(condition)
    return lambda env: holds(program, env)


def env_with(value):
    resource = {} if value is MISSING else {"x": value}
    return {"user": {"id": "u1", "attributes": {}}, "resource": resource, "context": {}}


@pytest.mark.parametrize("op", sorted(_COMPARISONS))
def test_every_comparison_against_a_literal_is_the_general_comparison(op):
    for literal, value in itertools.product(LITERALS, [*VALUES, MISSING]):
        test = program_of({"op": op, "left": {"attr": "resource.x"}, "right": {"value": literal}})
        expected = False if value is MISSING else _COMPARISONS[op](value, literal) is True
        assert test(env_with(value)) is expected, (op, literal, value)
        # the same comparison with both operands read from the environment (no special form)
        general = program_of({"op": op, "left": {"attr": "resource.x"}, "right": {"attr": "context.y"}})
        env = env_with(value)
        env["context"] = {"y": literal}
        assert general(env) is expected, (op, literal, value)


def test_paths_of_one_two_and_three_names_and_non_objects_on_the_way():
    env = {"user": {"id": "u1", "attributes": {"team": "red"}}, "resource": "text", "context": {"a": {"b": 1}}}
    for path, expected in (("user.id", "u1"), ("user.attributes.team", "red"), ("context.a.b", 1),
                           ("resource.x", None), ("context.a.b.c", None), ("user", None)):
        test = program_of({"op": "exists", "left": {"attr": path}})
        assert test(env) is (expected is not None or path == "user"), path


def test_a_malformed_node_counts_only_when_evaluation_reaches_it():
    true = {"op": "eq", "left": {"value": 1}, "right": {"value": 1}}
    false = {"op": "eq", "left": {"value": 1}, "right": {"value": 2}}
    bad = {"op": "nope", "left": {"value": 1}, "right": {"value": 1}}
    env = env_with(1)
    assert holds(compile_condition({"all": [false, bad]}), env) is False  # never reached
    assert holds(compile_condition({"any": [true, bad]}), env) is True
    for reached in ({"all": [true, bad]}, {"any": [false, bad]}, {"not": bad}, bad):
        with pytest.raises(_Malformed):
            holds(compile_condition(reached), env)
        assert evaluate_condition(reached, env) is False
    # exists with an attribute that reads a non-boolean: malformed when evaluated, not before
    exists = program_of({"op": "exists", "left": {"attr": "resource.x"}, "right": {"attr": "context.w"}})
    assert exists({**env, "context": {"w": True}}) is True
    with pytest.raises(_Malformed):
        exists({**env, "context": {"w": "yes"}})


def test_a_malformed_deny_holds_and_a_malformed_allow_does_not_and_answers_are_kept():
    bad = {"op": "eq", "left": {"attr": 5}, "right": {"value": 5}}
    deny = Policy("1", "d", DENY, ("a:b",), bad)
    allow = Policy("2", "a", "allow", ("a:b",), bad)
    count, denies, allows = CompiledPolicies([deny, allow]).effects("a:b")
    assert count == 2 and len(denies) == 1 and len(allows) == 1
    memo: dict = {}
    assert any_holds(denies, env_with(1), memo, True) is True
    assert any_holds(allows, env_with(1), memo, False) is False
    assert memo == {id(deny): True, id(allow): False}
    # one permission's check keeps no memo, and answers the same
    assert any_holds(denies, env_with(1), None, True) is True
    assert any_holds(allows, env_with(1), None, False) is False
    fine = Policy("3", "f", "allow", ("a:b",), {"op": "eq", "left": {"attr": "resource.x"}, "right": {"value": 1}})
    _, _, allows = CompiledPolicies([allow, fine]).effects("a:b")
    assert any_holds(allows, env_with(1), None, False) is True  # the malformed one is passed over
    assert any_holds(allows, env_with(2), None, False) is False
    assert deny.program is deny.program  # compiled once per policy


ADDRESSES = ["10.1.2.3", "10.0.0.0", "10.255.255.255", "11.0.0.0", "9.255.255.255", "192.168.1.1", "0.0.0.0",
             "255.255.255.255", "::1", "::", "::ffff:10.1.2.3", "::ffff:192.168.1.1", "2001:db8::1", "2001:db9::",
             "fe80::1%eth0", "10.1.2", "not an address", "", " 10.1.2.3", "10.1.2.3/32", "::ffff:0a01:0203"]
NETWORKS = ["10.0.0.0/8", "10.1.2.3", "10.1.2.3/32", "10.1.2.99/24", "0.0.0.0/0", "192.168.0.0/16", "::/0", "::1/128",
            "::ffff:10.0.0.0/104", "2001:db8::/32", "fe80::/10", "10.0.0.0/33", "nope", ""]


def reference_ip_in_cidr(address, cidrs) -> bool:
    """ip_in_cidr as ipaddress's own ``in`` says it (an IPv4-mapped IPv6 address is also
    its IPv4 address)."""
    import ipaddress

    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    candidates = [parsed] + ([parsed.ipv4_mapped] if parsed.version == 6 and parsed.ipv4_mapped else [])
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            pass
    return any(candidate in network for network in networks for candidate in candidates)


def test_ip_in_cidr_is_ipaddress_membership():
    ip_in_cidr = _COMPARISONS["ip_in_cidr"]
    for address, network in itertools.product(ADDRESSES, NETWORKS):
        assert ip_in_cidr(address, network) is reference_ip_in_cidr(address, [network]), (address, network)
    for address in ADDRESSES:
        assert ip_in_cidr(address, NETWORKS) is reference_ip_in_cidr(address, NETWORKS), address
        test = program_of({"op": "ip_in_cidr", "left": {"attr": "resource.x"}, "right": {"value": NETWORKS[:3]}})
        assert test(env_with(address)) is reference_ip_in_cidr(address, NETWORKS[:3]), address


# --- programs against a walk of the tree ----------------------------------------------------

from collections.abc import Mapping  # noqa: E402
from types import MappingProxyType  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from shared.abac.language import MAX_CONDITION_DEPTH  # noqa: E402


def walk(node, env, depth=1) -> bool:
    """The language as docs/authorization.md states it, walked over the document: the
    reference the programs are held to (it shares nothing with them but the comparisons)."""
    if type(node) is not dict or depth > MAX_CONDITION_DEPTH:
        raise _Malformed
    if "op" in node:
        return compare(node, env)
    for name in ("all", "any"):
        if name in node:
            if type(node[name]) is not list:
                raise _Malformed
            results = (walk(child, env, depth + 1) for child in node[name])
            return all(results) if name == "all" else any(results)
    if "not" in node:
        return not walk(node["not"], env, depth + 1)
    raise _Malformed


def operand(node, env):
    if type(node) is not dict or len(node) != 1:
        raise _Malformed
    if "value" in node:
        return node["value"]
    if type(node.get("attr")) is not str:
        raise _Malformed
    value = env
    for key in node["attr"].split("."):
        if not isinstance(value, Mapping) or key not in value:
            return MISSING
        value = value[key]
    return value


def compare(node, env) -> bool:
    op = node["op"]
    if "left" not in node:
        raise _Malformed
    if op == "exists":
        wanted = operand(node["right"], env) if "right" in node else True
        present = operand(node["left"], env) is not MISSING
        if type(wanted) is not bool:
            raise _Malformed
        return present == wanted
    if not isinstance(op, str) or op not in _COMPARISONS or "right" not in node:
        raise _Malformed
    a, b = operand(node["left"], env), operand(node["right"], env)
    if a is MISSING or b is MISSING:
        return False
    try:
        return _COMPARISONS[op](a, b) is True
    except Exception:
        return False


PATHS = ["resource.x", "resource.y", "context.x", "user.id", "user.attributes.x", "user.attributes", "user",
         "resource.x.y", "context", "a.b.c.d", "resource..x", "", "user.id.x", "user.attributes.x.y", "user.other",
         "context.x.y.x"]
SCALARS = st.sampled_from(LITERALS + VALUES[:-1]) | st.floats(allow_nan=True) | st.integers() | st.text(max_size=3)
OPERANDS = (st.sampled_from(PATHS).map(lambda path: {"attr": path}) | SCALARS.map(lambda value: {"value": value})
            | st.sampled_from([{"attr": 5}, {}, {"attr": "resource.x", "value": 1}, "x", None]))
COMPARISONS = st.builds(lambda op, left, right, drop: {k: v for k, v in {"op": op, "left": left, "right": right}.items()
                                                      if k != drop},
                        st.sampled_from(sorted(_COMPARISONS) + ["exists", "nope", 5]), OPERANDS, OPERANDS,
                        st.sampled_from([None, None, None, "left", "right"]))
CONDITIONS = st.recursive(COMPARISONS, lambda inner: (
    st.lists(inner, max_size=4).map(lambda items: {"all": items})
    | st.lists(inner, max_size=4).map(lambda items: {"any": items})
    | inner.map(lambda item: {"not": item})
    | st.sampled_from([{"all": "x"}, {"any": None}, {}, [], "x", {"other": 1}])), max_leaves=10)
ENV_VALUES = SCALARS | st.lists(SCALARS, max_size=3) | st.dictionaries(st.sampled_from(["x", "y"]), SCALARS, max_size=2)
ENVS = st.builds(
    lambda resource, context, attributes, proxy, odd: {
        "user": {"id": "u1", "attributes": MappingProxyType(attributes) if proxy else attributes},
        "resource": resource if not odd else "text", "context": context},
    st.dictionaries(st.sampled_from(["x", "y"]), ENV_VALUES, max_size=2),
    st.dictionaries(st.sampled_from(["x", "y"]), ENV_VALUES, max_size=2),
    st.dictionaries(st.sampled_from(["x", "y"]), ENV_VALUES, max_size=2), st.booleans(), st.booleans())


def run(test, env):
    try:
        return test(env)
    except _Malformed:
        return "malformed"


def same(a, b) -> bool:
    return a is b or a == b


@settings(max_examples=1500, deadline=None)
@given(condition=CONDITIONS, env=ENVS)
def test_a_program_gives_what_a_walk_of_the_condition_gives(condition, env):
    expected = run(lambda env: walk(condition, env), env)
    assert same(run(program_of(condition), env), expected), (condition, env)
    assert expected in (True, False, "malformed")
    # an environment that is not a plain dict is read the same way
    assert same(run(program_of(condition), MappingProxyType(env)), expected)


def test_every_special_form_is_the_walk():
    for op, literal in itertools.product(sorted(_COMPARISONS), LITERALS):
        for path in ("resource.x", "user.attributes.x"):
            condition = {"op": op, "left": {"attr": path}, "right": {"value": literal}}
            for value in [*VALUES, MISSING]:
                env = env_with(value)
                env["user"]["attributes"] = env["resource"]
                assert same(program_of(condition)(env), walk(condition, env)), (op, literal, value, path)


def test_conditions_are_compiled_once_and_literals_stay_data():
    condition = {"op": "eq", "left": {"attr": "resource.x"}, "right": {"value": "') or True or ('"}}
    assert compile_condition(condition) is compile_condition(dict(condition))
    assert holds(compile_condition(condition), env_with("') or True or ('")) is True
    assert holds(compile_condition(condition), env_with("x")) is False
    sneaky = {"op": "eq", "left": {"attr": "resource.__class__"}, "right": {"value": 1}}
    assert holds(compile_condition(sneaky), env_with(1)) is False


def test_programs_and_policies_leave_the_garbage_collector_nothing_to_track():
    """A tenant's thousand conditions at the caps were ~250,000 objects in the cyclic
    collector's full collections (closures, cells, the parsed documents), and a full
    collection's pause grows with their number (docs/performance.md, "Garbage collection
    pauses"). A program is tuples of atoms, which the collector stops tracking after the
    collections it survives, and a compiled policy keeps its condition as bytes."""
    import gc

    comparisons = [{"op": "eq", "left": {"attr": "resource.k"}, "right": {"value": "v"}},
                   {"op": "in", "left": {"attr": "user.attributes.team"}, "right": {"value": ["a", "b"]}},
                   {"op": "ip_in_cidr", "left": {"attr": "context.ip"}, "right": {"value": ["10.0.0.0/8"]}},
                   {"op": "gt", "left": {"attr": "context.n"}, "right": {"attr": "resource.n"}},
                   {"op": "contains", "left": {"value": ["a", 1]}, "right": {"attr": "resource.n"}}]
    policy = Policy("1", "p", DENY, ("a:b",), {"all": [{"any": comparisons}, {"not": comparisons[0]}]})
    program = policy.program
    for _ in range(10):  # a collection untracks a tuple once its contents are: a level each time
        gc.collect()
    assert not gc.is_tracked(program)  # so nothing in it is tracked either
    assert [value for value in vars_of(policy) if gc.is_tracked(value)] == []
    assert policy.condition == {"all": [{"any": comparisons}, {"not": comparisons[0]}]}


def vars_of(policy):
    return [getattr(policy, name) for name in type(policy).__slots__]
