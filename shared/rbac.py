"""Role-based access control: permission patterns, role assignments and a user's grants.

Pure functions over plain data, shared by the control plane's authz endpoints and the
decision service so both give the same answer for the same data. Nothing here does I/O,
reads the clock (``now`` is passed in, timezone-aware) or logs.

Spec sections implemented: "Permission" (``resource:action``, ``*`` in either part) and
"Role assignment" (scope, expires_at); the scope rules: docs/authorization.md, "Scope and expiry". ABAC
conditions are ``shared.abac``; the answer to a check combining both is
``shared.authorization``.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from shared.timeutil import UTC, aware, parse_iso

PERMISSION_PATTERN = re.compile(r"^[a-zA-Z0-9_*-]+:[a-zA-Z0-9_*-]+$")
WILDCARD = "*"

# The one user status that may be allowed anything ("suspended", "deleted" and "unknown"
# never are).
ACTIVE = "active"


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


def overlaps(pattern: str, permission: str) -> bool:
    """Whether ``pattern`` and ``permission`` cover a name in common: part by part, equal
    or either one ``*``. A check of a wildcard (``posts:*``: may the user do every action
    on posts) is about every name it covers, so a deny of any of them (``posts:delete``)
    bears on it, though it does not cover it. Anything not a valid permission overlaps
    nothing."""
    if not (is_valid_permission(pattern) and is_valid_permission(permission)):
        return False
    pattern_resource, _, pattern_action = pattern.partition(":")
    resource, _, action = permission.partition(":")
    return (WILDCARD in (pattern_resource, resource) or pattern_resource == resource) and (
        WILDCARD in (pattern_action, action) or pattern_action == action)


def has_wildcard(permission: str) -> bool:
    """Whether a permission's resource or action is ``*``."""
    resource, _, action = permission.partition(":")
    return WILDCARD in (resource, action)


def covering_patterns(permission: str) -> tuple[str, str, str, str]:
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
class Grants:
    """Everything needed to decide for one user of one application, read at change-log ``seq``.

    ``status`` is the user's account state: "active", "suspended", "deleted", or "unknown"
    for a user the application does not have. ``attributes`` (the user's ABAC attributes) is
    held as a read-only view of a private copy. ``token_stamp``: the stamp (milliseconds)
    the user's access tokens must carry as ``tnb``, set when a password reset or a
    hand-over to the email's owner took the account back (docs/authentication.md); None
    while it never was.
    """

    user_id: str
    status: str
    assignments: tuple[Assignment, ...] = ()
    attributes: Mapping = field(default_factory=dict, hash=False)
    seq: int = 0
    token_stamp: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "assignments", tuple(self.assignments))
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))

    @classmethod
    def unknown(cls, user_id: str, seq: int = 0) -> Grants:
        """Grants of a user the application does not have: never allowed."""
        return cls(user_id=user_id, status="unknown", seq=seq)

    def to_json(self) -> dict:
        out = {
            "user_id": self.user_id,
            "status": self.status,
            "assignments": [assignment.to_json() for assignment in self.assignments],
            "attributes": dict(self.attributes),
            "seq": self.seq,
        }
        if self.token_stamp is not None:
            out["token_stamp"] = self.token_stamp
        return out

    @classmethod
    def from_json(cls, data: Mapping) -> Grants:
        token_stamp = data.get("token_stamp")
        return cls(
            user_id=data["user_id"],
            status=data["status"],
            assignments=tuple(Assignment.from_json(item) for item in data.get("assignments", ())),
            attributes=data.get("attributes") or {},
            seq=data.get("seq", 0),
            token_stamp=token_stamp if isinstance(token_stamp, int) else None,
        )


# --- scope -------------------------------------------------------------------------------


def resolve_scope(scope: str | None, context) -> str | None:
    """The scope of a check: the explicit ``scope`` parameter, else ``context.scope`` if a string."""
    if scope is not None:
        return scope
    if type(context) is dict or (context is not None and isinstance(context, Mapping)):  # the ABC check costs more
        value = context.get("scope")
        if isinstance(value, str):
            return value
    return None


# --- compiled form -----------------------------------------------------------------------


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


# --- effective permissions ---------------------------------------------------------------


def effective_permissions(grants: Grants, scope: str | None, now: datetime) -> set[str]:
    """Permission patterns in effect at ``scope`` (unscoped assignments included): those of
    active, applicable assignments; empty unless the user is active."""
    return set(compile_grants(grants, scope, now).patterns)


def applicable_assignments(grants: Grants, scope: str | None, now: datetime) -> tuple[Assignment, ...]:
    """The assignments behind :func:`effective_permissions` (for the roles it lists)."""
    if grants.status != ACTIVE:
        return ()
    return tuple(a for a in grants.assignments if a.applies_to(scope) and a.active(now))

