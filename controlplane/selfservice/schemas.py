"""Request validation and response shapes of user self-service.

The profile update is partial: only the fields sent change, unknown fields are ignored.
- ``name``: a non-empty string of at most 255 characters (trimmed);
- ``avatar_url``: an http or https URL of at most 2048 characters, or null to clear it;
- ``metadata``: a JSON object that replaces the stored one whole, or null to clear it;
  at most 16 KiB of JSON, nested at most 16 levels, and no key may start with ``$``,
  contain ``.`` or a NUL character (MongoDB cannot store or update such keys reliably;
  Auth0 has the same rule for its user metadata).
"""
from __future__ import annotations

from controlplane.audit import schemas as audit_schemas
from controlplane.passkeys import schemas as passkey_schemas
from controlplane.users.schemas import Metadata
from shared.validation import ID, NULLABLE_TIME, TIME, DisplayName, Invalid, Schema, Url, object_schema

NAME_MAX = 255
AVATAR_URL_MAX = 2048


class Name(DisplayName):
    """A display name: trimmed, not empty (the spec's User name, max 255)."""

    def __init__(self, **kw):
        super().__init__(max_len=NAME_MAX, min_len=1, **kw)

    def clean(self, value):
        if isinstance(value, str) and not value.strip():
            raise Invalid("must not be empty")
        return super().clean(value)


UPDATE_PROFILE = Schema({
    "name": Name(description="at most 255 characters; cannot be emptied"),
    "avatar_url": Url(nullable=True, max_len=AVATAR_URL_MAX, description="http or https URL; null clears it"),
    "metadata": Metadata(nullable=True, description="replaces the stored object whole; null clears it."),
}, partial=True, description="All fields optional; omitted fields stay unchanged and unknown fields are ignored.")


# ---------------------------------------------------------------- responses


PROFILE = object_schema({
    "id": ID,
    "email": {"type": "string", "format": "email"},
    "name": {"type": "string", "maxLength": NAME_MAX},
    "avatar_url": {"type": ["string", "null"], "format": "uri"},
    "email_verified": {"type": "boolean"},
    "metadata": {"type": ["object", "null"]},
    "created_at": TIME,
    "updated_at": TIME,
}, "The User profile resource.")

_SESSION_PROPERTIES = {
    "id": ID,
    "device_info": object_schema({"ip": {"type": ["string", "null"]}, "user_agent": {"type": ["string", "null"]}}),
    "is_remember_me": {"type": "boolean"},
    "last_used_at": TIME,
    "expires_at": TIME,
    "created_at": TIME,
}

SESSION = object_schema(_SESSION_PROPERTIES, "A session: a non-revoked, non-expired refresh token.")

SESSION_LIST = {"type": "array", "items": SESSION, "description": "Newest first."}

REVOKED = object_schema({
    "revoked_count": {"type": "integer", "minimum": 0},
    "message": {"type": "string"},
})

EXPORT_USER = object_schema({
    "id": ID,
    "email": {"type": "string", "format": "email"},
    "name": {"type": "string"},
    "created_at": TIME,
    "updated_at": TIME,
    "email_verified": {"type": "boolean"},
    "avatar_url": {"type": ["string", "null"]},
    "metadata": {"type": ["object", "null"]},
    "attributes": {"type": "object", "description": "ABAC attributes stored about the user"},
    "last_login_at": NULLABLE_TIME,
})

EXPORT_SESSION = object_schema({**_SESSION_PROPERTIES, "revoked_at": NULLABLE_TIME},
                         "Every stored session, live, revoked or expired, newest first.")

EXPORT_ROLE = object_schema({
    "role_id": ID,
    "name": {"type": "string"},
    "display_name": {"type": "string"},
    "scope": {"type": ["string", "null"]},
    "expires_at": NULLABLE_TIME,
    "assigned_at": TIME,
}, "A current (unexpired) role assignment.")

EXPORT_MFA_METHOD = object_schema({
    "id": ID,
    "type": {"type": "string", "enum": ["totp"]},
    "label": {"type": "string"},
    "is_primary": {"type": "boolean"},
    "status": {"type": "string", "enum": ["pending", "active"]},
    "verified_at": NULLABLE_TIME,
    "last_used_at": NULLABLE_TIME,
}, "The MFA method resource; never the secret.")

EXPORT_OAUTH_CONNECTION = object_schema({
    "client_id": {"type": "string"},
    "scopes": {"type": "array", "items": {"type": "string"}},
    "granted_at": TIME,
    "withdrawn_at": NULLABLE_TIME,
}, "An OIDC consent the user gave a client, withdrawn or not.")

EXPORT_LINKED_IDENTITY = object_schema({
    "id": ID,
    "connection_id": ID,
    "connection_name": {"type": ["string", "null"]},
    "issuer": {"type": "string"},
    "sub": {"type": "string"},
    "email": {"type": ["string", "null"]},
    "email_verified": {"type": "boolean"},
    "linked_at": TIME,
    "last_sign_in_at": NULLABLE_TIME,
}, "An identity at an upstream provider linked to the user (docs/connections.md); never its tokens.")

EXPORT_AUDIT_LOG = {**audit_schemas.RECORD, "description": "An audit record the user did or that was done to "
                    "the user (docs/audit.md), oldest first; data keys naming secrets are removed."}

EXPORT = object_schema({
    "exported_at": TIME,
    "user": EXPORT_USER,
    "sessions": {"type": "array", "items": EXPORT_SESSION},
    "roles": {"type": "array", "items": EXPORT_ROLE},
    "mfa_methods": {"type": "array", "items": EXPORT_MFA_METHOD},
    "passkeys": {"type": "array", "items": passkey_schemas.PASSKEY,
                 "description": "The user's passkeys, as GET V1/auth/passkeys lists them (no key material)."},
    "oauth_connections": {"type": "array", "items": EXPORT_OAUTH_CONNECTION},
    "linked_identities": {"type": "array", "items": EXPORT_LINKED_IDENTITY},
    "audit_logs": {"type": "array", "items": EXPORT_AUDIT_LOG},
})
