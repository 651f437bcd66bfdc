"""Kept-alive connections of the webhook sender (controlplane/webhooks/delivery.py
``Sender``): reused for the same checked address and host name only, never past the
read cap or a long idle time, and still under the attempt's deadline; and what an answer
can make the sender do: read past the cap, decompress, use a proxy."""
from __future__ import annotations

import gzip
import socket
import threading
import time
import tracemalloc

import h11
import pytest

from controlplane.webhooks import delivery
from controlplane.webhooks.delivery import RESPONSE_READ_CAP, Sender
from controlplane.webhooks.targets import TargetPolicy

LOOPBACK = TargetPolicy(allow_private=True)
BIG = 64 * 1024 * 1024


def peers(receiver) -> list:
    return [r["peer"] for r in receiver.requests]


def test_deliveries_to_one_target_share_a_connection(receiver):
    sender = Sender(5)
    outcomes = [sender.post(LOOPBACK.pin(receiver.url), b"{}", {}) for _ in range(5)]
    assert all(o.ok for o in outcomes)
    assert len(set(peers(receiver))) == 1


def test_a_connection_idle_too_long_is_not_reused(receiver, monkeypatch):
    monkeypatch.setattr(delivery, "IDLE_REUSE", 0.05)
    sender = Sender(5)
    assert sender.post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    time.sleep(0.1)
    assert sender.post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    first, second = peers(receiver)
    assert first != second


def test_a_response_over_the_read_cap_closes_its_connection(receiver):
    receiver.answer = b"x" * 100
    sender = Sender(5, read_cap=10)
    assert sender.post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    assert sender.post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    first, second = peers(receiver)
    assert first != second


def test_a_new_address_for_the_name_gets_a_new_connection(receiver):
    """DNS rebinding between two sends: the second connects to the newly checked
    address (where nothing listens here), never through the connection to the old one."""
    answers = iter([["127.0.0.1"], ["127.0.0.2"]])
    policy = TargetPolicy(allow_private=True, resolver=lambda host, port: next(answers))
    url = receiver.url.replace("127.0.0.1", "hooks.example.test")
    sender = Sender(2)
    assert sender.post(policy.pin(url), b"{}", {}).ok
    second = policy.pin(url)
    assert second.address == "127.0.0.2"
    receiver.server.server_close()  # nothing may reach the receiver again
    assert not sender.post(second, b"{}", {}).ok
    assert len(receiver.requests) == 1


def test_the_deadline_covers_a_reused_connection():
    """One connection: the first answer at once, the second a byte every 0.2 s (no single
    read waits the 1 s timeout); the second attempt still ends at the 1 s deadline."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        conn, _ = server.accept()
        accepted.append(conn)
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 50:
                time.sleep(0.2)
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    sender = Sender(1)
    try:
        assert sender.post(LOOPBACK.pin(url), b"{}", {}).ok
        started = time.monotonic()
        outcome = sender.post(LOOPBACK.pin(url), b"{}", {})
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert outcome.status is None and outcome.error == "timeout"
    assert elapsed < 2.0 and len(accepted) == 1


def test_each_delivery_thread_has_its_own_connections(receiver):
    sender = Sender(5)
    threads = [threading.Thread(target=lambda: [sender.post(LOOPBACK.pin(receiver.url), b"{}", {}) for _ in range(3)])
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(receiver.requests) == 9 and len(set(peers(receiver))) == 3


def test_an_attempt_that_ended_leaves_its_kept_connection_alone(receiver, monkeypatch):
    """The first attempt's deadline falls due while its connection sits in the pool (or
    serves the next attempt): it must not shut that socket."""
    monkeypatch.setattr(delivery, "IDLE_REUSE", 10.0)
    sender = Sender(1)
    assert sender.post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    time.sleep(1.3)  # past the first attempt's 1 s deadline
    assert sender.post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    first, second = peers(receiver)
    assert first == second


class RawTarget:
    """One connection on a bare socket: reads the request with h11 (an HTTP implementation
    apart from the sender's), then writes ``head`` and ``body`` as they are and records
    how many body bytes the kernel took.  A sender that stops reading at its cap and
    closes makes that send fail with the rest of the body unsent."""

    def __init__(self, head: bytes, body: bytes):
        self.request: h11.Request | None = None
        self.sent = 0
        self.done = threading.Event()
        self._head, self._body = head, body
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self._sock.accept()
        with conn:
            conn.settimeout(10)
            parser = h11.Connection(h11.SERVER)
            while not isinstance(event := parser.next_event(), h11.EndOfMessage):
                if event is h11.NEED_DATA:
                    parser.receive_data(conn.recv(65536))
                elif isinstance(event, h11.Request):
                    self.request = event
            body = memoryview(self._body)
            try:
                conn.sendall(self._head)
                while self.sent < len(body):
                    self.sent += conn.send(body[self.sent:self.sent + 65536])
            except OSError:
                pass
        self.done.set()

    def close(self):
        self._sock.close()


def _head(status: int, length: int, *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever", "Location: https://example.com/elsewhere", f"Content-Length: {length}",
             *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


@pytest.mark.parametrize("status", [200, 301, 302, 303, 307, 308])
def test_no_answer_is_read_past_the_cap_whatever_its_status(status):
    """A 3xx with a Location is read like any answer: up to the cap, then the connection
    is closed (requests' Session would read it all to prepare the redirect it does not
    follow).  The kernel's buffers take a few MiB at most; the rest is never sent."""
    target = RawTarget(_head(status, BIG), b"x" * BIG)
    try:
        assert Sender(5).post(LOOPBACK.pin(target.url), b"{}", {}).status == status
        assert target.done.wait(10)
    finally:
        target.close()
    assert target.sent < BIG // 4, f"{target.sent} bytes of the body were read"


@pytest.mark.parametrize("status", [200, 302])
def test_a_compressed_answer_is_never_decompressed(status):
    """The sender asks for no encoding, and a gzip answer well under the cap that would
    expand to 32 MiB is read as it is: the attempt's memory stays far below that."""
    bomb = gzip.compress(bytes(BIG // 2), 9)
    assert len(bomb) < RESPONSE_READ_CAP
    target = RawTarget(_head(status, len(bomb), "Content-Encoding: gzip"), bomb)
    tracemalloc.start()
    try:
        assert Sender(5).post(LOOPBACK.pin(target.url), b"{}", {}).status == status
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        target.close()
    assert peak < 4 * 1024 * 1024, f"{peak} bytes allocated: the body was decompressed"
    assert dict(target.request.headers)[b"accept-encoding"] == b"identity"


def test_a_proxy_from_the_environment_is_not_used(receiver, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert Sender(5).post(LOOPBACK.pin(receiver.url), b"{}", {}).ok
    assert len(receiver.requests) == 1
