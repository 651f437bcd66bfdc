"""The control-plane client's HTTP (decision/client.py): kept-alive lookups, a pooled
connection the server closed is replaced rather than failing a check, and every
transport failure is a ControlPlaneError (checks then fail closed)."""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from decision.client import ApplicationNotFound, ControlPlaneClient, ControlPlaneError, Refused


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def do_GET(self):
        server = self.server
        server.seen.append((self.path, self.headers.get("Authorization"), self.client_address[1]))
        status, body, *headers = server.answers.get(self.path, (404, {"error": {"code": "APPLICATION_NOT_FOUND"}}))
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        for name, value in (headers[0] if headers else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if server.close_after_answer:
            self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.seen, httpd.answers, httpd.close_after_answer = [], {}, False
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _client(server, **kw):
    return ControlPlaneClient(f"http://127.0.0.1:{server.server_address[1]}/", "sk_test_x", **kw)


WHOAMI = "/internal/v1/whoami"


def test_lookups_reuse_one_kept_alive_connection(server):
    server.answers[WHOAMI] = (200, {"kind": "api_key", "application_id": "a"})
    client = _client(server)
    for _ in range(3):
        assert client.whoami()["application_id"] == "a"
    assert [path for path, _, _ in server.seen] == [WHOAMI] * 3
    assert {auth for _, auth, _ in server.seen} == {"Bearer sk_test_x"}
    assert len({port for _, _, port in server.seen}) == 1  # one connection


def test_a_connection_the_server_closed_is_replaced_not_failed(server):
    server.answers[WHOAMI] = (200, {"kind": "internal"})
    server.close_after_answer = True  # closes each connection after answering, without saying so
    client = _client(server)
    for _ in range(3):
        assert client.whoami() == {"kind": "internal"}
        time.sleep(0.05)  # the server's close lands while the connection is idle, as a keep-alive timeout does
    assert len({port for _, _, port in server.seen}) == 3


def test_statuses_and_bodies_map_to_the_client_errors(server):
    client = _client(server)
    with pytest.raises(ApplicationNotFound):
        client.policies("nope")
    server.answers[WHOAMI] = (401, {"error": {"code": "AUTH_INVALID_API_KEY"}})
    with pytest.raises(ControlPlaneError, match="HTTP 401 AUTH_INVALID_API_KEY"):
        client.whoami()
    server.answers[WHOAMI] = (200, b"not json")
    with pytest.raises(ControlPlaneError, match="not JSON"):
        client.whoami()
    server.answers[WHOAMI] = (200, [1, 2])
    with pytest.raises(ControlPlaneError, match="not a JSON object"):
        client.whoami()
    server.answers["/.well-known/jwks.json"] = (200, {"keys": []})
    assert client.jwks() == {"keys": []}
    assert server.seen[-1][1] is None  # the JWKS is read without the credential


def _answering_once(reply: bytes) -> socket.socket:
    """A listener that reads one request of its first connection, answers ``reply``
    whatever it was, and closes it."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer():
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(reply)
        connection.close()

    threading.Thread(target=answer, daemon=True).start()
    return listener


def test_unreachable_slow_and_malformed_servers_are_control_plane_errors():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(ControlPlaneError, match="ConnectionRefusedError"):
        ControlPlaneClient(f"http://127.0.0.1:{port}", "t").whoami()

    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    garbage = _answering_once(b"SSH-2.0-OpenSSH\r\n\r\n")
    try:
        slow = ControlPlaneClient(f"http://127.0.0.1:{silent.getsockname()[1]}", "t", timeout=(1.0, 0.2))
        with pytest.raises(ControlPlaneError, match="TimeoutError"):
            slow.whoami()
        with pytest.raises(ControlPlaneError, match="BadStatusLine"):
            ControlPlaneClient(f"http://127.0.0.1:{garbage.getsockname()[1]}", "t").whoami()
    finally:
        silent.close()
        garbage.close()


def test_https_is_verified_against_the_ca_bundle():
    """A TLS server whose certificate no CA in the bundle signed: refused before any
    request is sent (here, a plain TCP server that answers the handshake with garbage)."""
    listener = _answering_once(b"HTTP/1.1 200 OK\r\n\r\n")
    try:
        with pytest.raises(ControlPlaneError, match="SSL"):
            ControlPlaneClient(f"https://127.0.0.1:{listener.getsockname()[1]}", "t").whoami()
    finally:
        listener.close()


@pytest.mark.parametrize("status, code, headers, retry_after", [
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "12"}, 12.0),
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # a date: our own wait
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "9" * 400}, 300.0),  # too many digits for a float: capped
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "9" * 5000}, 300.0),  # too many for int(): capped, not a crash
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "86400"}, 300.0),  # a day: capped
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "-5"}, None),  # not delay-seconds
    (429, "STREAM_LIMIT_EXCEEDED", {"Retry-After": "1_000"}, None),  # int() would take it; the RFC does not
    (401, "AUTH_INVALID_API_KEY", {}, None),
    (403, "PERMISSION_DENIED", {}, None),
])
def test_a_refused_stream_says_how_long_to_wait(server, status, code, headers, retry_after):
    """A refusal is not a gap that an immediate retry fixes: the follower waits what the
    429's Retry-After says, or its own longer wait (decision/stream.py)."""
    server.answers["/internal/v1/changes"] = (status, {"error": {"code": code}}, headers)
    with pytest.raises(Refused, match=f"HTTP {status} {code}") as refused:
        _client(server).changes(None, read_timeout=1)
    assert refused.value.retry_after == retry_after
