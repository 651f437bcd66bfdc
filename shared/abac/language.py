"""The ABAC condition language: its operators, what each comparison computes, and the
size of a condition.

The language (docs/authorization.md, "Conditions and their validation"): a condition is
``{"all": [...]}``, ``{"any": [...]}``, ``{"not": c}`` or ``{"op": OPERATOR, "left":
OPERAND, "right": OPERAND}``, an operand ``{"attr": "user.id" | "user.attributes.X" |
"resource.X" | "context.X"}`` or ``{"value": literal}``; a missing attribute makes the
comparison false. The control plane validates conditions on write
(``controlplane/abac/conditions.py``) against :data:`OPERATORS`; ``shared.abac.evaluator``
runs them. Pure: no I/O, no clock, no logging.
"""
from __future__ import annotations

import ipaddress
import operator
from collections.abc import Mapping
from functools import lru_cache

# Evaluation refuses (as false) anything nested deeper; policies are validated on write
# to a stricter depth.
MAX_CONDITION_DEPTH = 10


class Malformed(Exception):
    """The condition itself (not the data it reads) is not in the condition language."""


# What an attribute that is not there reads as: no comparison with it holds.
MISSING = object()


def condition_nodes(condition, limit: int | None = None) -> int:
    """How many nodes a condition has: each ``all``, ``any``, ``not`` and comparison counts
    one (operands are part of their comparison). What it costs to compile or evaluate is
    linear in this number; the control plane caps it per policy. Anything that is not a
    node counts one and is not walked into; nothing is walked below MAX_CONDITION_DEPTH.
    With ``limit``, the count stops once past it (a number above ``limit``)."""
    count, pending = 0, [(condition, 1)]
    while pending:
        node, depth = pending.pop()
        count += 1
        if limit is not None and count > limit:
            break
        if type(node) is not dict or "op" in node or depth >= MAX_CONDITION_DEPTH:
            continue
        for name in ("all", "any"):
            if type(node.get(name)) is list:
                pending.extend((child, depth + 1) for child in node[name])
                break
        else:
            if "not" in node:
                pending.append((node["not"], depth + 1))
    return count


# --- what the comparisons compute ----------------------------------------------------------


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(a, b) -> bool:
    """Equality as JSON means it: true is not 1, 1 equals 1.0, containers compare deeply."""
    if type(a) is str and type(b) is str:  # the common case, decided as below
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    return False


def _ordered(a, b) -> bool:
    """gt/gte/lt/lte compare two numbers or two strings, nothing else."""
    return (is_number(a) and is_number(b)) or (isinstance(a, str) and isinstance(b, str))


def _member(item, collection) -> bool:
    return isinstance(collection, (list, tuple)) and any(json_equal(item, element) for element in collection)


def _contains(left, right) -> bool:
    if isinstance(left, (list, tuple)):
        return _member(right, left)
    return isinstance(left, str) and isinstance(right, str) and right in left


# Addresses and networks as integers: ``address in network`` of ipaddress (same version,
# ``address & netmask == network address``) is ``first <= address <= last`` over the
# network's range, without its Python-level method calls on every check.


@lru_cache(maxsize=4096)
def _address_keys(text: str) -> tuple:
    """``((version, integer), ...)`` for an IP address -- an IPv4-mapped IPv6 address also
    as the IPv4 address it maps (``::ffff:10.0.0.1`` is 10.0.0.1) -- or () if not one."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return ()
    keys: tuple[tuple[int, int], ...] = ((address.version, int(address)),)
    if address.version == 6 and address.ipv4_mapped is not None:
        keys += ((4, int(address.ipv4_mapped)),)
    return keys


@lru_cache(maxsize=1024)
def _network(text: str):
    """``(version, first, last)`` of a CIDR (host bits ignored), or None."""
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    return network.version, int(network.network_address), int(network.broadcast_address)


def networks(right) -> tuple:
    """The valid networks of an ``ip_in_cidr`` right operand (a CIDR or a list of them), as
    ``(version, first, last)`` tuples of integers."""
    cidrs = (right,) if isinstance(right, str) else right if isinstance(right, (list, tuple)) else ()
    found = (_network(cidr) if isinstance(cidr, str) else None for cidr in cidrs)
    return tuple(network for network in found if network is not None)


def address_in(left, networks: tuple) -> bool:
    """Whether ``left`` is an IP address inside one of ``networks`` (:func:`networks`)."""
    if not networks or not isinstance(left, str):
        return False
    for version, number in _address_keys(left):
        for network_version, first, last in networks:
            if version == network_version and first <= number <= last:
                return True
    return False


def _ip_in_cidr(left, right) -> bool:
    return address_in(left, networks(right))


ORDERINGS = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}

# The comparisons of two present values, by operator: what a comparison computes when no
# faster form applies (``shared.abac.evaluator``); ``exists`` reads presence, not values.
COMPARISONS = {
    "eq": json_equal,
    "ne": lambda a, b: not json_equal(a, b),
    "gt": lambda a, b: _ordered(a, b) and a > b,
    "gte": lambda a, b: _ordered(a, b) and a >= b,
    "lt": lambda a, b: _ordered(a, b) and a < b,
    "lte": lambda a, b: _ordered(a, b) and a <= b,
    "in": _member,
    "not_in": lambda a, b: isinstance(b, (list, tuple)) and not _member(a, b),
    "contains": _contains,
    "starts_with": lambda a, b: isinstance(a, str) and isinstance(b, str) and a.startswith(b),
    "ip_in_cidr": _ip_in_cidr,
}


def _operators() -> tuple[str, ...]:
    """Every operator of the language, as the API lists them: the comparisons, with
    ``exists`` (which reads presence, not values) before ``ip_in_cidr``."""
    names = list(COMPARISONS)
    names.insert(names.index("ip_in_cidr"), "exists")
    return tuple(names)


OPERATORS = _operators()
