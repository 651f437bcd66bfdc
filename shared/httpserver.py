"""The services' HTTP/1.1 server: a connection loop for gunicorn's gevent worker (and the
decision service's one-process mode) whose requests are parsed by httptools (llhttp, the
parser of Node.js) instead of gunicorn's or gevent's pure-Python parsers. Both services
run on it (shared/httpworker.py has the gunicorn worker classes, shared/serving.py picks
them):

    gunicorn -c python:controlplane.gunicorn_conf 'controlplane.wsgi:create()'
    gunicorn -c python:decision.gunicorn_conf 'decision.wsgi:create()'

Why: the stock servers' own work around a request (reading the request line, parsing
headers in Python, formatting the response) costs more than a cache-hit check inside
the Falcon app (figures: benchmarks/NOTES.md). Gunicorn manages the processes (pre-fork,
graceful reload and shutdown, the worker heartbeat, ``--max-requests``), gevent runs one
greenlet per connection, and the apps are plain WSGI.

What the loop does per connection: feed received bytes to the parser, collect complete
requests (pipelined ones in order), answer each through the WSGI app, keep the
connection alive as HTTP/1.1 says. The limits a server exposed to an untrusted client
needs are enforced here, before the app runs: header block size, and with it a chunked
body's extensions and trailer fields, which are dropped (431); body size (413, or the
app's own answer: ``Connection(large_bodies_to_app=True)``); a malformed request (400,
then close; 501 and 505 for what HTTP/1.1 lets a server decline); a deadline for each
request head (408) and an idle timeout (gunicorn's ``--keep-alive``) on every other
read; and a cap on the connections of a process (``ConnectionSlots``).

Responses (PEP 3333): a response with a Content-Length, or whose iterable is a list or
tuple (every Falcon response but ``resp.stream``), is joined and sent in one call. Any
other iterable without a Content-Length is streamed as it is produced (the control
plane's server-sent event change streams): the head goes with the first non-empty
chunk, each chunk is sent at once in HTTP/1.1's chunked transfer coding (RFC 9112,
7.1), or close-delimited to an HTTP/1.0 client. A failed send (the client went away)
stops the iteration, and the iterable's ``close()`` lets the app's generator clean up.

Stopping (SIGTERM: gunicorn's worker, or ``python -m decision``; ``ConnectionSlots.drain``):
the idle keep-alive connections are closed at once, with a FIN and without a reset (what
a client sent meanwhile is read and dropped; RFC 9112, 9.6); a request under way is
answered with ``Connection: close``. A streamed response ends after its next chunk with
its last-chunk framing: the change streams are endless sequences of whole events, sent
at least once a heartbeat, whose clients resume from the last event they saw.

Taking turns (``Turns``): gevent switches greenlets only when one would block. A client
that sends its next request as soon as it has read the previous answer (wrk, any
closed-loop client on another core) can keep its connection's socket readable every
time the loop comes back to ``recv``, so that greenlet answered thousands of requests in
a row while the other connections waited: under ``wrk -c16`` the p50 was 0.1 to 3 ms and
the p99 24 to 150 ms, one connection answered up to 40 times as often as another
(benchmarks/NOTES.md, "Saturation fairness"). A connection now yields to the other
connections after each answered read.
"""
from __future__ import annotations

import gc
import io
import logging
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import MutableSequence
from urllib.parse import unquote_to_bytes

import httptools

from shared.http import MAX_BODY_BYTES, STATUS_CODES, dumps, error_document

log = logging.getLogger("iamgate.httpserver")

MAX_HEADER_BYTES = 64 * 1024
# A chunk's size line and the CRLFs around its data, without extensions: up to 12 hex
# digits. Anything past that per chunk (extensions, and the trailer section) is counted
# toward MAX_HEADER_BYTES, as Node.js counts chunk extensions since CVE-2024-22019.
CHUNK_FRAMING_BYTES = 16
HEADER_TIMEOUT = 10.0  # seconds for a request's line and headers, from its first byte (IAMGATE_HEADER_TIMEOUT)
KEEPALIVE_SECONDS = 75  # an idle connection's wait for its next request, and each body read's (both services)
MAX_CONNECTIONS = 1000  # per process (IAMGATE_MAX_CONNECTIONS); gunicorn's worker_connections
RECV_BYTES = 64 * 1024
LINGER_SECONDS = 2.0  # reading and dropping what a client still sends before closing (RFC 9112, 9.6)
LINGER_BYTES = 4 * 1024 * 1024
# The Server header (and SERVER_SOFTWARE) of each service: a name, no version.
CONTROL_PLANE_SERVER = "iamgate"
DECISION_SERVER = "iamgate-decision"
_SERVER_LINES: dict[str, bytes] = {}  # Server header value -> the bytes that end the Date line and the head


def freeze_start_up() -> None:
    """Move what a worker holds once started (modules, the app, its settings) out of the
    cyclic garbage collector's reach (``gc.freeze``), as pre-fork servers do: a full
    collection then walks only what came after, and one stalls the event loop for that
    much less (docs/performance.md, "Garbage collection pauses"). Collected first, so no
    dead cycle is frozen for good; what is frozen lives as long as the process anyway."""
    gc.collect()
    gc.freeze()


def _server_line(server: str) -> bytes:
    line = _SERVER_LINES.get(server)
    if line is None:
        line = _SERVER_LINES[server] = f"\r\nServer: {server}\r\n\r\n".encode("latin-1")
    return line

_HEAD_TOO_LARGE = "The request line and headers are too large."
_FRAMING_TOO_LARGE = "The request's chunk extensions and trailer fields are too large."
# Trailer fields are read (they count toward the limit above) and dropped: a field sent
# after the body must not pass for a header the app trusts (Content-Type, X-Forwarded-For).
_DROPPED: deque[tuple[bytes, bytes]] = deque(maxlen=0)

# Status lines as Falcon writes them (``falcon.code_to_http_status``; RFC 9110's reason
# phrases: "413 Content Too Large"), for the statuses the decision service answers without Falcon,
# which is imported on the first request that needs it (a sidecar starts sooner).
_STATUS_LINES = {code: f"{code} {phrase}" for code, phrase in (
    (200, "OK"), (400, "Bad Request"), (401, "Unauthorized"), (403, "Forbidden"), (404, "Not Found"),
    (405, "Method Not Allowed"), (408, "Request Timeout"), (413, "Content Too Large"),
    (415, "Unsupported Media Type"), (429, "Too Many Requests"), (431, "Request Header Fields Too Large"),
    (500, "Internal Server Error"), (501, "Not Implemented"), (503, "Service Unavailable"),
    (505, "HTTP Version Not Supported"))}


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


class _BodyOverLimit(Exception):
    """``large_bodies_to_app``: the current request's body has gone past the limit; it is
    answered by the app with what was kept, then the connection closes."""


class _Request:
    __slots__ = ("method", "target", "version", "headers", "body", "keep_alive")
    method: bytes
    version: str
    keep_alive: bool

    def __init__(self):
        self.target = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []


class _Parsing:
    """httptools callbacks: build ``_Request`` objects as the bytes arrive. A body limit
    broken in a callback raises ``Refused`` (or ``_BodyOverLimit``), which httptools
    re-raises from ``feed_data`` as the context of its ``HttpParserCallbackError``.

    What llhttp accepts and HTTP/1.1 (RFC 9112) does not is refused here, once the head
    is in: a version other than 1.0 and 1.1, an HTTP/1.1 request without exactly one
    Host (3.2), a transfer coding other than chunked alone (6.1; llhttp takes
    ``gzip, chunked`` as chunked), an HTTP/1.0 request with a Transfer-Encoding (6.1:
    its framing is faulty; llhttp and h11 read it as chunked). The differential test
    against h11 pins the result (tests/shared/test_http_differential.py)."""

    def __init__(self, max_body: int, large_bodies_to_app: bool = False):
        self.parser = httptools.HttpRequestParser(self)
        self.max_body = max_body
        self.large_bodies_to_app = large_bodies_to_app
        self.current: _Request | None = None
        self.complete: list[_Request] = []
        # where on_header puts a field: the request's headers, or nowhere (trailers)
        self.fields: MutableSequence[tuple[bytes, bytes]] = _DROPPED
        self.in_headers = False  # a request's line and headers have begun, not ended
        self.header_bytes = 0    # bytes received while in_headers (over several reads)
        self.body_bytes = 0
        # Bytes received after the head (counted by ``serve`` per read) and chunks begun:
        # received - body_bytes is the body's framing, chunk extensions and trailers.
        self.received = 0
        self.chunks = 0
        self.continue_wanted = False

    def on_message_begin(self):
        self.current = _Request()
        self.fields = self.current.headers
        self.in_headers = True
        self.header_bytes = self.body_bytes = self.chunks = 0

    def on_url(self, url: bytes):
        assert self.current is not None  # httptools calls back only inside a message, begun with current
        self.current.target += url

    def on_header(self, name: bytes, value: bytes):
        # llhttp skips the whitespace before a value but keeps what follows it, which is
        # not part of the value either (RFC 9112, 5).
        self.fields.append((name, value.rstrip(b" \t")))

    def on_headers_complete(self):
        self.in_headers = False
        self.fields = _DROPPED
        request, parser = self.current, self.parser
        assert request is not None
        request.method = parser.get_method()
        request.version = version = parser.get_http_version()
        request.keep_alive = parser.should_keep_alive()
        if version != "1.1" and version != "1.0":
            if version == "0.9":  # llhttp's reading of a request line without a version
                raise Refused(400, "The request line must end with HTTP/1.1 or HTTP/1.0.")
            raise Refused(505, f"HTTP/{version} is not supported here; use HTTP/1.1.")
        hosts = codings = 0
        size = len(request.target)
        for name, value in request.headers:
            size += len(name) + len(value) + 4  # ": " and CRLF
            length = len(name)  # lower-case only the names that can match
            if length == 4 and (name == b"Host" or name.lower() == b"host"):  # the usual spelling, without a copy
                hosts += 1
            elif (length == 14 and name.lower() == b"content-length" and int(value) > self.max_body
                    and not self.large_bodies_to_app):
                raise Refused(413, "The request body is too large.", {"max_bytes": self.max_body})
            elif length == 17 and name.lower() == b"transfer-encoding":
                if version == "1.0":
                    # RFC 9112, 6.1: an HTTP/1.0 message with a Transfer-Encoding has faulty
                    # framing, and the connection must close after it. An HTTP/1.0 proxy in
                    # front does not know chunked and frames the bytes otherwise: what llhttp
                    # reads as a body and the next request is a request smuggled past it.
                    # Refused before the body is read, as llhttp refuses Content-Length with
                    # Transfer-Encoding: nothing after the head is parsed.
                    raise Refused(400, "An HTTP/1.0 request cannot have a Transfer-Encoding.")
                codings += 1
                if codings > 1 or value.lower() != b"chunked":
                    raise Refused(501, "Only the chunked transfer coding is supported.")
            elif (length == 6 and name.lower() == b"expect" and value.lower() == b"100-continue"
                    and version == "1.1"):
                self.continue_wanted = True
        if hosts != 1 and (hosts or version == "1.1"):
            raise Refused(400, "An HTTP/1.1 request needs exactly one Host header.")
        if size > MAX_HEADER_BYTES:  # ended in the read that crossed the limit, which serve does not count
            raise Refused(431, _HEAD_TOO_LARGE, {"max_bytes": MAX_HEADER_BYTES})
        self.received = -size  # serve adds this read whole; its part of the head is not framing

    def on_chunk_header(self):
        self.chunks += 1

    def on_body(self, body: bytes):
        assert self.current is not None
        self.body_bytes += len(body)
        if self.body_bytes > self.max_body:  # chunked bodies have no Content-Length to check up front
            if self.large_bodies_to_app:  # keep one byte past the limit: the app sees it is over
                self.current.body.append(body[:len(body) - (self.body_bytes - self.max_body - 1)])
                raise _BodyOverLimit
            raise Refused(413, "The request body is too large.", {"max_bytes": self.max_body})
        self.current.body.append(body)

    def on_message_complete(self):
        assert self.current is not None
        self.complete.append(self.current)
        self.current = None
        self.continue_wanted = False

    def framing_over_limit(self) -> bool:
        """A request still arriving after its head has sent more than its chunks' own
        framing in extensions and trailer fields. Called once a read: llhttp reports
        neither extensions nor unfinished fields, and httptools holds a field until it ends."""
        return self.received - self.body_bytes > MAX_HEADER_BYTES + CHUNK_FRAMING_BYTES * self.chunks


class Turns:
    """One connection's turns on a gevent event loop: once it has answered what one read
    brought, the greenlet yields to the hub (``gevent.sleep(0)``) before it answers more, so
    every connection the loop's last poll found ready is answered before this one answers
    its next request, even when that request is already in its socket. Under saturation the
    connections then answer one read each, in turn. A ``gevent.sleep(0)`` resumes from
    gevent's callback queue before the loop polls again, and gevent runs that queue for at
    most its switch interval (``gevent.getswitchinterval()``, 5 ms) before polling: a
    connection that became ready since the last poll waits at most that long. (Waiting for
    readability through the loop, ``gevent.socket.wait_read``, polls every time, but
    doubled the cost of a request on this machine: benchmarks/NOTES.md.)

    With the loop's poll count (``polls``: libev's iteration count) the yield waits for the
    next read and is made only when that read came back without a poll in between: the
    client's next request was already in the socket, the case the turns are for. A client
    that waits for each answer makes every ``recv`` block, so its connection goes through
    a poll anyway and never yields, where the yield cost a hub round trip per request, a
    few per cent of a small request's CPU. Without ``polls`` it yields after every answered
    read.
    """

    __slots__ = ("_pause", "_polls", "_seen")

    def __init__(self, pause, polls=None):
        self._pause = pause
        self._polls = polls
        self._seen = None  # the poll count when the last read was answered

    @classmethod
    def gevent(cls) -> Turns:
        """For a connection served by a greenlet of the current thread's hub."""
        from gevent import get_hub, sleep

        loop = get_hub().loop
        if not hasattr(loop, "iteration"):  # another loop than libev's
            return cls(sleep)
        return cls(sleep, lambda: loop.iteration)

    def answered(self) -> None:
        """What one read brought is answered."""
        if self._polls is None:
            self._pause(0)
        else:
            self._seen = self._polls()

    def read(self) -> None:
        """The read after an answered one brought data."""
        if self._seen is not None and self._polls() == self._seen:  # it did not wait for a poll
            self._pause(0)
        self._seen = None


class ConnectionSlots:
    """The connections of one process, at most ``limit`` of them (gunicorn's
    worker_connections: its gevent pool stops accepting when that many are open).

    A connection that is waiting for a request head (just accepted, idle between
    requests, or still sending its head) holds its slot cheaply and can give it up: when
    a new connection takes the last free slot, the one that has waited longest is closed
    to keep a slot free, as nginx reuses its idle connections when it runs out
    (``ngx_drain_connections``). Connections whose requests are past the head (a body
    arriving, an answer being made or sent) are never closed for room; when every
    connection is such, the pool is full and new ones wait in the listen backlog until
    one ends. Half-open connections therefore cannot lock out a client that sends its
    request at once: it needs its slot for milliseconds, and the header deadline ends
    the rest anyway (docs/security.md, "Slow clients")."""

    def __init__(self, limit: int = MAX_CONNECTIONS):
        self.limit = limit
        self.open: set[Connection] = set()
        self.waiting: dict[Connection, None] = {}  # in the order they began to wait: oldest first

    def admit(self, connection: Connection) -> None:
        self.open.add(connection)
        if len(self.open) >= self.limit and self.waiting:
            victim = next(iter(list(self.waiting)))  # a copy: threads (the tests) may change it meanwhile
            self.waiting.pop(victim, None)
            self.open.discard(victim)
            victim.end()
        self.waiting[connection] = None

    def release(self, connection: Connection) -> None:
        self.open.discard(connection)
        self.waiting.pop(connection, None)

    def drain(self, timeout: float, poll: float = 0.05) -> None:
        """The process is stopping (it no longer accepts, and its worker is no longer
        ``alive``, so every answer from now on says ``Connection: close``): close each
        idle connection now, as nginx and Go's ``Server.Shutdown`` do, and return once
        the others have ended, or after ``timeout``.

        Idle is waiting for a request of which no byte has arrived; RFC 9112 (9.6) lets
        a server close such a connection at any time, and a client that sent a request
        meanwhile sees the connection end unanswered and retries it (9.3.1). Each one is
        closed in stages (``Connection.close_idle``): a FIN at once, then what the
        client still sends is read and dropped, so no request in flight is met with a
        reset; after ``LINGER_SECONDS`` it is ended. Connections with a request under
        way (its head, its body, or its answer) finish it and close; a streamed answer
        ends after its next chunk."""
        began = time.monotonic()
        for connection in list(self.waiting):
            if connection.parsing.current is None:
                connection.close_idle()
        self._wait(lambda: not any(connection.closing for connection in list(self.open)),
                   began + min(LINGER_SECONDS, timeout), poll)
        for connection in list(self.open):
            if connection.closing:
                connection.end()
        self._wait(lambda: not self.open, began + timeout, poll)

    @staticmethod
    def _wait(done, deadline: float, poll: float) -> None:
        while not done() and time.monotonic() < deadline:
            time.sleep(poll)


class Connection:
    """One client connection: requests in, responses out, until either side closes.
    ``turns`` (a ``Turns``) when it shares a gevent loop with other connections;
    ``slots`` (a ``ConnectionSlots``): the process's connections, which it joins. The
    Server header is ``base_environ["SERVER_SOFTWARE"]``. ``large_bodies_to_app``: a body
    over ``max_body`` is not refused here; the app gets the request with the first
    ``max_body + 1`` bytes of it (and the declared Content-Length, if any) and answers it
    as it answers any body too large for it, then the connection closes.

    Timeouts: ``header_timeout`` for a request's line and headers, whole, from its first
    byte (the first request's from the accept; the empty lines a client may send before
    a request line count as its first bytes): a client that sent part of a head by then
    gets 408, one that sent nothing else is closed. ``timeout`` (gunicorn's
    ``--keep-alive``) for every other read: idle between requests, or within a body."""

    def __init__(self, sock, client_address, app, base_environ: dict, *, worker=None,
                 timeout: float | None = KEEPALIVE_SECONDS, header_timeout: float = HEADER_TIMEOUT,
                 max_body: int = MAX_BODY_BYTES, turns: Turns | None = None,
                 slots: ConnectionSlots | None = None, large_bodies_to_app: bool = False):
        self.sock = sock
        self.app = app
        self.worker = worker
        self.timeout = timeout
        self.header_timeout = header_timeout
        self.turns = turns
        self.slots = slots
        self.parsing = _Parsing(max_body, large_bodies_to_app)
        self.closing = False  # close_idle: the FIN is sent, what arrives is dropped
        self._started: tuple[str, list] | None = None  # start_response's arguments
        self._head_sent = False
        self._server_line = _server_line(base_environ["SERVER_SOFTWARE"])
        self.environ = dict(base_environ)
        if isinstance(client_address, tuple):
            self.environ["REMOTE_ADDR"], self.environ["REMOTE_PORT"] = client_address[0], str(client_address[1])
        else:
            self.environ["REMOTE_ADDR"] = self.environ["REMOTE_PORT"] = ""

    def serve(self) -> None:
        slots = self.slots
        if slots is not None:
            slots.admit(self)
        try:
            self._serve()
        finally:
            if slots is not None:
                slots.release(self)
            self.sock.close()

    def end(self) -> None:
        """Close the connection from outside (``ConnectionSlots``): its read returns nothing
        and ``serve`` ends (a shutdown, unlike a close, wakes a thread blocked in it)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close_idle(self) -> None:
        """Begin closing an idle connection from outside (``ConnectionSlots.drain``), as
        ``_linger`` does from inside: the FIN goes now, and the read it is waiting in
        drops whatever the client still sends, until the client closes or ``end``."""
        self.closing = True
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    @property
    def stopping(self) -> bool:
        """The process is stopping: its worker is no longer ``alive`` (SIGTERM, or gunicorn's
        ``--max-requests`` reached)."""
        return self.worker is not None and not self.worker.alive

    def _serve(self) -> None:
        sock, parsing, slots = self.sock, self.parsing, self.slots
        # The head's deadline, while one is due: a time of the monotonic clock. Each read
        # waits until then at most, and at most ``timeout``. (It bounds each send too: a
        # client that reads nothing for that long is gone. A streamed response is never
        # cut for being long.)
        head_due: float | None = time.monotonic() + self.header_timeout
        refusal: tuple[int, str, dict | None] | None  # each read's, set in the loop
        sock.settimeout(_sooner(self.header_timeout, self.timeout))
        while True:
            try:
                data = sock.recv(RECV_BYTES)
            except TimeoutError:
                if parsing.in_headers:
                    self._refuse_late_head()
                return
            except OSError:
                return
            if not data:
                return
            if self.turns is not None:
                self.turns.read()
            if self.closing:  # answered nothing after the FIN: dropped until the client closes
                continue
            refusal = None  # (status, message, details): answered after the requests before it
            over_limit = None  # a request whose body is too large, for the app to answer
            try:
                parsing.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                parsing.complete.pop()  # the upgrade request, always the last one parsed
                refusal = (400, "Protocol upgrades are not supported.", None)
            except httptools.HttpParserError as exc:
                cause = exc.__context__
                if isinstance(cause, Refused):
                    refusal = (cause.status, str(cause), cause.details)
                elif isinstance(cause, _BodyOverLimit):
                    over_limit, parsing.current = parsing.current, None
                else:  # ValueError: a Content-Length llhttp took but int() did not
                    refusal = (400, "The request is not valid HTTP/1.1.", None)
            else:
                if parsing.current is not None:  # a request is still arriving
                    if parsing.in_headers:  # one read holds at most RECV_BYTES: count only across reads
                        parsing.header_bytes += len(data)
                        if parsing.header_bytes > MAX_HEADER_BYTES:
                            refusal = (431, _HEAD_TOO_LARGE, {"max_bytes": MAX_HEADER_BYTES})
                    else:
                        parsing.received += len(data)
                        if parsing.framing_over_limit():
                            refusal = (431, _FRAMING_TOO_LARGE, {"max_bytes": MAX_HEADER_BYTES})
            answered = False
            if parsing.complete:  # pipelined requests parsed before a refused one get their answers
                if slots is not None:  # past its head: no longer a slot to free
                    slots.waiting.pop(self, None)
                requests, parsing.complete = parsing.complete, []
                for request in requests:
                    if not self._respond(request):
                        if request.keep_alive and self.stopping:  # the client may have sent more
                            self._linger()
                        return
                answered = True
            if refusal is not None:
                self._refuse(*refusal)
                return
            if over_limit is not None:  # the rest of its body is never parsed: close after the answer
                over_limit.keep_alive = False
                self._respond(over_limit)
                self._linger()
                return
            if parsing.continue_wanted:  # headers in, the client waits before sending the body
                parsing.continue_wanted = False
                try:
                    sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                except OSError:
                    return
            # What the next read waits for: a request, the rest of a head, or a body.
            if parsing.current is None and self.stopping:  # idle once the drain has begun
                self._linger()
                return
            if parsing.current is None or parsing.in_headers:
                if answered and slots is not None:
                    slots.waiting[self] = None
                if parsing.current is None and answered:  # idle: the keep-alive wait
                    if head_due is not None:
                        head_due = None
                        sock.settimeout(self.timeout)
                else:
                    # A head under way, or nothing since the last answer (or the accept) but
                    # empty lines: llhttp skips those before a request line (RFC 9112, 2.2)
                    # without beginning a message, yet they are the next request's first
                    # bytes. Were the connection idle, a CRLF now and then would hold it for
                    # ever, each one re-arming the keep-alive timeout.
                    now = time.monotonic()
                    if head_due is None or answered:  # a head begun after pipelined requests has its own
                        head_due = now + self.header_timeout
                    if now >= head_due:
                        if parsing.in_headers:
                            self._refuse_late_head()
                        return  # only empty lines: closed, as a connection that sent nothing is
                    sock.settimeout(_sooner(head_due - now, self.timeout))
            else:
                if slots is not None:
                    slots.waiting.pop(self, None)
                if head_due is not None:
                    head_due = None
                    sock.settimeout(self.timeout)
            if answered and self.turns is not None:
                self.turns.answered()

    def _refuse_late_head(self) -> None:
        self._refuse(408, "The request line and headers did not arrive in time.",
                     {"timeout_seconds": self.header_timeout})

    def _linger(self) -> None:
        """Close in stages (RFC 9112, 9.6): stop sending, then read and drop what the
        client still sends (the rest of a body) until it closes, for at most
        ``LINGER_SECONDS`` and ``LINGER_BYTES``. Closing with unread data would reset the
        connection, and a reset can destroy the answer before the client has read it."""
        sock = self.sock
        try:
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            received = 0
            while received < LINGER_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                sock.settimeout(left)
                data = sock.recv(RECV_BYTES)
                if not data:
                    return
                received += len(data)
        except OSError:
            pass

    # -- one request --

    def _respond(self, request: _Request) -> bool:
        """Answer one request; False when the connection must close afterwards."""
        if self.worker is not None:  # first, as gunicorn's workers do: the request reaching
            self.worker.count_request()  # --max-requests is answered with Connection: close
        self._started = None
        result = chunks = None
        try:
            try:
                result = self.app(self._environ(request), self._start_response)
                # Decided once the app has answered: a stop that began meanwhile closes this one.
                keep_alive = request.keep_alive and not self.stopping
                if isinstance(result, (list, tuple)):
                    body = b"".join(result)
                else:
                    # PEP 3333: the head waits for the first non-empty chunk (start_response
                    # may even be called while producing it), or for the end.
                    chunks, body = iter(result), b""
                    for body in chunks:
                        if body:
                            break
                    else:
                        chunks = None
                    if chunks is not None and self._started is not None and _has_length(self._started[1]):
                        body += b"".join(chunks)  # the app framed it: one send, as for a list
                        chunks = None
            except Refused as exc:  # from _environ: the request, not the app
                self._refuse(exc.status, str(exc), exc.details)
                return False
            except Exception:
                log.exception("unhandled error in the app")
                self._refuse(500, "An unexpected error occurred.")
                return False
            if self._started is None:
                log.error("the app returned without calling start_response")
                self._refuse(500, "An unexpected error occurred.")
                return False
            if chunks is not None:
                return self._stream(request, body, chunks, keep_alive)

            # The whole body at once: the common case.
            status, headers = self._started
            framing = ""
            for name, _ in headers:
                if len(name) == 14 and name.lower() == "content-length":
                    break
            else:
                if not status.startswith(_NO_BODY_STATUSES):
                    framing = f"Content-Length: {len(body)}\r\n"
            response = self._head(request, framing, keep_alive, body if request.method != b"HEAD" else b"")
            try:
                sent = self.sock.send(response)  # a response fits the socket buffer: one call, no loop
                if sent < len(response):
                    self.sock.sendall(response[sent:])
            except OSError:
                return False
            return keep_alive
        finally:
            close = getattr(result, "close", None)
            if close is not None:  # also when the client went away mid-stream: the app's generator cleans up
                try:
                    close()
                except Exception:
                    log.exception("closing the app's response failed")

    def _head(self, request: _Request, framing: str, keep_alive: bool, body: bytes = b"") -> bytes:
        """The response's head (``framing``: its Content-Length or Transfer-Encoding line,
        if any), followed by ``body``: a whole response in one buffer, or a streamed one's head."""
        assert self._started is not None  # the app has started its response
        status, headers = self._started
        head = "".join([f"{name}: {value}\r\n" for name, value in headers]) + framing
        if not keep_alive:
            head += "Connection: close\r\n"
        elif request.version == "1.0":
            head += "Connection: keep-alive\r\n"
        return b"".join((b"HTTP/1.1 ", status.encode("latin-1"), b"\r\n", head.encode("latin-1"),
                         b"Date: ", http_date(), self._server_line, body))

    def _stream(self, request: _Request, first: bytes, chunks, keep_alive: bool) -> bool:
        """Send ``first`` and then each further non-empty chunk as the app produces it:
        chunked for HTTP/1.1, close-delimited for HTTP/1.0 (RFC 9112, 6.3); nothing of
        it for HEAD, 204 or 304."""
        self._head_sent = True  # from here on start_response cannot replace the head
        try:
            return self._send_chunks(request, first, chunks, keep_alive)
        finally:
            self._head_sent = False

    def _send_chunks(self, request: _Request, first: bytes, chunks, keep_alive: bool) -> bool:
        sock = self.sock
        assert self._started is not None
        if request.method == b"HEAD" or self._started[0].startswith(_NO_BODY_STATUSES):
            try:
                sock.sendall(self._head(request, "", keep_alive))
            except OSError:
                return False
            return keep_alive
        chunked = request.version == "1.1"
        if chunked:
            head = self._head(request, "Transfer-Encoding: chunked\r\n", keep_alive)
        else:
            keep_alive = False
            head = self._head(request, "", False)
        try:
            sock.sendall(head + (b"%x\r\n%b\r\n" % (len(first), first) if chunked else first))
            while True:
                if self.stopping:  # the change streams never end: one cannot hold the stop
                    keep_alive = False
                    break
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except Exception:  # the head is out: all that is left is to end the message unfinished
                    log.exception("unhandled error in the app while streaming its response")
                    return False
                if chunk:
                    sock.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the client went away (or read nothing for the timeout)
            return False
        return keep_alive

    def _start_response(self, status: str, headers: list, exc_info=None):
        if exc_info and self._head_sent:
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
            text = value.decode("latin-1")
            environ[key] = f"{environ[key]},{text}" if key in environ else text
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
            self.sock.sendall(head + b"Date: " + http_date() + self._server_line + body)
        except OSError:
            pass


def _sooner(seconds: float, timeout: float | None) -> float:
    """``seconds``, or the read timeout if that is shorter (``None``: no read timeout)."""
    return seconds if timeout is None or seconds < timeout else timeout


def _has_length(headers: list) -> bool:
    for name, _ in headers:
        if len(name) == 14 and name.lower() == "content-length":
            return True
    return False


def base_environ(host: str, port: int | str, server: str) -> dict:
    """The part of every request's environ that one listener fixes; ``server`` is the
    service's Server header (``CONTROL_PLANE_SERVER``, ``DECISION_SERVER``)."""
    return {
        "SCRIPT_NAME": "",
        "SERVER_NAME": host,
        "SERVER_PORT": str(port),
        "SERVER_SOFTWARE": server,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
    }


class ThreadedServer:
    """``Connection`` on plain threads, for a process that does not run gevent (the webhook
    worker's health and metrics port): one thread accepts, each connection gets its own."""

    def __init__(self, listener: socket.socket, app, server: str, *, timeout: float = KEEPALIVE_SECONDS):
        self.listener = listener
        self.app = app
        self.timeout = timeout
        name = listener.getsockname()
        self.environ = base_environ(name[0], name[1], server)
        self.environ.update({"wsgi.multithread": True, "wsgi.multiprocess": False})

    def start(self) -> ThreadedServer:
        threading.Thread(target=self._accept, name="iamgate-http-accept", daemon=True).start()
        return self

    def _accept(self) -> None:
        while True:
            try:
                client, address = self.listener.accept()
            except OSError:  # stop() closed the listener
                return
            connection = Connection(client, address, self.app, self.environ, timeout=self.timeout)
            threading.Thread(target=connection.serve, name="iamgate-http", daemon=True).start()

    def stop(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
        except OSError:
            pass
        self.listener.close()
