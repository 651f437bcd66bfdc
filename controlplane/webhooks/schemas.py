"""Request validation and response shapes of webhooks (spec "Webhook", "Webhook
delivery", "Webhooks").  The URL's target rules (https, no private or local address)
are ``targets.TargetPolicy``'s; the event names are checked against the catalogue by
the service (400 WEBHOOK_EVENT_UNSUPPORTED)."""
from __future__ import annotations

from controlplane.webhooks.targets import URL_MAX
from shared.validation import ID, NULLABLE_TIME, TIME, Bool, List, Schema, String

EVENTS_MAX = 50


def url_field(*, required):
    return String(required=required, min_len=1, max_len=URL_MAX,
                  description="https URL, at most 2048 characters; private, loopback and localhost targets are refused")


def events_field(*, required):
    return List(String(min_len=1, max_len=100), required=required, min_items=1, max_items=EVENTS_MAX,
                description="event kinds from the spec's list; duplicates are dropped")


CREATE_WEBHOOK = Schema({
    "url": url_field(required=True),
    "events": events_field(required=True),
})

UPDATE_WEBHOOK = Schema({
    "url": url_field(required=False),
    "events": events_field(required=False),
    "is_active": Bool(),
}, partial=True, description="All fields optional; events replaces the list.")


WEBHOOK = {
    "type": "object",
    "properties": {
        "id": ID,
        "url": {"type": "string", "format": "uri"},
        "events": {"type": "array", "items": {"type": "string"}},
        "is_active": {"type": "boolean"},
        "created_at": TIME,
        "updated_at": TIME,
    },
}

WEBHOOK_WITH_SECRET = {
    "type": "object",
    "properties": {**WEBHOOK["properties"],
                   "secret": {"type": "string", "description": "whsec_ and the base64 of 32 random bytes: the key "
                                                         "of both delivery signatures; shown only in this response"}},
}


DELIVERY = {
    "type": "object",
    "properties": {
        "id": {**ID, "description": "the X-Service-Delivery-Id and webhook-id, the same on every attempt"},
        "webhook_id": ID,
        "event": {"type": "string"},
        "status": {"type": "string", "enum": ["pending", "delivered", "failed", "cancelled"]},
        "response_status": {"type": ["integer", "null"]},
        "delivered_at": NULLABLE_TIME,
        "retry_count": {"type": "integer", "description": "retries made (0 after the first attempt)"},
        "created_at": TIME,
        "redelivery_of": {"type": ["string", "null"], "format": "uuid",
                          "description": "the delivery this one sends again (POST .../redeliver); null otherwise"},
    },
}

DELIVERY_LIST = {"type": "array", "items": DELIVERY}
