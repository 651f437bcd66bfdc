"""SIGTERM drains kept-alive connections, with the real processes (issue 31, item 6).

Both services as they run in a pod: the control plane under gunicorn (its master
relays the SIGTERM to the worker) and the decision service as ``python -m decision``,
one process. Eight clients keep a connection open to one of them: five idle, three in
the middle of a request (its head sent, half of its body). On SIGTERM every idle
connection must end with a clean close (end of stream, never a reset), each request in
flight must get its whole answer with ``Connection: close``, and the process must exit
0 well within the pod's grace period. The issue saw the decision service reset all
eight connections and the control plane seven; before the fix this test saw every
connection closed by force (by gevent's one-second stop, by the graceful timeout), the
requests in flight unanswered.
"""
from __future__ import annotations

import json
import signal
import socket
import sys
import time

import pytest

from tests.e2e.processes import Processes, wait_until

CLIENTS, IN_FLIGHT = 8, 3
BODY = b"0123456789"
# Generous on a loaded machine: the drain itself takes well under a second.
WAIT = 15.0
EXIT_WITHIN = 20.0  # both drain for 5 s at most (GRACEFUL_SECONDS; the launcher's --graceful-timeout)


def _response(sock: socket.socket) -> tuple[str, dict, bytes]:
    """One whole response (status line, headers, body) from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError(f"the connection ended after {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError(f"the body ended after {len(body)} bytes")
        body += chunk
    return status, headers, body


def _outcome(action) -> str:
    """What a client saw: "reset", "eof" or what ``action`` returned."""
    try:
        return action()
    except ConnectionResetError:
        return "reset"
    except EOFError:
        return "eof"
    except TimeoutError:
        return "timeout"


def _closed(sock: socket.socket) -> str:
    """"eof" when the server closed the connection cleanly (FIN), "reset" on RST."""
    return _outcome(lambda: "eof" if sock.recv(65536) == b"" else "data")


def _answered_and_closed(sock: socket.socket) -> str:
    """Sends the rest of the body; "close" when the whole answer says Connection: close
    and a clean end of stream follows it."""
    def finish():
        sock.sendall(BODY[len(BODY) // 2:])
        status, headers, _ = _response(sock)
        if headers.get("connection") != "close":
            return f"answered {status} without Connection: close"
        return "close" if _closed(sock) == "eof" else "answered, then reset"

    return _outcome(finish)


def _drain(url: str, process) -> None:
    host, port = url.rsplit("/", 1)[-1].split(":")
    clients = [socket.create_connection((host, int(port)), timeout=WAIT) for _ in range(CLIENTS)]
    try:
        for client in clients:  # each connection has answered once and is kept alive
            client.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            status, headers, _ = _response(client)
            assert status.startswith("HTTP/1.1 200") and headers.get("connection") != "close", (status, headers)
        in_flight, idle = clients[:IN_FLIGHT], clients[IN_FLIGHT:]
        for client in in_flight:  # the head and half of the body: a request the server is reading
            client.sendall(f"POST /healthz HTTP/1.1\r\nHost: {host}\r\nContent-Type: text/plain\r\n"
                           f"Content-Length: {len(BODY)}\r\nExpect: 100-continue\r\n\r\n".encode())
            assert _response(client)[0] == "HTTP/1.1 100 Continue"  # the server has read the head
            client.sendall(BODY[:len(BODY) // 2])
        stopped = time.monotonic()
        process.send_signal(signal.SIGTERM)
        # The idle connections end first: they show that the drain has begun.
        idle_seen = [_closed(client) for client in idle]
        answers = [_answered_and_closed(client) for client in in_flight]
        for client in clients:  # as a client does at the end of a stream: the server need not wait for it
            client.close()
        assert (idle_seen, answers) == (["eof"] * len(idle), ["close"] * len(in_flight))
        assert process.wait(EXIT_WITHIN) == 0
        assert time.monotonic() - stopped < EXIT_WITHIN
    finally:
        for client in clients:
            client.close()


@pytest.fixture
def processes(tmp_path):
    started = Processes(tmp_path, env={"IAMGATE_STREAM_HEARTBEAT": 1})
    yield started
    started.stop()


def _start_one_process_decision_service(processes: Processes) -> None:
    processes.decision = processes._spawn("decision", [sys.executable, "-m", "decision"], processes.env)
    assert wait_until(lambda: processes.decision.poll() is None and processes.decision_ready(1), 60), processes.logs()


def test_the_control_plane_drains_on_sigterm(processes):
    """A decision service follows the control plane's change stream meanwhile, as in a
    pod: that endless response ends at its next heartbeat rather than holding the worker
    until gunicorn's graceful timeout cuts it off."""
    processes.start_control_plane()
    _start_one_process_decision_service(processes)

    def stream_lost() -> list[dict]:
        return [json.loads(line) for line in processes.logs().splitlines() if "change stream lost" in line]

    before = len(stream_lost())
    _drain(processes.control_url, processes.control)
    assert "Worker graceful timeout" not in processes.logs()
    assert wait_until(lambda: len(stream_lost()) > before, WAIT), processes.logs()
    # Ended as a whole message, not cut off by the master's SIGKILL at the graceful timeout.
    assert stream_lost()[-1]["reason"] == "the control plane ended the stream", processes.logs()


def test_the_one_process_decision_service_drains_on_sigterm(processes):
    processes.start_control_plane()
    _start_one_process_decision_service(processes)
    _drain(processes.decision_url, processes.decision)
