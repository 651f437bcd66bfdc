"""Request validation and response shapes of roles and role assignments.

The spec's Role resource: name unique per application, at most 100 characters and
immutable; display_name at most 255; permissions in ``resource:action`` form (``*`` in
either part), at least one.  Role assignment: role_id, scope (string or null),
expires_at (ISO 8601 or null, in the future).
"""
from __future__ import annotations

from shared.checks import Permission, Scope  # noqa: F401  (role and assignment fields)
from shared.ids import is_uuid
from shared.validation import ID, NULLABLE_TIME, TIME, Bool, DateTime, Invalid, List, Schema, String, Uuid, page_of

NAME_MAX = 100
DISPLAY_NAME_MAX = 255
DESCRIPTION_MAX = 1000
PERMISSIONS_PER_ROLE_MAX = 200
SEARCH_MAX = 100

# Names appear in URLs ({role} may be a name) and in logs: letters, digits and . _ : -,
# starting with a letter or digit.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"


class RoleName(String):
    def __init__(self, **kw):
        super().__init__(max_len=NAME_MAX, pattern=NAME_PATTERN, **kw)

    def clean(self, value):
        try:
            value = super().clean(value)
        except Invalid as exc:
            if str(exc) == "has an invalid format":
                raise Invalid("may contain only letters, digits and . _ : - "
                              "and must start with a letter or digit") from None
            raise
        if is_uuid(value):
            # {role} in paths is an id when it looks like one, so such a name could never be addressed.
            raise Invalid("must not look like a UUID")
        return value


def permissions_field(*, required):
    return List(Permission(), required=required, min_items=1, max_items=PERMISSIONS_PER_ROLE_MAX,
                description="resource:action patterns, * allowed in either part; duplicates are dropped")


CREATE_ROLE = Schema({
    "name": RoleName(required=True, description="unique within the application; cannot change later"),
    "display_name": String(required=True, max_len=DISPLAY_NAME_MAX),
    "description": String(nullable=True, max_len=DESCRIPTION_MAX),
    "permissions": permissions_field(required=True),
    "is_system_role": Bool(default=False, description="system roles cannot be modified or deleted"),
})

# PUT and PATCH both take any subset; ``name`` and ``is_system_role`` are accepted only
# unchanged (a client sending the whole resource back must not fail).
UPDATE_ROLE = Schema({
    "name": String(max_len=NAME_MAX, description="immutable: only the current value is accepted"),
    "display_name": String(required=False, min_len=1, max_len=DISPLAY_NAME_MAX),
    "description": String(nullable=True, max_len=DESCRIPTION_MAX),
    "permissions": permissions_field(required=False),
    "is_system_role": Bool(description="immutable: only the current value is accepted"),
}, partial=True, description="All fields optional; permissions replaces the whole set.")

ASSIGN_ROLE = Schema({
    "role_id": Uuid(required=True),
    "scope": Scope(nullable=True, description="null or omitted: the assignment applies at every scope"),
    "expires_at": DateTime(nullable=True, description="ISO 8601, in the future; null: never expires"),
})


# --- response shapes (OpenAPI) ------------------------------------------------------------


ROLE_SUMMARY = {
    "type": "object",
    "properties": {
        "id": ID,
        "name": {"type": "string"},
        "display_name": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "is_system_role": {"type": "boolean"},
        "permissions_count": {"type": "integer"},
        "permissions": {"type": "array", "items": {"type": "string"},
                        "description": "only with include_permissions=true"},
        "created_at": TIME,
    },
}

ROLE_WITH_NAMES = {
    "type": "object",
    "properties": {
        **ROLE_SUMMARY["properties"],
        "permissions": {"type": "array", "items": {"type": "string"}},
        "updated_at": TIME,
    },
}

ROLE_DETAIL = {
    "type": "object",
    "properties": {
        **ROLE_WITH_NAMES["properties"],
        "permissions": {"type": "array", "items": {
            "type": "object", "properties": {"id": ID, "name": {"type": "string"}}}},
        "users_count": {"type": "integer"},
    },
}

ROLE_PAGE = page_of(ROLE_SUMMARY)

# The terms of an assignment, in the create response and in each item of a user's list.
_TERMS = {
    "scope": {"type": ["string", "null"]},
    "expires_at": NULLABLE_TIME,
    "assigned_at": TIME,
}

# Whose roles or permissions a list answers with, and at which scope.
_SUBJECT = {"user_id": ID, "scope": {"type": ["string", "null"]}}

ASSIGNMENT = {
    "type": "object",
    "properties": {"user_id": ID, "role_id": ID, **_TERMS},
}

ASSIGNMENT_LIST = {
    "type": "object",
    "properties": {
        "data": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "role_id": ID,
                "name": {"type": "string"},
                "display_name": {"type": "string"},
                **_TERMS,
            },
        }},
        **_SUBJECT,
    },
}

USER_PERMISSIONS = {
    "type": "object",
    "properties": {
        **_SUBJECT,
        "permissions": {"type": "array", "items": {"type": "string"}},
        "roles": {"type": "array", "items": {
            "type": "object", "properties": {"id": ID, "name": {"type": "string"}}}},
    },
}
