"""The authorization check's wire contract, shared by the control plane and the
decision service so both validate every request the same way and give the same errors.

Parameters (spec "Authorization checks"): user_id, permission (``resource:action``,
spec "Permission") or permissions (1 to 50, spec "Limits"), resource and context
(objects, ABAC), plus ``scope`` (or ``context.scope``) and ``min_revision`` (an
``X-Iamgate-Revision``, docs/decision-service.md).  One bad field answers 400
VALIDATION_INVALID_FORMAT, several VALIDATION_MULTIPLE_ERRORS.  ``Permission`` and
``Scope`` are also the role and assignment fields.
"""
from __future__ import annotations

import re
from typing import Any

from shared.http import dumps
from shared.rbac import PERMISSION_PATTERN, is_valid_permission
from shared.validation import Int, Invalid, List, Object, Schema, String, object_schema

BULK_MAX = 50
PERMISSION_MAX = 255
SCOPE_MAX = 255
ATTRIBUTES_MAX_BYTES = 64 * 1024


# Permission names already found valid: an application checks a bounded set of names,
# so validating each once keeps a 50-permission bulk check cheap. Bounded against junk.
_VALID: dict[str, None] = {}
_VALID_MAX = 10000


class Permission(String):
    def __init__(self, **kw):
        super().__init__(max_len=PERMISSION_MAX, strip=False, **kw)

    def clean(self, value):
        if type(value) is str and value in _VALID:
            return value
        value = super().clean(value)
        if not is_valid_permission(value):
            raise Invalid(f"{value!r} is not a permission of the form resource:action "
                          "(letters, digits, _, - or * in each part)")
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID[value] = None
        return value

    def schema(self):
        return {**super().schema(), "pattern": PERMISSION_PATTERN.pattern}


def _known_permissions(value) -> list | None:
    """``Permissions().clean(value)`` when ``value`` is a list of 1 to 50 names validated
    before; None says nothing (the general path gives the result or the error)."""
    if type(value) is list and 1 <= len(value) <= BULK_MAX:
        try:
            known = _VALID.keys() >= set(value)  # the keys are strings: nothing else matches
        except TypeError:  # an unhashable item
            return None
        if known:
            return list(dict.fromkeys(value))
    return None


class Permissions(List):
    """The bulk check's list: duplicates answered once, in the order first given."""

    def __init__(self, **kw):
        super().__init__(Permission(), min_items=1, max_items=BULK_MAX, **kw)

    def clean(self, value):
        known = _known_permissions(value)
        return known if known is not None else list(dict.fromkeys(super().clean(value)))

    def schema(self):
        return {**super().schema(), "items": Permission().schema()}


class Scope(String):
    """An assignment scope: any non-empty label without control characters."""

    _CONTROL = re.compile(r"[\x00-\x1f\x7f]")

    def __init__(self, **kw):
        super().__init__(min_len=1, max_len=SCOPE_MAX, **kw)

    def clean(self, value):
        value = super().clean(value)
        if self._CONTROL.search(value):
            raise Invalid("must not contain control characters")
        return value

    def schema(self):
        return {**super().schema(), "pattern": r"^(?=.*\S)[^\u0000-\u001f\u007f]+$"}


_USER_ID = String(required=True, max_len=255, description="the user to check (an unknown user is not allowed)")
_SCOPE = Scope(nullable=True, description="check at this scope; default context.scope, else unscoped only")
_MIN_REVISION = Int(min=0, nullable=True, description="answer from data at least as fresh as this X-Iamgate-Revision")
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
    "permissions": Permissions(required=True, description=f"1 to {BULK_MAX} permissions; duplicates answered once"),
    "resource": _RESOURCE,
    "context": _CONTEXT,
    "scope": _SCOPE,
    "min_revision": _MIN_REVISION,
})


def query_parameters(schema: Schema) -> dict:
    """``controlplane.openapi.op(query=...)`` entries for a schema read from the query
    string: {name: (JSON schema, description, required)}; a query value is never null."""
    out = {}
    for name, field in schema.fields.items():
        json_schema = field.schema()
        if isinstance(json_schema.get("type"), list):
            json_schema["type"] = next(t for t in json_schema["type"] if t != "null")
        out[name] = (json_schema, json_schema.pop("description", ""), field.required)
    return out


# GET check: an empty scope is no scope (query_values), as in the JSON checks.
CHECK_QUERY_PARAMETERS = query_parameters(CHECK_QUERY)


def check_query(req) -> dict:
    """The GET check's validated parameters. The common request -- a user id and a
    permission seen before, nothing else -- skips the general path, which gives the same
    values (or the error) for everything else."""
    params = req.params
    if len(params) == 2:
        user_id, permission = params.get("user_id"), params.get("permission")
        if type(user_id) is str and type(permission) is str and known_valid(user_id, permission):
            return {"user_id": user_id, "permission": permission}
    return CHECK_QUERY.validate(query_values(req))


# The JSON checks' fast path (``body_values``) takes bodies of at most FAST_BODY_BYTES with at
# most FAST_BODY_BRACKETS opening brackets. Re-serialised compactly, as ``Object`` bounds
# resource and context, JSON is at most 4.5 times its source (``1e15`` is written
# ``1000000000000000.0``, a two-byte UTF-8 character ``\u00e9``), so such a body's resource or
# context is always within ATTRIBUTES_MAX_BYTES; and so few brackets are far from the
# recursion limit that re-serialising a deeply nested value would hit.
FAST_BODY_BYTES = ATTRIBUTES_MAX_BYTES // 8
FAST_BODY_BRACKETS = 32
_ABSENT = object()


def body_values(body, raw: bytes, *, bulk: bool) -> dict | None:
    """What ``CHECK.validate(body)`` (``bulk``: ``CHECK_BULK``) returns, for the common body
    (``body`` parsed from ``raw``): a plain user id, permission names validated before,
    resource and context absent, null or small objects. None says nothing: the caller then
    takes the schema's general path, which gives the same values or the error. The
    schema walk and re-serialising resource and context to bound their size cost more
    than the rest of a POST check's validation."""
    if (type(body) is not dict or len(raw) > FAST_BODY_BYTES
            or raw.count(b"{") + raw.count(b"[") > FAST_BODY_BRACKETS):
        return None
    user_id = body.get("user_id")
    if (type(user_id) is not str or not 0 < len(user_id) <= 255
            or user_id[0].isspace() or user_id[-1].isspace()):  # what String(strip=True) leaves as it is
        return None
    if bulk:
        permissions = _known_permissions(body.get("permissions"))
        if permissions is None:
            return None
        values: dict[str, Any] = {"user_id": user_id, "permissions": permissions}
    else:
        permission = body.get("permission")
        if type(permission) is not str or permission not in _VALID:
            return None
        values = {"user_id": user_id, "permission": permission}
    resource = body.get("resource", _ABSENT)
    if resource is not _ABSENT:
        if resource is not None and type(resource) is not dict:
            return None
        values["resource"] = resource
    context = body.get("context", _ABSENT)
    if context is not _ABSENT:
        if context is not None and type(context) is not dict:
            return None
        values["context"] = context
    if len(values) < len(body):  # other fields: scope and min_revision through the schema's fields
        for name, field in (("scope", _SCOPE), ("min_revision", _MIN_REVISION)):
            value = body.get(name, _ABSENT)
            if value is not _ABSENT:
                if value is not None:
                    try:
                        value = field.clean(value)
                    except Invalid:
                        return None
                values[name] = value
    return values


# The check routes, for both services: Falcon's URI templates and the paths they match.
CHECK_PATH_PREFIX = "/api/v1/applications/"
CHECK_PATH_SUFFIX = "/authz/check"
CHECK_BULK_PATH_SUFFIX = CHECK_PATH_SUFFIX + "-bulk"
CHECK_ROUTE = CHECK_PATH_PREFIX + "{applicationId}" + CHECK_PATH_SUFFIX
CHECK_BULK_ROUTE = CHECK_PATH_PREFIX + "{applicationId}" + CHECK_BULK_PATH_SUFFIX

# The answers (CHECK_RESPONSE, CHECK_ABAC_RESPONSE, BULK_RESPONSE) as ``shared.http.dumps``
# writes them, by hand: a valid permission holds only [A-Za-z0-9_*:-], nothing JSON would
# escape; a user id may need escaping.
_TRUE_FALSE = {True: "true", False: "false"}


def check_text(permission: str, allowed: bool, cached: bool) -> str:
    """A GET check's answer."""
    return f'{{"allowed":{_TRUE_FALSE[allowed]},"permission":"{permission}","cached":{_TRUE_FALSE[cached]}}}'


def abac_check_text(permission: str, allowed: bool, cached: bool, abac_evaluated: bool, policies_checked: int) -> str:
    """A POST check's answer."""
    return (f'{{"allowed":{_TRUE_FALSE[allowed]},"permission":"{permission}",'
            f'"cached":{_TRUE_FALSE[cached]},"abac_evaluated":{_TRUE_FALSE[abac_evaluated]},'
            f'"policies_checked":{int(policies_checked)}}}')


def bulk_text(user_id: str, results) -> str:
    """A bulk check's answer; ``results`` are (permission, allowed) pairs in answer order."""
    body = ",".join([f'"{permission}":{_TRUE_FALSE[allowed]}' for permission, allowed in results])
    return f'{{"user_id":{dumps(user_id)},"results":{{{body}}}}}'


def path_application(path: str, suffix: str) -> str | None:
    """The ``{applicationId}`` of ``/api/v1/applications/{applicationId}<suffix>``, or None
    for any other path (a trailing slash, a non-ASCII id: the router decides those)."""
    if not (path.startswith(CHECK_PATH_PREFIX) and path.endswith(suffix)):
        return None
    app_id = path[len(CHECK_PATH_PREFIX):-len(suffix)]
    # Non-ASCII: UTF-8 tunnelled as latin-1 (PEP 3333), which Falcon decodes.
    if not app_id or "/" in app_id or not app_id.isascii():
        return None
    return app_id


def plain_get_check(environ: dict) -> tuple[str, str, str] | None:
    """(applicationId, user_id, permission) of the plain form of ``GET .../authz/check``,
    the request a tenant's service sends on every request it authorizes, read straight
    from a WSGI environ; None for anything else, which the Falcon route then answers.

    Plain: the path exactly, and exactly the two parameters, in either order, non-empty,
    with nothing percent-encoded, that ``CHECK_QUERY`` accepts as they are (a permission
    name seen for the first time is validated here, and remembered). The method is the
    caller's to check."""
    app_id = path_application(environ.get("PATH_INFO", ""), CHECK_PATH_SUFFIX)
    if app_id is None:
        return None
    query = environ.get("QUERY_STRING", "")
    if "%" in query or "+" in query:
        return None
    first, _, second = query.partition("&")
    name, _, value = first.partition("=")
    other_name, _, other_value = second.partition("=")
    if name == "user_id" and other_name == "permission":
        user_id, permission = value, other_value
    elif name == "permission" and other_name == "user_id":
        user_id, permission = other_value, value
    else:
        return None
    if "&" in second or not _plain_values(user_id, permission):  # "&": a third parameter, either order
        return None
    return app_id, user_id, permission


def _plain_values(user_id: str, permission: str) -> bool:
    """Whether the schema takes these two parameters as they are. A permission name seen
    for the first time is validated here (the schema remembers it), so that even the
    first check of a name needs no Falcon; anything the schema refuses goes to Falcon,
    which reports it after checking the credentials, as for every invalid request."""
    if known_valid(user_id, permission):
        return True
    try:
        CHECK_QUERY.validate({"user_id": user_id, "permission": permission})
    except Exception:
        return False
    return known_valid(user_id, permission)


def known_valid(user_id: str, permission: str) -> bool:
    """True when the schema would accept this user id and permission as they are: the
    permission was validated before and the user id is a plain non-empty string. False
    says nothing: the caller then takes the general path."""
    return (permission in _VALID and 0 < len(user_id) <= 255
            and not user_id[0].isspace() and not user_id[-1].isspace())


def query_values(req) -> dict:
    """The GET check's query parameters as the schema takes them: an empty scope is no
    scope, and min_revision is converted when it is a number (the schema reports it if not)."""
    values = {}
    for name in ("user_id", "permission", "scope", "min_revision"):
        value = req.get_param(name)
        if value is not None:
            values[name] = value
    if values.get("scope") == "":
        del values["scope"]
    raw = values.get("min_revision")
    if raw is not None:
        try:
            values["min_revision"] = int(raw)
        except ValueError:
            pass
    return values


# ---------------------------------------------------------------- responses (no data wrapper)

CHECK_RESPONSE: dict[str, Any] = object_schema({
    "allowed": {"type": "boolean"},
    "permission": {"type": "string"},
    "cached": {"type": "boolean", "description": "answered from the permission check cache"},
})

CHECK_ABAC_RESPONSE = object_schema({
    **CHECK_RESPONSE["properties"],
    "abac_evaluated": {"type": "boolean", "description": "an active policy covered the permission"},
    "policies_checked": {"type": "integer", "description": "active policies covering the permission"},
}, required=["allowed", "permission", "cached", "abac_evaluated", "policies_checked"])

BULK_RESPONSE = object_schema({
    "user_id": {"type": "string"},
    "results": {"type": "object", "additionalProperties": {"type": "boolean"}},
})
