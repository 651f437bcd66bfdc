"""ABAC management: policies, user attributes, and the dry run.

The model (docs/authorization.md, "ABAC: policies and user attributes": policies under
``V1/abac/policies``, user attributes under ``V1/users/{userId}/attributes``) and the
order of evaluation: a
matching deny policy denies; else RBAC allows; else a matching allow policy allows; else
deny.  Every write emits its event after the data changed (``policy.created``,
``policy.updated``, ``policy.deleted``, ``attribute.set``, ``attribute.deleted``): the
control plane's check cache and the decision services invalidate on them, a policy
event for the whole application, an attribute event for its one user.  A write that finds
its change already made (a policy update that changes nothing, an attribute set to the
value it holds) emits the internal ``policies.invalidated`` / ``grants.invalidated``
instead: it may be the retry of an attempt that failed between its write and its event
(docs/architecture.md, "Repeated writes").

Caps (``PolicyLimits``, docs/authorization.md "Limits"): a create, and an update that
changes the permissions, is counted against the application's policies and the
policies naming each permission pattern while it holds the application's write guard
(``controlplane.collection.WriteGuard``), so parallel writes cannot pass a cap; the condition caps
are the schemas'.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from controlplane.abac import conditions
from controlplane.abac.errors import (
    AttributeKeyConflict,
    AttributeLimitReached,
    AttributeNotFound,
    PermissionPolicyLimitReached,
    PolicyLimitReached,
    PolicyNotFound,
)
from controlplane.abac.schemas import ATTRIBUTES_PER_USER_MAX, PolicyLimits
from controlplane.abac.store import PolicyStore
from controlplane.audit.changes import changes as field_changes
from controlplane.events import EventLog
from controlplane.roles.service import RoleService
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import UserNotFound
from shared.abac import CompiledPolicies, Policy, condition_environment
from shared.authorization import decide_compiled
from shared.ids import is_uuid, new_id
from shared.rbac import WILDCARD, compile_grants, covering_patterns, has_wildcard, resolve_scope
from shared.timeutil import Clock, isoformat

_POLICY_FIELDS = ("name", "description", "effect", "permissions", "condition", "is_active")



@dataclass(eq=False)
class PolicyReader:
    """What other areas read of ABAC, so none of them reads its store: the active policies
    a check evaluates, for the authz area's check cache and the decision services'
    internal API.  Each is one read of the store, on a cache miss only."""

    policies: PolicyStore

    def active(self, app_id: str) -> list[Policy]:
        """The application's active policies in creation order (``PolicyStore.active``)."""
        return self.policies.active(app_id)

    def active_by_ids(self, app_id: str, policy_ids: list[str]) -> list[Policy]:
        """Those of ``policy_ids`` that are active policies of the application: one absent
        was deleted or deactivated."""
        return self.policies.active_by_ids(app_id, policy_ids)


@dataclass(eq=False)
class AbacService:
    policies: PolicyStore
    users: UserDirectory  # attributes live on the user, written through the users area
    roles: RoleService  # the source of a user's grants for the dry run
    events: EventLog
    clock: Clock
    limits: PolicyLimits

    def head(self) -> int:
        """The change-log head: the revision a write that changed nothing answers."""
        return self.events.head()

    # --- policies ------------------------------------------------------------------------

    def list_policies(self, app_id: str, *, is_active: bool | None, permission: str | None, page: int,
                      per_page: int) -> tuple[list[dict], int]:
        """A page of policies sorted by name.  ``permission``: only the policies a check
        of that permission evaluates (a pattern of theirs covers it; for a wildcard, also
        a deny's that overlaps it: ``CompiledPolicies.covering``)."""
        patterns = sorted(set(covering_patterns(permission))) if permission is not None else None
        overlapping = _overlapping_regex(permission) if permission is not None and has_wildcard(permission) else None
        return self.policies.search(app_id, is_active=is_active, patterns=patterns, denies_matching=overlapping,
                                    skip=(page - 1) * per_page, limit=per_page)

    def get_policy(self, app_id: str, policy_id: str) -> dict:
        policy = self.policies.get(app_id, policy_id) if is_uuid(policy_id) else None
        if policy is None:
            raise PolicyNotFound(policy_id)
        return policy

    def create_policy(self, app_id: str, values: dict) -> dict:
        """Store a policy; 409 RESOURCE_ALREADY_EXISTS when the name is taken, 409
        ABAC_POLICY_LIMIT_EXCEEDED or ABAC_POLICIES_PER_PERMISSION_EXCEEDED at a cap."""
        with self.policies.write_guard(self.clock).held(app_id):
            if self.policies.count(app_id) >= self.limits.per_application:
                raise PolicyLimitReached(self.limits.per_application)
            self._check_patterns(app_id, values["permissions"])
            now = self.clock()
            doc = {"_id": new_id(), "app_id": app_id, **{field: values[field] for field in _POLICY_FIELDS},
                   "created_at": now, "updated_at": now}
            self.policies.insert(doc)
        self.events.emit(app_id, "policy.created", _policy_event(doc), subject={"policy_id": doc["_id"]})
        return doc

    def update_policy(self, app_id: str, policy_id: str, values: dict) -> dict:
        """Apply any subset of the fields.  Nothing changed: 200 with the policy, no
        policy.updated, and ``policies.invalidated`` naming it (the update may repeat one
        that stored the change and failed before policy.updated: caches read the policy
        again, one document).  New permission patterns are counted against their cap, as
        for a create."""
        if "permissions" not in values:
            before, changes = self._update(app_id, policy_id, values)
        else:
            with self.policies.write_guard(self.clock).held(app_id):
                before, changes = self._update(app_id, policy_id, values, check_patterns=True)
        if not changes:
            self.events.emit(app_id, "policies.invalidated",
                             {"policy_id": before["_id"], "name": before["name"], "repeat_of": "policy.updated"},
                             subject={"policy_id": before["_id"]})
            return before
        after = {**before, **changes}
        changed = sorted(field for field in _POLICY_FIELDS if not _same_json(before.get(field), after.get(field)))
        if changed:
            diff = field_changes(before, after, changed)  # the audit record's values: none is secret
            self.events.emit(app_id, "policy.updated", {**_policy_event(after), "changes": changed,
                                                        "before": diff["before"], "after": diff["after"]},
                             subject={"policy_id": after["_id"]})
        return after

    def _update(self, app_id: str, policy_id: str, values: dict, *, check_patterns: bool = False):
        """(the policy before, the changes written); no changes: (the policy, {}).  A field
        changes when it differs as JSON (``_same_json``), not by Python's ``!=``, where
        ``0 == False`` would drop a condition's ``false`` replacing ``0``."""
        current = self.get_policy(app_id, policy_id)
        changes = {field: value for field, value in values.items() if not _same_json(current.get(field), value)}
        if not changes:
            return current, {}
        if check_patterns and "permissions" in changes:
            held = set(current.get("permissions") or ())
            self._check_patterns(app_id, [pattern for pattern in changes["permissions"] if pattern not in held])
        changes["updated_at"] = self.clock()
        before = self.policies.update(app_id, current["_id"], changes)
        if before is None:
            raise PolicyNotFound(policy_id)
        return before, changes

    def _check_patterns(self, app_id: str, patterns: list[str]) -> None:
        """409 ABAC_POLICIES_PER_PERMISSION_EXCEEDED when one more policy naming one of
        ``patterns`` would pass the cap."""
        if not patterns:
            return
        limit = self.limits.per_permission
        counts = self.policies.count_by_pattern(app_id, list(patterns))
        for pattern in patterns:
            if counts.get(pattern, 0) >= limit:
                raise PermissionPolicyLimitReached(pattern, limit)

    def delete_policy(self, app_id: str, policy_id: str) -> None:
        removed = self.policies.delete(app_id, policy_id) if is_uuid(policy_id) else None
        if removed is None:
            raise PolicyNotFound(policy_id)
        self.events.emit(app_id, "policy.deleted", {"policy_id": removed["_id"], "name": removed["name"]},
                         subject={"policy_id": removed["_id"]})

    # --- user attributes -----------------------------------------------------------------

    def attributes(self, app_id: str, user_id: str) -> dict:
        """``{key: value}``; 404 USER_NOT_FOUND for an unknown or deleted user."""
        found = self.users.attributes(app_id, user_id) if is_uuid(user_id) else None
        if found is None:
            raise UserNotFound(user_id)
        return found

    def set_attribute(self, app_id: str, user_id: str, key: str, value, *, invalidate_unchanged: bool = True) -> dict:
        """Set one attribute (at most ATTRIBUTES_PER_USER_MAX keys per user): ``{key, value}``.
        The value it already held: no attribute.set, but ``grants.invalidated`` for the user
        (the set may repeat one that failed before its event), unless ``invalidate_unchanged``
        is False: a connection's sign-in maps the same attributes at every sign-in, where
        an event per attribute would drop the user's cached decisions at every sign-in."""
        if not is_uuid(user_id):
            raise UserNotFound(user_id)
        result = self.users.set_attribute(app_id, user_id, key, value, max_keys=ATTRIBUTES_PER_USER_MAX)
        if result.outcome == "no_user":
            raise UserNotFound(user_id)
        if result.outcome == "conflict":
            raise AttributeKeyConflict(user_id, key, result.conflicts_with)
        if result.outcome == "limit":
            raise AttributeLimitReached(user_id, ATTRIBUTES_PER_USER_MAX)
        if not _same_json(result.previous, value):
            self.events.emit(app_id, "attribute.set", {"user_id": user_id, "key": key, "value": value},
                             subject={"user_id": user_id}, user_ids=[user_id])
        elif invalidate_unchanged:
            self.events.emit(app_id, "grants.invalidated",
                             {"user_id": user_id, "key": key, "repeat_of": "attribute.set"},
                             subject={"user_id": user_id}, user_ids=[user_id])
        return {"key": key, "value": value}

    def delete_attribute(self, app_id: str, user_id: str, key: str) -> None:
        if not is_uuid(user_id):
            raise UserNotFound(user_id)
        result = self.users.unset_attribute(app_id, user_id, key)
        if result.outcome == "no_user":
            raise UserNotFound(user_id)
        if result.outcome == "no_key":
            raise AttributeNotFound(user_id, key)
        self.events.emit(app_id, "attribute.deleted", {"user_id": user_id, "key": key},
                         subject={"user_id": user_id}, user_ids=[user_id])

    # --- the dry run ---------------------------------------------------------------------

    def evaluate(self, app_id: str, values: dict) -> dict:
        """``POST V1/abac/evaluate``: the POST check's answer for ``values`` from fresh data
        (no cache), with an optional inline policy evaluated beside the active ones, and
        the reasons: RBAC's answer, each covering policy with whether its condition held,
        and the value of every condition node."""
        user_id, permission = values["user_id"], values["permission"]
        resource, context = values.get("resource"), values.get("context")
        scope = resolve_scope(values.get("scope"), context)
        grants = self.roles.grants(app_id, user_id)
        compiled = compile_grants(grants, scope, self.clock())
        policies = self.policies.active(app_id)
        inline = values.get("policy")
        if inline is not None:
            policies.append(Policy(id=None, name=inline["name"], effect=inline["effect"],
                                   permissions=tuple(inline["permissions"]), condition=inline["condition"],
                                   is_active=inline["is_active"]))
        decision = decide_compiled(compiled, [permission], policies=policies, resource=resource,
                                   context=context)[permission]
        env = condition_environment(user_id, grants.attributes, resource, context)
        covering = CompiledPolicies(policies).covering(permission)
        reports = [_policy_report(policy, env) for policy in covering]
        rbac = compiled.allows(permission)
        return {
            "allowed": decision.allowed,
            "permission": permission,
            "user_id": user_id,
            "user_status": grants.status,
            "scope": scope,
            "rbac_allowed": rbac,
            "abac_evaluated": decision.abac_evaluated,
            "policies_checked": decision.policies_checked,
            "decided_by": _decided_by(compiled.user_active, rbac, reports),
            "policies": reports,
        }


def _policy_report(policy: Policy, env: dict) -> dict:
    trace = conditions.trace(policy.condition, env) if policy.condition is not None else None
    return {
        "id": policy.id,
        "name": policy.name,
        "effect": policy.effect,
        "inline": policy.id is None,
        "matched": True if trace is None else trace["value"],
        "condition": policy.condition,
        "trace": trace,
    }


def _decided_by(user_active: bool, rbac: bool, reports: list[dict]) -> str:
    """Which rule gave the answer, in the order the engine applies them."""
    if not user_active:
        return "user_not_active"
    if any(r["effect"] == "deny" and r["matched"] for r in reports):
        return "deny_policy"
    if rbac:
        return "rbac"
    if any(r["effect"] == "allow" and r["matched"] for r in reports):
        return "allow_policy"
    return "no_match"


def _overlapping_regex(permission: str) -> str:
    """A regular expression for the patterns that overlap a wildcard ``permission``
    (``shared.rbac.overlaps``): each part equal, or either one ``*``."""
    def part(value: str) -> str:
        return "[^:]+" if value == WILDCARD else "(" + re.escape(value) + "|\\*)"
    resource, _, action = permission.partition(":")
    return "^" + part(resource) + ":" + part(action) + "$"


def _same_json(a, b) -> bool:
    """Equal as JSON text (true is not 1); MISSING equals nothing."""
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except TypeError:
        return False


def _policy_event(doc: dict) -> dict:
    return {"policy_id": doc["_id"], "name": doc["name"], "effect": doc["effect"],
            "permissions": list(doc["permissions"]), "is_active": doc["is_active"]}


def serialize_policy(doc: dict) -> dict:
    """The Policy resource."""
    return {
        "id": doc["_id"],
        "name": doc["name"],
        "description": doc.get("description"),
        "effect": doc["effect"],
        "permissions": list(doc.get("permissions") or ()),
        "condition": doc.get("condition"),
        "is_active": bool(doc.get("is_active")),
        "created_at": isoformat(doc["created_at"]),
        "updated_at": isoformat(doc["updated_at"]),
    }
