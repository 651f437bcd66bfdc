"""Compiled conditions (shared/abac.py ``compile_condition``) give what the language says.

Conditions are compiled once into closures, with special forms for a comparison against a
literal. These tests hold every special form to the general comparison
(``_COMPARISONS[op](value, literal) is True``) over values of every JSON type, and check that
a malformed node is only found when evaluation reaches it, as a walk of the tree finds it.
"""
from __future__ import annotations

import itertools

import pytest

from shared.abac import (_COMPARISONS, DENY, CompiledPolicies, Policy, _Malformed, any_holds, compile_condition,
                         evaluate_condition)

LITERALS = ["a", "", "ab", "10.0.0.0/8", "::ffff:10.0.0.0/104", "nope", 0, 1, 1.0, 2.5, -3, True, False, None,
            ["a", "b"], ["10.0.0.0/8", "192.168.0.0/16"], ["x", 1], [], {"a": 1}, float("nan")]
VALUES = ["a", "ab", "ba", "b", "", "10.1.2.3", "::ffff:10.1.2.3", "192.168.1.1", "x", 0, 1, 1.0, 0.5, 2.5, 3, -3,
          True, False, None, ["a"], ["a", "b"], ("a",), [1, "a"], [True], {"a": 1}, 10 ** 40, float("nan")]
MISSING = object()


def env_with(value):
    resource = {} if value is MISSING else {"x": value}
    return {"user": {"id": "u1", "attributes": {}}, "resource": resource, "context": {}}


@pytest.mark.parametrize("op", sorted(_COMPARISONS))
def test_every_comparison_against_a_literal_is_the_general_comparison(op):
    for literal, value in itertools.product(LITERALS, [*VALUES, MISSING]):
        test = compile_condition({"op": op, "left": {"attr": "resource.x"}, "right": {"value": literal}})
        expected = False if value is MISSING else _COMPARISONS[op](value, literal) is True
        assert test(env_with(value)) is expected, (op, literal, value)
        # the same comparison with both operands read from the environment (no special form)
        general = compile_condition({"op": op, "left": {"attr": "resource.x"}, "right": {"attr": "context.y"}})
        env = env_with(value)
        env["context"] = {"y": literal}
        assert general(env) is expected, (op, literal, value)


def test_paths_of_one_two_and_three_names_and_non_objects_on_the_way():
    env = {"user": {"id": "u1", "attributes": {"team": "red"}}, "resource": "text", "context": {"a": {"b": 1}}}
    for path, expected in (("user.id", "u1"), ("user.attributes.team", "red"), ("context.a.b", 1),
                           ("resource.x", None), ("context.a.b.c", None), ("user", None)):
        test = compile_condition({"op": "exists", "left": {"attr": path}})
        assert test(env) is (expected is not None or path == "user"), path


def test_a_malformed_node_counts_only_when_evaluation_reaches_it():
    true = {"op": "eq", "left": {"value": 1}, "right": {"value": 1}}
    false = {"op": "eq", "left": {"value": 1}, "right": {"value": 2}}
    bad = {"op": "nope", "left": {"value": 1}, "right": {"value": 1}}
    env = env_with(1)
    assert compile_condition({"all": [false, bad]})(env) is False  # never reached
    assert compile_condition({"any": [true, bad]})(env) is True
    for reached in ({"all": [true, bad]}, {"any": [false, bad]}, {"not": bad}, bad):
        with pytest.raises(_Malformed):
            compile_condition(reached)(env)
        assert evaluate_condition(reached, env) is False
    # exists with an attribute that reads a non-boolean: malformed when evaluated, not before
    exists = compile_condition({"op": "exists", "left": {"attr": "resource.x"}, "right": {"attr": "context.w"}})
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
    assert deny.test is deny.test  # compiled once per policy


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
        test = compile_condition({"op": "ip_in_cidr", "left": {"attr": "resource.x"}, "right": {"value": NETWORKS[:3]}})
        assert test(env_with(address)) is reference_ip_in_cidr(address, NETWORKS[:3]), address
