"""Pieces both services' OpenAPI documents share: the error envelope, the rate-limit
and request-id headers, one 5xx response, and error responses built from the domain
error classes (``shared.errors``), whose codes and statuses come from the same
definitions the code raises (``shared.http.status_of``).

An error response's description lists the codes it can carry, space-separated
(tests/core/test_error_catalogue.py reads them).
"""
from __future__ import annotations

from shared.http import status_of

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details", "request_id", "timestamp"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
                "request_id": {"type": "string"},
                "timestamp": {"type": "string", "format": "date-time"},
            },
        }
    },
}


# The spec's rate-limit headers (shared.http.error_headers) and the request id every
# response carries (shared.http.RequestIdMiddleware).
_DIGITS = {"type": "string", "pattern": "^[0-9]+$"}
HEADERS = {
    "X-RateLimit-Limit": {"description": "Requests allowed per window.", "schema": _DIGITS},
    "X-RateLimit-Remaining": {"description": "Requests left in the window.", "schema": _DIGITS},
    "X-RateLimit-Reset": {"description": "Unix time at which the window resets.", "schema": _DIGITS},
    "Retry-After": {"description": "Seconds to wait before retrying (RFC 9110 section 10.2.3).", "schema": _DIGITS},
    "X-Request-Id": {"description": "The request's id (echoed when the caller sent a well-formed one).",
                     "schema": {"type": "string"}},
}

ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}

# Every operation can fail unexpectedly (a bug, the database gone): one shared 5xx answer.
SHARED_RESPONSES = {
    "InternalError": {
        "description": "INTERNAL_ERROR: an unexpected failure; the body carries the request id to report.",
        "content": ERROR_CONTENT,
        "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
    },
}

_HEADERS_OF_STATUS = {
    429: ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"),
    503: ("Retry-After",),
}


# RFC 6749 section 5.2: the OAuth endpoints' error body (controlplane/oidc/errors.py).
OAUTH_ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}, "error_description": {"type": "string"}},
}

COMPONENTS = {
    "schemas": {"Error": ERROR_SCHEMA, "OAuthError": OAUTH_ERROR_SCHEMA},
    "headers": HEADERS,
    "responses": SHARED_RESPONSES,
}


def error_pairs(errors) -> list[tuple[int, str]]:
    """(status, code) of each documented error class, in order, without repeats."""
    pairs: list[tuple[int, str]] = []
    for error in errors:
        # TRANSITION (issue "one shape"): (status, code) tuples until every area uses classes.
        candidates = [error] if isinstance(error, tuple) else [(status_of(error), code) for code in error.codes()]
        pairs.extend(pair for pair in candidates if pair not in pairs)
    return pairs


def error_responses(errors) -> dict:
    """{status: response} for these error classes, plus the shared 500; each class's
    ``body_schema`` names the component schema of its body (the envelope, ``Error``,
    unless the class says otherwise)."""
    responses: dict = {}
    bodies: dict[str, list[str]] = {}
    for error in errors:
        for status, code in error_pairs([error]):
            entry = responses.setdefault(str(status), {"description": ""})
            if code not in entry["description"].split():
                entry["description"] = (entry["description"] + " " + code).strip()
            body = error.body_schema
            if body not in bodies.setdefault(str(status), []):
                bodies[str(status)].append(body)
    for status, entry in responses.items():
        refs = [{"$ref": f"#/components/schemas/{body}"} for body in bodies[status]]
        entry["content"] = {"application/json": {"schema": refs[0] if len(refs) == 1 else {"oneOf": refs}}}
        names = _HEADERS_OF_STATUS.get(int(status))
        if names:
            entry["headers"] = {name: {"$ref": f"#/components/headers/{name}"} for name in names}
    responses["500"] = {"$ref": "#/components/responses/InternalError"}
    return responses
