"""Validation of API key creation and the API key response (dashboard
/api/dashboard/applications/{applicationId}/api-keys)."""
from __future__ import annotations

from shared.validation import NULLABLE_TIME, TIME, List, Schema, String, object_schema

CREATE = Schema({
    "name": String(required=True, max_len=255),
    "permissions": List(String(max_len=201), min_items=1, max_items=100,
                        description="resource:action patterns; default every V1 permission and decision:sync. "
                                    "roles:manage is administration (its holder can grant itself *:*); "
                                    "a decision service's key needs only decision:sync"),
})

API_KEY_RESPONSE = object_schema({
    "id": {"type": "string", "format": "uuid"},
    "name": {"type": "string"},
    "key_prefix": {"type": "string"},
    "permissions": {"type": "array", "items": {"type": "string"}},
    "created_at": TIME,
    "last_used_at": NULLABLE_TIME,
    "key": {"type": "string", "description": "the secret; only in the create response"},
}, required=())
