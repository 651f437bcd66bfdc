"""Kept-alive connections of the webhook sender (controlplane/webhooks/delivery.py
``Sender``): reused for the same checked address and host name only, never past the
read cap or a long idle time, and still under the attempt's deadline."""
from __future__ import annotations

import socket
import threading
import time

from controlplane.webhooks import delivery
from controlplane.webhooks.delivery import Sender
from controlplane.webhooks.targets import TargetPolicy

LOOPBACK = TargetPolicy(allow_private=True)


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
