"""The authorization engine: RBAC with wildcard permissions, scopes, expiry, and ABAC policies.

Pure functions over plain data, shared by the control plane's authz endpoints and the
decision service so both give the same answer for the same data. Nothing here does I/O,
reads the clock (``now`` is passed in, timezone-aware) or logs.

Spec sections implemented: "Permission" (``resource:action``, ``*`` in either part),
"Role assignment" (scope, expires_at) and "Authorization checks"; ARCHITECTURE.md decides
the scope rules, the ABAC condition language and the order deny policy > RBAC > allow policy.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType

from shared.timeutil import UTC, aware, parse_iso

PERMISSION_PATTERN = re.compile(r"^[a-zA-Z0-9_*-]+:[a-zA-Z0-9_*-]+$")
WILDCARD = "*"

ACTIVE = "active"
ALLOW = "allow"
DENY = "deny"

MAX_CONDITION_DEPTH = 10
MAX_CONDITION_NODES = 100

OPERATORS = frozenset(
    {"eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "starts_with", "exists", "ip_in_cidr"}
)
_ATTR_ROOTS = ("user", "resource", "context")


# --- permissions -------------------------------------------------------------------------


def is_valid_permission(value) -> bool:
    """True for a string of the form ``resource:action`` as the spec's Permission defines it."""
    return isinstance(value, str) and PERMISSION_PATTERN.fullmatch(value) is not None


def matches(pattern: str, permission: str) -> bool:
    """Whether a granted ``pattern`` covers the checked ``permission``.

    Part by part: a pattern part equal to ``*`` matches any part (a literal ``*`` included),
    any other part must be equal, case-sensitively. So ``posts:*`` covers ``posts:*`` but
    ``posts:read`` does not. Anything that is not a valid permission matches nothing.
    """
    if not (is_valid_permission(pattern) and is_valid_permission(permission)):
        return False
    pattern_resource, _, pattern_action = pattern.partition(":")
    resource, _, action = permission.partition(":")
    return (pattern_resource == WILDCARD or pattern_resource == resource) and (
        pattern_action == WILDCARD or pattern_action == action
    )


def _covering_patterns(permission: str) -> tuple[str, str, str, str]:
    """Every pattern that can cover a valid permission: itself, res:*, *:act and *:*."""
    resource, _, action = permission.partition(":")
    return permission, resource + ":*", "*:" + action, "*:*"


# --- data --------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _datetime(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return aware(value)
    return parse_iso(value)


@dataclass(frozen=True)
class Assignment:
    """One role assignment of a user, with the role's permission patterns."""

    role_id: str
    role_name: str
    permissions: tuple[str, ...]
    scope: str | None = None
    expires_at: datetime | None = None

    def __post_init__(self):
        object.__setattr__(self, "permissions", tuple(self.permissions))
        object.__setattr__(self, "expires_at", aware(self.expires_at))

    def active(self, now: datetime) -> bool:
        """Not expired: an assignment expiring exactly at ``now`` no longer counts."""
        return self.expires_at is None or self.expires_at > now

    def applies_to(self, scope: str | None) -> bool:
        """An unscoped assignment applies to every check; a scoped one only to its scope."""
        return self.scope is None or self.scope == scope

    def to_json(self) -> dict:
        return {
            "role_id": self.role_id,
            "role_name": self.role_name,
            "permissions": list(self.permissions),
            "scope": self.scope,
            "expires_at": _iso(self.expires_at),
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Assignment:
        return cls(
            role_id=data["role_id"],
            role_name=data["role_name"],
            permissions=tuple(data.get("permissions", ())),
            scope=data.get("scope"),
            expires_at=_datetime(data.get("expires_at")),
        )


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


@dataclass(frozen=True)
class Grants:
    """Everything needed to decide for one user of one application, read at change-log ``seq``.

    ``status`` is the user's account state: "active", "suspended", "deleted", or "unknown"
    for a user the application does not have. ``attributes`` (the user's ABAC attributes) is
    held as a read-only view of a private copy.
    """

    user_id: str
    status: str
    assignments: tuple[Assignment, ...] = ()
    attributes: Mapping = field(default_factory=dict, hash=False)
    seq: int = 0

    def __post_init__(self):
        object.__setattr__(self, "assignments", tuple(self.assignments))
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))

    @classmethod
    def unknown(cls, user_id: str, seq: int = 0) -> Grants:
        """Grants of a user the application does not have: never allowed."""
        return cls(user_id=user_id, status="unknown", seq=seq)

    def to_json(self) -> dict:
        return {
            "user_id": self.user_id,
            "status": self.status,
            "assignments": [assignment.to_json() for assignment in self.assignments],
            "attributes": dict(self.attributes),
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Grants:
        return cls(
            user_id=data["user_id"],
            status=data["status"],
            assignments=tuple(Assignment.from_json(item) for item in data.get("assignments", ())),
            attributes=data.get("attributes") or {},
            seq=data.get("seq", 0),
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one check; the ABAC fields are what a POST check reports."""

    allowed: bool
    abac_evaluated: bool = False
    policies_checked: int = 0


_ALLOWED = Decision(True)
_DENIED = Decision(False)


# --- scope -------------------------------------------------------------------------------


def resolve_scope(scope: str | None, context) -> str | None:
    """The scope of a check: the explicit ``scope`` parameter, else ``context.scope`` if a string."""
    if scope is not None:
        return scope
    if isinstance(context, Mapping):
        value = context.get("scope")
        if isinstance(value, str):
            return value
    return None


# --- compiled forms ----------------------------------------------------------------------


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
        for pattern in _covering_patterns(permission):
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


@dataclass(frozen=True, slots=True)
class CompiledGrants:
    """A user's grants resolved for one scope at one instant.

    ``patterns`` holds the permission patterns of the active, applicable assignments (empty
    unless the user is active). The answers stay right while ``now < valid_until`` (the
    earliest future expiry among those assignments; None: until the grants change), so a
    caller may cache this object that long.
    """

    user_id: str
    user_active: bool
    scope: str | None
    patterns: frozenset[str]
    attributes: Mapping
    valid_until: datetime | None
    seq: int = 0

    def allows(self, permission: str) -> bool:
        """RBAC alone: some pattern covers ``permission``. O(1)."""
        patterns = self.patterns
        if not patterns:
            return False
        if permission in patterns:  # patterns are all valid, so permission is too
            return True
        if not is_valid_permission(permission):
            return False
        resource, _, action = permission.partition(":")
        return resource + ":*" in patterns or "*:" + action in patterns or "*:*" in patterns

    def decide(self, permission: str, *, policies=(), resource=None, context=None) -> Decision:
        """See :func:`decide`; the scope was fixed at compilation."""
        return self.decide_many((permission,), policies=policies, resource=resource, context=context)[permission]

    def decide_many(self, permissions: Iterable[str], *, policies=(), resource=None, context=None) -> dict[str, Decision]:
        """See :func:`decide_many`; the scope was fixed at compilation."""
        compiled_policies = compile_policies(policies) if policies else None
        if not compiled_policies:
            if not self.user_active:
                return {permission: _DENIED for permission in permissions}
            allows = self.allows
            return {permission: _ALLOWED if allows(permission) else _DENIED for permission in permissions}

        environment = None
        holds: dict[int, bool] = {}  # a policy's condition gives one answer per check
        results: dict[str, Decision] = {}
        for permission in permissions:
            covering = compiled_policies.covering(permission)
            if not covering:
                results[permission] = _ALLOWED if self.user_active and self.allows(permission) else _DENIED
                continue
            if not self.user_active:
                # Counted all the same: the count depends only on the policies, and a
                # different one would tell the caller the user is not active.
                allowed = False
            else:
                if environment is None:
                    environment = _environment(self, resource, context)
                allowed = _abac_allowed(covering, self.allows(permission), environment, holds)
            results[permission] = Decision(allowed, abac_evaluated=True, policies_checked=len(covering))
        return results


def compile_grants(grants: Grants, scope: str | None, now: datetime) -> CompiledGrants:
    """Resolve ``grants`` for checks at ``scope`` (already resolved, see :func:`resolve_scope`)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if grants.status != ACTIVE:
        return CompiledGrants(grants.user_id, False, scope, frozenset(), grants.attributes, None, grants.seq)
    patterns: set[str] = set()
    valid_until = None
    for assignment in grants.assignments:
        if not (assignment.applies_to(scope) and assignment.active(now)):
            continue
        patterns.update(pattern for pattern in assignment.permissions if is_valid_permission(pattern))
        if assignment.expires_at is not None and (valid_until is None or assignment.expires_at < valid_until):
            valid_until = assignment.expires_at
    return CompiledGrants(grants.user_id, True, scope, frozenset(patterns), grants.attributes, valid_until, grants.seq)


# --- decisions ---------------------------------------------------------------------------


def effective_permissions(grants: Grants, scope: str | None, now: datetime) -> set[str]:
    """Permission patterns in effect at ``scope`` (unscoped assignments included): those of
    active, applicable assignments; empty unless the user is active."""
    return set(compile_grants(grants, scope, now).patterns)


def applicable_assignments(grants: Grants, scope: str | None, now: datetime) -> tuple[Assignment, ...]:
    """The assignments behind :func:`effective_permissions` (for the roles it lists)."""
    if grants.status != ACTIVE:
        return ()
    return tuple(a for a in grants.assignments if a.applies_to(scope) and a.active(now))


def decide(grants: Grants, permission: str, *, now: datetime, scope: str | None = None,
           policies: Iterable[Policy] | CompiledPolicies = (), resource=None, context=None) -> Decision:
    """Answer one authorization check.

    A user who is not active is never allowed. Without policies (GET checks) this is RBAC:
    allowed iff an active assignment applying to the check's scope has a pattern covering
    ``permission``. With policies, those that are active and cover ``permission`` are
    evaluated: a deny policy whose condition holds denies; else RBAC allows; else an allow
    policy whose condition holds allows; else deny.
    """
    compiled = compile_grants(grants, resolve_scope(scope, context), now)
    return compiled.decide(permission, policies=policies, resource=resource, context=context)


def decide_many(grants: Grants, permissions: Iterable[str], *, now: datetime, scope: str | None = None,
                policies: Iterable[Policy] | CompiledPolicies = (), resource=None,
                context=None) -> dict[str, Decision]:
    """:func:`decide` for several permissions (bulk check), compiling the grants once."""
    compiled = compile_grants(grants, resolve_scope(scope, context), now)
    return compiled.decide_many(permissions, policies=policies, resource=resource, context=context)


def _environment(compiled: CompiledGrants, resource, context) -> dict:
    return {
        "user": {"id": compiled.user_id, "attributes": compiled.attributes},
        "resource": resource if isinstance(resource, Mapping) else {},
        "context": context if isinstance(context, Mapping) else {},
    }


def _abac_allowed(covering: tuple[Policy, ...], rbac_allowed: bool, environment: dict, holds: dict) -> bool:
    for policy in covering:
        if policy.effect == DENY and _holds(policy, environment, holds):
            return False
    if rbac_allowed:
        return True
    return any(policy.effect == ALLOW and _holds(policy, environment, holds) for policy in covering)


def _holds(policy: Policy, environment: dict, memo: dict) -> bool:
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
