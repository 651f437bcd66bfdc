"""The decision service's HTTP/1.1 server: a gunicorn gevent worker whose connections are
parsed by httptools (llhttp, the parser of Node.js) instead of gunicorn's or gevent's
pure-Python parsers.

    gunicorn --worker-class decision.server.DecisionWorker 'decision.wsgi:create()'

Why: pywsgi's own work around a request (reading the request line, parsing headers
through the standard library's email parser, formatting the response) costs more than a
cache-hit check inside the Falcon app (figures: docs/performance.md). Gunicorn manages
the processes (pre-fork, graceful reload and shutdown, the worker heartbeat,
``--max-requests``), gevent runs one greenlet per connection, and the app is plain WSGI,
so nothing else in the service (the change-stream follower, the control-plane client)
depends on this server.

What the loop does per connection: feed received bytes to the parser, collect complete
requests (pipelined ones in order), answer each through the WSGI app, keep the
connection alive as HTTP/1.1 says. The limits a server exposed to an untrusted client
needs are enforced here, before the app runs: header block size (431), body size (413),
a malformed request (400, then close), and an idle timeout (gunicorn's ``--keep-alive``).

Taking turns (``Turns``): gevent switches greenlets only when one would block. A client
that sends its next request as soon as it has read the previous answer (wrk, any
closed-loop client on another core) can keep its connection's socket readable every
time the loop comes back to ``recv``, so that greenlet answered thousands of requests in
a row while the other connections waited: under ``wrk -c16`` the p50 was 0.1 to 3 ms and
the p99 24 to 150 ms, one connection answered up to 40 times as often as another
(docs/performance.md, "Saturation fairness"). A connection now yields to the other
connections after each answered read.
"""
from __future__ import annotations

import io
import logging
import sys
import time
import uuid
from urllib.parse import unquote_to_bytes

import httptools

from shared.http import MAX_BODY_BYTES, STATUS_CODES, dumps, error_document

log = logging.getLogger("iamgate.decision.server")

MAX_HEADER_BYTES = 64 * 1024
RECV_BYTES = 64 * 1024
SERVER = "iamgate-decision"
_SERVER_LINE = f"\r\nServer: {SERVER}\r\n\r\n".encode()  # ends the Date line and the head

_HEAD_TOO_LARGE = "The request line and headers are too large."

# Status lines as Falcon writes them (``falcon.code_to_http_status``; RFC 9110's reason
# phrases: "413 Content Too Large"), for the statuses this service answers without Falcon,
# which is imported on the first request that needs it (start-up time, issue 18).
_STATUS_LINES = {code: f"{code} {phrase}" for code, phrase in (
    (200, "OK"), (400, "Bad Request"), (401, "Unauthorized"), (403, "Forbidden"), (404, "Not Found"),
    (405, "Method Not Allowed"), (413, "Content Too Large"), (415, "Unsupported Media Type"),
    (429, "Too Many Requests"), (431, "Request Header Fields Too Large"), (500, "Internal Server Error"),
    (503, "Service Unavailable"))}


def status_line(code: int) -> str:
    """``"404 Not Found"`` for 404: Falcon's status line, without importing Falcon for
    the common ones."""
    line = _STATUS_LINES.get(code)
    if line is None:
        import falcon

        line = falcon.code_to_http_status(code)
    return line
_NO_BODY_STATUSES = ("1", "204", "304")  # a server must not send Content-Length with these (RFC 9110, 8.6)


_ENVIRON_KEYS: dict[bytes, str] = {}  # header name as received -> its WSGI environ key ("" = dropped)
_ENVIRON_KEYS_MAX = 1024


def _environ_key(name: bytes) -> str:
    """``HTTP_X_FORWARDED_FOR`` for ``X-Forwarded-For`` (``CONTENT_TYPE`` and
    ``CONTENT_LENGTH`` without the prefix, as WSGI says); "" for a name containing ``_``,
    which could pose as its dashed twin (``X_Forwarded_For``): dropped, as nginx does.
    Clients send the same few names again and again, so the answers are remembered."""
    text = name.decode("latin-1")
    key = "" if "_" in text else text.upper().replace("-", "_")
    if key and key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        key = "HTTP_" + key
    if len(_ENVIRON_KEYS) >= _ENVIRON_KEYS_MAX:
        _ENVIRON_KEYS.clear()
    _ENVIRON_KEYS[name] = key
    return key


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _imf_fixdate(seconds: int) -> bytes:
    """RFC 9110 section 5.6.7's IMF-fixdate (what ``email.utils.formatdate(usegmt=True)``
    gives, without importing the email package at start-up)."""
    t = time.gmtime(seconds)
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT").encode("ascii")


class _HttpDate:
    """The ``Date`` header, formatted once a second."""

    def __init__(self, clock=time.time):
        self._clock = clock
        self._second = -1
        self._value = b""

    def __call__(self) -> bytes:
        now = int(self._clock())
        if now != self._second:
            self._second = now
            self._value = _imf_fixdate(now)
        return self._value


http_date = _HttpDate()


class Refused(Exception):
    """A request the connection cannot go on after: answered with ``status``, then closed."""

    def __init__(self, status: int, message: str, details: dict | None = None):
        super().__init__(message)
        self.status, self.details = status, details


class _Request:
    __slots__ = ("method", "target", "version", "headers", "body", "keep_alive")

    def __init__(self):
        self.target = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []


class _Parsing:
    """httptools callbacks: build ``_Request`` objects as the bytes arrive. A body limit
    broken in a callback raises ``Refused``, which httptools re-raises from
    ``feed_data`` as the context of its ``HttpParserCallbackError``."""

    def __init__(self, max_body: int):
        self.parser = httptools.HttpRequestParser(self)
        self.max_body = max_body
        self.current: _Request | None = None
        self.complete: list[_Request] = []
        self.in_headers = False  # a request's line and headers have begun, not ended
        self.header_bytes = 0    # bytes received while in_headers (over several reads)
        self.body_bytes = 0
        self.continue_wanted = False

    def on_message_begin(self):
        self.current = _Request()
        self.in_headers = True
        self.header_bytes = self.body_bytes = 0

    def on_url(self, url: bytes):
        self.current.target += url

    def on_header(self, name: bytes, value: bytes):
        self.current.headers.append((name, value))

    def on_headers_complete(self):
        self.in_headers = False
        request, parser = self.current, self.parser
        request.method = parser.get_method()
        request.version = parser.get_http_version()
        request.keep_alive = parser.should_keep_alive()
        size = len(request.target)
        for name, value in request.headers:
            size += len(name) + len(value) + 4  # ": " and CRLF
            length = len(name)  # lower-case only the names that can match
            if length == 14 and name.lower() == b"content-length" and int(value) > self.max_body:
                raise Refused(413, "The request body is too large.", {"max_bytes": self.max_body})
            if (length == 6 and name.lower() == b"expect" and value.lower() == b"100-continue"
                    and request.version == "1.1"):
                self.continue_wanted = True
        if size > MAX_HEADER_BYTES:  # ended in the read that crossed the limit, which serve does not count
            raise Refused(431, _HEAD_TOO_LARGE, {"max_bytes": MAX_HEADER_BYTES})

    def on_body(self, body: bytes):
        self.body_bytes += len(body)
        if self.body_bytes > self.max_body:  # chunked bodies have no Content-Length to check up front
            raise Refused(413, "The request body is too large.", {"max_bytes": self.max_body})
        self.current.body.append(body)

    def on_message_complete(self):
        self.complete.append(self.current)
        self.current = None
        self.continue_wanted = False


class Turns:
    """One connection's turns on a gevent event loop: after answering what one read brought,
    the greenlet yields to the hub (``gevent.sleep(0)``) before reading again, so every
    connection the loop's last poll found ready is answered before this one reads its
    next request, even when that request is already in its socket. Under saturation the
    connections then answer one read each, in turn. A ``gevent.sleep(0)`` resumes from
    gevent's callback queue before the loop polls again, and gevent runs that queue for at
    most its switch interval (``gevent.getswitchinterval()``, 5 ms) before polling: a
    connection that became ready since the last poll waits at most that long. (Waiting for
    readability through the loop, ``gevent.socket.wait_read``, polls every time, but
    doubled the cost of a request on this machine: docs/performance.md.)
    """

    __slots__ = ("_pause",)

    def __init__(self, pause):
        self._pause = pause

    @classmethod
    def gevent(cls) -> "Turns":
        """For a connection served by a greenlet of the current thread's hub."""
        from gevent import sleep

        return cls(sleep)

    def answered(self) -> None:
        self._pause(0)


class Connection:
    """One client connection: requests in, responses out, until either side closes.
    ``turns`` (a ``Turns``) when it shares a gevent loop with other connections."""

    def __init__(self, sock, client_address, app, base_environ: dict, *, worker=None, timeout: float | None = 75,
                 max_body: int = MAX_BODY_BYTES, turns: Turns | None = None):
        self.sock = sock
        self.app = app
        self.worker = worker
        self.timeout = timeout
        self.turns = turns
        self.parsing = _Parsing(max_body)
        self._started: tuple[str, list] | None = None  # start_response's arguments
        self.environ = dict(base_environ)
        if isinstance(client_address, tuple):
            self.environ["REMOTE_ADDR"], self.environ["REMOTE_PORT"] = client_address[0], str(client_address[1])
        else:
            self.environ["REMOTE_ADDR"] = self.environ["REMOTE_PORT"] = ""

    def serve(self) -> None:
        sock, parsing = self.sock, self.parsing
        # A timer around every read ends idle keep-alive connections and clients that send
        # too slowly.
        sock.settimeout(self.timeout)
        try:
            while True:
                try:
                    data = sock.recv(RECV_BYTES)
                except OSError:  # the timeout included
                    return
                if not data:
                    return
                refusal = None  # (status, message, details): answered after the requests before it
                try:
                    parsing.parser.feed_data(data)
                except httptools.HttpParserUpgrade:
                    parsing.complete.pop()  # the upgrade request, always the last one parsed
                    refusal = (400, "Protocol upgrades are not supported.", None)
                except httptools.HttpParserError as exc:
                    cause = exc.__context__
                    if isinstance(cause, Refused):
                        refusal = (cause.status, str(cause), cause.details)
                    else:  # ValueError: a Content-Length llhttp took but int() did not
                        refusal = (400, "The request is not valid HTTP/1.1.", None)
                else:
                    if parsing.in_headers:  # one read holds at most RECV_BYTES: count only across reads
                        parsing.header_bytes += len(data)
                        if parsing.header_bytes > MAX_HEADER_BYTES:
                            refusal = (431, _HEAD_TOO_LARGE, {"max_bytes": MAX_HEADER_BYTES})
                answered = False
                if parsing.complete:  # pipelined requests parsed before a refused one get their answers
                    requests, parsing.complete = parsing.complete, []
                    for request in requests:
                        if not self._respond(request):
                            return
                    answered = True
                if refusal is not None:
                    self._refuse(*refusal)
                    return
                if parsing.continue_wanted:  # headers in, the client waits before sending the body
                    parsing.continue_wanted = False
                    try:
                        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    except OSError:
                        return
                if answered and self.turns is not None:
                    self.turns.answered()
        finally:
            sock.close()

    # -- one request --

    def _respond(self, request: _Request) -> bool:
        """Answer one request; False when the connection must close afterwards."""
        if self.worker is not None:  # first, as gunicorn's workers do: the request reaching
            self.worker.count_request()  # --max-requests is answered with Connection: close
        keep_alive = request.keep_alive and (self.worker is None or self.worker.alive)
        self._started = None
        try:
            result = self.app(self._environ(request), self._start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Refused as exc:  # from _environ: the request, not the app
            self._refuse(exc.status, str(exc), exc.details)
            return False
        except Exception:
            log.exception("unhandled error in the decision app")
            self._refuse(500, "An unexpected error occurred.")
            return False
        if self._started is None:
            log.error("the decision app returned without calling start_response")
            self._refuse(500, "An unexpected error occurred.")
            return False

        status, headers = self._started
        head = "".join([f"{name}: {value}\r\n" for name, value in headers])
        for name, _ in headers:
            if name.lower() == "content-length":
                break
        else:
            if not status.startswith(_NO_BODY_STATUSES):
                head += f"Content-Length: {len(body)}\r\n"
        if not keep_alive:
            head += "Connection: close\r\n"
        elif request.version == "1.0":
            head += "Connection: keep-alive\r\n"
        response = b"".join((b"HTTP/1.1 ", status.encode("latin-1"), b"\r\n", head.encode("latin-1"),
                             b"Date: ", http_date(), _SERVER_LINE, body if request.method != b"HEAD" else b""))
        try:
            sent = self.sock.send(response)  # a response fits the socket buffer: one call, no loop
            if sent < len(response):
                self.sock.sendall(response[sent:])
        except OSError:
            return False
        return keep_alive

    def _start_response(self, status: str, headers: list, exc_info=None):
        if exc_info and self._started:
            raise exc_info[1].with_traceback(exc_info[2])
        self._started = (status, headers)

    def _environ(self, request: _Request) -> dict:
        environ = self.environ.copy()
        target = request.target
        path, _, query = target.partition(b"?")
        if not path.startswith(b"/"):  # absolute-form (a proxy-style request line)
            try:
                url = httptools.parse_url(target)
            except httptools.HttpParserInvalidURLError:  # llhttp took it: http://host:99999/, http://
                raise Refused(400, "The request target is not a valid URL.") from None
            path, query = url.path or b"/", url.query or b""
        if b"%" in path:
            path = unquote_to_bytes(path)
        environ["REQUEST_METHOD"] = request.method.decode("ascii")
        environ["PATH_INFO"] = path.decode("latin-1")
        environ["QUERY_STRING"] = query.decode("latin-1")
        environ["RAW_URI"] = target.decode("latin-1")
        environ["SERVER_PROTOCOL"] = "HTTP/" + request.version
        for name, value in request.headers:
            key = _ENVIRON_KEYS.get(name)
            if key is None:
                key = _environ_key(name)
            if not key:
                continue
            value = value.decode("latin-1")
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        body = b"".join(request.body)
        environ["wsgi.input"] = io.BytesIO(body)
        if body and "CONTENT_LENGTH" not in environ:
            environ["CONTENT_LENGTH"] = str(len(body))  # a chunked body, now whole
        return environ

    def _refuse(self, status: int, message: str, details: dict | None = None) -> None:
        """Answer with the error envelope, before (or instead of) the app; the caller closes."""
        request_id = uuid.uuid4().hex
        body = dumps(error_document(STATUS_CODES[status], message, details, request_id)).encode()
        head = (f"HTTP/1.1 {status_line(status)}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nX-Request-Id: {request_id}\r\nConnection: close\r\n").encode()
        try:
            self.sock.sendall(head + b"Date: " + http_date() + _SERVER_LINE + body)
        except OSError:
            pass


def base_environ(host: str, port: int | str) -> dict:
    return {
        "SCRIPT_NAME": "",
        "SERVER_NAME": host,
        "SERVER_PORT": str(port),
        "SERVER_SOFTWARE": SERVER,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
    }


def __getattr__(name: str):
    """``DecisionWorker`` is imported on demand: gunicorn asks for it, ``python -m decision``
    (one process, no gunicorn) never does, and importing gunicorn's worker costs start-up time."""
    if name == "DecisionWorker":
        from decision.gunicorn_worker import DecisionWorker

        return DecisionWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
