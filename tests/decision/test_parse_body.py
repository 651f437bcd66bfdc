"""The POST hot path parses bodies with orjson only where it answers as json does.

``decision.hotpath.parse_body(raw)`` must give exactly ``shared.http.parse_json(raw.decode())``
(``json.loads`` refusing lone surrogates, as the control plane reads bodies) -- the same
types (1 is not 1.0 nor True), the same float bits (-0.0), the same key order and
duplicate-key winner -- or raise where it raises. The cases here are orjson's known
differences (integers beyond 64 bits, NaN and Infinity, numbers out of range, lone
surrogates, deep nesting) and random documents and random bytes (hypothesis).
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decision.hotpath import parse_body
from shared.http import parse_json


def canonical(value):
    """A value with its JSON types spelled out, so equal means the same document."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", [canonical(item) for item in value])
    if isinstance(value, dict):
        return ("dict", [(key, canonical(item)) for key, item in value.items()])
    raise AssertionError(f"not a JSON value: {value!r}")


def outcome(parse, raw: bytes):
    try:
        return "ok", canonical(parse(raw))
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return ("error",)


def reference(raw: bytes):
    return parse_json(raw.decode())


def assert_same(raw: bytes):
    assert outcome(parse_body, raw) == outcome(reference, raw), raw[:200]


@pytest.mark.parametrize("raw", [
    b'{"user_id":"u1","permission":"documents:read","resource":{"tags":["a","b"]},"context":{"hour":11}}',
    b'{"a":1,"a":2}', b'{"b":1,"a":2,"b":3}', b'1e400', b'-1e400', b'1.7976931348623157e309', b'5e-324', b'1e-400',
    b'123456789012345678', b'1234567890123456789', b'-1234567890123456789', b'9223372036854775807',
    b'9223372036854775808', b'18446744073709551615', b'18446744073709551616', b'-9223372036854775809',
    b'123456789012345678901234567890', b'{"min_revision":100000000000000000000}', b'0.1234567890123456789',
    b'[1.0,-0,-0.0,1E2,1e+2,0.1,2.5e-3]', b'NaN', b'-NaN', b'Infinity', b'-Infinity', b'[NaN]', b'"\\ud800"',
    b'"\\udc00\\ud800"', b'"\\ud83d\\ude00"', b'{"\\ud83d\\ude00":1}', b'{"\\udfff":1}', b'["a",{"b":["\\ud800x"]}]',
    b'"\\\\ud800"', b'"\\ud800\\ud800"', b'"\xf0\x9f\x98\x80"', b'"\xed\xa0\x80"',
    b'\xef\xbb\xbf{}', b'{"a":"\xff"}', b'"\x7f"', b'"\x01"', b'"\xe2\x80\xa8"', b'"\\u0000"', b'"\\/"',
    b' {} ', b'\t\n\r{}', b'\x0c{}', b'{}x', b'{} {}', b'', b' ', b'01', b'-01', b'.5', b'1.', b'1e', b'-', b'+1',
    b'[1,]', b'{"a":1,}', b"{'a':1}", b'{"a" 1}', b'tru', b'true', b'null', b'"abc', b'"\\x41"', b'"\\u00E9"',
    b'[' * 1023 + b']' * 1023, b'[' * 1025 + b']' * 1025, b'[' * 3000 + b']' * 3000, b'{"a":' * 600 + b'1' + b'}' * 600,
])
def test_known_differences_and_edges(raw):
    assert_same(raw)


FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 5e-324, 1.7976931348623157e308,
                                                                            2.2250738585072014e-308, 0.1, 1e16, 1e22])
INTEGERS = st.integers() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70) | st.sampled_from(
    [2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, -(2 ** 63), -(2 ** 63) - 1])
VALUES = st.recursive(
    st.none() | st.booleans() | INTEGERS | FLOATS | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(value=VALUES, ensure_ascii=st.booleans(), indent=st.sampled_from([None, 1]))
def test_random_documents(value, ensure_ascii, indent):
    raw = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent).encode("utf-8", "surrogatepass")
    assert_same(raw)


NUMBER_TEXT = st.from_regex(rb"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,4})?\Z")


@settings(max_examples=500, deadline=None)
@given(number=NUMBER_TEXT)
def test_random_number_texts(number):
    assert_same(number)
    assert_same(b'{"n":' + number + b"}")


@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=40) | st.text(alphabet='{}[]":,.-+0123456789eEtrufalsnNI \\u\t', max_size=30).map(
    lambda text: text.encode()))
def test_random_bytes(raw):
    assert_same(raw)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, cut=st.integers(min_value=0, max_value=200), junk=st.binary(max_size=3))
def test_damaged_documents(value, cut, junk):
    raw = json.dumps(value).encode()
    assert_same(raw[:cut] + junk + raw[cut:])
