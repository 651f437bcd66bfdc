"""The JSON checks' fast path (``shared.checks.body_values``) gives what the schema gives.

``body_values(body, raw, bulk=...)`` either returns exactly ``CHECK.validate(body)`` (or
``CHECK_BULK``'s) or None, and never accepts a body the schema refuses. Bodies here sit at
the edges of the fast path: the size and bracket bounds, user ids with white space or of
255 characters, every type in every field, scope and min_revision values, bulk lists with
duplicates, unknown names or unhashable items; and random bodies (hypothesis).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.checks import (
    ATTRIBUTES_MAX_BYTES,
    CHECK,
    CHECK_BULK,
    FAST_BODY_BRACKETS,
    FAST_BODY_BYTES,
    Permission,
    body_values,
)
from shared.errors import ValidationFailed

KNOWN = ["documents:read", "documents:write", "reports:*"]
for _name in KNOWN:
    Permission().clean(_name)  # validated once: known to the fast path
RESOURCE = {"owner_id": "u2", "tags": ["a", "b"], "private": False}
CONTEXT = {"ip": "10.0.0.1", "hour": 11}


def general(body, bulk):
    try:
        return (CHECK_BULK if bulk else CHECK).validate(body)
    except ValidationFailed:
        return "refused"


def agree(body, *, bulk=False, raw=None) -> dict | None:
    """body_values of ``body`` (sent as ``raw``, default its JSON), held to the schema."""
    raw = json.dumps(body).encode() if raw is None else raw
    fast = body_values(body, raw, bulk=bulk)
    if fast is not None:
        expected = general(body, bulk)
        assert expected != "refused", body
        assert fast == expected and list(fast) == list(expected), body  # same values, same order
    return fast


def check(**fields):
    return {"user_id": "u1", "permission": "documents:read", **fields}


def test_the_common_body_takes_the_fast_path():
    assert agree(check(resource=RESOURCE, context=CONTEXT)) == check(resource=RESOURCE, context=CONTEXT)
    assert agree({"user_id": "u1", "permissions": KNOWN, "resource": RESOURCE}, bulk=True) == {
        "user_id": "u1", "permissions": KNOWN, "resource": RESOURCE}
    assert agree(check()) == check()
    assert agree(check(resource=None, context=None, scope=None, min_revision=None)) is not None
    assert agree(check(scope="project-1", min_revision=7)) == check(scope="project-1", min_revision=7)
    assert agree(check(x=1, y=[[[]]])) == check()  # unknown fields are ignored, as the schema ignores them


@pytest.mark.parametrize("user_id", ["", " ", " u1", "u1 ", "u1\n", "\u00a0u1", "u1\u2003", "x" * 256, 5, None,
                                     ["u1"], {"id": "u1"}, True])
def test_user_ids_the_schema_would_change_or_refuse_take_the_general_path(user_id):
    assert agree(check(user_id=user_id)) is None


@pytest.mark.parametrize("user_id", ["x" * 255, "a b", "\u00e9", "a\"b\\c", "3f1c2a9e-0000-4000-8000-000000000001"])
def test_plain_user_ids_take_the_fast_path(user_id):
    assert agree(check(user_id=user_id)) is not None


@pytest.mark.parametrize("permission", ["documents:unseen-before", "nocolon", "", 5, None, ["documents:read"]])
def test_a_permission_not_validated_before_takes_the_general_path(permission):
    assert agree(check(permission=permission)) is None


@pytest.mark.parametrize("value", [[], "doc", 1, 1.5, True, ["a"]])
@pytest.mark.parametrize("field", ["resource", "context"])
def test_a_resource_or_context_that_is_not_an_object_takes_the_general_path(field, value):
    assert agree(check(**{field: value})) is None


@pytest.mark.parametrize("scope", ["", " ", " p", "p ", "a\x00b", "x" * 256, 5, ["p"], "p\u00e9", "x" * 255, "p q"])
def test_scope_values_agree(scope):
    agree(check(scope=scope))
    agree(check(context={"scope": scope}))


@pytest.mark.parametrize("min_revision", [0, 1, 2.0, 2.5, -1, True, False, "3", 10 ** 30, float("nan")])
def test_min_revision_values_agree(min_revision):
    agree(check(min_revision=min_revision))


@pytest.mark.parametrize("permissions", [
    KNOWN, [KNOWN[0]], [KNOWN[1], KNOWN[0], KNOWN[1]], [KNOWN[0]] * 50, [KNOWN[0]] * 51, [], [KNOWN[0], "x:new"],
    [KNOWN[0], 5], [KNOWN[0], ["x"]], [KNOWN[0], {"a": 1}], "documents:read", None,
])
def test_bulk_permission_lists_agree(permissions):
    agree({"user_id": "u1", "permissions": permissions}, bulk=True)


def test_the_bulk_and_single_bodies_are_not_mixed_up():
    assert agree({"user_id": "u1", "permission": KNOWN[0]}, bulk=True) is None
    assert agree({"user_id": "u1", "permissions": KNOWN}) is None


def test_bodies_over_the_size_or_bracket_bound_take_the_general_path():
    filler = "x" * (FAST_BODY_BYTES - len(json.dumps(check(resource={"f": ""}))))
    at_bound = check(resource={"f": filler})
    assert len(json.dumps(at_bound).encode()) == FAST_BODY_BYTES
    assert agree(at_bound) is not None
    assert agree(check(resource={"f": filler + "x"})) is None

    nested = check(resource={"a": [[]] * (FAST_BODY_BRACKETS - 3)})  # the body and resource: 2 more
    assert agree(nested) is not None
    assert agree(check(resource={"a": [[]] * (FAST_BODY_BRACKETS - 2)})) is None
    # brackets inside strings count too: the bound only sends more bodies the general way
    assert agree(check(resource={"a": "[" * FAST_BODY_BRACKETS})) is None


@pytest.mark.parametrize("atom", ["1e15", "-1e15", "1E9", "1", "0.1", '"\u00e9"', '"' + "\u00e9" * 100 + '"',
                                  '"' + "\U0001f600" * 100 + '"', '"\\u00e9"', "true", "{}"])
def test_a_body_within_the_size_bound_cannot_reserialise_past_the_attributes_bound(atom):
    """Compact JSON grows most from numbers like 1e15 (4.5 times) and two-byte UTF-8
    characters (3 times, as \\u escapes): a body of FAST_BODY_BYTES stays within
    ATTRIBUTES_MAX_BYTES, so its resource and context do too."""
    count = (FAST_BODY_BYTES - 2) // (len(atom.encode()) + 1)
    raw = ("[" + ",".join([atom] * count) + "]").encode()
    assert FAST_BODY_BYTES - 2 * len(atom.encode()) <= len(raw) <= FAST_BODY_BYTES
    compact = json.dumps(json.loads(raw), separators=(",", ":"))
    assert len(compact) <= 4.5 * len(raw) <= ATTRIBUTES_MAX_BYTES


def test_a_non_object_body_takes_the_general_path():
    for body in ([check()], "x", 1, None):
        assert body_values(body, json.dumps(body).encode(), bulk=False) is None


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=12)
FIELD = st.one_of(JSON, st.sampled_from(KNOWN + [" u", "u ", "", "x:y"]))


@settings(max_examples=300, deadline=None)
@given(fields=st.dictionaries(st.sampled_from(["user_id", "permission", "permissions", "resource", "context",
                                               "scope", "min_revision", "other"]), FIELD, max_size=7),
       bulk=st.booleans())
def test_random_bodies_agree(fields, bulk):
    agree(fields, bulk=bulk)
    if "user_id" in fields:
        agree({**fields, "resource": {"k": fields["user_id"]}, "permission": KNOWN[0], "permissions": KNOWN},
              bulk=bulk)
