"""Attribute-based access control: policies and the condition language they hold.

Pure functions over plain data, shared by the control plane and the decision service.
Nothing here does I/O, reads the clock or logs.

ARCHITECTURE.md ("ABAC") decides the language: a condition is ``{"all": [...]}``,
``{"any": [...]}``, ``{"not": c}`` or ``{"op": OPERATOR, "left": OPERAND, "right":
OPERAND}``, an operand ``{"attr": "user.id" | "user.attributes.X" | "resource.X" |
"context.X"}`` or ``{"value": literal}``; a missing attribute makes the comparison false.
How policies combine with RBAC is ``shared.authorization``.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from shared.rbac import covering_patterns, is_valid_permission

ALLOW = "allow"
DENY = "deny"

MAX_CONDITION_DEPTH = 10
MAX_CONDITION_NODES = 100

OPERATORS = frozenset(
    {"eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "starts_with", "exists", "ip_in_cidr"}
)
_ATTR_ROOTS = ("user", "resource", "context")


# --- policies ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """An ABAC policy. ``condition`` None holds unconditionally."""

    id: str
    name: str
    effect: str
    permissions: tuple[str, ...]
    condition: dict | None = field(default=None, hash=False)
    is_active: bool = True

    def __post_init__(self):
        if self.effect not in (ALLOW, DENY):
            raise ValueError(f"policy effect must be 'allow' or 'deny', not {self.effect!r}")
        object.__setattr__(self, "permissions", tuple(self.permissions))

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "effect": self.effect,
            "permissions": list(self.permissions),
            "condition": self.condition,
            "is_active": self.is_active,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Policy:
        return cls(
            id=data["id"],
            name=data["name"],
            effect=data["effect"],
            permissions=tuple(data.get("permissions", ())),
            condition=data.get("condition"),
            is_active=data.get("is_active", True),
        )


class CompiledPolicies:
    """Active policies indexed by permission pattern, so finding those covering a
    permission is four dictionary lookups. Build once per policy set and reuse."""

    __slots__ = ("policies", "_by_pattern", "_covering")
    _COVERING_CACHE_SIZE = 4096

    def __init__(self, policies: Iterable[Policy]):
        self.policies: tuple[Policy, ...] = tuple(policy for policy in policies if policy.is_active)
        by_pattern: dict[str, list[int]] = {}
        for index, policy in enumerate(self.policies):
            for pattern in set(policy.permissions):
                if is_valid_permission(pattern):
                    by_pattern.setdefault(pattern, []).append(index)
        self._by_pattern = {pattern: tuple(indexes) for pattern, indexes in by_pattern.items()}
        # An application checks a bounded set of permission names, so remembering the answer
        # per name turns the lookups into one; the bound only guards against junk names.
        self._covering: dict[str, tuple[Policy, ...]] = {}

    def __len__(self) -> int:
        return len(self.policies)

    def covering(self, permission: str) -> tuple[Policy, ...]:
        """Active policies with a pattern that matches ``permission``, in input order."""
        covering = self._covering.get(permission)
        if covering is not None:
            return covering
        if not self._by_pattern or not is_valid_permission(permission):
            return ()
        found: set[int] = set()
        for pattern in covering_patterns(permission):
            indexes = self._by_pattern.get(pattern)
            if indexes:
                found.update(indexes)
        covering = tuple(self.policies[index] for index in sorted(found))
        if len(self._covering) >= self._COVERING_CACHE_SIZE:
            self._covering.clear()
        self._covering[permission] = covering
        return covering


def compile_policies(policies: Iterable[Policy] | CompiledPolicies) -> CompiledPolicies:
    return policies if isinstance(policies, CompiledPolicies) else CompiledPolicies(policies)


def condition_environment(user_id: str, attributes: Mapping, resource, context) -> dict:
    """What a condition's ``attr`` operands read: the checked user, the check's resource
    and context (a non-object resource or context reads as empty)."""
    return {
        "user": {"id": user_id, "attributes": attributes},
        "resource": resource if isinstance(resource, Mapping) else {},
        "context": context if isinstance(context, Mapping) else {},
    }


def policy_holds(policy: Policy, environment: dict, memo: dict) -> bool:
    """Whether ``policy``'s condition holds (``memo``: answers already found for this check,
    by policy). A malformed condition fails closed: a deny holds, an allow does not."""
    if policy.condition is None:
        return True
    key = id(policy)
    if key not in memo:
        try:
            memo[key] = _evaluate(policy.condition, environment, 1)
        except _Malformed:
            # Validation keeps these out of the store; should one slip through, fail closed.
            memo[key] = policy.effect == DENY
    return memo[key]


# --- conditions --------------------------------------------------------------------------


class _Malformed(Exception):
    """The condition itself (not the data it reads) is not in the condition language."""


_MISSING = object()


def evaluate_condition(condition, env: Mapping) -> bool:
    """Whether an ABAC condition holds for ``env`` ({"user": {"id", "attributes"}, "resource",
    "context"}). Bad or missing data makes a comparison false; it never raises. A condition
    that is not in the language (see :func:`validate_condition`) is false as a whole."""
    try:
        return _evaluate(condition, env, 1)
    except _Malformed:
        return False


def _evaluate(node, env, depth: int) -> bool:
    if type(node) is not dict or depth > MAX_CONDITION_DEPTH:
        raise _Malformed
    if "op" in node:
        return _evaluate_comparison(node, env)
    if "all" in node:
        children = node["all"]
        if type(children) is not list:
            raise _Malformed
        return all(_evaluate(child, env, depth + 1) for child in children)
    if "any" in node:
        children = node["any"]
        if type(children) is not list:
            raise _Malformed
        return any(_evaluate(child, env, depth + 1) for child in children)
    if "not" in node:
        return not _evaluate(node["not"], env, depth + 1)
    raise _Malformed


def _evaluate_comparison(node: dict, env) -> bool:
    op = node["op"]
    if "left" not in node:
        raise _Malformed
    left = _operand(node["left"], env)
    if op == "exists":
        wanted = _operand(node["right"], env) if "right" in node else True
        if type(wanted) is not bool:
            raise _Malformed
        return (left is not _MISSING) == wanted
    comparison = _COMPARISONS.get(op) if isinstance(op, str) else None
    if comparison is None or "right" not in node:
        raise _Malformed
    right = _operand(node["right"], env)
    if left is _MISSING or right is _MISSING:
        return False
    try:
        return comparison(left, right) is True
    except Exception:  # runtime data we cannot compare (e.g. absurdly deep) is simply false
        return False


def _operand(operand, env):
    if type(operand) is not dict or len(operand) != 1:
        raise _Malformed
    if "value" in operand:
        return operand["value"]
    path = operand.get("attr")
    if type(path) is not str:
        raise _Malformed
    return _resolve(env, path)


def _resolve(env, path: str):
    node = env
    for key in path.split("."):
        if type(node) is not dict and not isinstance(node, Mapping):
            return _MISSING
        node = node.get(key, _MISSING)
        if node is _MISSING:
            return _MISSING
    return node


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_equal(a, b) -> bool:
    """Equality as JSON means it: true is not 1, 1 equals 1.0, containers compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[key], b[key]) for key in a)
    return False


def _ordered(a, b) -> bool:
    """gt/gte/lt/lte compare two numbers or two strings, nothing else."""
    return (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))


def _member(item, collection) -> bool:
    return isinstance(collection, (list, tuple)) and any(_json_equal(item, element) for element in collection)


def _contains(left, right) -> bool:
    if isinstance(left, (list, tuple)):
        return _member(right, left)
    return isinstance(left, str) and isinstance(right, str) and right in left


@lru_cache(maxsize=4096)
def _ip(text: str):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def _network(text: str):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _ip_in_cidr(left, right) -> bool:
    if not isinstance(left, str):
        return False
    address = _ip(left)
    if address is None:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        candidates = (address, address.ipv4_mapped)  # ::ffff:10.0.0.1 is 10.0.0.1
    else:
        candidates = (address,)
    cidrs = (right,) if isinstance(right, str) else right if isinstance(right, (list, tuple)) else ()
    for cidr in cidrs:
        network = _network(cidr) if isinstance(cidr, str) else None
        if network is not None and any(candidate in network for candidate in candidates):
            return True
    return False


_COMPARISONS = {
    "eq": _json_equal,
    "ne": lambda a, b: not _json_equal(a, b),
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


# --- condition validation ----------------------------------------------------------------


def validate_condition(condition, path: str = "condition") -> dict[str, str]:
    """Check a policy condition against the condition language; ``{}`` when valid, else
    ``{json_path: reason}`` for each problem found (for a 400 naming them)."""
    errors: dict[str, str] = {}
    count = _validate_node(condition, path, 1, errors)
    if count > MAX_CONDITION_NODES:
        errors.setdefault(path, f"has {count} nodes; at most {MAX_CONDITION_NODES} are allowed")
    return errors


def _validate_node(node, path: str, depth: int, errors: dict) -> int:
    """Validate one condition node and its children; return how many nodes it holds."""
    if depth > MAX_CONDITION_DEPTH:
        errors[path] = f"nested deeper than {MAX_CONDITION_DEPTH} levels"
        return 1
    if not isinstance(node, dict):
        errors[path] = "must be an object"
        return 1
    kinds = [key for key in ("all", "any", "not", "op") if key in node]
    if len(kinds) != 1:
        errors[path] = "must have exactly one of all, any, not, op"
        return 1
    kind = kinds[0]
    allowed_keys = {"op", "left", "right"} if kind == "op" else {kind}
    unknown = sorted(str(key) for key in node if key not in allowed_keys)
    if unknown:
        errors[path] = f"unknown key(s): {', '.join(unknown)}"
    if kind == "op":
        _validate_comparison(node, path, errors)
        return 1
    if kind == "not":
        return 1 + _validate_node(node["not"], f"{path}.not", depth + 1, errors)
    children = node[kind]
    if not isinstance(children, list) or not children:
        errors[f"{path}.{kind}"] = "must be a non-empty array of conditions"
        return 1
    return 1 + sum(
        _validate_node(child, f"{path}.{kind}[{index}]", depth + 1, errors) for index, child in enumerate(children)
    )


def _validate_comparison(node: dict, path: str, errors: dict) -> None:
    op = node["op"]
    if not isinstance(op, str) or op not in OPERATORS:
        errors[f"{path}.op"] = f"unknown operator; one of {', '.join(sorted(OPERATORS))}"
        return
    if "left" not in node:
        errors[f"{path}.left"] = "is required"
    else:
        _validate_operand(node["left"], f"{path}.left", errors)
    if op == "exists":
        if "left" in node and isinstance(node["left"], dict) and "attr" not in node["left"]:
            errors.setdefault(f"{path}.left", "exists needs an attribute operand")
        if "right" in node and not (
            isinstance(node["right"], dict) and set(node["right"]) == {"value"} and isinstance(node["right"]["value"], bool)
        ):
            errors[f"{path}.right"] = 'exists takes only {"value": true} or {"value": false}'
        return
    if "right" not in node:
        errors[f"{path}.right"] = "is required"
        return
    right = node["right"]
    if not _validate_operand(right, f"{path}.right", errors) or "value" not in right:
        return
    value = right["value"]
    reason = None
    if op in ("in", "not_in") and not isinstance(value, list):
        reason = f"{op} needs an array"
    elif op in ("gt", "gte", "lt", "lte") and not (_is_number(value) or isinstance(value, str)):
        reason = f"{op} compares numbers or strings"
    elif op == "starts_with" and not isinstance(value, str):
        reason = "starts_with needs a string"
    elif op == "ip_in_cidr":
        cidrs = [value] if isinstance(value, str) else value if isinstance(value, list) else None
        if not cidrs or not all(isinstance(cidr, str) and _network(cidr) is not None for cidr in cidrs):
            reason = "ip_in_cidr needs a CIDR string or a non-empty array of them"
    if reason:
        errors[f"{path}.right.value"] = reason


def _validate_operand(operand, path: str, errors: dict) -> bool:
    if not isinstance(operand, dict) or len(operand) != 1 or not ({"attr", "value"} & set(operand)):
        errors[path] = 'must be {"attr": path} or {"value": literal}'
        return False
    if "value" in operand:
        if not _is_json(operand["value"]):
            errors[f"{path}.value"] = "must be a JSON value"
            return False
        return True
    reason = _attr_problem(operand["attr"])
    if reason:
        errors[f"{path}.attr"] = reason
        return False
    return True


def _attr_problem(attr) -> str | None:
    expected = "must be user.id, user.attributes.X, resource.X or context.X"
    if not isinstance(attr, str):
        return expected
    parts = attr.split(".")
    if any(not part for part in parts) or parts[0] not in _ATTR_ROOTS or len(parts) < 2:
        return expected
    if parts[0] == "user" and not (parts[1:] == ["id"] or (parts[1] == "attributes" and len(parts) >= 3)):
        return expected
    return None


def _is_json(value, depth: int = 0) -> bool:
    if depth > 32:
        return False
    if value is None or isinstance(value, (bool, str, int, float)):
        return True
    if isinstance(value, list):
        return all(_is_json(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_json(item, depth + 1) for key, item in value.items())
    return False
