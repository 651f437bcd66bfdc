"""The audit routes' query parameters: the filters, the cursor and the page size."""
from __future__ import annotations

from shared.errors import ValidationFailed
from shared.timeutil import parse_iso

RESULTS = ("success", "failure")
TEXT_MAX = 200
DEFAULT_LIMIT, MAX_LIMIT = 50, 100
TEXT_FILTERS = {
    "action": "a prefix of the action (user. lists user.login, user.created...)",
    "actor_id": "the actor's id",
    "target_id": "the target's id",
    "ip": "the client address, exactly",
}

FILTER_QUERY = {
    **{name: ({"type": "string", "maxLength": TEXT_MAX}, text) for name, text in TEXT_FILTERS.items()},
    "result": ({"type": "string", "enum": list(RESULTS)}, "success or failure"),
    "since": ({"type": "string", "format": "date-time"}, "records at or after this time (ISO 8601)"),
    "until": ({"type": "string", "format": "date-time"}, "records before this time (ISO 8601)"),
}
PAGE_QUERY = {
    "cursor": ({"type": "string"}, "the next_cursor of the previous page"),
    "limit": ({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}, "page size"),
}

_ACTOR = {"type": "object", "properties": {"type": {"type": "string"}, "id": {"type": ["string", "null"]},
                                           "display": {"type": ["string", "null"]}}}
# The record as the API shows it, exactly these fields (docs/audit.md, "Fields").
_RECORD_FIELDS = {
    "id": {"type": "string"}, "at": {"type": "string", "format": "date-time"}, "action": {"type": "string"},
    "result": {"type": "object", "properties": {"status": {"type": "string", "enum": list(RESULTS)},
                                                "reason": {"type": "string"}}},
    "actor": _ACTOR, "target": _ACTOR,
    "application_id": {"type": ["string", "null"]}, "organization_id": {"type": ["string", "null"]},
    "request_id": {"type": ["string", "null"]}, "ip": {"type": ["string", "null"]},
    "user_agent": {"type": ["string", "null"]}, "data": {"type": "object"},
    "prev_hash": {"type": ["string", "null"]}, "hash": {"type": ["string", "null"]},
}
RECORD = {"type": "object", "required": list(_RECORD_FIELDS), "additionalProperties": False,
          "properties": _RECORD_FIELDS}
PAGE = {"type": "object", "properties": {"data": {"type": "array", "items": RECORD},
                                         "next_cursor": {"type": ["string", "null"]}}}


def filters(req) -> dict:
    """The cleaned filters; every bad one is named in one 400."""
    errors, values = {}, {}
    for name in TEXT_FILTERS:
        raw = req.get_param(name)
        if raw is None or raw == "":
            continue
        if len(raw) > TEXT_MAX:
            errors[name] = f"must be at most {TEXT_MAX} characters"
        else:
            values[name] = raw
    result = req.get_param("result")
    if result:
        if result in RESULTS:
            values["result"] = result
        else:
            errors["result"] = "must be success or failure"
    for name in ("since", "until"):
        raw = req.get_param(name)
        if raw:
            try:
                values[name] = parse_iso(raw)
            except ValueError:
                errors[name] = "must be an ISO 8601 date-time, e.g. 2026-11-27T00:00:00Z"
    if "since" in values and "until" in values and values["since"] > values["until"]:
        errors["until"] = "must not be before since"
    if errors:
        raise ValidationFailed(errors)
    return values


def limit(req) -> int:
    raw = req.get_param("limit")
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise ValidationFailed({"limit": f"must be an integer from 1 to {MAX_LIMIT}"})
    return int(raw)
