"""The services' HTTP/1.1 server (shared/httpserver.py) over real TCP sockets.

``Connection.serve`` runs on plain blocking sockets as well as gevent's, so each accepted
connection is served in its own thread here; the client side writes exact bytes and reads
raw responses. The apps are tiny WSGI apps (an echo of the environ, apps that raise or
leave framing to the server); the real decision app is exercised elsewhere.
"""
from __future__ import annotations

import gc
import json
import logging
import re
import select
import socket
import threading
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import SimpleNamespace

import pytest

from shared import httpserver as server_module
from shared import serving
from shared.httpserver import (
    CONTROL_PLANE_SERVER,
    DECISION_SERVER,
    MAX_HEADER_BYTES,
    Connection,
    ConnectionSlots,
    Turns,
    _HttpDate,
    base_environ,
)
from shared.httpworker import ControlPlaneWorker, DecisionWorker

SERVER = DECISION_SERVER

TIMEOUT = 5.0  # client reads, and the server's idle timeout unless a test sets its own
ENVIRON_KEYS = ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "RAW_URI", "CONTENT_TYPE", "CONTENT_LENGTH",
                "SERVER_PROTOCOL", "REMOTE_ADDR", "REMOTE_PORT", "SERVER_NAME", "SERVER_PORT", "SCRIPT_NAME")


# ---------------------------------------------------------------- apps


class Echo:
    """Answers with what it received as JSON (its own Content-Length); records every call."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, environ, start_response):
        seen = {key: environ.get(key) for key in ENVIRON_KEYS}
        seen["headers"] = {key: value for key, value in environ.items() if key.startswith("HTTP_")}
        seen["body"] = environ["wsgi.input"].read().decode("latin-1")
        self.calls.append(seen)
        payload = json.dumps(seen).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]


class Result:
    """An iterable WSGI result with ``close()``, which records that it was called."""

    def __init__(self, chunks, fail=False):
        self.chunks, self.fail, self.closed = chunks, fail, 0

    def __iter__(self):
        yield from self.chunks
        if self.fail:
            raise RuntimeError("failed while iterating")

    def close(self):
        self.closed += 1


def failing_app(chunks, results: list):
    """An app whose plain-text result yields ``chunks`` and then raises; each result it
    returns is appended to ``results``."""
    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        results.append(Result(chunks, fail=True))
        return results[-1]

    return app


# ---------------------------------------------------------------- server and client


class Server:
    """Listens on a free port of 127.0.0.1; every accepted socket is served by ``Connection``
    in its own daemon thread. Errors escaping ``serve`` are kept (none may)."""

    def __init__(self, app, **options):
        self.app = app
        self.options = {"timeout": TIMEOUT, **options}
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.clients: list[Client] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        environ = base_environ("127.0.0.1", self.port, SERVER)
        while not self.stopping.is_set():
            try:
                sock, address = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection = Connection(sock, address, self.app, environ, **self.options)
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, connection):
        try:
            connection.serve()
        except BaseException as exc:  # reported at teardown
            self.errors.append(exc)

    def client(self) -> Client:
        client = Client(self.port)
        self.clients.append(client)
        return client

    def stop(self):
        self.stopping.set()
        self.acceptor.join(TIMEOUT)
        self.listener.close()
        for client in self.clients:
            client.close()
        for thread in self.threads:
            thread.join(TIMEOUT)
        assert not [thread for thread in self.threads if thread.is_alive()], "a connection outlived its client"
        assert not self.errors, self.errors


class Response:
    def __init__(self, status_line: str, headers: list[tuple[str, str]], body: bytes):
        self.version, status, self.reason = status_line.split(" ", 2)
        self.status = int(status)
        self.headers = headers
        self.body = body
        self.chunks: list[bytes] = []  # of a chunked body, as framed

    def header(self, name: str) -> str | None:
        values = self.all(name)
        assert len(values) <= 1, f"{name} repeated: {values}"
        return values[0] if values else None

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]

    @property
    def json(self):
        return json.loads(self.body)


class Client:
    """A raw client socket: exact bytes out, responses parsed from a buffer (pipelined
    responses may arrive in one read)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # every send its own segment
        self.port = self.sock.getsockname()[1]
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_slowly(self, data: bytes, size: int = 1, pause: float = 0.001) -> None:
        for start in range(0, len(data), size):
            self.sock.sendall(data[start:start + size])
            time.sleep(pause)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def response(self, head_only: bool = False) -> Response:
        """One full response: status line, headers, then a body of Content-Length bytes,
        or a chunked one (none for 1xx, or when ``head_only``: the answer to a HEAD)."""
        response = self.head()
        if head_only or response.status < 200 or response.status in (204, 304):
            return response
        if response.header("Transfer-Encoding") == "chunked":
            assert response.header("Content-Length") is None
            while (chunk := self.chunk()) != b"":
                response.chunks.append(chunk)
            response.body = b"".join(response.chunks)
            return response
        length = response.header("Content-Length")
        assert length is not None, f"no Content-Length: {response.headers}"
        while len(self.buffer) < int(length):
            assert self._fill(), f"closed within a body: {self.buffer!r}"
        response.body, self.buffer = self.buffer[:int(length)], self.buffer[int(length):]
        return response

    def head(self) -> Response:
        """A response's status line and headers."""
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), f"closed before a full response head: {self.buffer!r}"
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = [tuple(line.split(": ", 1)) for line in lines]
        assert all(len(header) == 2 for header in headers), lines
        return Response(status_line, headers, b"")

    def chunk(self) -> bytes:
        """The next chunk of a chunked body (RFC 9112, 7.1): b"" for the last one, whose
        empty trailer section is read too."""
        while b"\r\n" not in self.buffer:
            assert self._fill(), f"closed before a chunk's size: {self.buffer!r}"
        size_line, self.buffer = self.buffer.split(b"\r\n", 1)
        assert re.fullmatch(rb"[0-9a-f]+", size_line), size_line  # no extensions, lower-case hex
        size = int(size_line, 16)
        while len(self.buffer) < size + 2:
            assert self._fill(), f"closed within a chunk: {self.buffer!r}"
        data, end, self.buffer = self.buffer[:size], self.buffer[size:size + 2], self.buffer[size + 2:]
        assert end == b"\r\n", end
        return data

    def rest(self) -> bytes:
        """Everything until the server closes; ``TimeoutError`` if it does not within TIMEOUT."""
        try:
            while self._fill():
                pass
        except ConnectionResetError:
            pass
        data, self.buffer = self.buffer, b""
        return data

    def closed(self) -> bool:
        """The server closed the connection with nothing more sent."""
        return self.rest() == b""

    def close(self):
        self.sock.close()


@pytest.fixture
def serve():
    """``serve(app=None, **Connection options)`` -> a running ``Server`` (an ``Echo`` by default)."""
    servers = []

    def start(app=None, **options) -> Server:
        server = Server(app if app is not None else Echo(), **options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def echo(serve):
    return serve()


def request(method: str = "GET", target: str = "/", *headers: str, body: bytes = b"",
            version: str = "HTTP/1.1") -> bytes:
    """Exact request bytes: a Host header, ``headers``, Content-Length when there is a body."""
    lines = [f"{method} {target} {version}", "Host: test", *headers]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def eventually(condition, seconds: float = TIMEOUT) -> bool:
    """``condition()`` became true within ``seconds`` (what the server does after its answer)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def assert_open(client: Client) -> None:
    """The connection still serves requests."""
    client.send(request("GET", "/still-open"))
    response = client.response()
    assert response.status == 200
    assert response.json["PATH_INFO"] == "/still-open"


def assert_envelope(response: Response, status: int, code: str) -> dict:
    """The error envelope, its X-Request-Id, and ``Connection: close``."""
    assert response.status == status
    assert response.header("Content-Type") == "application/json"
    assert response.header("Connection") == "close"
    assert int(response.header("Content-Length")) == len(response.body)
    error = response.json["error"]
    assert set(error) == {"code", "message", "details", "request_id", "timestamp"}
    assert error["code"] == code
    assert error["message"]
    assert re.fullmatch(r"[0-9a-f]{32}", error["request_id"])
    assert response.header("X-Request-Id") == error["request_id"]
    assert datetime.fromisoformat(error["timestamp"]).tzinfo is not None
    return error


# ---------------------------------------------------------------- keep-alive and pipelining


def test_keep_alive_two_gets_on_one_connection(echo):
    client = echo.client()
    for path in ("/first", "/second"):
        client.send(request("GET", path))
        response = client.response()
        assert (response.version, response.status, response.reason) == ("HTTP/1.1", 200, "OK")
        assert response.json["PATH_INFO"] == path
        assert response.json["SERVER_PROTOCOL"] == "HTTP/1.1"
        assert response.header("Content-Length") == str(len(response.body))
        assert response.header("Content-Type") == "application/json"
        assert response.header("Server") == SERVER
        date = parsedate_to_datetime(response.header("Date"))
        assert abs((date - datetime.now(UTC)).total_seconds()) < 60
        assert response.header("Connection") is None  # HTTP/1.1: keep-alive by default
    assert [call["PATH_INFO"] for call in echo.app.calls] == ["/first", "/second"]
    assert len(echo.threads) == 1
    assert_open(client)


def test_pipelined_requests_are_answered_in_order(echo):
    client = echo.client()
    client.send(request("GET", "/one") + request("POST", "/two", body=b"payload") + request("GET", "/three?x=3"))
    first, second, third = client.response(), client.response(), client.response()
    assert [first.status, second.status, third.status] == [200, 200, 200]
    assert first.json["PATH_INFO"] == "/one"
    assert (second.json["REQUEST_METHOD"], second.json["PATH_INFO"], second.json["body"]) == ("POST", "/two", "payload")
    assert (third.json["PATH_INFO"], third.json["QUERY_STRING"]) == ("/three", "x=3")
    assert client.buffer == b""
    assert_open(client)


def test_a_request_sent_byte_by_byte_is_parsed(echo):
    client = echo.client()
    client.send_slowly(request("POST", "/slow?q=1", "X-Trace: abc", body=b"hello"))
    response = client.response()
    assert response.status == 200
    seen = response.json
    assert (seen["REQUEST_METHOD"], seen["PATH_INFO"], seen["QUERY_STRING"]) == ("POST", "/slow", "q=1")
    assert seen["headers"]["HTTP_X_TRACE"] == "abc"
    assert (seen["body"], seen["CONTENT_LENGTH"]) == ("hello", "5")
    assert len(echo.app.calls) == 1
    assert_open(client)


# ---------------------------------------------------------------- bodies


def test_post_with_content_length(echo):
    client = echo.client()
    client.send(request("POST", "/check", "Content-Type: application/json", body=b'{"user": "u1"}'))
    seen = client.response().json
    assert seen["body"] == '{"user": "u1"}'
    assert seen["CONTENT_LENGTH"] == "14"
    assert seen["CONTENT_TYPE"] == "application/json"
    assert "HTTP_CONTENT_TYPE" not in seen["headers"]
    assert "HTTP_CONTENT_LENGTH" not in seen["headers"]
    assert_open(client)


def test_chunked_body_is_whole_with_its_length(echo):
    client = echo.client()
    client.send(request("POST", "/chunked", "Transfer-Encoding: chunked", "Content-Type: text/plain"))
    client.send(b"5\r\nhello\r\n")
    client.send(b"6\r\n world\r\n")
    client.send(b"0\r\n\r\n")
    seen = client.response().json
    assert seen["body"] == "hello world"
    assert seen["CONTENT_LENGTH"] == "11"
    assert seen["CONTENT_TYPE"] == "text/plain"
    assert seen["headers"]["HTTP_TRANSFER_ENCODING"] == "chunked"
    assert_open(client)


def test_empty_chunked_body(echo):
    client = echo.client()
    client.send(request("POST", "/chunked", "Transfer-Encoding: chunked") + b"0\r\n\r\n")
    seen = client.response().json
    assert (seen["body"], seen["CONTENT_LENGTH"]) == ("", None)
    assert_open(client)


# -------------------------------------------------------- trailers and chunk extensions (issue 24, items 1, 4, 12)


def _chunked(*headers: str) -> bytes:
    """The head of a chunked POST, then a one-byte chunk and the last chunk: what follows
    is its trailer section."""
    return request("POST", "/chunked", "Transfer-Encoding: chunked", *headers) + b"1\r\nx\r\n0\r\n"


def test_trailer_fields_never_become_headers(echo):
    """A trailer must not set what the app reads as a header: Content-Type, or an
    X-Forwarded-For that would pass the per-IP limits."""
    client = echo.client()
    client.send(_chunked("Content-Type: text/plain")
                + b"Content-Type: application/evil\r\nX-Forwarded-For: 203.0.113.9\r\nX-Trailer: t\r\n\r\n")
    seen = client.response().json
    assert seen["body"] == "x"
    assert seen["CONTENT_TYPE"] == "text/plain"
    assert seen["headers"] == {"HTTP_HOST": "test", "HTTP_TRANSFER_ENCODING": "chunked"}
    assert_open(client)


def test_trailer_section_within_the_limit_is_read_and_dropped(echo):
    client = echo.client()
    trailer = b"X-Trailer: " + b"t" * (MAX_HEADER_BYTES // 2) + b"\r\n\r\n"
    client.send(_chunked())
    client.send_slowly(trailer, size=8192)
    seen = client.response().json
    assert (seen["body"], seen["PATH_INFO"]) == ("x", "/chunked")
    assert "HTTP_X_TRAILER" not in seen["headers"]
    assert_open(client)


def test_unending_trailer_section_is_431_once_past_the_limit(echo):
    """200 MB of trailer fields used to be kept whole by the parser: the worker's memory
    grew by as much and stayed there. Trailers count toward the head's 64 KiB."""
    client = echo.client()
    client.send(_chunked())
    start = b"X-Endless: "
    client.send_slowly(start + b"e" * (MAX_HEADER_BYTES + 1000 - len(start)), size=16384)  # all of it read
    error = assert_envelope(client.response(), 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert error["details"] == {"max_bytes": MAX_HEADER_BYTES}
    assert client.closed()
    assert echo.app.calls == []


def test_many_trailer_fields_are_431_once_past_the_limit(echo):
    client = echo.client()
    client.send(_chunked())
    client.send_slowly(b"".join(b"X-T-%05d: %s\r\n" % (n, b"t" * 100) for n in range(700)), size=16384)
    assert_envelope(client.response(), 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert client.closed()


def test_chunk_extensions_within_the_limit_are_accepted(echo):
    client = echo.client()
    client.send(request("POST", "/ext", "Transfer-Encoding: chunked")
                + b"5;name=value;flag\r\nhello\r\n6;" + b"e" * 1000 + b"\r\n world\r\n0;last\r\n\r\n")
    assert client.response().json["body"] == "hello world"
    assert_open(client)


@pytest.mark.parametrize("extension", [
    pytest.param(lambda: [b"1;" + b"e" * (MAX_HEADER_BYTES + 1000)], id="one-endless-extension"),
    pytest.param(lambda: [b"1;e=" + b"e" * 1000 + b"\r\nx\r\n" for _ in range(70)], id="one-per-chunk"),
])
def test_chunk_extensions_past_the_limit_are_431(echo, extension):
    """As Node.js counts them since CVE-2024-22019: llhttp keeps no extension, but without
    a limit a client could send one for ever, or one with every byte of a body."""
    client = echo.client()
    client.send(request("POST", "/ext", "Transfer-Encoding: chunked"))
    client.send_slowly(b"".join(extension()), size=16384)
    assert_envelope(client.response(), 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert client.closed()
    assert echo.app.calls == []


def test_small_chunks_are_not_counted_as_extensions(echo):
    """A client that sends its body in one-byte chunks sends five bytes of framing for
    each: that is the chunks' own framing, not extensions."""
    client = echo.client()
    client.send(request("POST", "/small-chunks", "Transfer-Encoding: chunked"))
    client.send_slowly(b"1\r\nx\r\n" * 20000 + b"0\r\n\r\n", size=16384)
    assert client.response().json["body"] == "x" * 20000
    assert_open(client)


# ---------------------------------------------------------------- Connection header and versions


@pytest.mark.parametrize("headers, version", [
    pytest.param(("Connection: close",), "HTTP/1.1", id="connection-close-from-the-client"),
    pytest.param((), "HTTP/1.0", id="http-1.0-closes-by-default"),
])
def test_the_connection_closes_after_the_answer(echo, headers, version):
    client = echo.client()
    client.send(request("GET", "/bye", *headers, version=version))
    response = client.response()
    assert response.status == 200
    assert (response.json["PATH_INFO"], response.json["SERVER_PROTOCOL"]) == ("/bye", version)
    assert response.header("Connection") == "close"
    assert client.closed()


def test_http_1_0_keep_alive_is_honoured(echo):
    client = echo.client()
    for path in ("/a", "/b"):
        client.send(request("GET", path, "Connection: keep-alive", version="HTTP/1.0"))
        response = client.response()
        assert response.status == 200
        assert (response.json["PATH_INFO"], response.json["SERVER_PROTOCOL"]) == (path, "HTTP/1.0")
        assert response.header("Connection") == "keep-alive"
    client.send(request("GET", "/c", version="HTTP/1.0"))  # no keep-alive this time: the last one
    assert client.response().header("Connection") == "close"
    assert client.closed()
    assert len(echo.app.calls) == 3


# ---------------------------------------------------------------- refusals before the app


@pytest.mark.parametrize("data", [
    pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", id="garbage"),
    pytest.param(b"GET\r\n\r\n", id="no-target"),
    pytest.param(b"GET / HTTP/9.9\r\nHost: test\r\n\r\n", id="bad-version"),
    pytest.param(b"GET /a b HTTP/1.1\r\nHost: test\r\n\r\n", id="space-in-target"),
    pytest.param(b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", id="bad-header-name"),
    pytest.param(b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", id="bare-cr"),
    pytest.param(b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", id="bad-content-length"),
    pytest.param(b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", id="both-framings"),
    pytest.param(b"GET / HTTP/1.1\nHost: test\n\n", id="bare-lf"),
])
def test_malformed_request_is_400_then_closed(echo, data):
    client = echo.client()
    client.send(data)
    error = assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert error["details"] == {}
    assert client.closed()
    assert echo.app.calls == []


def test_requests_before_a_malformed_one_are_answered_first(echo):
    client = echo.client()
    client.send(request("GET", "/good") + b"NOT HTTP\r\n\r\n")
    first = client.response()
    assert first.status == 200
    assert first.json["PATH_INFO"] == "/good"
    assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert client.closed()
    assert len(echo.app.calls) == 1


def test_invalid_absolute_target_is_400_not_500(echo, caplog):
    client = echo.client()
    client.send(request("GET", "http://host:99999/x"))
    assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert client.closed()
    assert echo.app.calls == []
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_content_length_over_max_body_is_413(serve):
    server = serve(max_body=1000)
    client = server.client()
    client.send(request("POST", "/big", "Content-Length: 1001"))  # the head alone: refused before the body
    error = assert_envelope(client.response(), 413, "PAYLOAD_TOO_LARGE")
    assert error["details"] == {"max_bytes": 1000}
    assert client.closed()
    assert server.app.calls == []


def test_content_length_at_max_body_is_accepted(serve):
    server = serve(max_body=1000)
    client = server.client()
    client.send(request("POST", "/edge", body=b"x" * 1000))
    response = client.response()
    assert response.status == 200
    assert response.json["CONTENT_LENGTH"] == "1000"
    assert len(response.json["body"]) == 1000


def test_chunked_body_growing_over_max_body_is_413(serve):
    server = serve(max_body=1000)
    client = server.client()
    client.send(request("POST", "/big", "Transfer-Encoding: chunked") + b"3e8\r\n" + b"x" * 1000 + b"\r\n")
    client.send(b"1\r\ny\r\n")  # one byte over; the server has read all that was sent
    error = assert_envelope(client.response(), 413, "PAYLOAD_TOO_LARGE")
    assert error["details"] == {"max_bytes": 1000}
    assert client.closed()
    assert server.app.calls == []


def _head_of(size: int) -> bytes:
    """A GET whose request line and headers are ``size`` bytes (``X-Pad-*`` headers)."""
    start, end = b"GET /big-head HTTP/1.1\r\nHost: test\r\n", b"\r\n"
    lines, left = [], size - len(start) - len(end)
    while left > 0:
        prefix = f"X-Pad-{len(lines)}: ".encode()
        line_size = min(8000, left)
        if line_size - len(prefix) - 2 < 1:  # too small for a header of its own: widen the previous one
            lines[-1] = lines[-1][:-2] + b"p" * line_size + b"\r\n"
        else:
            lines.append(prefix + b"p" * (line_size - len(prefix) - 2) + b"\r\n")
        left -= line_size
    head = start + b"".join(lines) + end
    assert len(head) == size
    return head


def test_head_block_within_the_limit_is_accepted(echo):
    client = echo.client()
    client.send_slowly(_head_of(MAX_HEADER_BYTES - 1000), size=8192)
    response = client.response()
    assert response.status == 200
    assert response.json["PATH_INFO"] == "/big-head"
    assert_open(client)


def test_head_block_over_the_limit_is_431(echo):
    """Just over the limit, in several sends, the last one ending the headers."""
    client = echo.client()
    client.send_slowly(_head_of(MAX_HEADER_BYTES + 2000), size=8192)
    error = assert_envelope(client.response(), 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert error["details"] == {"max_bytes": MAX_HEADER_BYTES}
    assert client.closed()
    assert echo.app.calls == []


def test_unending_head_block_is_431_before_it_ends(echo):
    client = echo.client()
    start = b"GET / HTTP/1.1\r\nX-Endless: "
    client.send_slowly(start + b"e" * (MAX_HEADER_BYTES - len(start)), size=16384)
    client.send(b"e")  # one byte over, all of it read by the server; no end of headers sent
    error = assert_envelope(client.response(), 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert error["details"] == {"max_bytes": MAX_HEADER_BYTES}
    assert client.closed()
    assert echo.app.calls == []


@pytest.mark.parametrize("headers", [
    pytest.param(("Connection: Upgrade", "Upgrade: websocket"), id="websocket"),
    pytest.param(("Connection: keep-alive, Upgrade", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAAQAAP__"), id="h2c"),
])
def test_upgrade_is_refused(echo, headers):
    client = echo.client()
    client.send(request("GET", "/socket", *headers))
    error = assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert "upgrade" in error["message"].lower()
    assert client.closed()
    assert echo.app.calls == []


def test_connect_is_refused(echo):
    client = echo.client()
    client.send(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert client.closed()
    assert echo.app.calls == []


def test_requests_before_an_upgrade_are_answered_first(echo):
    client = echo.client()
    client.send(request("GET", "/plain") + request("GET", "/socket", "Connection: Upgrade", "Upgrade: websocket"))
    first = client.response()
    assert (first.status, first.json["PATH_INFO"]) == (200, "/plain")
    assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert client.closed()
    assert [call["PATH_INFO"] for call in echo.app.calls] == ["/plain"]


# ---------------------------------------------------------------- HTTP/1.1 conformance (issue 24, item 12)


@pytest.mark.parametrize("data, status, code", [
    pytest.param(b"GET / HTTP/1.1\r\n\r\n", 400, "BAD_REQUEST", id="http-1.1-without-host"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "BAD_REQUEST", id="two-hosts"),
    pytest.param(b"GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", 400, "BAD_REQUEST", id="two-hosts-http-1.0"),
    pytest.param(request("POST", "/", "Transfer-Encoding: gzip, chunked") + b"0\r\n\r\n", 501, "NOT_IMPLEMENTED",
                 id="gzip-then-chunked"),
    pytest.param(request("POST", "/", "Transfer-Encoding: gzip") + b"0\r\n\r\n", 501, "NOT_IMPLEMENTED",
                 id="gzip"),
    pytest.param(request("POST", "/", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked") + b"0\r\n\r\n",
                 400, "BAD_REQUEST", id="two-transfer-encodings"),  # llhttp refuses it before the head ends
    pytest.param(request("POST", "/", "Transfer-Encoding: chunked", version="HTTP/1.0") + b"0\r\n\r\n",
                 400, "BAD_REQUEST", id="http-1.0-with-transfer-encoding"),
    pytest.param(request("POST", "/", "Transfer-Encoding: gzip", version="HTTP/1.0") + b"0\r\n\r\n",
                 400, "BAD_REQUEST", id="http-1.0-with-another-coding"),  # the framing is faulty, not the coding
    pytest.param(b"GET /\r\n\r\n", 400, "BAD_REQUEST", id="no-version"),
    pytest.param(b"GET / HTTP/0.9\r\nHost: test\r\n\r\n", 400, "BAD_REQUEST", id="http-0.9"),
    pytest.param(request("GET", "/", version="HTTP/2.0"), 505, "HTTP_VERSION_NOT_SUPPORTED", id="http-2.0"),
])
def test_what_http_1_1_lets_a_server_refuse_is_refused(echo, data, status, code):
    client = echo.client()
    client.send(data)
    assert_envelope(client.response(), status, code)
    assert client.closed()
    assert echo.app.calls == []


def test_an_http_1_0_request_with_transfer_encoding_smuggles_nothing(echo):
    """RFC 9112, 6.1: an HTTP/1.0 message with a Transfer-Encoding has faulty framing and
    the connection closes after it. llhttp reads its body as chunked and, with
    ``Connection: keep-alive``, the server used to keep the connection and answer what
    followed: bytes an HTTP/1.0 proxy in front framed as one request's became two. Now
    it is one 400 with ``Connection: close``, and neither request reaches the app."""
    client = echo.client()
    client.send(b"GET /first HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nGET /\r\n0\r\n\r\n"
                + request("GET", "/smuggled"))
    error = assert_envelope(client.response(), 400, "BAD_REQUEST")
    assert "Transfer-Encoding" in error["message"]
    assert client.closed()
    assert echo.app.calls == []


def test_http_1_0_without_host_is_accepted(echo):
    """RFC 9112, 3.2: only an HTTP/1.1 request must have a Host (h11 agrees)."""
    client = echo.client()
    client.send(b"GET /old HTTP/1.0\r\n\r\n")
    assert client.response().json["PATH_INFO"] == "/old"


# ---------------------------------------------------------------- Expect: 100-continue


def test_expect_100_continue(echo):
    client = echo.client()
    client.send(request("POST", "/upload", "Expect: 100-continue", "Content-Length: 5"))
    interim = client.response()
    assert (interim.version, interim.status, interim.reason, interim.headers) == ("HTTP/1.1", 100, "Continue", [])
    assert client.buffer == b""
    assert echo.app.calls == []
    client.send(b"hello")
    response = client.response()
    assert response.status == 200
    assert (response.json["body"], response.json["headers"]["HTTP_EXPECT"]) == ("hello", "100-continue")
    assert_open(client)


def test_no_100_continue_when_the_body_came_with_the_headers(echo):
    client = echo.client()
    client.send(request("POST", "/upload", "Expect: 100-continue", body=b"hello"))
    response = client.response()
    assert response.status == 200  # straight to the final response
    assert response.json["body"] == "hello"
    assert_open(client)


def test_expect_100_continue_over_max_body_is_413_not_100(serve):
    server = serve(max_body=1000)
    client = server.client()
    client.send(request("POST", "/upload", "Expect: 100-continue", "Content-Length: 5000"))
    assert_envelope(client.response(), 413, "PAYLOAD_TOO_LARGE")
    assert client.closed()


# ---------------------------------------------------------------- the environ


def test_environ_of_a_request(echo):
    client = echo.client()
    client.send(request("GET", "/a%20b/c%2Fd?q=a%20b&x=1", "X-Forwarded-For: 10.0.0.1",
                        "X_Forwarded_For: 6.6.6.6", "X-Multi: a", "X-Multi: b", "Accept: */*"))
    seen = client.response().json
    assert seen["PATH_INFO"] == "/a b/c/d"
    assert seen["QUERY_STRING"] == "q=a%20b&x=1"
    assert seen["RAW_URI"] == "/a%20b/c%2Fd?q=a%20b&x=1"
    assert seen["REQUEST_METHOD"] == "GET"
    assert seen["SCRIPT_NAME"] == ""
    assert seen["CONTENT_TYPE"] is None and seen["CONTENT_LENGTH"] is None
    assert seen["headers"] == {"HTTP_HOST": "test", "HTTP_X_FORWARDED_FOR": "10.0.0.1", "HTTP_X_MULTI": "a,b",
                               "HTTP_ACCEPT": "*/*"}
    assert (seen["REMOTE_ADDR"], seen["REMOTE_PORT"]) == ("127.0.0.1", str(client.port))
    assert (seen["SERVER_NAME"], seen["SERVER_PORT"]) == ("127.0.0.1", str(echo.port))


def test_a_field_value_has_no_trailing_whitespace(echo):
    """llhttp keeps it; RFC 9112 (5) and h11 do not (found by test_http_differential.py)."""
    client = echo.client()
    client.send(request("POST", "/", "X-Forwarded-For: 203.0.113.9 \t", "Transfer-Encoding: chunked ")
                + b"1\r\nx\r\n0\r\n\r\n")
    seen = client.response().json
    assert seen["headers"]["HTTP_X_FORWARDED_FOR"] == "203.0.113.9"
    assert seen["body"] == "x"


def test_underscore_header_cannot_pose_as_a_dashed_one(echo):
    client = echo.client()
    client.send(request("GET", "/", "X_Forwarded_For: 6.6.6.6"))
    assert "HTTP_X_FORWARDED_FOR" not in client.response().json["headers"]


def test_absolute_form_target(echo):
    client = echo.client()
    client.send(request("GET", "http://decision.internal:8080/x%20y?y=1&z=%20"))
    seen = client.response().json
    assert (seen["PATH_INFO"], seen["QUERY_STRING"]) == ("/x y", "y=1&z=%20")
    assert seen["RAW_URI"] == "http://decision.internal:8080/x%20y?y=1&z=%20"
    client.send(request("GET", "http://decision.internal"))
    seen = client.response().json
    assert (seen["PATH_INFO"], seen["QUERY_STRING"]) == ("/", "")


def test_each_request_gets_a_fresh_environ(echo):
    client = echo.client()
    client.send(request("POST", "/one", "X-Only-First: 1", "Content-Type: text/plain", body=b"abc")
                + request("GET", "/two"))
    first, second = client.response().json, client.response().json
    assert first["headers"]["HTTP_X_ONLY_FIRST"] == "1"
    assert "HTTP_X_ONLY_FIRST" not in second["headers"]
    assert (second["CONTENT_TYPE"], second["CONTENT_LENGTH"], second["body"]) == (None, None, "")


# ---------------------------------------------------------------- app results and failures


def test_app_that_raises_is_500_and_logged(serve, caplog):
    def broken(environ, start_response):
        raise ValueError("boom")

    server = serve(broken)
    client = server.client()
    with caplog.at_level(logging.ERROR, logger="iamgate.httpserver"):
        client.send(request("GET", "/"))
        error = assert_envelope(client.response(), 500, "INTERNAL_ERROR")
        assert client.closed()
    assert error["details"] == {}
    assert "boom" not in error["message"]
    records = [record for record in caplog.records if record.name == "iamgate.httpserver"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert isinstance(records[0].exc_info[1], ValueError)


def test_result_that_raises_before_its_first_chunk_is_500_and_closed(serve, caplog):
    """Nothing was sent yet (the head waits for the first non-empty chunk): a 500 can still be said."""
    results = []
    client = serve(failing_app([b""], results)).client()
    with caplog.at_level(logging.ERROR, logger="iamgate.httpserver"):
        client.send(request("GET", "/"))
        assert_envelope(client.response(), 500, "INTERNAL_ERROR")
        assert client.closed()
    assert results[0].closed == 1
    assert any(isinstance(record.exc_info[1], RuntimeError) for record in caplog.records if record.exc_info)


class ClosableList(list):
    def close(self):
        self.closed = True


def test_missing_content_length_of_a_list_or_tuple_is_added_and_close_called(serve):
    results = [ClosableList([b"hello, ", b"", b"world"]), (b"hello, ", b"world")]

    def app(environ, start_response):
        start_response("201 Created", [("Content-Type", "text/plain"), ("X-App", "yes")])
        return results[int(environ["PATH_INFO"][1:])]

    server = serve(app)
    client = server.client()
    client.send(request("GET", "/0") + request("GET", "/1"))
    for _ in range(2):
        response = client.response()
        assert (response.status, response.reason) == (201, "Created")
        assert response.body == b"hello, world"
        assert response.all("Content-Length") == ["12"]
        assert response.header("Transfer-Encoding") is None
        assert (response.header("Content-Type"), response.header("X-App")) == ("text/plain", "yes")
    assert eventually(lambda: getattr(results[0], "closed", False))


def test_an_iterable_with_its_content_length_is_sent_whole_and_closed(serve):
    results = []

    def app(environ, start_response):
        start_response("200 OK", [("content-length", "12")])
        results.append(Result([b"hello, ", b"", b"world"]))
        return results[-1]

    client = serve(app).client()
    client.send(request("GET", "/") + request("GET", "/"))
    for _ in range(2):
        response = client.response()
        assert (response.body, response.all("content-length"), response.header("Transfer-Encoding")) == (
            b"hello, world", ["12"], None)
    assert eventually(lambda: [result.closed for result in results] == [1, 1])  # closed after the send


def test_empty_body_gets_content_length_zero(serve):
    def app(environ, start_response):
        start_response("200 OK", [])
        return []

    server = serve(app)
    client = server.client()
    client.send(request("GET", "/"))
    response = client.response()
    assert (response.status, response.body, response.all("Content-Length")) == (200, b"", ["0"])
    client.send(request("GET", "/"))
    assert client.response().status == 200


def test_no_content_length_added_to_204_or_304(serve):
    statuses = iter(["204 No Content", "304 Not Modified", "200 OK"])

    def app(environ, start_response):
        start_response(next(statuses), [("X-App", "yes")])
        return []

    server = serve(app)
    client = server.client()
    client.send(request("GET", "/") + request("GET", "/") + request("GET", "/"))
    first, second, third = client.response(), client.response(), client.response()
    assert (first.status, first.all("Content-Length")) == (204, [])
    assert (second.status, second.all("Content-Length")) == (304, [])
    assert (third.status, third.all("Content-Length")) == (200, ["0"])


def test_app_that_never_starts_the_response_is_500(serve, caplog):
    def app(environ, start_response):
        return [b"no status"]

    server = serve(app)
    client = server.client()
    with caplog.at_level(logging.ERROR, logger="iamgate.httpserver"):
        client.send(request("GET", "/"))
        assert_envelope(client.response(), 500, "INTERNAL_ERROR")
        assert client.closed()
    assert any("start_response" in record.getMessage() for record in caplog.records)


class _GoneClient:
    """A socket whose peer sent ``data`` and then went away: every send fails."""

    def __init__(self, data: bytes):
        self.reads = [data]
        self.closed = False

    def settimeout(self, timeout):
        pass

    def recv(self, size):
        return self.reads.pop(0) if self.reads else b""

    def send(self, data):
        raise BrokenPipeError(32, "Broken pipe")

    sendall = send

    def close(self):
        self.closed = True


def test_client_gone_before_100_continue_ends_quietly():
    sock = _GoneClient(request("POST", "/", "Expect: 100-continue", "Content-Length: 5"))
    Connection(sock, ("127.0.0.1", 1), Echo(), base_environ("127.0.0.1", 80, SERVER)).serve()  # must not raise
    assert sock.closed


def test_app_content_length_is_not_repeated(echo):
    client = echo.client()
    client.send(request("GET", "/"))
    response = client.response()
    assert response.all("Content-Length") == [str(len(response.body))]


def test_head_has_the_length_but_no_body(echo):
    client = echo.client()
    client.send(request("HEAD", "/resource") + request("GET", "/after"))
    head = client.response(head_only=True)
    assert head.status == 200
    length = int(head.header("Content-Length"))
    after = client.response()  # parses only if the HEAD answer carried no body bytes
    assert after.status == 200
    assert after.json["PATH_INFO"] == "/after"
    assert echo.app.calls[0]["REQUEST_METHOD"] == "HEAD"
    assert length == len(json.dumps(echo.app.calls[0]).encode())
    assert client.buffer == b""


# ---------------------------------------------------------------- streamed responses


class Stream:
    """A streaming WSGI app: each response is a generator (no Content-Length) yielding the
    chunks of ``PATH_INFO`` split on ``/``; ``gates[i]`` (a ``threading.Event``), when
    present, is waited for before chunk ``i``. Records what was yielded and whether each
    generator was closed (its ``finally`` ran)."""

    def __init__(self, status: str = "200 OK", gates: dict | None = None, forever: bool = False):
        self.status, self.gates, self.forever = status, gates or {}, forever
        self.yielded: list[bytes] = []
        self.finished: list[str] = []  # "closed" or "ended", per generator

    def __call__(self, environ, start_response):
        start_response(self.status, [("Content-Type", "text/event-stream")])
        parts = [part.encode() for part in environ["PATH_INFO"].split("/")[1:]]
        return self._chunks(parts)

    def _chunks(self, parts):
        how = "closed"
        try:
            i = 0
            while i < len(parts) or self.forever:
                gate = self.gates.get(i)
                if gate is not None:
                    assert gate.wait(TIMEOUT)
                chunk = parts[i] if i < len(parts) else b"tick"
                if self.forever and i >= len(parts):
                    time.sleep(0.01)
                self.yielded.append(chunk)
                yield chunk
                i += 1
            how = "ended"
        finally:
            self.finished.append(how)


def test_chunks_are_sent_as_they_are_produced(serve):
    gates = {2: threading.Event(), 3: threading.Event()}
    app = Stream(gates=gates)
    client = serve(app).client()
    client.send(request("GET", "/hello/world/later/last"))
    head = client.head()
    assert (head.status, head.header("Transfer-Encoding"), head.header("Content-Length")) == (200, "chunked", None)
    assert head.header("Content-Type") == "text/event-stream"
    assert head.header("Connection") is None
    assert [client.chunk(), client.chunk()] == [b"hello", b"world"]  # while the generator waits
    assert app.finished == []
    gates[2].set()
    assert client.chunk() == b"later"
    assert app.finished == []
    gates[3].set()
    assert [client.chunk(), client.chunk()] == [b"last", b""]
    assert eventually(lambda: app.finished == ["ended"])
    assert client.buffer == b""


def test_empty_chunks_are_not_sent(serve):
    app = Stream()
    client = serve(app).client()
    client.send(request("GET", "/a//b/"))  # chunks a, "", b, ""
    response = client.response()
    assert (response.chunks, response.body) == ([b"a", b"b"], b"ab")  # an empty chunk would end the body


def test_keep_alive_after_a_chunked_response(serve):
    client = serve(Stream()).client()
    for path in ("/one/two", "/three"):
        client.send(request("GET", path))
        response = client.response()
        assert response.chunks == [part.encode() for part in path.split("/")[1:]]
        assert response.header("Connection") is None
    assert client.buffer == b""


def test_pipelined_requests_with_streamed_responses_are_answered_in_order(serve):
    def app(environ, start_response):
        if environ["PATH_INFO"].startswith("/whole"):
            return Echo()(environ, start_response)
        return Stream()(environ, start_response)

    client = serve(app).client()
    client.send(request("GET", "/s/1") + request("GET", "/whole") + request("GET", "/s/2/3")
                + request("POST", "/whole", body=b"xyz"))
    first, second, third, fourth = (client.response() for _ in range(4))
    assert first.chunks == [b"s", b"1"]
    assert (second.json["PATH_INFO"], second.header("Transfer-Encoding")) == ("/whole", None)
    assert third.chunks == [b"s", b"2", b"3"]
    assert fourth.json["body"] == "xyz"


def test_client_gone_mid_stream_closes_the_generator(serve):
    app = Stream(forever=True)
    server = serve(app)
    client = server.client()
    client.send(request("GET", "/first"))
    client.head()
    assert client.chunk() == b"first"
    client.close()  # the server finds out at a send, and stops asking for chunks
    assert eventually(lambda: app.finished == ["closed"])
    count = len(app.yielded)
    time.sleep(0.1)
    assert len(app.yielded) == count


def test_close_is_called_when_the_client_went_away_before_the_first_chunk():
    closed = []

    class Body:
        def __iter__(self):
            yield b"never delivered"

        def close(self):
            closed.append(True)

    def app(environ, start_response):
        start_response("200 OK", [])
        return Body()

    sock = _GoneClient(request("GET", "/"))
    Connection(sock, ("127.0.0.1", 1), app, base_environ("127.0.0.1", 80, SERVER)).serve()  # must not raise
    assert closed == [True] and sock.closed


def test_head_of_a_streamed_response_has_no_body_and_keeps_the_connection(serve):
    app = Stream(forever=True)
    client = serve(app).client()
    client.send(request("HEAD", "/a/b") + request("GET", "/after"))
    head = client.response(head_only=True)
    assert (head.status, head.header("Content-Length")) == (200, None)
    after = client.head()  # parses only if the HEAD answer carried no body bytes
    assert (after.status, after.header("Transfer-Encoding")) == (200, "chunked")
    assert client.chunk() == b"after"
    client.close()
    assert eventually(lambda: app.finished == ["closed", "closed"])  # the HEAD's generator was closed, not run out
    assert app.yielded[0] == b"a"


@pytest.mark.parametrize("status", ["204 No Content", "304 Not Modified"])
def test_204_and_304_streamed_have_no_body(serve, status):
    app = Stream(status=status)
    client = serve(app).client()
    client.send(request("GET", "/x/y") + request("GET", "/z"))
    for _ in range(2):
        response = client.response()
        assert (response.header("Content-Length"), response.header("Transfer-Encoding")) == (None, None)
    assert client.buffer == b""


def test_http_1_0_streamed_response_is_close_delimited(serve):
    app = Stream()
    client = serve(app).client()
    client.send(request("GET", "/one/two", "Connection: keep-alive", version="HTTP/1.0"))
    head = client.head()
    assert head.status == 200
    assert (head.header("Transfer-Encoding"), head.header("Content-Length"), head.header("Connection")) == (
        None, None, "close")
    assert client.rest() == b"onetwo"
    assert app.finished == ["ended"]


def test_a_generator_that_starts_the_response_with_its_first_chunk(serve):
    def app(environ, start_response):
        start_response("202 Accepted", [("X-Late", "yes")])  # PEP 3333 allows it this late
        yield b"first"
        yield b"second"

    def lazy(environ, start_response):
        return app(environ, start_response)

    client = serve(lazy).client()
    client.send(request("GET", "/"))
    response = client.response()
    assert (response.status, response.header("X-Late"), response.chunks) == (202, "yes", [b"first", b"second"])


def test_a_generator_of_only_empty_chunks_gets_content_length_zero(serve):
    def app(environ, start_response):
        start_response("200 OK", [])
        yield b""
        yield b""

    client = serve(app).client()
    client.send(request("GET", "/") + request("GET", "/"))
    for _ in range(2):
        response = client.response()
        assert (response.all("Content-Length"), response.header("Transfer-Encoding"), response.body) == (
            ["0"], None, b"")


def test_result_that_raises_after_its_first_chunk_ends_the_message_unfinished(serve, caplog):
    results = []
    client = serve(failing_app([b"partial"], results)).client()
    with caplog.at_level(logging.ERROR, logger="iamgate.httpserver"):
        client.send(request("GET", "/") + request("GET", "/never"))
        head = client.head()
        assert (head.status, head.header("Transfer-Encoding")) == (200, "chunked")
        assert client.chunk() == b"partial"
        assert client.closed()  # no last chunk: the client knows the body is incomplete
    assert results[0].closed == 1
    assert len(results) == 1
    assert any(isinstance(record.exc_info[1], RuntimeError) for record in caplog.records if record.exc_info)


def test_the_idle_timeout_does_not_cut_a_streamed_response(serve):
    """The timer runs around reads only: a stream quiet for longer than the keep-alive
    timeout (a change stream between heartbeats) goes on."""
    gate = threading.Event()
    app = Stream(gates={1: gate})
    client = serve(app, timeout=0.2).client()
    client.send(request("GET", "/before/after"))
    client.head()
    assert client.chunk() == b"before"
    time.sleep(0.6)
    gate.set()
    assert [client.chunk(), client.chunk()] == [b"after", b""]
    assert app.finished == ["ended"] or eventually(lambda: app.finished == ["ended"])
    _closed_within(client, 2.0)  # and once it has ended, the idle timeout applies again


# ---------------------------------------------------------------- bodies over the limit, answered by the app


def test_content_length_over_max_body_goes_to_the_app_when_asked(serve):
    server = serve(max_body=1000, large_bodies_to_app=True)
    client = server.client()
    client.send(request("POST", "/big", body=b"x" * 5000))
    response = client.response()
    assert (response.status, response.header("Connection")) == (200, "close")
    assert response.json["CONTENT_LENGTH"] == "5000"  # as declared; the app refuses it from that
    assert response.json["body"] == "x" * 1001  # one byte past the limit, never the rest
    assert client.closed()


def test_chunked_body_over_max_body_goes_to_the_app_when_asked(serve):
    server = serve(max_body=1000, large_bodies_to_app=True)
    client = server.client()
    client.send(request("POST", "/big", "Transfer-Encoding: chunked") + b"3e8\r\n" + b"x" * 1000 + b"\r\n"
                + b"5\r\nyyyyy\r\n")
    response = client.response()
    assert (response.status, response.header("Connection")) == (200, "close")
    assert (response.json["CONTENT_LENGTH"], response.json["body"]) == ("1001", "x" * 1000 + "y")
    assert client.closed()


def test_the_rest_of_a_body_over_the_limit_is_read_and_dropped_before_closing(serve):
    """RFC 9112, 9.6: closing with unread data resets the connection, and a reset destroys
    the answer if the client has not read it yet; the server half-closes and drains."""
    server = serve(max_body=1000, large_bodies_to_app=True)
    client = server.client()
    client.send(request("POST", "/big", body=b"x" * 100_000))  # within the socket buffers
    time.sleep(0.3)  # the server has answered and ended its side before the client reads
    response = client.response()
    assert (response.status, response.header("Connection"), len(response.json["body"])) == (200, "close", 1001)
    assert client.sock.recv(1) == b""  # the server's end of the stream, not a reset


def test_a_client_that_never_stops_sending_is_cut_after_the_linger(serve, monkeypatch):
    monkeypatch.setattr(server_module, "LINGER_SECONDS", 0.3)
    server = serve(max_body=1000, large_bodies_to_app=True)
    client = server.client()
    client.send(request("POST", "/big", "Transfer-Encoding: chunked") + b"7d0\r\n" + b"x" * 2000 + b"\r\n")
    assert client.response().status == 200
    started = time.monotonic()
    with pytest.raises(OSError):
        while time.monotonic() - started < TIMEOUT:
            client.send(b"400\r\n" + b"y" * 1024 + b"\r\n")
            time.sleep(0.01)
    assert time.monotonic() - started < 3


def test_body_at_max_body_is_whole_when_the_app_judges(serve):
    server = serve(max_body=1000, large_bodies_to_app=True)
    client = server.client()
    client.send(request("POST", "/edge", body=b"x" * 1000) + request("GET", "/next"))
    assert len(client.response().json["body"]) == 1000
    assert client.response().json["PATH_INFO"] == "/next"


def test_the_server_header_is_the_base_environs(serve):
    class ControlPlaneServer(Server):
        def _accept(self):  # the control plane's name instead of the decision service's
            global SERVER
            saved, SERVER = SERVER, CONTROL_PLANE_SERVER
            try:
                super()._accept()
            finally:
                SERVER = saved

    server = ControlPlaneServer(Echo(), timeout=TIMEOUT)
    try:
        client = server.client()
        client.send(request("GET", "/"))
        response = client.response()
        assert response.header("Server") == "iamgate"
        assert response.json["headers"] == {"HTTP_HOST": "test"}
        client.send(request("GET", "/") + b"BAD\r\n\r\n")
        client.response()
        assert client.response().header("Server") == "iamgate"  # the server's own refusals too
    finally:
        server.stop()


# ---------------------------------------------------------------- idle timeout


def _closed_within(client: Client, seconds: float) -> float:
    started = time.monotonic()
    assert client.closed()
    elapsed = time.monotonic() - started
    assert elapsed < seconds
    return elapsed


def test_idle_connection_is_closed_after_the_timeout(serve):
    server = serve(timeout=0.3)
    client = server.client()
    assert _closed_within(client, 2.0) >= 0.2


def test_idle_keep_alive_connection_is_closed_after_a_request(serve):
    server = serve(timeout=0.3)
    client = server.client()
    client.send(request("GET", "/"))
    assert client.response().status == 200
    _closed_within(client, 2.0)


def test_a_client_stalling_mid_head_gets_408_and_is_closed(serve):
    server = serve(timeout=0.3)
    client = server.client()
    client.send(b"GET /stalled HTTP/1.1\r\nHost: te")
    started = time.monotonic()
    assert_envelope(client.response(), 408, "REQUEST_TIMEOUT")
    _closed_within(client, 2.0 - (time.monotonic() - started))
    assert server.app.calls == []


# ---------------------------------------------------------------- the head's deadline (issue 24, item 7)


def test_a_head_sent_a_line_at_a_time_is_408_at_its_deadline(serve):
    """Each line arrives well within the read timeout: only the whole head's deadline ends it."""
    server = serve(timeout=TIMEOUT, header_timeout=0.6)
    client = server.client()
    started = time.monotonic()
    client.send(b"GET /slow HTTP/1.1\r\n")
    for n in range(40):  # a line every 0.1 s, until the server answers
        if select.select([client.sock], [], [], 0.1)[0]:
            break
        client.send(b"X-Line-%d: x\r\n" % n)
    error = assert_envelope(client.response(), 408, "REQUEST_TIMEOUT")
    assert error["details"] == {"timeout_seconds": 0.6}
    assert 0.5 < time.monotonic() - started < TIMEOUT
    assert client.closed()
    assert server.app.calls == []


def test_a_connection_that_sends_nothing_is_closed_at_the_head_deadline(serve):
    server = serve(timeout=TIMEOUT, header_timeout=0.3)
    client = server.client()
    assert _closed_within(client, 2.0) >= 0.2  # nothing was sent: nothing to answer


def test_the_keep_alive_wait_is_not_the_head_deadline(serve):
    """Between requests the idle timeout applies; the next head's deadline starts with its first byte."""
    server = serve(timeout=TIMEOUT, header_timeout=0.4)
    client = server.client()
    client.send(request("GET", "/1"))
    assert client.response().status == 200
    time.sleep(0.6)
    client.send(b"GET /2 HTTP/1.1\r\n")
    time.sleep(0.2)
    client.send(b"Host: test\r\n\r\n")
    assert client.response().json["PATH_INFO"] == "/2"


def test_a_head_begun_after_a_pipelined_request_has_a_deadline_of_its_own(serve):
    server = serve(timeout=TIMEOUT, header_timeout=1.0)
    client = server.client()
    client.send(b"GET /1 HTTP/1.1\r\n")
    time.sleep(0.6)
    client.send(b"Host: test\r\n\r\nGET /2 HTTP/1.1\r\n")
    assert client.response().json["PATH_INFO"] == "/1"
    time.sleep(0.6)  # 1.2 s after the first head began, 0.6 s after the second did
    client.send(b"Host: test\r\n\r\n")
    assert client.response().json["PATH_INFO"] == "/2"


@pytest.mark.parametrize("answered_first", [False, True], ids=["from-the-accept", "after-an-answer"])
def test_empty_lines_before_a_request_line_do_not_escape_the_head_deadline(serve, answered_first):
    """llhttp skips the empty lines a client may send before a request line (RFC 9112,
    2.2) without beginning a message, so the connection looked idle: the head deadline
    was dropped and each CRLF re-armed the idle timeout, and a client sending one every
    so often held the connection for as long as it liked. They count as the next
    request's first bytes now: the connection closes at the head deadline, on a new
    connection as after an answer, with nothing sent (no request began)."""
    server = serve(timeout=TIMEOUT, header_timeout=0.4)
    client = server.client()
    if answered_first:
        client.send(request("GET", "/first"))
        assert client.response().status == 200
    started = time.monotonic()
    for _ in range(40):  # a CRLF every 0.1 s, well within the idle timeout, until the server closes
        if select.select([client.sock], [], [], 0.1)[0]:
            break
        try:
            client.send(b"\r\n")
        except OSError:  # closed between the select and the send
            break
    assert client.closed()
    assert 0.3 < time.monotonic() - started < 2.0
    assert [call["PATH_INFO"] for call in server.app.calls] == (["/first"] if answered_first else [])


def test_a_head_after_empty_lines_has_its_deadline_from_their_first_byte(serve):
    """The deadline counts from the first empty line, not from the request line that
    follows: 408 comes at ``header_timeout`` after that CRLF."""
    server = serve(timeout=TIMEOUT, header_timeout=1.0)
    client = server.client()
    client.send(request("GET", "/first"))
    assert client.response().status == 200
    client.send(b"\r\n")
    time.sleep(0.8)
    client.send(b"GET /late HTTP/1.1\r\n")
    began = time.monotonic()
    assert_envelope(client.response(), 408, "REQUEST_TIMEOUT")
    assert time.monotonic() - began < 0.7  # about 0.2 s; 1.0 s if the request line began the deadline
    assert client.closed()


def test_an_empty_line_after_a_request_keeps_the_connection(echo):
    """The CRLF some clients add after a body (RFC 9112, 2.2) is skipped: the request is
    answered and the connection waits for the next one."""
    client = echo.client()
    client.send(request("POST", "/with-crlf", body=b"data") + b"\r\n")
    assert client.response().json["body"] == "data"
    assert_open(client)


def test_a_body_is_not_held_to_the_head_deadline(serve):
    server = serve(timeout=TIMEOUT, header_timeout=0.3)
    client = server.client()
    client.send(request("POST", "/slow-body", "Content-Length: 4"))
    for byte in b"body":
        time.sleep(0.15)
        client.send(bytes([byte]))
    assert client.response().json["body"] == "body"


# ---------------------------------------------------------------- connection slots (issue 24, item 7)


def _connected(slots: ConnectionSlots, count: int) -> None:
    assert eventually(lambda: len(slots.open) == count), (len(slots.open), count)


def test_at_the_cap_the_connection_waiting_longest_is_closed(serve):
    slots = ConnectionSlots(3)
    server = serve(slots=slots)
    idle = server.client()
    _connected(slots, 1)
    partial = server.client()
    partial.send(b"GET / HTTP/1.1\r\nHost: te")
    _connected(slots, 2)
    fresh = server.client()  # the last free slot: the oldest waiting connection makes room
    assert idle.closed()
    fresh.send(request("GET", "/fresh"))
    assert fresh.response().json["PATH_INFO"] == "/fresh"
    late = server.client()  # the partial head has now waited longest; fresh waits since its answer
    assert partial.closed()
    assert_open(fresh)
    assert_open(late)
    assert len(slots.open) == 2


def test_a_connection_past_its_head_is_never_closed_for_room(serve):
    slots = ConnectionSlots(3)
    server = serve(slots=slots)
    uploading = server.client()
    uploading.send(request("POST", "/upload", "Content-Length: 8") + b"half")
    idle = server.client()
    _connected(slots, 2)
    server.client()
    assert idle.closed()
    uploading.send(b"done")
    assert uploading.response().json["body"] == "halfdone"


def test_when_no_connection_can_make_room_none_is_closed(serve):
    slots = ConnectionSlots(2)
    server = serve(slots=slots)
    uploading = server.client()
    uploading.send(request("POST", "/upload", "Content-Length: 8") + b"half")
    _connected(slots, 1)
    other = server.client()
    other.send(request("GET", "/other"))
    assert other.response().status == 200
    uploading.send(b"done")
    assert uploading.response().json["body"] == "halfdone"
    assert len(slots.open) == 2


def test_a_connection_leaves_its_slot_when_it_ends(serve):
    slots = ConnectionSlots(10)
    server = serve(slots=slots)
    client = server.client()
    client.send(request("GET", "/", "Connection: close"))
    assert client.response().status == 200
    assert client.closed()
    assert eventually(lambda: not slots.open and not slots.waiting)


# ---------------------------------------------------------------- draining on SIGTERM (issue 31, item 6)


IDLE = 60.0  # the server's idle timeout here: a connection that ends sooner was ended by the drain


def _ended_cleanly(client: Client) -> bool:
    """The server closed with a FIN and nothing more sent; a reset raises ConnectionResetError."""
    return client.sock.recv(65536) == b""


def _draining(slots: ConnectionSlots, worker, timeout: float = TIMEOUT) -> threading.Thread:
    """What a stopping process does: its worker no longer alive, then ``slots.drain``."""
    worker.alive = False
    drain = threading.Thread(target=slots.drain, args=(timeout,), daemon=True)
    drain.start()
    return drain


def test_drain_closes_idle_connections_and_answers_requests_in_flight_with_close(serve):
    slots, worker = ConnectionSlots(10), FakeWorker()
    server = serve(slots=slots, worker=worker, timeout=IDLE)
    kept_alive = server.client()
    kept_alive.send(request("GET", "/first"))
    assert kept_alive.response().header("Connection") is None
    fresh = server.client()  # accepted, nothing sent yet: idle too
    uploading = server.client()
    uploading.send(request("POST", "/upload", "Content-Length: 8") + b"half")
    heading = server.client()
    heading.send(b"GET /head HTTP/1.1\r\nHost: te")
    _connected(slots, 4)
    drain = _draining(slots, worker)
    assert _ended_cleanly(kept_alive) and _ended_cleanly(fresh)
    uploading.send(b"done")
    heading.send(b"st\r\n\r\n")
    for client, body in ((uploading, "halfdone"), (heading, "")):
        response = client.response()
        assert (response.status, response.json["body"], response.header("Connection")) == (200, body, "close")
        assert _ended_cleanly(client)
    for client in (kept_alive, fresh, uploading, heading):
        client.close()
    drain.join(TIMEOUT)
    assert not drain.is_alive() and not slots.open


def test_a_request_racing_the_drain_is_read_and_dropped_not_reset(serve):
    """A client that sent its next request as the drain closed its idle connection sees
    the connection end unanswered (and may retry), never a reset: what it sent is read."""
    slots, worker = ConnectionSlots(10), FakeWorker()
    server = serve(slots=slots, worker=worker, timeout=IDLE)
    client = server.client()
    client.send(request("GET", "/first"))
    client.response()
    drain = _draining(slots, worker)
    assert eventually(lambda: all(connection.closing for connection in slots.open))
    client.send(request("POST", "/late", body=b"x" * 100_000))
    time.sleep(0.2)  # the server has read it (a close with it unread would reset)
    assert _ended_cleanly(client)
    assert not [call for call in server.app.calls if call["PATH_INFO"] == "/late"]
    client.close()
    drain.join(TIMEOUT)
    assert not drain.is_alive() and not slots.open


def test_an_idle_client_that_never_closes_does_not_hold_the_drain(serve, monkeypatch):
    monkeypatch.setattr(server_module, "LINGER_SECONDS", 0.2)
    slots, worker = ConnectionSlots(10), FakeWorker()
    server = serve(slots=slots, worker=worker, timeout=IDLE)
    client = server.client()
    client.send(request("GET", "/first"))
    client.response()
    _connected(slots, 1)
    drain = _draining(slots, worker, timeout=60)
    drain.join(TIMEOUT)
    assert not drain.is_alive() and not slots.open
    assert _ended_cleanly(client)


def test_an_answer_made_while_the_drain_began_says_close(serve):
    """Keep-alive is decided once the app has answered: a request the app was still
    working on when the stop began is answered with Connection: close."""
    slots, worker = ConnectionSlots(10), FakeWorker()
    working, stopped = threading.Event(), threading.Event()

    def slow(environ, start_response):
        working.set()
        stopped.wait(TIMEOUT)
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    server = serve(slow, slots=slots, worker=worker, timeout=IDLE)
    client = server.client()
    client.send(request("GET", "/slow"))
    assert working.wait(TIMEOUT)
    drain = _draining(slots, worker)
    stopped.set()
    response = client.response()
    assert (response.body, response.header("Connection")) == (b"ok", "close")
    assert _ended_cleanly(client)
    client.close()
    drain.join(TIMEOUT)
    assert not drain.is_alive()


def test_a_connection_idle_after_the_drain_began_closes_itself(serve):
    """An answer sent as the stop began may have promised keep-alive; the connection then
    closes as soon as it is idle, since the drain has already looked at it."""
    slots, worker = ConnectionSlots(10), FakeWorker()
    answered = threading.Event()

    def app(environ, start_response):
        start_response("200 OK", [("Content-Length", "2")])
        yield b"ok"
        worker.alive = False  # after the head was made, before the connection waits again
        answered.set()

    server = serve(app, slots=slots, worker=worker, timeout=IDLE)
    client = server.client()
    client.send(request("GET", "/"))
    assert client.response().header("Connection") is None
    assert answered.wait(TIMEOUT)
    assert _ended_cleanly(client)


def test_a_streamed_response_ends_after_its_next_chunk_once_the_drain_began(serve):
    """A change stream never ends by itself: it must not hold the stop until the graceful
    timeout. Its client sees a whole chunked message, then the connection close."""
    slots, worker = ConnectionSlots(10), FakeWorker()
    tick = threading.Event()

    def events(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        while True:
            tick.wait(TIMEOUT)
            tick.clear()
            yield b"event: heartbeat\n\n"

    server = serve(events, slots=slots, worker=worker, timeout=IDLE)
    client = server.client()
    client.send(request("GET", "/stream"))
    tick.set()
    response = client.head()
    assert client.chunk() == b"event: heartbeat\n\n"
    drain = _draining(slots, worker)
    tick.set()  # the next heartbeat, unless the server saw the stop before it asked for one
    rest = iter(client.chunk, b"")  # up to the last chunk: a whole message
    assert list(rest) in ([], [b"event: heartbeat\n\n"])
    assert response.header("Transfer-Encoding") == "chunked"
    assert _ended_cleanly(client)
    client.close()
    drain.join(TIMEOUT)
    assert not drain.is_alive() and not slots.open


# ---------------------------------------------------------------- the worker


class FakeWorker:
    def __init__(self, stop_at: int = 0):
        self.alive = True
        self.counted = 0
        self.stop_at = stop_at  # as gunicorn's --max-requests: the request that stops the worker

    def count_request(self):
        self.counted += 1
        if self.counted == self.stop_at:
            self.alive = False


def test_worker_counts_each_answered_request(serve):
    worker = FakeWorker()
    server = serve(worker=worker)
    client = server.client()
    client.send(request("GET", "/1") + request("GET", "/2"))
    assert [client.response().status, client.response().status] == [200, 200]
    assert worker.counted == 2
    client.send(request("GET", "/3"))
    assert client.response().header("Connection") is None
    assert worker.counted == 3


def test_worker_no_longer_alive_closes_the_connection(serve):
    worker = FakeWorker(stop_at=2)
    server = serve(worker=worker)
    client = server.client()
    client.send(request("GET", "/1"))
    response = client.response()
    assert response.header("Connection") is None
    client.send(request("GET", "/2"))
    response = client.response()
    assert (response.status, response.json["PATH_INFO"]) == (200, "/2")
    assert response.header("Connection") == "close"
    assert client.closed()
    assert worker.counted == 2


def _worker(max_requests: int, worker_class=DecisionWorker) -> DecisionWorker:
    worker = worker_class.__new__(worker_class)
    worker.nr, worker.max_requests, worker.alive = 0, max_requests, True
    worker._slots = ConnectionSlots(100)
    worker.log = SimpleNamespace(messages=[])
    worker.log.info = worker.log.messages.append
    return worker


def test_count_request_reaching_max_requests_ends_the_worker():
    worker = _worker(max_requests=3)
    worker.count_request()
    worker.count_request()
    assert (worker.nr, worker.alive, worker.log.messages) == (2, True, [])
    worker.count_request()
    assert (worker.nr, worker.alive) == (3, False)
    assert worker.log.messages == ["Autorestarting worker after current request."]
    worker.count_request()
    assert (worker.nr, worker.alive) == (4, False)
    assert len(worker.log.messages) == 1  # logged once


def test_request_reaching_max_requests_closes_its_connection(serve):
    """As gunicorn's own workers do: the request that ends the worker is answered with
    ``Connection: close`` (an idle keep-alive connection would hold the worker's exit)."""
    worker = _worker(max_requests=2)
    server = serve(worker=worker)
    client = server.client()
    client.send(request("GET", "/1"))
    assert client.response().header("Connection") is None
    assert worker.alive
    client.send(request("GET", "/2"))
    response = client.response()
    assert (response.status, response.header("Connection")) == (200, "close")
    assert client.closed()
    assert (worker.nr, worker.alive) == (2, False)


def test_worker_handle_serves_with_the_listener_environ():
    """``DecisionWorker.handle``: one base environ per listener, the worker's keep-alive
    as the timeout, ``self.wsgi`` as the app."""
    app = Echo()
    worker = _worker(max_requests=100)
    worker._environs, worker.wsgi, worker.cfg = {}, app, SimpleNamespace(keepalive=TIMEOUT)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        clients, threads = [], []
        for _ in range(2):
            client = Client(port)
            clients.append(client)
            sock, address = listener.accept()
            threads.append(threading.Thread(target=worker.handle, args=(listener, sock, address), daemon=True))
            threads[-1].start()
            client.send(request("GET", "/h", "Connection: close"))
            seen = client.response().json
            assert (seen["SERVER_NAME"], seen["SERVER_PORT"]) == ("127.0.0.1", str(port))
            assert (seen["REMOTE_ADDR"], seen["REMOTE_PORT"]) == ("127.0.0.1", str(client.port))
            assert client.closed()
        for thread in threads:
            thread.join(TIMEOUT)
            assert not thread.is_alive()
        for client in clients:
            client.close()
    assert list(worker._environs) == [listener]
    assert worker.nr == 2


@pytest.mark.parametrize("worker_class, server, large_bodies_to_app", [
    (DecisionWorker, "iamgate-decision", False), (ControlPlaneWorker, "iamgate", True)])
def test_each_service_worker_has_its_server_name_and_body_limit(monkeypatch, worker_class, server,
                                                                large_bodies_to_app):
    seen = []

    class Recorded:
        def __init__(self, sock, address, app, environ, **options):
            seen.append((environ["SERVER_SOFTWARE"], options))

        def serve(self):
            pass

    monkeypatch.setattr("shared.httpworker.Connection", Recorded)
    worker = _worker(max_requests=100, worker_class=worker_class)
    worker._environs, worker.wsgi, worker.cfg = {}, Echo(), SimpleNamespace(keepalive=7)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        worker.handle(listener, None, ("127.0.0.1", 1))
    (software, options), = seen
    assert software == server
    assert (options["large_bodies_to_app"], options["timeout"], options["max_body"]) == (
        large_bodies_to_app, 7, 1024 * 1024)
    assert isinstance(options["turns"], Turns)
    assert (options["header_timeout"], options["slots"]) == (worker.header_timeout, worker._slots)


@pytest.mark.parametrize("service", [serving.CONTROL_PLANE, serving.DECISION])
def test_the_settings_give_each_worker_the_connection_cap_and_head_deadline_and_freeze_its_start(monkeypatch, service):
    """gunicorn's worker_connections (the gevent pool a worker accepts into) and the
    worker's ConnectionSlots are one number, IAMGATE_MAX_CONNECTIONS; a
    --worker-connections on gunicorn's command line would change both."""
    from gunicorn.workers.ggevent import GeventWorker

    for name, value in {"IAMGATE_MAX_CONNECTIONS": "321", "IAMGATE_HEADER_TIMEOUT": "7",
                        "IAMGATE_INTERNAL_TOKEN": "t" * 32, "IAMGATE_LOG_LEVEL": "WARNING"}.items():
        monkeypatch.setenv(name, value)
    values = serving.settings(service)
    assert values["worker_connections"] == 321
    monkeypatch.setattr(GeventWorker, "init_process", lambda self: None)  # gunicorn's own start-up
    worker = _worker(max_requests=100, worker_class=ControlPlaneWorker if service == serving.CONTROL_PLANE
                     else DecisionWorker)
    worker.worker_connections = values["worker_connections"]
    worker.init_process()
    calls = []  # the test process's own objects stay out of the permanent generation
    monkeypatch.setattr(gc, "collect", lambda *args: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    values["post_worker_init"](worker)
    assert (worker._slots.limit, worker.header_timeout) == (321, 7)
    # What the worker started with leaves the cyclic collector's full collections, collected
    # first so that no dead cycle is frozen (shared.httpserver.freeze_start_up).
    assert calls == ["collect", "freeze"]


# ---------------------------------------------------------------- Date and the base environ


def test_http_date_is_rfc_7231_and_formatted_once_a_second(monkeypatch):
    formatted, _imf_fixdate = [], server_module._imf_fixdate

    def counting__imf_fixdate(*args, **kwargs):
        formatted.append(args)
        return _imf_fixdate(*args, **kwargs)

    monkeypatch.setattr(server_module, "_imf_fixdate", counting__imf_fixdate)
    now = [1_700_000_000.25]
    date = _HttpDate(clock=lambda: now[0])

    first = date()
    assert first == b"Tue, 14 Nov 2023 22:13:20 GMT"
    assert re.fullmatch(rb"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT", first)
    assert parsedate_to_datetime(first.decode()) == datetime.fromtimestamp(1_700_000_000, UTC)
    now[0] = 1_700_000_000.99
    assert date() is first
    assert len(formatted) == 1
    now[0] = 1_700_000_001.0
    second = date()
    assert second == b"Tue, 14 Nov 2023 22:13:21 GMT"
    assert len(formatted) == 2
    assert date() is second
    assert len(formatted) == 2


def test_base_environ():
    environ = base_environ("10.1.2.3", 8181, SERVER)
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"], environ["SERVER_SOFTWARE"]) == ("10.1.2.3", "8181", SERVER)
    assert (environ["wsgi.version"], environ["wsgi.url_scheme"], environ["SCRIPT_NAME"]) == ((1, 0), "http", "")
    assert environ["wsgi.input_terminated"] is True


def test_the_date_header_is_email_utils_imf_fixdate():
    from email.utils import formatdate

    from shared.httpserver import _imf_fixdate

    for seconds in (0, 951782400, 1_000_000_000, 1_767_225_599, 2 ** 31 - 1, 4_102_444_800):
        assert _imf_fixdate(seconds) == formatdate(seconds, usegmt=True).encode("ascii")


# ---------------------------------------------------------------- taking turns


def test_turns_yield_to_the_hub_after_every_answered_read(serve):
    """One yield per answered read, however many pipelined requests the read brought; none
    for a 100 Continue alone (the headers of a request that waits for it are no answer)."""
    pauses = []
    client = serve(turns=Turns(pauses.append)).client()
    client.send(request("GET", "/1"))
    assert client.response().status == 200
    client.send(request("GET", "/2") + request("GET", "/3"))
    assert [client.response().status for _ in range(2)] == [200, 200]
    client.send(b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
    assert client.response().status == 100
    client.send(b"ok")
    assert client.response().json["body"] == "ok"
    deadline = time.monotonic() + TIMEOUT
    while len(pauses) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pauses == [0, 0, 0]


@pytest.mark.parametrize("polled, yields", [
    (True, False),  # the read waited for a poll: the client had waited for the answer
    (False, True),  # a second read in one loop iteration: the request was already there
])
def test_turns_yield_only_when_the_next_read_came_without_a_poll(polled, yields):
    pauses, polls = [], [7]
    turns = Turns(pauses.append, polls=lambda: polls[0])
    turns.read()  # a connection's first read follows no answer
    turns.answered()
    assert pauses == []
    polls[0] += polled
    turns.read()
    assert pauses == ([0] if yields else [])


def test_the_gevent_loop_has_what_turns_read():
    """Else every answered read would yield again (``Turns.gevent`` falls back to it)."""
    pytest.importorskip("gevent")
    assert Turns.gevent()._polls is not None


def test_a_client_that_waits_for_each_answer_is_never_made_to_yield():
    """On gevent sockets in this thread's hub: each request is sent after the previous
    answer, so the connection's recv blocks (a poll) every time and nothing else waits."""
    gevent = pytest.importorskip("gevent")
    from gevent import socket as gsocket
    from gevent.server import StreamServer

    pauses = []

    def counted():
        turns = Turns.gevent()
        turns._pause = lambda seconds: (pauses.append(seconds), gevent.sleep(seconds))
        return turns

    def app(environ, start_response):
        start_response("204 No Content", [])
        return [b""]

    server = StreamServer(("127.0.0.1", 0), lambda sock, address: Connection(
        sock, address, app, base_environ("127.0.0.1", 0, SERVER), timeout=TIMEOUT, turns=counted()).serve())
    server.start()
    try:
        client = gsocket.create_connection(("127.0.0.1", server.server_port))
        for i in range(20):
            client.sendall(request("GET", f"/{i}"))
            with gevent.Timeout(TIMEOUT):
                received = b""
                while not received.endswith(b"\r\n\r\n"):
                    received += client.recv(4096)
            assert received.startswith(b"HTTP/1.1 204")
        client.close()
    finally:
        server.stop()
    assert pauses == []


def _served_while_a_client_pipelines(turns_factory) -> tuple[int, int]:
    """On gevent sockets in this thread's hub (no monkey patching): a "hog" client pipelines
    200 requests, so its socket is readable every time its greenlet comes back to ``recv``,
    and a second client sends one request at the same time (one poll finds both ready).
    Returns the position at which the second client's request was answered, and how many
    were answered."""
    gevent = pytest.importorskip("gevent")
    from gevent import socket as gsocket
    from gevent.server import StreamServer

    order: list[str] = []

    def app(environ, start_response):
        order.append(environ["PATH_INFO"])
        start_response("204 No Content", [])
        return [b""]

    def handle(sock, address):
        Connection(sock, address, app, base_environ("127.0.0.1", 0, SERVER), timeout=TIMEOUT,
                   turns=turns_factory()).serve()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    try:
        address = ("127.0.0.1", server.server_port)
        hog, other = gsocket.create_connection(address), gsocket.create_connection(address)
        gevent.sleep(0.05)  # both accepted, both greenlets waiting in recv
        other.sendall(request("GET", "/other"))  # neither send yields: the server has read nothing yet,
        hog.sendall(b"".join(request("GET", f"/hog/{i}") for i in range(200)))  # and libev runs the hog first
        with gevent.Timeout(TIMEOUT):
            while "/other" not in order or len(order) < 201:
                gevent.sleep(0.01)
        hog.close()
        other.close()
    finally:
        server.stop()
    return order.index("/other") + 1, len(order)


def test_a_connection_whose_requests_keep_arriving_takes_turns_with_the_others(monkeypatch):
    """The saturation-fairness fix (benchmarks/NOTES.md): without turns the pipelining
    client is answered to the end before the other connection is even read; with them the
    other request is answered right after the hog's first read (three requests)."""
    monkeypatch.setattr(server_module, "RECV_BYTES", 128)  # a couple of requests per read
    position, answered = _served_while_a_client_pipelines(lambda: None)
    assert (position, answered) == (201, 201)
    position, answered = _served_while_a_client_pipelines(Turns.gevent)
    assert answered == 201
    assert position <= 6
