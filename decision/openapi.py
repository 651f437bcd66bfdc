"""The decision service's own OpenAPI 3.1 document (``GET /openapi.json``).

Its check routes are the control plane's, path for path (spec, "Authorization checks"),
so the request and response schemas come from the same definitions both services
validate with (``shared.checks``), and the error envelope, headers and shared 5xx from
``shared.openapi``. Register with
``app.add_route("/openapi.json", OpenApiDocument())`` in ``decision.app.create_app``.
"""
from __future__ import annotations

import falcon

from decision.service import DecisionUnavailable
from shared import checks
from shared.errors import (
    MalformedJson,
    NotFound,
    PayloadTooLarge,
    PermissionMissing,
    RevisionAhead,
    Unauthorized,
    UnsupportedMediaType,
    ValidationFailed,
)
from shared.http import dumps
from shared.openapi import COMPONENTS, error_responses

_APP_ID = {"name": "applicationId", "in": "path", "required": True, "schema": {"type": "string"}}
_SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]
_CALLER = ("Bearer: an API key of the application with permission authz:check, or an end-user access token "
           "whose user holds authz:check. Answered from this service's cache, kept fresh by the control "
           "plane's change stream; 503 DECISION_UNAVAILABLE (fail closed) when it cannot be.")
# Every check: the caller's credential and gate, the application, the inputs, freshness.
_CHECK_ERRORS = [ValidationFailed, RevisionAhead, Unauthorized, PermissionMissing, NotFound, DecisionUnavailable]
_BODY_ERRORS = [MalformedJson, PayloadTooLarge, UnsupportedMediaType]


def _ok(schema: dict, description: str = "Success") -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema.json_schema()}}}


def _check_operations() -> dict:
    get = {
        "tags": ["authz"], "summary": "Check one permission (RBAC)", "description": _CALLER,
        "security": _SECURITY,
        "parameters": [_APP_ID] + [
            {"name": name, "in": "query", "required": required, "schema": schema, "description": desc}
            for name, (schema, desc, required) in checks.CHECK_QUERY_PARAMETERS.items()
        ],
        "responses": {"200": _ok(checks.CHECK_RESPONSE), **error_responses(_CHECK_ERRORS)},
    }
    post = {
        "tags": ["authz"], "summary": "Check one permission with ABAC policies", "description": _CALLER,
        "security": _SECURITY, "parameters": [_APP_ID], "requestBody": _body(checks.CHECK),
        "responses": {"200": _ok(checks.CHECK_ABAC_RESPONSE), **error_responses(_CHECK_ERRORS + _BODY_ERRORS)},
    }
    bulk = {
        "tags": ["authz"], "summary": f"Check 1 to {checks.BULK_MAX} permissions at once", "description": _CALLER,
        "security": _SECURITY, "parameters": [_APP_ID], "requestBody": _body(checks.CHECK_BULK),
        "responses": {"200": _ok(checks.BULK_RESPONSE), **error_responses(_CHECK_ERRORS + _BODY_ERRORS)},
    }
    return {checks.CHECK_ROUTE: {"get": get, "post": post}, checks.CHECK_BULK_ROUTE: {"post": bulk}}


def _ops_operations() -> dict:
    status = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
    ready = {"type": "object", "required": ["status", "stream"], "properties": {
        "status": {"type": "string", "enum": ["ready", "unavailable"]},
        "stream": {"type": "string", "enum": ["connected", "disconnected"]}}}
    public = {"tags": ["ops"], "security": []}
    return {
        "/healthz": {"get": {**public, "summary": "Liveness: the process answers",
                             "responses": {"200": _ok(status), **error_responses([])}}},
        "/readyz": {"get": {**public, "summary": "Readiness: the change stream is connected and alive",
                            "responses": {"200": _ok(ready), "503": _ok(ready, "Not ready"),
                                          **error_responses([])}}},
        "/metrics": {"get": {**public, "summary": "Prometheus metrics of this worker (text exposition format)",
                             "description": "With IAMGATE_METRICS_TOKEN set, needs Authorization: Bearer <that "
                                            "token> (401 otherwise), as the control plane's /metrics.",
                             "responses": {"200": {"description": "Success", "content": {"text/plain": {}}},
                                           **error_responses([Unauthorized])}}},
        "/openapi.json": {"get": {**public, "summary": "This OpenAPI 3.1 document",
                                  "responses": {"200": _ok({"type": "object"}), **error_responses([])}}},
    }


def build_document(*, version: str = "1.0.0", server_url: str = "/") -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "iamgate decision service", "version": version},
        "servers": [{"url": server_url}],
        "tags": [{"name": "authz"}, {"name": "ops"}],
        "paths": {**_check_operations(), **_ops_operations()},
        "components": {
            **COMPONENTS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "API key (sk_test_/sk_live_) or end-user RS256 access token."},
            },
        },
    }


class OpenApiDocument:
    """``GET /openapi.json``; the document is built once (the routes are fixed)."""

    def __init__(self, **options):
        self._text = dumps(build_document(**options))

    def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_JSON
        resp.text = self._text
