"""The condition language's validation report and the dry run's trace (pure functions)."""
from __future__ import annotations

import pytest

from controlplane.abac.conditions import MAX_DEPTH, too_large, trace, validate
from shared.abac import condition_environment
from tests.conditions import attr, op, val

VALID = [
    op("eq", attr("resource.owner_id"), attr("user.id")),
    op("ne", attr("user.attributes.team"), val("ops")),
    op("gt", attr("context.hour"), val(18)),
    op("lte", attr("resource.title"), val("m")),
    op("in", attr("user.attributes.role"), val(["admin", "owner"])),
    op("not_in", attr("context.country"), val([])),
    op("in", attr("user.id"), attr("resource.editors")),
    op("contains", attr("resource.tags"), val("public")),
    op("starts_with", attr("resource.path"), val("/docs/")),
    op("exists", attr("user.attributes.clearance")),
    op("exists", attr("user.attributes.clearance"), val(False)),
    op("ip_in_cidr", attr("context.ip"), val("10.0.0.0/8")),
    op("ip_in_cidr", attr("context.ip"), val(["10.0.0.0/8", "2001:db8::/32", "192.168.1.7"])),
    op("ip_in_cidr", val("10.1.2.3"), attr("user.attributes.networks")),
    op("eq", attr("resource.a.b.c"), val(None)),
    {"all": [op("eq", attr("context.x"), val(1)), {"not": op("eq", attr("context.y"), val(2.5))}]},
    {"any": [op("eq", attr("context.x"), val(True))]},
]


@pytest.mark.parametrize("condition", VALID)
def test_valid_conditions_have_no_problems(condition):
    assert validate(condition) == {}


INVALID = [
    ("not an object", "condition", "must be an object"),
    ({}, "condition", "must have one of all, any, not, op"),
    ({"all": [], "any": []}, "condition", "exactly one"),
    ({"all": []}, "condition.all", "non-empty array"),
    ({"any": {"op": "eq"}}, "condition.any", "non-empty array"),
    ({"all": [op("eq", attr("context.a"), val(1)), op("eq", attr("context.b"), val(1)), {"op": "equals"}]},
     "condition.all[2].op", "unknown operator 'equals'; use one of eq, ne"),
    ({"op": 3, "left": val(1), "right": val(1)}, "condition.op", "unknown operator 3"),
    ({"op": "eq", "left": attr("context.a"), "right": val(1), "extra": 1}, "condition", "unknown key(s) extra"),
    ({"not": {"all": [1]}}, "condition.not.all[0]", "must be an object"),
    (op("eq", attr("context.a")), "condition.right", "is required for eq"),
    ({"op": "eq", "right": val(1)}, "condition.left", "is required"),
    (op("eq", {"attr": "context.a", "value": 1}, val(1)), "condition.left", '{"attr": "<path>"} or {"value"'),
    (op("eq", {"path": "context.a"}, val(1)), "condition.left", '{"attr": "<path>"}'),
    (op("eq", attr("user.name"), val(1)), "condition.left.attr", "must be user.id, user.attributes.<key>"),
    (op("eq", attr("user.attributes"), val(1)), "condition.left.attr", "must be user.id"),
    (op("eq", attr("session.id"), val(1)), "condition.left.attr", "must be user.id"),
    (op("eq", attr("resource"), val(1)), "condition.left.attr", "must be user.id"),
    (op("eq", attr("resource..a"), val(1)), "condition.left.attr", "must be user.id"),
    (op("eq", attr(7), val(1)), "condition.left.attr", "must be user.id"),
    (op("eq", attr("resource." + "a" * 300), val(1)), "condition.left.attr", "at most 255"),
    (op("in", attr("context.a"), val("admin")), "condition.right.value", "in needs an array"),
    (op("not_in", attr("context.a"), val(3)), "condition.right.value", "not_in needs an array"),
    (op("gt", attr("context.a"), val(True)), "condition.right.value", "gt compares numbers or strings"),
    (op("lt", attr("context.a"), val([1])), "condition.right.value", "lt compares numbers or strings"),
    (op("starts_with", attr("context.a"), val(1)), "condition.right.value", "starts_with needs a string"),
    (op("ip_in_cidr", attr("context.ip"), val("10.0.0.0/33")), "condition.right.value", "not a network: '10.0.0.0/33'"),
    (op("ip_in_cidr", attr("context.ip"), val("office")), "condition.right.value", "not a network"),
    (op("ip_in_cidr", attr("context.ip"), val([])), "condition.right.value", "non-empty array"),
    (op("ip_in_cidr", attr("context.ip"), val(["10.0.0.0/8", 5])), "condition.right.value", "a non-string"),
    (op("ip_in_cidr", val("nope"), val("10.0.0.0/8")), "condition.left.value", "IP address on the left"),
    (op("exists", val(1)), "condition.left", "exists needs an attribute"),
    (op("exists", attr("context.a"), val("yes")), "condition.right", "exists takes no right"),
    (op("exists", attr("context.a"), attr("context.b")), "condition.right", "exists takes no right"),
    (op("eq", attr("context.a"), val({"k": 1})), "condition.right.value", "JSON scalar"),
    (op("eq", attr("context.a"), val([[1]])), "condition.right.value", "item 0 must be a JSON scalar"),
    (op("eq", attr("context.a"), val(float("nan"))), "condition.right.value", "finite"),
    (op("eq", attr("context.a"), val(2 ** 64)), "condition.right.value", "beyond 64 bits"),
]


@pytest.mark.parametrize("condition, path, reason", INVALID)
def test_each_problem_is_named_by_its_json_path(condition, path, reason):
    problems = validate(condition)
    assert path in problems, problems
    assert reason in problems[path]


def test_every_problem_is_reported_not_only_the_first():
    problems = validate({"any": [{"op": "nope"}, op("in", attr("context.a"), val(1)), op("eq", attr("x.y"), val(1))]})
    assert set(problems) == {"condition.any[0].op", "condition.any[1].right.value", "condition.any[2].left.attr"}


def _nested(depth):
    node = op("eq", attr("context.a"), val(1))
    for _ in range(depth - 1):
        node = {"not": node}
    return node


def test_nesting_is_limited_to_eight_levels():
    assert validate(_nested(MAX_DEPTH)) == {}
    problems = validate(_nested(MAX_DEPTH + 1))
    assert list(problems) == ["condition" + ".not" * MAX_DEPTH]
    assert "deeper than 8" in problems["condition" + ".not" * MAX_DEPTH]


def test_absurd_nesting_is_refused_without_recursing_to_death():
    node = {"op": "eq", "left": attr("context.a"), "right": val(1)}
    for _ in range(5000):
        node = {"not": node}
    assert "deeper than 8" in next(iter(validate(node).values()))


def test_too_large_measures_the_bytes_then_the_nodes():
    small = op("in", attr("context.a"), val(["x" * 100] * 30))
    assert too_large(small, max_bytes=4096, max_nodes=1) is None
    big = op("in", attr("context.a"), val(["x" * 100] * 40))
    assert too_large(big, max_bytes=4096, max_nodes=1) == {"bytes": 4179, "max_bytes": 4096}
    many = {"any": [op("eq", attr("context.a"), val(i)) for i in range(32)]}  # 33 nodes
    assert too_large(many, max_bytes=65536, max_nodes=33) is None
    assert too_large(many, max_bytes=65536, max_nodes=32) == {"nodes": 33, "max_nodes": 32}


def test_a_custom_root_path_prefixes_every_path():
    assert set(validate({"op": "x"}, "policy.condition")) == {"policy.condition.op"}


def test_trace_gives_every_node_its_value_and_resolved_operands():
    condition = {"all": [op("eq", attr("resource.owner_id"), attr("user.id")),
                         {"not": op("exists", attr("user.attributes.banned"))},
                         op("gt", attr("context.hour"), val(8))]}
    env = condition_environment("u1", {"team": "a"}, {"owner_id": "u1"}, {"hour": "9"})
    out = trace(condition, env)
    assert out["path"] == "condition" and out["value"] is False
    first, second, third = out["children"]
    assert first == {"path": "condition.all[0]", "value": True, "op": "eq",
                     "left": {"attr": "resource.owner_id", "value": "u1"}, "right": {"attr": "user.id", "value": "u1"}}
    assert second["value"] is True and second["child"]["value"] is False
    assert second["child"]["left"] == {"attr": "user.attributes.banned", "missing": True}
    # A type mismatch ("9" vs 8) is false, never an error.
    assert third == {"path": "condition.all[2]", "value": False, "op": "gt",
                     "left": {"attr": "context.hour", "value": "9"}, "right": {"value": 8}}


def test_validation_accepts_exactly_the_operators_the_engine_evaluates():
    """One list of operators: the one the engine's comparisons define (``shared.abac``)."""
    from controlplane.abac import conditions
    from shared.abac import OPERATORS, compile_condition, holds
    from shared.abac.language import COMPARISONS

    assert conditions.OPERATORS is OPERATORS
    assert set(OPERATORS) == {*COMPARISONS, "exists"}
    env = condition_environment("u1", {}, {"x": "10.0.0.1"}, {})
    for name in OPERATORS:
        condition = op(name, attr("resource.x"), val(["10.0.0.0/8"] if name in ("in", "not_in", "ip_in_cidr")
                                                     else True if name == "exists" else "10.0.0.1"))
        assert validate(condition, "condition") == {}, name
        assert holds(compile_condition(condition), env) in (True, False), name  # not Malformed
