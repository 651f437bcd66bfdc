"""Request validation and response shapes of the authorization checks.

Parameters (spec "Authorization checks"): user_id, permission (resource:action) or
permissions (1 to 50), resource and context (objects, ABAC), plus ``scope`` (or
``context.scope``) and ``min_revision`` (read-your-writes, ARCHITECTURE.md).
"""
from __future__ import annotations

from shared.validation import Int, List, Object, Schema, String

from controlplane.roles.schemas import Permission, Scope

BULK_MAX = 50
ATTRIBUTES_MAX_BYTES = 64 * 1024

_USER_ID = String(required=True, max_len=255, description="the user to check (an unknown user is not allowed)")
_SCOPE = Scope(nullable=True, description="check at this scope; default context.scope, else unscoped only")
_MIN_REVISION = Int(min=0, nullable=True,
                    description="answer from data at least as fresh as this X-Iamgate-Revision")
_RESOURCE = Object(nullable=True, max_bytes=ATTRIBUTES_MAX_BYTES, description="ABAC resource attributes")
_CONTEXT = Object(nullable=True, max_bytes=ATTRIBUTES_MAX_BYTES, description="ABAC request context")

CHECK_QUERY = Schema({
    "user_id": _USER_ID,
    "permission": Permission(required=True),
    "scope": _SCOPE,
    "min_revision": _MIN_REVISION,
})

CHECK = Schema({
    "user_id": _USER_ID,
    "permission": Permission(required=True),
    "resource": _RESOURCE,
    "context": _CONTEXT,
    "scope": _SCOPE,
    "min_revision": _MIN_REVISION,
})

CHECK_BULK = Schema({
    "user_id": _USER_ID,
    "permissions": List(Permission(), required=True, min_items=1, max_items=BULK_MAX,
                        description=f"1 to {BULK_MAX} permissions; duplicates answered once"),
    "resource": _RESOURCE,
    "context": _CONTEXT,
    "scope": _SCOPE,
    "min_revision": _MIN_REVISION,
})

CHECK_RESPONSE = {
    "type": "object",
    "required": ["allowed", "permission", "cached"],
    "properties": {
        "allowed": {"type": "boolean"},
        "permission": {"type": "string"},
        "cached": {"type": "boolean", "description": "answered from the permission check cache"},
    },
}

CHECK_ABAC_RESPONSE = {
    "type": "object",
    "required": ["allowed", "permission", "cached", "abac_evaluated", "policies_checked"],
    "properties": {
        **CHECK_RESPONSE["properties"],
        "abac_evaluated": {"type": "boolean", "description": "an active policy covered the permission"},
        "policies_checked": {"type": "integer", "description": "active policies covering the permission"},
    },
}

BULK_RESPONSE = {
    "type": "object",
    "required": ["user_id", "results"],
    "properties": {
        "user_id": {"type": "string"},
        "results": {"type": "object", "additionalProperties": {"type": "boolean"}},
    },
}
