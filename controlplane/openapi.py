"""Route registry and the OpenAPI 3.1 document built from it.

Areas add routes through ``Routes.add`` (never ``app.add_route`` directly), with the
tag they belong to.  Each resource documents its methods in a ``docs`` mapping built
with ``op(...)``, and each operation's summary and description in the docstring of the
function that serves it (``controlplane.resource.Resource``); request bodies reuse the
same ``shared.validation.Schema`` objects that validate them, and security comes from
the resource's ``access`` declarations.
"""
from __future__ import annotations

import re

import falcon

from controlplane.auth import CREDENTIAL
from controlplane.dashboard.errors import DashboardMfaRequired, DashboardReauthRequired
from controlplane.oidc import cors
from controlplane.oidc.errors import InvalidRequest, TemporarilyUnavailable
from controlplane.oidc.wire import OAUTH_PATHS
from controlplane.store import StoreUnavailable
from shared.errors import (
    ApplicationNotFound,
    Forbidden,
    MalformedJson,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
    UnsupportedMediaType,
    ValidationFailed,
)
from shared.http import OPTIONAL_PAGE_QUERY
from shared.openapi import COMPONENTS, error_responses
from shared.validation import list_of

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_BODY_METHODS = ("POST", "PUT", "PATCH")
_PARAM = re.compile(r"{([^}]+)}")
# Gates that can refuse an authenticated caller (controlplane.auth.AuthMiddleware._gate).
_GATED = ("permission", "owner", "owner_or_permission", "user")

def op(summary=None, *, body=None, query=None, ok=200, response=None, errors=(), description=None, wrapped=True,
       also=None, path=None, store=True):
    """Describe one operation: its machine parts.  Its human text is the docstring of the
    function that serves it (``Resource.__init_subclass__`` reads it): the first paragraph
    is the summary, the rest the description; ``summary`` and ``description`` here are for
    an operation whose text cannot be a docstring (several routes served by one inherited
    responder with other words).

    body: a ``Schema``; query: {name: (json schema, description[, required])}; response: a JSON
    schema of the payload (wrapped in ``data`` unless ``wrapped`` is False); errors:
    the domain error classes (``shared.errors``) the operation can raise, whose codes and
    statuses come from the same definitions the code raises; also: other answers,
    {status: (json schema, description[, media type...])}, added beside what the status
    already documents (readiness's 503, the hosted pages' HTML); path: {name: json
    schema} for path parameters narrower than a string; store: False for the few
    operations that never read the store (so never answer its 503).
    """
    return {
        "summary": summary, "body": body, "query": query or {}, "ok": ok, "response": response,
        "errors": tuple(errors), "description": description, "wrapped": wrapped,
        "also": dict(also or {}), "path": dict(path or {}), "store": store,
    }


def list_op(item, *, errors, query=None, summary=None, description=None):
    """A GET answered by ``shared.http.respond_list``: the whole list, or the page that
    the optional ?page= and ?per_page= (after the route's own ``query``) ask for; ``item``
    is the JSON schema of one element.  A bad page parameter is ValidationFailed, added
    to ``errors``."""
    return op(summary, query={**(query or {}), **OPTIONAL_PAGE_QUERY}, response=list_of(item), wrapped=False,
              errors=[*errors, ValidationFailed], description=description)


class Routes:
    def __init__(self, app):
        self.app = app
        self.entries: list[tuple[str, object, str]] = []

    def add(self, path: str, resource, tag: str) -> None:
        self.app.add_route(path, resource)
        self.entries.append((path, resource, tag))

    def add_each(self, tag: str, service, resources: dict[str, type]) -> None:
        """An area whose resources all take its one service: ``{path: resource class}``."""
        for path, resource in resources.items():
            self.add(path, resource(service), tag)


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
            item[method.lower()] = _operation(doc, access, tag, params, method, resource, path)
            item[method.lower()]["operationId"] = operation_id(method, path)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "servers": [{"url": server_url}],
        "tags": [{"name": t} for t in tags],
        "paths": paths,
        "components": {
            **COMPONENTS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "End-user RS256 access token, API key (sk_test_/sk_live_) "
                                          "or internal token."},
                "dashboardSession": {"type": "apiKey", "in": "cookie", "name": "iamgate_session"},
            },
        },
    }


def operation_id(method: str, path: str) -> str:
    """The operation's ``operationId``: its method and path in camel case, a path
    parameter as ``By<Name>`` (``POST /api/dashboard/organizations/{organizationId}/members``
    is ``postApiDashboardOrganizationsByOrganizationIdMembers``); unique because the
    method and path are.  The console's parity table (``controlplane/console/parity.py``)
    names API operations by it."""
    words = []
    for segment in path.strip("/").split("/"):
        name = _PARAM.fullmatch(segment)
        if name:
            words.append("By" + name.group(1)[:1].upper() + name.group(1)[1:])
        else:
            words += [part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", segment) if part]
    return method.lower() + "".join(words)


def _operation(doc, access, tag, path_params, method="GET", resource=None, path="") -> dict:
    notes = (doc["description"], cors.DESCRIPTIONS.get(getattr(resource, "cors", None)), access.describe())
    operation = {"tags": [tag], "summary": doc["summary"], "description": " ".join(part for part in notes if part)}
    parameters = [{**p, "schema": doc["path"].get(p["name"], p["schema"])} for p in path_params] + [
        {"name": name, "in": "query", "required": bool(required and required[0]), "schema": schema,
         "description": desc}
        for name, (schema, desc, *required) in doc["query"].items()
    ]
    if parameters:
        operation["parameters"] = parameters
    accepted = tuple(getattr(resource, "accepted_media_types", (falcon.MEDIA_JSON,)))
    media_types = [m for m in accepted if m]
    if doc["body"] is not None:
        schema = doc["body"].json_schema()
        operation["requestBody"] = {
            "required": "" not in accepted,
            "content": {media: {"schema": schema} for media in media_types},
        }
    elif method in _BODY_METHODS:
        # JsonBodyMiddleware: even a POST that reads nothing must say application/json, so
        # a cross-site HTML form (which cannot send it) never reaches a cookie route.
        plain = accepted == (falcon.MEDIA_JSON,)
        refusal = "400 invalid_request" if path.startswith(OAUTH_PATHS) else "415"
        operation["requestBody"] = {
            "required": "" not in accepted,
            "description": ("No body is read; the" if plain else "The") + " Content-Type must be "
                           f"{' or '.join(media_types)} (a defence against cross-site form posts), else {refusal}"
                           + ("; or send no body." if "" in accepted else "."),
            "content": {media: {"schema": {"type": "object"}} for media in media_types},
        }
    if access.kind in ("public", "console"):  # a console page answers a signed-out browser too
        operation["security"] = []
    elif access.kind == "dashboard":
        operation["security"] = [{"dashboardSession": []}]
    else:
        operation["security"] = [{"bearer": []}]
    sensitive = method in getattr(resource, "sensitive", ())
    operation["responses"] = _responses(doc, access, method, accepted, path, sensitive)
    return operation


def implied_errors(doc, access, method, accepted, path, sensitive=False) -> list:
    """The errors every operation of this shape can answer, whatever its own code does:
    the middleware's (application lookup, authentication, gates, the API throttle, 415,
    which the OAuth endpoints answer as RFC 6749's ``invalid_request``) and
    ``read_json``'s (400 malformed, 413 too large), and the store's 503 (at the OAuth
    endpoints, RFC 6749's ``temporarily_unavailable``); on the dashboard's routes of an
    organization or an application, its ``require_mfa`` (``DashboardAccess``); on a
    ``sensitive`` method, the session's refusal without a recent sign-in (``dashboard.sudo``)."""
    errors = [DashboardReauthRequired] if sensitive else []
    if "{applicationId}" in path and access.kind != "dashboard":
        errors.append(ApplicationNotFound)
    if access.kind == "dashboard" and ("{applicationId}" in path or "{organizationId}" in path):
        errors.append(DashboardMfaRequired)
    if access.kind not in ("public", "console"):
        errors.append(Unauthorized)
    if access.kind in _GATED:
        errors.append(Forbidden)
    if access.kind not in ("public", "dashboard", "console", "internal"):
        errors.append(RateLimited)  # ApiThrottle, per credential
    if doc["body"] is not None:
        errors += [MalformedJson, PayloadTooLarge]
    if method in _BODY_METHODS and "" not in accepted:
        errors.append(InvalidRequest if path.startswith(OAUTH_PATHS) else UnsupportedMediaType)
    if doc["store"]:
        errors.append(TemporarilyUnavailable if path.startswith(OAUTH_PATHS) else StoreUnavailable)
    return errors


def _responses(doc, access, method, accepted, path, sensitive) -> dict:
    ok_content = None
    if doc["response"] is not None:
        schema = doc["response"]
        if doc["wrapped"]:
            schema = {"type": "object", "properties": {"data": schema}, "required": ["data"]}
        ok_content = {"application/json": {"schema": schema}}
    responses = {str(doc["ok"]): {"description": "Success", **({"content": ok_content} if ok_content else {})}}
    responses.update(error_responses([*doc["errors"], *implied_errors(doc, access, method, accepted, path, sensitive)]))
    for status, (schema, description, *media) in doc["also"].items():
        entry = responses.setdefault(str(status), {"description": description})
        if description not in entry["description"]:
            entry["description"] = f"{entry['description']} (also: {description})"
        for media_type in media or ["application/json"]:
            entry.setdefault("content", {})[media_type] = {"schema": schema}
    return responses
