"""Route registry and the OpenAPI 3.1 document built from it.

Areas add routes through ``Routes.add`` (never ``app.add_route`` directly), with the
tag they belong to.  Each resource documents its methods in a ``docs`` mapping built
with ``op(...)``; request bodies reuse the same ``shared.validation.Schema`` objects
that validate them, and security comes from the resource's ``access`` declarations.
"""
from __future__ import annotations

import re

from shared.errors import MalformedJson, PayloadTooLarge, UnsupportedMediaType
from shared.http import status_of

from controlplane.auth import CREDENTIAL

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_PARAM = re.compile(r"{([^}]+)}")

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


def op(summary, *, body=None, query=None, ok=200, response=None, errors=(), description=None, wrapped=True):
    """Describe one operation.

    body: a ``Schema``; query: {name: (json schema, description)}; response: a JSON
    schema of the payload (wrapped in ``data`` unless ``wrapped`` is False); errors:
    the domain error classes (``shared.errors``) the operation can raise, whose codes and
    statuses come from the same definitions the code raises.
    """
    return {
        "summary": summary, "body": body, "query": query or {}, "ok": ok, "response": response,
        "errors": tuple(errors), "description": description, "wrapped": wrapped,
    }


def error_pairs(errors) -> list[tuple[int, str]]:
    """(status, code) of each documented error class, in order, without repeats."""
    pairs = []
    for error in errors:
        pairs.extend(pair for pair in ((status_of(error), code) for code in error.codes()) if pair not in pairs)
    return pairs


class Routes:
    def __init__(self, app):
        self.app = app
        self.entries: list[tuple[str, object, str]] = []

    def add(self, path: str, resource, tag: str) -> None:
        self.app.add_route(path, resource)
        self.entries.append((path, resource, tag))


def methods_of(resource) -> list[str]:
    return [m for m in _METHODS if hasattr(resource, "on_" + m.lower())]


def build_document(routes: Routes, *, title: str, version: str, server_url: str) -> dict:
    paths: dict = {}
    tags = []
    for path, resource, tag in routes.entries:
        if tag not in tags:
            tags.append(tag)
        item = paths.setdefault(path, {})
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PARAM.findall(path)
        ]
        for method in methods_of(resource):
            doc = getattr(resource, "docs", {}).get(method) or op("(undocumented)")
            access = getattr(resource, "access", {}).get(method, CREDENTIAL)
            item[method.lower()] = _operation(doc, access, tag, params)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "servers": [{"url": server_url}],
        "tags": [{"name": t} for t in tags],
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR_SCHEMA},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "End-user RS256 access token, API key (sk_test_/sk_live_) or internal token."},
                "dashboardSession": {"type": "apiKey", "in": "cookie", "name": "iamgate_session"},
            },
        },
    }


def _operation(doc, access, tag, path_params) -> dict:
    operation = {"tags": [tag], "summary": doc["summary"], "description": " ".join(
        part for part in (doc["description"], access.describe()) if part)}
    parameters = list(path_params) + [
        {"name": name, "in": "query", "required": False, "schema": schema, "description": desc}
        for name, (schema, desc) in doc["query"].items()
    ]
    if parameters:
        operation["parameters"] = parameters
    if doc["body"] is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": doc["body"].json_schema()}},
        }
    if access.kind == "public":
        operation["security"] = []
    elif access.kind == "dashboard":
        operation["security"] = [{"dashboardSession": []}]
    else:
        operation["security"] = [{"bearer": []}]
    ok_content = None
    if doc["response"] is not None:
        schema = doc["response"]
        if doc["wrapped"]:
            schema = {"type": "object", "properties": {"data": schema}, "required": ["data"]}
        ok_content = {"application/json": {"schema": schema}}
    responses = {str(doc["ok"]): {"description": "Success", **({"content": ok_content} if ok_content else {})}}
    error_ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    errors = list(doc["errors"])
    if doc["body"] is not None:  # read_json and JsonBodyMiddleware refuse these for every body
        errors += [MalformedJson, PayloadTooLarge, UnsupportedMediaType]
    for status, code in error_pairs(errors):
        entry = responses.setdefault(str(status), {"description": "", "content": error_ref})
        entry["description"] = (entry["description"] + " " + code).strip()
    if access.kind != "public":
        responses.setdefault("401", {"description": "UNAUTHORIZED", "content": error_ref})
    operation["responses"] = responses
    return operation
