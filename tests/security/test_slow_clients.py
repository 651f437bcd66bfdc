"""Slow clients against the real services (issue 24, item 7): the control plane under
gunicorn (one gevent worker, memory://) and the decision service as one process
(``python -m decision``), each with its default connection cap (IAMGATE_MAX_CONNECTIONS,
1000 per process) and a 2 s IAMGATE_HEADER_TIMEOUT.

Before: about 1,000 half-open connections filled the control plane's gevent pool, and a
client that sent its request at once waited in the listen backlog; the decision service
kept every connection open (no cap at all), and a header line every minute kept one
open for ever; so did an empty line now and then before any request line, on either.
"""
from __future__ import annotations

import os
import resource
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.processes import Processes, stop_process, wait_until

ROOT = Path(__file__).resolve().parents[2]
HALF_OPEN = 2000
CAP = 1000  # IAMGATE_MAX_CONNECTIONS' default
HEADER_TIMEOUT = 2
HALF_A_HEAD = b"GET /healthz HTTP/1.1\r\nHost: slow\r\n"  # never ended


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """{"control plane": (url, pid of the process serving it), "decision": ...}"""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HALF_OPEN + 500:
        pytest.skip(f"RLIMIT_NOFILE's hard limit ({hard}) is below {HALF_OPEN + 500}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the services inherit it: their cap is the limit
    log_dir = tmp_path_factory.mktemp("slow-clients")
    processes = Processes(log_dir, env={"IAMGATE_HEADER_TIMEOUT": HEADER_TIMEOUT,
                                        "IAMGATE_MONGODB_URI": "memory://"})
    decision = None
    try:
        processes.start_control_plane()
        decision = subprocess.Popen([sys.executable, "-m", "decision"], cwd=ROOT, env=processes.env,
                                    stdout=open(log_dir / "decision.log", "w"), stderr=subprocess.STDOUT)
        assert wait_until(lambda: _answers(processes.decision_url + "/healthz"), 60), processes.logs()
        worker = wait_until(lambda: _children(processes.control.pid))
        yield {"control plane": (processes.control_url, worker[0]), "decision": (processes.decision_url, decision.pid)}
    finally:
        stop_process(decision)
        processes.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _sockets(pid: int) -> int:
    """The process's open sockets (its listener and its client connections among them)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:  # closed meanwhile
            pass
    return count


class HalfOpen:
    """Connections that each send half a request head and nothing more; one the server
    closes is opened again, as a slowloris client does."""

    def __init__(self, port: int):
        self.port = port
        self.selector = selectors.DefaultSelector()  # epoll: select() stops at fd 1024
        self.opened = self.closed_by_server = 0

    def open(self, count: int) -> None:
        for _ in range(count):
            sock = socket.socket()
            sock.settimeout(2)
            try:
                sock.connect(("127.0.0.1", self.port))
                sock.sendall(HALF_A_HEAD)
            except OSError:  # the listen backlog is full: the server is not accepting
                sock.close()
                continue
            self.selector.register(sock, selectors.EVENT_READ)
            self.opened += 1

    def refill(self) -> None:
        """Open as many as the server closed (evicted, or 408 at the deadline)."""
        gone = [key.fileobj for key, _ in self.selector.select(0)]
        for sock in gone:
            self.selector.unregister(sock)
            sock.close()
        self.closed_by_server += len(gone)
        self.open(len(gone))

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()


def _answer_time(url: str) -> float:
    """Seconds for a new connection's GET /healthz to be answered 200 (a failure: inf)."""
    started = time.monotonic()
    try:
        with requests.get(url + "/healthz", timeout=5, headers={"Connection": "close"}) as response:
            if response.status_code != 200:
                return float("inf")
    except requests.RequestException:
        return float("inf")
    return time.monotonic() - started


@pytest.mark.parametrize("service", ["control plane", "decision"])
def test_half_open_connections_do_not_lock_out_a_client_that_sends_its_request(services, service):
    url, pid = services[service]
    attack = HalfOpen(int(url.rsplit(":", 1)[1]))
    try:
        attack.open(HALF_OPEN)
        times, most_sockets = [], 0
        for _ in range(12):  # about 3 s of a sustained attack
            attack.refill()
            times.append(_answer_time(url))
            most_sockets = max(most_sockets, _sockets(pid))
            time.sleep(0.25)
    finally:
        attack.close()
    # Every answer within 1 s; a loaded 2-core machine may stall one, so the median and
    # all but one are held to 1 s and the slowest to 3 s (answered, not timed out).
    assert sorted(times)[len(times) // 2] < 1.0, times
    assert sorted(times)[-2] < 1.0, times
    assert max(times) < 3.0, times
    assert most_sockets <= CAP + 20, most_sockets  # the cap holds (+ the listener and the service's own)
    assert attack.closed_by_server >= HALF_OPEN - CAP, attack.closed_by_server


@pytest.mark.parametrize("service", ["control plane", "decision"])
def test_a_header_line_at_a_time_does_not_keep_a_connection(services, service):
    url, _ = services[service]
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: slow\r\n")
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)
        for n in range(60):  # a line every 0.25 s, well within any read timeout
            if selector.select(0.25):
                break
            sock.sendall(b"X-Line-%d: x\r\n" % n)
        answer = sock.recv(65536)
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert b'"REQUEST_TIMEOUT"' in answer
    assert HEADER_TIMEOUT - 0.5 < elapsed < HEADER_TIMEOUT + 5, elapsed


@pytest.mark.parametrize("service", ["control plane", "decision"])
def test_empty_lines_before_a_request_line_do_not_keep_a_connection(services, service):
    """The empty lines a server ignores before a request line (RFC 9112, 2.2) begin no
    message in llhttp: a CRLF every 0.25 s kept the connection idle, each one re-arming
    the 75 s keep-alive timeout, so it was held for as long as the client liked. They
    are held to IAMGATE_HEADER_TIMEOUT from the first of them: closed, with nothing to
    answer since no request began."""
    url, _ = services[service]
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as sock:
        started = time.monotonic()
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)
        closed = False
        for _ in range(int((HEADER_TIMEOUT + 5) / 0.25)):  # a CRLF every 0.25 s
            if selector.select(0.25):
                closed = True
                break
            try:
                sock.sendall(b"\r\n")
            except OSError:  # closed between the select and the send
                closed = True
                break
        elapsed = time.monotonic() - started
        assert closed, f"still open {elapsed:.1f} s after its first byte, with a {HEADER_TIMEOUT} s header timeout"
        try:
            answer = sock.recv(65536)
        except ConnectionResetError:  # a CRLF arrived as the server closed
            answer = b""
    assert answer == b"", answer
    assert HEADER_TIMEOUT - 0.5 < elapsed < HEADER_TIMEOUT + 5, elapsed
