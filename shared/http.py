"""HTTP conventions shared by both Falcon apps.

- every response carries ``X-Request-Id``;
- every error (our own, Falcon's 404/405, malformed JSON, 415, unexpected exceptions)
  is rendered as the spec's error envelope by ``install_error_handlers``;
- POST/PUT/PATCH bodies must be ``application/json`` (a CSRF defence for the cookie
  dashboard too); ``read_json`` parses them with a size bound (``parse_json``: json, less
  lone surrogates);
- ``page_params``/``paginated`` implement the spec's list envelope.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
import re
from datetime import datetime
from typing import TYPE_CHECKING

from shared.errors import (
    BadGateway,
    BadRequest,
    Conflict,
    DomainError,
    Forbidden,
    Gone,
    MalformedJson,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    Unprocessable,
    UnsupportedMediaType,
    ValidationFailed,
)
from shared.request_ids import resolve_request_id
from shared.timeutil import isoformat, utcnow

if TYPE_CHECKING:
    import falcon

log = logging.getLogger("iamgate.http")

MAX_BODY_BYTES = 1024 * 1024
MEDIA_JSON = "application/json"  # falcon.MEDIA_JSON

# Falcon is imported inside the functions that use it, not here: the decision service
# answers its common requests with this module's envelope helpers and without Falcon,
# which it imports only on the first request that needs it (a sidecar starts sooner).


def _json_default(value):
    if isinstance(value, datetime):
        return isoformat(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value) -> str:
    return json.dumps(value, default=_json_default, separators=(",", ":"))


_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(text: str):
    """``json.loads(text)``, refusing (ValueError) a document any string of which, key or
    value, holds a lone surrogate, as I-JSON does (RFC 7493 section 2.1): json reads
    ``"\\ud800"`` without its pair as a string that is no Unicode text, which fails later
    wherever it is encoded (MongoDB, bcrypt, the response). ``text`` is strictly decoded,
    so a surrogate can only come from a ``\\u`` escape.

    Refused too: ``NaN``, ``Infinity`` and ``-Infinity``, which json takes though they
    are no JSON (RFC 8259 section 6), and a number beyond a float's range (``1e999``,
    which json reads as infinity): stored, either would make every later answer carrying
    it invalid JSON."""
    value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    if "\\u" in text and _holds_surrogate(value):
        raise ValueError("a string holds a lone surrogate (a \\ud800-\\udfff escape without its pair)")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (RFC 8259 section 6)")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:32]} is beyond the range of a double")
    return number


def _holds_surrogate(value) -> bool:
    pending = [value]  # a stack, not recursion: the document nests as deep as json.loads allowed
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def json_handlers():
    import falcon

    handler = falcon.media.JSONHandler(dumps=dumps, loads=parse_json)
    return {falcon.MEDIA_JSON: handler}


# ---------------------------------------------------------------- error envelope

# The envelope's code for an HTTP error that carries no code of its own (Falcon's, and the
# decision service's HTTP server refusing a request before the app runs).
STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "REQUEST_TIMEOUT",
    411: "LENGTH_REQUIRED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    431: "REQUEST_HEADER_FIELDS_TOO_LARGE",
    429: "RATE_LIMIT_EXCEEDED",
    500: "INTERNAL_ERROR",
    501: "NOT_IMPLEMENTED",
    503: "SERVICE_UNAVAILABLE",
    505: "HTTP_VERSION_NOT_SUPPORTED",
}


def envelope(req, code: str, message: str, details=None) -> dict:
    return error_document(code, message, details, request_id(req))


def error_document(code: str, message: str, details, request_id: str) -> dict:
    """The spec's error envelope (``envelope`` for a Falcon request; the decision
    service's hot path and HTTP server call this directly)."""
    return {
        "error": {
            "code": code,
            "message": message,
            "details": details or {},
            "request_id": request_id,
            "timestamp": isoformat(utcnow()),
        }
    }


def _render(req, resp, status: int, code: str, message: str, details=None, headers=None):
    _write(resp, status, dumps(envelope(req, code, message, details)), headers)


def _write(resp, status: int, text: str, headers=None):
    resp.status = status
    resp.content_type = MEDIA_JSON
    resp.text = text
    resp.data = None
    if headers:
        resp.set_headers(headers)


# The one table from a kind of domain error to its HTTP status (shared.errors).
ERROR_STATUS = {
    BadRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Gone: 410,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    Unprocessable: 422,
    RateLimited: 429,
    BadGateway: 502,
    ServiceUnavailable: 503,
}


def status_of(error_class: type) -> int:
    """The HTTP status of a domain error class: that of the nearest kind it derives from."""
    for klass in error_class.__mro__:
        status = ERROR_STATUS.get(klass)
        if status is not None:
            return status
    return 400


def error_headers(ex: DomainError) -> dict:
    """The headers a domain error asks for: the spec's X-RateLimit-* set and Retry-After."""
    if isinstance(ex, RateLimited):
        return {
            "X-RateLimit-Limit": str(ex.limit),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(ex.reset_at),
            "Retry-After": str(ex.retry_after),
        }
    if isinstance(ex, ServiceUnavailable) and ex.retry_after is not None:
        return {"Retry-After": str(ex.retry_after)}
    return {}


def domain_error_answer(ex: DomainError, request_id: str) -> tuple[int, str, dict]:
    """(status, JSON text, headers) of a domain error's envelope: what the Falcon handler
    renders, for the hot paths that answer without Falcon."""
    return (status_of(type(ex)), dumps(error_document(ex.code, ex.message, ex.details, request_id)),
            error_headers(ex))


def unexpected_error_answer(request_id: str) -> tuple[int, str]:
    """(500, JSON text) for an unexpected exception, logged with its traceback (call it
    in the ``except`` block): what the Falcon handler renders, for the hot paths."""
    log.exception("unhandled error", extra={"request_id": request_id})
    return 500, dumps(error_document("INTERNAL_ERROR", "An unexpected error occurred.", None, request_id))


def render_domain_error(req, resp, ex: DomainError, _params=None):
    """The Falcon error handler of domain errors: ``ex`` as the envelope, with its headers.
    Handlers of foreign exceptions (the store's driver) call it with the domain error
    they stand for."""
    _write(resp, *domain_error_answer(ex, request_id(req)))


def _falcon_error(req, resp, ex: falcon.HTTPError, _params):
    status = ex.status_code
    if status == 404:
        message = "No route matches this path."
    elif status == 405:
        message = f"Method {req.method} is not allowed on this path."
    else:
        message = ex.title  # never empty: Falcon falls back to the status line
        if ex.description:
            message = f"{message}: {ex.description}"
    headers = dict(ex.headers or {})
    _render(req, resp, status, STATUS_CODES.get(status, f"HTTP_{status}"), message, None, headers)


def _unexpected(req, resp, ex: Exception, _params):
    import falcon

    if isinstance(ex, falcon.HTTPStatus):
        raise ex
    _write(resp, *unexpected_error_answer(request_id(req)))


def install_error_handlers(app: falcon.App) -> None:
    import falcon

    # Falcon looks handlers up by the most specific type, so order does not matter.
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _falcon_error)
    app.add_error_handler(DomainError, render_domain_error)


# ---------------------------------------------------------------- middleware


def request_id(req) -> str:
    rid = getattr(req.context, "request_id", None)
    if rid is None:
        rid = req.context.request_id = resolve_request_id(req.get_header("X-Request-Id"))
    return rid


class RequestIdMiddleware:
    """Assigns (or accepts a well-formed) request id and echoes it on every response."""

    def process_request(self, req, resp):
        resp.set_header("X-Request-Id", request_id(req))

    def process_response(self, req, resp, _resource, _req_succeeded):
        resp.set_header("X-Request-Id", request_id(req))


class RequestLogMiddleware:
    """Writes ``request_log``'s line (``shared.logs.RequestLog``) for every answered
    request. Place it early: its ``process_resource`` notes the route's application
    before a later middleware (authentication) may refuse the request. The duration is
    from the metrics middleware's ``req.context.started``, the span the latency histogram
    times."""

    def __init__(self, request_log):
        self._request_log = request_log

    def process_resource(self, req, _resp, _resource, params):
        req.context.application_id = params.get("applicationId")

    def process_response(self, req, resp, resource, _req_succeeded):
        self._request_log(request_id(req), req.method, req.uri_template if resource is not None else None,
                          resp.status_code, req.context.started, req.remote_addr, req.get_header("X-Forwarded-For"),
                          getattr(req.context, "application_id", None))


class JsonBodyMiddleware:
    """POST/PUT/PATCH must send application/json (415 otherwise).

    Checked after routing so an unknown path still answers 404 and a wrong method 405.
    Resources may list extra accepted media types in ``accepted_media_types``.
    """

    def process_resource(self, req, _resp, resource, _params):
        if req.method not in ("POST", "PUT", "PATCH") or resource is None:
            return
        if not hasattr(resource, "on_" + req.method.lower()):
            return  # Falcon answers 405
        accepted = getattr(resource, "accepted_media_types", (MEDIA_JSON,))
        media = (req.content_type or "").split(";")[0].strip().lower()
        if media not in accepted:
            named = [media for media in accepted if media]  # "" (no body) is no media type to name
            none = " (or no body)" if "" in accepted else ""
            raise UnsupportedMediaType(f"Content-Type must be {' or '.join(named)}{none}.",
                                       details={"content_type": req.content_type})


def read_body(req, max_bytes: int) -> bytes:
    """The raw request body; 413 PAYLOAD_TOO_LARGE past ``max_bytes``, refused from the
    declared length before anything is read when it says so."""
    length = req.content_length
    if length is not None and length > max_bytes:
        raise PayloadTooLarge(details={"max_bytes": max_bytes})
    raw = req.bounded_stream.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise PayloadTooLarge(details={"max_bytes": max_bytes})
    return raw


def read_json(req) -> dict:
    """The request body as a JSON object ({} when empty); 400 when malformed."""
    cached = getattr(req.context, "json_body", None)
    if cached is not None:
        return cached
    raw = read_body(req, MAX_BODY_BYTES)
    if not raw.strip():
        body = {}
    else:
        try:
            # Decoded as json.loads(raw) does, but strictly: UTF-8 that encodes a surrogate is refused too.
            body = parse_json(raw.decode(json.detect_encoding(raw)))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; nesting too deep
            raise MalformedJson("The request body is not valid JSON.", details={"body": str(exc)}) from None
        if not isinstance(body, dict):
            raise MalformedJson("The request body must be a JSON object.", details={"body": "must be a JSON object"})
    req.context.json_body = body
    return body


def respond(resp, data, status=200, message=None, headers=None, *, cacheable: bool = True):
    """Write the success envelope ``{"data": ..., "message"?: ...}``; not ``cacheable``:
    with ``no_store``'s headers."""
    if not cacheable:
        no_store(resp)
    body = {"data": data}
    if message is not None:
        body["message"] = message
    resp.status = status
    resp.media = body
    if headers:
        resp.set_headers(headers)


def bearer_token(authorization: str | None, error: type[DomainError] = Unauthorized) -> str | None:
    """RFC 6750 2.1: the token of an ``Authorization: Bearer <token>`` header value;
    None without the header, ``error`` for another scheme or an empty token."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise error("The Authorization header must be 'Bearer <token>'.")
    return value.strip()


class MetricsEndpoint:
    """``GET /metrics`` of either service: the Prometheus text exposition of ``metrics``;
    with IAMGATE_METRICS_TOKEN set (``token``), only for a request presenting exactly that
    bearer token, compared in constant time (401 otherwise)."""

    def __init__(self, metrics, token: str = ""):
        self.metrics = metrics
        self.token = token

    def on_get(self, req, resp):
        if self.token:
            presented = bearer_token(req.get_header("Authorization")) or ""
            if not hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8")):
                raise Unauthorized("/metrics needs the metrics token (IAMGATE_METRICS_TOKEN).")
        resp.data, resp.content_type = self.metrics.render()


def no_store(resp) -> None:
    """Responses carrying a secret or personal data (tokens, keys, TOTP secrets, backup
    codes, exports) must land in no cache (RFC 6749 section 5.1 for token responses)."""
    resp.cache_control = ["no-store"]
    resp.set_header("Pragma", "no-cache")


# ---------------------------------------------------------------- pagination

DEFAULT_PER_PAGE = 15
MAX_PER_PAGE = 100
# Far past any list read page by page, and small enough that the skip it makes,
# (MAX_PAGE - 1) * MAX_PER_PAGE, is an ordinary integer for MongoDB (a page number past
# 64 bits failed there: 500).
MAX_PAGE = 1_000_000

# The query parameters as the OpenAPI document describes them, for every paginated route.
PAGE_QUERY = {
    "page": ({"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1}, "page number"),
    "per_page": ({"type": "integer", "minimum": 1, "maximum": MAX_PER_PAGE, "default": DEFAULT_PER_PAGE},
                 "page size"),
}


def page_params(req) -> tuple[int, int]:
    """The spec's pagination: ``page`` (default 1, at most ``MAX_PAGE``) and ``per_page``
    (default 15, at most 100), each written in ASCII digits; 400 otherwise."""
    errors = {}

    def number(name, default, most):
        raw = req.get_param(name)
        if raw is None or raw == "":
            return default
        # Length first: int() of thousands of digits is slow, then refused (ValueError).
        if raw.isascii() and raw.isdigit() and len(raw) <= len(str(most)) and 1 <= int(raw) <= most:
            return int(raw)
        errors[name] = f"must be an integer from 1 to {most}"
        return default

    page = number("page", 1, MAX_PAGE)
    per_page = number("per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)
    if errors:
        raise ValidationFailed(errors)
    return page, per_page


# The same parameters on the lists the spec answers whole (organizations, members,
# applications, API keys, OIDC clients, webhooks): paging there is the caller's choice.
OPTIONAL_PAGE_QUERY = {
    name: ({key: value for key, value in schema.items() if key != "default"},
           f"{description}; with page or per_page the answer adds the paginated envelope's fields (current_page, "
           "last_page, per_page, total; per_page defaults to 15), without both it is the whole list")
    for name, (schema, description) in PAGE_QUERY.items()
}


def asked_page(req) -> tuple[int, int] | None:
    """``page_params`` when the caller pages (``page`` or ``per_page`` given), else None."""
    if req.get_param("page") is None and req.get_param("per_page") is None:
        return None
    return page_params(req)


def respond_list(req, resp, items: list, serialize=None) -> None:
    """A list the spec answers whole (``{"data": [...]}``, in the store's order): whole
    for a caller that does not page, so existing clients see no change; the page asked
    for, in the paginated envelope (a superset of ``{"data": ...}``), for one that does.
    ``serialize`` shapes each item (only those of the page)."""
    serialize = serialize or (lambda item: item)
    paging = asked_page(req)
    if paging is None:
        respond(resp, [serialize(item) for item in items])
        return
    page, per_page = paging
    start = (page - 1) * per_page
    resp.media = paginated([serialize(item) for item in items[start:start + per_page]], len(items), page, per_page)


def paginated(items: list, total: int, page: int, per_page: int) -> dict:
    return {
        "data": items,
        "current_page": page,
        "last_page": max(1, math.ceil(total / per_page)),
        "per_page": per_page,
        "total": total,
    }


def bool_param(req, name, default=False) -> bool:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return default
    lowered = raw.lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ValidationFailed({name: "must be true or false"})


# ---------------------------------------------------------------- client address


def client_ip(req, trusted_proxies=()) -> str:
    """The caller's IP.  X-Forwarded-For is believed only from trusted proxies: walk it
    from the right and stop at the first address that is not a trusted proxy."""
    return client_address(req.remote_addr, req.get_header("X-Forwarded-For"), trusted_proxies)


def client_address(remote: str | None, forwarded_for: str | None, trusted_proxies=()) -> str:
    """``client_ip`` of a peer address and an X-Forwarded-For value (a WSGI environ's
    ``REMOTE_ADDR`` and ``HTTP_X_FORWARDED_FOR``: the hot paths, without Falcon)."""
    remote = remote or "unknown"
    if not trusted_proxies or not _in_networks(remote, trusted_proxies):
        return remote
    forwarded = [part.strip() for part in (forwarded_for or "").split(",") if part.strip()]
    for address in reversed(forwarded):
        if not _in_networks(address, trusted_proxies):
            return address
    return forwarded[0] if forwarded else remote


def _in_networks(address, networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)
