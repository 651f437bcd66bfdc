"""The GET check's common case, answered without Falcon's request and response objects.

``GET /api/v1/applications/{applicationId}/authz/check?user_id=...&permission=...`` is
what a tenant's service sends on every request it authorizes, and Falcon's request and
response objects, routing and three middlewares cost about as much as the check itself.
``HotCheck`` answers the plain form of that request at the WSGI level, through the same
``Lookup`` as the Falcon resource (so the same credentials, cache, stream trust rule and
errors) and with the same headers, body, request id and metrics.

"Plain" means: exactly the two parameters, non-empty, with nothing percent-encoded, and
a permission name already validated once (``shared.checks.known_valid``). Anything else
(``scope``, ``min_revision``, encoded characters, a trailing slash, a non-ASCII path, a
new permission name, a malformed query) returns ``None`` and Falcon answers it, so
validation errors keep one implementation. Errors raised after that point (401, 403, 404,
503) are rendered here with the same envelope: running the request again through Falcon
would repeat a control-plane lookup that just failed.
"""
from __future__ import annotations

import logging
import time

import falcon

from shared.checks import known_valid
from shared.errors import DomainError
from shared.http import dumps, error_document, error_headers, status_of

from decision.resources import check_text

# The logger of shared.http's handler for unexpected errors, whose log line this repeats.
log = logging.getLogger("iamgate.http")

ROUTE = "/api/v1/applications/{applicationId}/authz/check"
_PREFIX = "/api/v1/applications/"
_SUFFIX = "/authz/check"
_JSON = falcon.MEDIA_JSON
_OK = falcon.code_to_http_status(200)


class HotCheck:
    def __init__(self, service, metrics, request_ids):
        self._service = service
        self._metrics = metrics
        self._request_ids = request_ids

    def __call__(self, environ: dict, start_response) -> list[bytes] | None:
        """The answer's body, or None when this request is not the plain form."""
        path = environ.get("PATH_INFO", "")
        if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
            return None
        app_id = path[len(_PREFIX):-len(_SUFFIX)]
        # Non-ASCII: UTF-8 tunnelled as latin-1 (PEP 3333), which Falcon decodes.
        if not app_id or "/" in app_id or not app_id.isascii():
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
        if "&" in second or not known_valid(user_id, permission):  # a third parameter, either order
            return None

        started = time.perf_counter()
        request_id = self._request_ids.resolve(environ.get("HTTP_X_REQUEST_ID"))
        headers = [("content-type", _JSON), ("x-request-id", request_id)]
        try:
            lookup = self._service.begin(app_id)
            lookup.authenticate(environ.get("HTTP_AUTHORIZATION"))
            decisions, cached = lookup.decide(user_id, (permission,), scope=None, min_revision=None, abac=False)
            status, text = 200, check_text(permission, decisions[permission].allowed, cached)
        except DomainError as error:
            status = status_of(type(error))
            text = dumps(error_document(error.code, error.message, error.details, request_id))
            headers += error_headers(error).items()
        except Exception:
            log.exception("unhandled error", extra={"request_id": request_id})
            status = 500
            text = dumps(error_document("INTERNAL_ERROR", "An unexpected error occurred.", None, request_id))
        body = text.encode()
        headers.append(("content-length", str(len(body))))
        start_response(_OK if status == 200 else falcon.code_to_http_status(status), headers)
        self._metrics.record("GET", ROUTE, status, started)
        return [body]
