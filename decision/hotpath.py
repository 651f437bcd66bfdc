"""The common checks, answered without Falcon's request and response objects.

``GET /api/v1/applications/{applicationId}/authz/check?user_id=...&permission=...`` is
what a tenant's service sends on every request it authorizes, and ``POST`` to the same
path (with resource and context, for ABAC) or to ``.../authz/check-bulk`` is the next most
common. Falcon's request and response objects, routing and three middlewares cost about
as much as the check itself. ``HotCheck`` answers the plain form of these requests at the
WSGI level, through the same ``Lookup`` as the Falcon resources (so the same credentials,
cache, stream trust rule and errors) and with the same headers, body, request id and
metrics.

"Plain" means, for a GET check: exactly the two parameters, non-empty, with nothing
percent-encoded, that the route's schema (``shared.checks.CHECK_QUERY``) accepts as they
are (``shared.checks.plain_get_check``, the control plane's hot path's rule too).
For a POST: ``Content-Type: application/json``, a ``Content-Length`` within the body
limit, a body that parses to a JSON object and that the route's own schema
(``shared.checks.CHECK`` / ``CHECK_BULK``, the common body through its fast path
``shared.checks.body_values``) accepts. Anything else (``scope`` or
``min_revision`` in a query, encoded characters, a trailing slash, a non-ASCII path, an
invalid permission name, a malformed query, another media type, a chunked or empty or
malformed or invalid body) returns ``None`` before anything was looked up,
and Falcon answers it, so validation errors keep one implementation and their order
(credentials first) is Falcon's. Errors raised after that point (401, 403, 404, 503) are
rendered here with the same envelope: running the request again through Falcon would
repeat a control-plane lookup that just failed. Each answer is logged as Falcon's
middleware logs it (``shared.logs.RequestLog``, sampled when busy).

``Probes`` answers ``GET /healthz`` and ``GET /readyz`` the same way. With both, a
sidecar is ready, and answers its common checks, without importing Falcon, which
``decision.app`` builds on the first request that needs it (a sidecar starts sooner).
"""
from __future__ import annotations

import io
import time

import orjson

from decision.service import Lookup
from shared.checks import (
    CHECK,
    CHECK_BULK,
    CHECK_BULK_PATH_SUFFIX,
    CHECK_BULK_ROUTE,
    CHECK_PATH_SUFFIX,
    CHECK_ROUTE,
    body_values,
    path_application,
    plain_get_check,
)
from shared.errors import DomainError
from shared.http import MAX_BODY_BYTES, MEDIA_JSON, domain_error_answer, dumps, parse_json, unexpected_error_answer
from shared.httpserver import status_line
from shared.request_ids import resolve_request_id

_JSON = MEDIA_JSON
_OK = status_line(200)
_NO_PEER = "127.0.0.1"  # Falcon's ``req.remote_addr`` without REMOTE_ADDR: the request line is the same


# A run of 19 digits or more (found as 19 zeros once every digit reads as zero, which costs
# a twentieth of a regular expression's search): orjson reads an integer beyond 64 bits as
# a float, json as an int.
_DIGITS_AS_ZEROS = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * 19

# POST routes: path suffix -> (route template, schema, bulk, answer)
_POSTS = ((CHECK_PATH_SUFFIX, CHECK_ROUTE, CHECK, False, Lookup.abac_check_text),
          (CHECK_BULK_PATH_SUFFIX, CHECK_BULK_ROUTE, CHECK_BULK, True, Lookup.bulk_text))


def parse_body(raw: bytes):
    """``shared.http.parse_json(raw.decode())``, as ``shared.http.read_json`` parses a body
    less its encoding detection (a body that is not UTF-8, or starts with a BOM, raises),
    through orjson, which parses a check body several times faster. orjson is asked only
    where its answer is parse_json's: it refuses what parse_json also refuses (malformed
    JSON, invalid UTF-8, a BOM, control characters, lone surrogates), but also some
    documents json takes (NaN and Infinity, numbers out of a float's range, nesting past
    1024), and it reads integers beyond 64 bits as floats: those bodies, and any holding 19
    digits in a row, are parsed by parse_json. tests/decision/test_parse_body.py holds the
    two to each other."""
    # find, not "in": bytes.__contains__ first tries its argument as an integer, and the
    # TypeError it raises and clears costs as much as the search
    if raw.translate(_DIGITS_AS_ZEROS).find(_LONG_DIGITS) < 0:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return parse_json(raw.decode())


class HotCheck:
    def __init__(self, service, metrics, request_log):
        self._service = service
        self._metrics = metrics
        self._request_log = request_log

    def __call__(self, environ: dict, start_response) -> list[bytes] | None:
        """The answer's body, or None when this request is not the plain form."""
        method = environ["REQUEST_METHOD"]
        if method == "GET":
            return self._get(environ, start_response)
        if method == "POST":
            return self._post(environ, start_response)
        return None

    def _get(self, environ: dict, start_response) -> list[bytes] | None:
        plain = plain_get_check(environ)  # the rule the control plane's hot path follows too
        if plain is None:
            return None
        app_id, user_id, permission = plain
        return self._answer(environ, start_response, "GET", CHECK_ROUTE, app_id,
                            lambda lookup: lookup.check_text(user_id, permission))

    def _post(self, environ: dict, start_response) -> list[bytes] | None:
        path = environ.get("PATH_INFO", "")
        for suffix, route, schema, bulk, text_of in _POSTS:  # noqa: B007 -- the one found is used after the loop
            if path.endswith(suffix):
                break
        else:
            return None
        app_id = path_application(path, suffix)
        if app_id is None:
            return None
        media = environ.get("CONTENT_TYPE", "")
        if media != _JSON and media.partition(";")[0].strip().lower() != _JSON:
            return None  # Falcon's JsonBodyMiddleware answers 415
        try:
            length = int(environ.get("CONTENT_LENGTH") or "")
        except ValueError:
            return None
        if not 0 < length <= MAX_BODY_BYTES:
            return None
        raw = environ["wsgi.input"].read(length)
        try:
            body = parse_body(raw)  # a body that is not UTF-8 or starts with a BOM goes to Falcon
            values = body_values(body, raw, bulk=bulk)
            if values is None and type(body) is dict:
                values = schema.validate(body)
        except Exception:  # malformed JSON or a validation error: Falcon reports it, after the credentials
            values = None
        if values is None:
            environ["wsgi.input"] = io.BytesIO(raw)  # Falcon reads the body from the start
            return None
        return self._answer(environ, start_response, "POST", route, app_id, lambda lookup: text_of(lookup, values))

    def _answer(self, environ, start_response, method: str, route: str, app_id: str, answer) -> list[bytes]:
        started = time.perf_counter()
        request_id = resolve_request_id(environ.get("HTTP_X_REQUEST_ID"))
        headers = [("content-type", _JSON), ("x-request-id", request_id)]
        try:
            lookup = self._service.begin(app_id, request_id)
            lookup.authenticate(environ.get("HTTP_AUTHORIZATION"))
            status, text = 200, answer(lookup)
        except DomainError as error:
            status, text, extra = domain_error_answer(error, request_id)
            headers += extra.items()
        except Exception:
            status, text = unexpected_error_answer(request_id)
        body = text.encode()
        headers.append(("content-length", str(len(body))))
        start_response(_OK if status == 200 else status_line(status), headers)
        self._metrics.record(method, route, status, started)
        self._request_log(request_id, method, route, status, started, environ.get("REMOTE_ADDR", _NO_PEER),
                          environ.get("HTTP_X_FORWARDED_FOR"), app_id)
        return [body]


_PROBE_ROUTES = ("/healthz", "/readyz")


class Probes:
    """``GET /healthz`` and ``GET /readyz`` as the Falcon routes (``decision.resources``)
    answer them: the same status, JSON body, request id and metrics. Any other method,
    or the path with a trailing slash, returns None and Falcon answers."""

    def __init__(self, follower, metrics, request_log):
        self._follower = follower
        self._metrics = metrics
        self._request_log = request_log

    def __call__(self, environ: dict, start_response) -> list[bytes] | None:
        route = environ.get("PATH_INFO", "")
        if route not in _PROBE_ROUTES or environ["REQUEST_METHOD"] != "GET":
            return None
        started = time.perf_counter()
        if route == "/healthz":
            status, body = 200, health_document()
        else:
            ready = self._follower.healthy()
            status, body = (200 if ready else 503), readiness_document(ready)
        data = dumps(body).encode()
        request_id = resolve_request_id(environ.get("HTTP_X_REQUEST_ID"))
        start_response(status_line(status), [
            ("content-type", _JSON), ("x-request-id", request_id), ("content-length", str(len(data)))])
        self._metrics.record("GET", route, status, started)
        self._request_log(request_id, "GET", route, status, started, environ.get("REMOTE_ADDR", _NO_PEER),
                          environ.get("HTTP_X_FORWARDED_FOR"), None)
        return [data]


def health_document() -> dict:
    return {"status": "ok"}


def readiness_document(ready: bool) -> dict:
    return {"status": "ready" if ready else "unavailable", "stream": "connected" if ready else "disconnected"}
