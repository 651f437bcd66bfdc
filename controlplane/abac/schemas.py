"""Request validation and response shapes of ABAC policies, user attributes and the dry run.

Policy (docs/authorization.md, "Policies"): ``{id, name, description, effect: allow|deny,
permissions: [patterns], condition, is_active, created_at, updated_at}``; the name is
unique per application.  A condition is checked by ``controlplane.abac.conditions``;
its problems are reported with the JSON path of the bad node.

User attribute (docs/authorization.md, "User attributes"): keys match
``^[a-zA-Z0-9_.-]{1,64}$`` (without empty dot-separated parts), values are JSON scalars
or arrays of scalars of at most 1 KiB, at most 50 keys per user.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from controlplane.abac import conditions
from controlplane.abac.errors import ConditionInvalid, ConditionTooLarge
from shared.checks import CHECK, Permission
from shared.errors import ValidationFailed
from shared.validation import ID, TIME, Bool, Field, Invalid, List, Object, Schema, String, page_of

NAME_MAX = 100
DESCRIPTION_MAX = 1000
PERMISSIONS_PER_POLICY_MAX = 100
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._:-]*$"

ATTRIBUTE_KEY_PATTERN = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
# The same rule for OpenAPI: dots separate non-empty levels.
ATTRIBUTE_KEY_SCHEMA = {"type": "string", "pattern": r"^[a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*$", "maxLength": 64}
ATTRIBUTE_VALUE_MAX_BYTES = 1024
ATTRIBUTES_PER_USER_MAX = 50


@dataclass(frozen=True)
class PolicyLimits:
    """The caps on an application's policies (IAMGATE_MAX_POLICIES_PER_APPLICATION,
    IAMGATE_MAX_POLICIES_PER_PERMISSION, IAMGATE_MAX_CONDITION_BYTES,
    IAMGATE_MAX_CONDITION_NODES): what one tenant's policies can cost every check of the
    process is linear in them (docs/authorization.md, "Limits")."""

    per_application: int
    per_permission: int
    condition_bytes: int
    condition_nodes: int

    @classmethod
    def of(cls, config) -> PolicyLimits:
        return cls(per_application=config.max_policies_per_application,
                   per_permission=config.max_policies_per_permission,
                   condition_bytes=config.max_condition_bytes, condition_nodes=config.max_condition_nodes)


class Condition(Field):
    """A condition object, or null (the policy holds unconditionally).  The language
    itself is checked by :func:`clean_policy`, which can name the bad node's path."""

    def schema(self):
        return {"type": ["object", "null"], "description": (
            'ABAC condition: {"all": [...]}, {"any": [...]}, {"not": c} or {"op", "left", "right"}; '
            f"at most {conditions.MAX_DEPTH} levels, IAMGATE_MAX_CONDITION_BYTES bytes of JSON and "
            "IAMGATE_MAX_CONDITION_NODES nodes; null: always holds")}


def _permissions(*, required):
    return List(Permission(), required=required, min_items=1, max_items=PERMISSIONS_PER_POLICY_MAX,
                description="resource:action patterns the policy covers, * allowed in either part")


_FIELDS = {
    "name": String(min_len=1, max_len=NAME_MAX, pattern=NAME_PATTERN,
                   description="unique within the application; letters, digits, space and . _ : -"),
    "description": String(nullable=True, max_len=DESCRIPTION_MAX),
    "effect": String(choices=("allow", "deny")),
    "permissions": _permissions(required=False),
    "condition": Condition(nullable=True),
    "is_active": Bool(),
}

CREATE_POLICY = Schema({
    **_FIELDS,
    "name": String(required=True, min_len=1, max_len=NAME_MAX, pattern=NAME_PATTERN,
                   description="unique within the application; letters, digits, space and . _ : -"),
    "effect": String(required=True, choices=("allow", "deny")),
    "permissions": _permissions(required=True),
    "condition": Condition(nullable=True, default=None),
    "description": String(nullable=True, max_len=DESCRIPTION_MAX, default=None),
    "is_active": Bool(default=True),
})

UPDATE_POLICY = Schema(_FIELDS, partial=True,
                       description="Any subset of the fields; permissions and condition are replaced whole.")

# The dry run's inline policy: a policy that is not stored (name optional).
INLINE_POLICY = Schema({**CREATE_POLICY.fields, "name": String(max_len=NAME_MAX, default="inline policy")})


def clean_policy(schema: Schema, body, limits: PolicyLimits, *, partial: bool, prefix: str = "") -> dict:
    """Validate a policy body.  A condition over the size caps is 400
    ABAC_CONDITION_TOO_LARGE before anything else is looked at; field errors answer as
    ``ValidationFailed`` does; when only the condition is wrong the answer is
    VALIDATION_INVALID_FORMAT naming each bad node's JSON path (``condition.all[2].op``)."""
    condition = body.get("condition") if isinstance(body, dict) else None
    if condition is not None:
        size = conditions.too_large(condition, max_bytes=limits.condition_bytes, max_nodes=limits.condition_nodes)
        if size is not None:
            raise ConditionTooLarge(f"{prefix}condition", size)
    errors: dict[str, str] = {}
    try:
        values = schema.clean(body, partial=partial, prefix=prefix)
    except ValidationFailed as exc:
        errors.update(exc.errors)
        values = {}
    problems = conditions.validate(condition, f"{prefix}condition") if condition is not None else {}
    if errors:
        raise ValidationFailed({**errors, **problems})
    if problems:
        raise ConditionInvalid(problems)
    return values


# --- user attributes ---------------------------------------------------------------------------


def attribute_key(key: str) -> str:
    """The ``{key}`` of an attribute path; 400 naming ``key`` when it is not one."""
    if not ATTRIBUTE_KEY_PATTERN.fullmatch(key):
        raise ValidationFailed({"key": f"must match {ATTRIBUTE_KEY_PATTERN.pattern}"})
    if "" in key.split("."):
        raise ValidationFailed({"key": "must not start or end with '.' or contain '..' (dots separate levels "
                                       "that conditions read as user.attributes.a.b)"})
    return key


def attribute_value(body: dict):
    """The ``value`` of a PUT attribute body: a JSON scalar or an array of scalars, at
    most 1 KiB of compact JSON."""
    if "value" not in body:
        raise ValidationFailed({"value": "is required"})
    value = body["value"]
    reason = conditions.scalar_or_scalars_problem(value)
    if reason is None:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > ATTRIBUTE_VALUE_MAX_BYTES:
            reason = f"is {size} bytes of JSON; at most {ATTRIBUTE_VALUE_MAX_BYTES} are allowed"
    if reason:
        raise ValidationFailed({"value": reason})
    return value


class AttributeValue(Field):
    def schema(self):
        return {"description": f"a JSON scalar or an array of scalars, at most {ATTRIBUTE_VALUE_MAX_BYTES} bytes",
                "oneOf": [{"type": ["string", "number", "boolean", "null"]},
                          {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}}]}


SET_ATTRIBUTE = Schema({"value": AttributeValue(required=True)})


# --- the dry run -------------------------------------------------------------------------------

EVALUATE = Schema({
    **CHECK.fields,
    "policy": Object(nullable=True, description="an inline policy (the create body, name optional) evaluated "
                                                "as if it were active, beside the stored ones"),
})


def clean_evaluate(body, limits: PolicyLimits) -> dict:
    values = EVALUATE.clean(body)
    inline = values.get("policy")
    if inline is not None:
        values["policy"] = clean_policy(INLINE_POLICY, inline, limits, partial=False, prefix="policy.")
    return values


def is_active_param(raw: str | None) -> bool | None:
    if raw is None or raw == "":
        return None
    if raw.lower() in ("1", "true", "yes"):
        return True
    if raw.lower() in ("0", "false", "no"):
        return False
    raise ValidationFailed({"is_active": "must be true or false"})


def permission_param(raw: str | None) -> str | None:
    if raw is None or raw == "":
        return None
    try:
        return Permission().clean(raw)
    except Invalid as exc:
        raise ValidationFailed({"permission": str(exc)}) from None


# --- response shapes (OpenAPI) -----------------------------------------------------------------


POLICY = {
    "type": "object",
    "properties": {
        "id": ID,
        "name": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "effect": {"type": "string", "enum": ["allow", "deny"]},
        "permissions": {"type": "array", "items": {"type": "string"}},
        "condition": {"type": ["object", "null"]},
        "is_active": {"type": "boolean"},
        "created_at": TIME,
        "updated_at": TIME,
    },
}

POLICY_PAGE = page_of(POLICY)

ATTRIBUTES = {"type": "object", "additionalProperties": AttributeValue().schema(),
              "description": "the user's attributes, key to value"}

ATTRIBUTE = {"type": "object", "properties": {"key": {"type": "string"}, "value": AttributeValue().schema()}}

_TRACE_NODE = {"type": "object", "properties": {
    "path": {"type": "string"}, "value": {"type": "boolean"}, "op": {"type": "string"},
    "left": {"type": "object"}, "right": {"type": "object"},
    "children": {"type": "array", "items": {"type": "object"}}, "child": {"type": "object"}}}

EVALUATION = {
    "type": "object",
    "properties": {
        "allowed": {"type": "boolean"},
        "permission": {"type": "string"},
        "user_id": {"type": "string"},
        "user_status": {"type": "string", "enum": ["active", "suspended", "deleted", "unknown"]},
        "scope": {"type": ["string", "null"]},
        "rbac_allowed": {"type": "boolean"},
        "abac_evaluated": {"type": "boolean"},
        "policies_checked": {"type": "integer"},
        "decided_by": {"type": "string", "enum": ["user_not_active", "deny_policy", "rbac", "allow_policy",
                                                  "no_match"]},
        "policies": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": ["string", "null"]}, "name": {"type": "string"},
            "effect": {"type": "string"}, "inline": {"type": "boolean"},
            "matched": {"type": "boolean", "description": "its condition held"},
            "condition": {"type": ["object", "null"]},
            "trace": {**_TRACE_NODE, "type": ["object", "null"]}}}},
    },
}
