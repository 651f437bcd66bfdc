"""The decision service's only data source: the control plane's internal API.

The sidecar holds no database credentials (docs/decision-service.md, "Protocol with the
control plane"). It reads a user's grants, an application's ABAC policies and API key
digests over HTTP, authenticated with the internal service token or an application API
key, and follows the change stream, a server-sent-events response of
``hello``/``change``/``reset``/``heartbeat`` frames (their meaning: ``decision.stream``).

HTTP/1.1 through the standard library's ``http.client`` (requests and urllib3 cost about
50 ms of a sidecar's start-up): lookups share a pool of kept-alive connections,
each stream has a connection of its own. A connection is given a connect timeout, then a
read timeout for every read; an idle pooled connection the server has closed is noticed
before it is reused, and nothing is retried (a failed call is a ``ControlPlaneError``,
and checks fail closed). ``https`` URLs are verified against certifi's CA bundle, the one
requests used, with host-name checking; no proxy settings are read from the environment
(a proxy between a sidecar and its control plane is a misconfiguration). Under gevent the
sockets are cooperative, so a slow control plane blocks only the greenlets waiting for it.
"""
from __future__ import annotations

import http.client
import json
import logging
import select
import socket
import ssl
from urllib.parse import urlencode, urlsplit

from shared import tracing
from shared.abac import Policy
from shared.rbac import Grants

log = logging.getLogger("iamgate.decision.client")

CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 3.0
_POOL_SIZE = 64
_MAX_FRAME_BYTES = 1024 * 1024
_USER_AGENT = "iamgate-decision"
_HTTP_ERRORS = (OSError, http.client.HTTPException, ValueError)  # socket, timeout, TLS, protocol; a bad header


class ControlPlaneError(Exception):
    """No usable answer from the control plane: unreachable, timed out, refused this
    service's credential, or sent something unreadable. Checks then fail closed."""


class Refused(ControlPlaneError):
    """The control plane refused this service's credential (401, 403) or its stream
    (429 STREAM_LIMIT_EXCEEDED). Asking again at once would be refused again: the
    follower waits ``retry_after`` seconds (the 429's Retry-After), or its own longer
    back-off when the server named none."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ApplicationNotFound(Exception):
    """The control plane does not know the application."""


class _Origin:
    """Where the control plane is, and how to open a connection to it."""

    def __init__(self, base_url: str, connect_timeout: float):
        parts = urlsplit(base_url)
        self.scheme, self.host, self.prefix = parts.scheme, parts.hostname or "", parts.path.rstrip("/")
        try:
            self.port = parts.port
        except ValueError:  # shared.config accepted the URL; a port out of range still fails every call
            self.port = -1
        self.connect_timeout = connect_timeout
        self._tls: ssl.SSLContext | None = None

    def connect(self, read_timeout: float) -> http.client.HTTPConnection:
        """A connected connection whose reads time out after ``read_timeout`` seconds."""
        if self.port == -1 or self.scheme not in ("http", "https"):
            raise http.client.InvalidURL(f"{self.scheme}://{self.host}:{self.port}")
        connection: http.client.HTTPConnection
        if self.scheme == "https":
            connection = http.client.HTTPSConnection(self.host, self.port, timeout=self.connect_timeout,
                                                     context=self._tls_context())
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)
        try:
            connection.connect()
            connection.sock.settimeout(read_timeout)
        except BaseException:
            connection.close()
            raise
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            import certifi

            self._tls = ssl.create_default_context(cafile=certifi.where())  # verifies the host name too
        return self._tls


class _Pool:
    """Idle kept-alive connections for lookups, up to ``maxsize``; more are opened when
    more lookups run at once, and closed when given back to a full pool."""

    def __init__(self, origin: _Origin, read_timeout: float, maxsize: int = _POOL_SIZE):
        self._origin = origin
        self._read_timeout = read_timeout
        self._maxsize = maxsize
        self._idle: list[http.client.HTTPConnection] = []

    def take(self) -> http.client.HTTPConnection:
        while self._idle:
            try:
                connection = self._idle.pop()
            except IndexError:  # another thread took the last one
                break
            if not _dropped(connection.sock):
                return connection
            connection.close()
        return self._origin.connect(self._read_timeout)

    def give(self, connection: http.client.HTTPConnection) -> None:
        if len(self._idle) < self._maxsize:
            self._idle.append(connection)
        else:
            connection.close()


def _dropped(sock) -> bool:
    """An idle connection is readable only when the server closed it (or sent what was
    never asked for): either way it cannot carry the next request (urllib3 checks the same)."""
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class ControlPlaneClient:
    """Calls of the internal API (docs/authorization.md, "Internal API for decision services")."""

    def __init__(self, base_url: str, credential: str, *, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)):
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {credential}", "Accept": "application/json",
                         "User-Agent": _USER_AGENT}
        self._timeout = timeout
        self._origin = _Origin(self.base_url, timeout[0])
        self._pool = _Pool(self._origin, timeout[1])

    # -- lookups

    def grants(self, app_id: str, user_id: str, *, request_id: str | None = None) -> tuple[int, Grants]:
        """(seq, grants) of one user; seq is the change-log head read before the data.
        ``request_id``: the check's, sent as ``X-Request-Id`` (each lookup's alike)."""
        body = self._get(f"/internal/v1/applications/{app_id}/users/{user_id}/grants", request_id=request_id)
        try:
            return _seq(body), Grants.from_json(body["grants"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ControlPlaneError(f"unreadable grants response: {exc!r}") from None

    def policies(self, app_id: str, policy_ids=None, *, request_id: str | None = None) -> tuple[int, list[Policy]]:
        """(seq, active ABAC policies) of the application; ``policy_ids``: only those of
        them (the ones a change frame named, to patch a cached set)."""
        query = "" if policy_ids is None else "?" + urlencode({"ids": ",".join(policy_ids)})
        body = self._get(f"/internal/v1/applications/{app_id}/policies{query}", request_id=request_id)
        try:
            return _seq(body), [Policy.from_json(item) for item in body["policies"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ControlPlaneError(f"unreadable policies response: {exc!r}") from None

    def api_keys(self, app_id: str, *, request_id: str | None = None) -> tuple[int, list[dict]]:
        """(seq, [{id, key_digest, permissions}]) of the application's active API keys."""
        body = self._get(f"/internal/v1/applications/{app_id}/api-keys", request_id=request_id)
        try:
            keys = [{"id": str(item["id"]), "key_digest": str(item["key_digest"]),
                     "permissions": tuple(item["permissions"])} for item in body["keys"]]
            return _seq(body), keys
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlPlaneError(f"unreadable api-keys response: {exc!r}") from None

    def whoami(self) -> dict:
        """What the control plane makes of this service's credential:
        ``{kind: internal|api_key, application_id, key_id, permissions}``."""
        body = self._get("/internal/v1/whoami")
        if body.get("kind") not in ("internal", "api_key"):
            raise ControlPlaneError("unreadable whoami response")
        return body

    def jwks(self) -> dict:
        """The control plane's public signing keys (``/.well-known/jwks.json``)."""
        body = self._get("/.well-known/jwks.json", authenticated=False)
        if not isinstance(body.get("keys"), list):
            raise ControlPlaneError("unreadable JWKS response")
        return body

    @tracing.outgoing("GET", lambda client, path, *_, **__: tracing.url_attributes(client.base_url + path))
    def _get(self, path: str, authenticated: bool = True, request_id: str | None = None) -> dict:
        headers = self._headers if authenticated else {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if request_id is not None:
            headers = {**headers, "X-Request-Id": request_id}
        try:
            connection = self._pool.take()
        except _HTTP_ERRORS as exc:
            raise ControlPlaneError(f"GET {path}: {exc.__class__.__name__}") from None
        try:
            connection.request("GET", self._origin.prefix + path, headers=tracing.propagate(headers))
            response = connection.getresponse()
            content = response.read()
        except _HTTP_ERRORS as exc:
            connection.close()
            raise ControlPlaneError(f"GET {path}: {exc.__class__.__name__}") from None
        if response.will_close:
            connection.close()
        else:
            self._pool.give(connection)
        _raise_for_status(response.status, content, path)
        try:
            body = json.loads(content)
        except ValueError:
            raise ControlPlaneError(f"GET {path}: the body is not JSON") from None
        if not isinstance(body, dict):
            raise ControlPlaneError(f"GET {path}: the body is not a JSON object")
        return body

    # -- the change stream

    def changes(self, since: int | None, *, app_id: str | None = None, read_timeout: float) -> ChangeStream:
        """Open the change stream: every application's with the internal token
        (``app_id`` None), one application's otherwise. ``since`` None starts live."""
        path = f"/internal/v1/applications/{app_id}/changes" if app_id else "/internal/v1/changes"
        target = self._origin.prefix + path + ("" if since is None else "?" + urlencode({"since": str(since)}))
        headers = {**self._headers, "Accept": "text/event-stream", "Cache-Control": "no-cache"}
        connection = None
        try:
            # A stream holds its connection for hours: one of its own, outside the lookup pool.
            connection = self._origin.connect(read_timeout)
            connection.request("GET", target, headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                content = response.read()
        except _HTTP_ERRORS as exc:
            if connection is not None:
                connection.close()
            raise ControlPlaneError(f"GET {path}: {exc.__class__.__name__}") from None
        try:
            if response.status != 200:
                _raise_for_status(response.status, content, path, response.getheader("Retry-After"))
            media = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
            if media != "text/event-stream":
                raise ControlPlaneError(f"GET {path}: expected text/event-stream, got {media or 'nothing'}")
        except (ControlPlaneError, ApplicationNotFound):
            response.close()
            connection.close()
            raise
        return ChangeStream(response, connection)


def _seq(body: dict) -> int:
    seq = body["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"seq must be a non-negative integer, got {seq!r}")
    return seq


def _raise_for_status(status: int, content: bytes, path: str, retry_after: str | None = None) -> None:
    if status == 200:
        return
    code = _error_code(content)
    if status == 404:
        raise ApplicationNotFound(path)
    if status in (401, 403):
        # Our own credential: a revoked API key or a wrong internal token. Loud, because
        # every check fails closed until an operator fixes the configuration.
        log.error("the control plane refused this decision service's credential",
                  extra={"path": path, "status": status, "code": code})
        raise Refused(f"GET {path}: HTTP {status} {code or ''}".strip())
    if status == 429:
        raise Refused(f"GET {path}: HTTP 429 {code or ''}".strip(), _seconds(retry_after))
    raise ControlPlaneError(f"GET {path}: HTTP {status} {code or ''}".strip())


# The longest a control plane's Retry-After may park the follower: past it the header
# is more likely a fault than a plan, and the cache would go stale for as long.
MAX_RETRY_AFTER = 300.0


def _seconds(retry_after: str | None) -> float | None:
    """Retry-After as delay-seconds (RFC 9110, 10.2.3: ``1*DIGIT``), at most
    ``MAX_RETRY_AFTER``; an HTTP date or garbage: None."""
    if retry_after is None:
        return None
    value = retry_after.strip()
    if not (value.isascii() and value.isdigit()):
        return None
    # A run of digits too long for int() (or for a float) still means "a long time".
    return MAX_RETRY_AFTER if len(value) > 6 else min(float(value), MAX_RETRY_AFTER)


def _error_code(content: bytes) -> str | None:
    try:
        return json.loads(content)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


class ChangeStream:
    """Server-sent events (WHATWG HTML, "Server-sent events") read as ``(event, data)``
    pairs, ``data`` parsed as JSON. Iteration ends when the server closes the stream;
    ``close`` (from any thread) ends it early."""

    def __init__(self, response, connection):
        self._response = response
        self._connection = connection

    def __iter__(self):
        raw = self._response
        buffer = b""
        event = ""
        data: list[str] = []
        while True:
            # read1 returns what has arrived (chunked or not) instead of waiting for a full block.
            chunk = raw.read1(65536)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > _MAX_FRAME_BYTES:
                raise ControlPlaneError("change stream: a line exceeds 1 MiB")
            for line in lines:
                line = line.rstrip(b"\r").decode("utf-8")
                if not line:
                    if data:
                        yield event or "message", _frame_data(data)
                    event, data = "", []
                    continue
                if line.startswith(":"):
                    continue  # a comment (keep-alive)
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)

    def close(self) -> None:
        sock = getattr(self._connection, "sock", None)
        if sock is not None:
            try:  # wakes a read blocked in another thread; closing alone would not
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._response.close()
        self._connection.close()


def _frame_data(lines: list[str]) -> dict:
    try:
        data = json.loads("\n".join(lines))
    except ValueError:
        raise ControlPlaneError("change stream: a frame's data is not JSON") from None
    if not isinstance(data, dict):
        raise ControlPlaneError("change stream: a frame's data is not a JSON object")
    return data
