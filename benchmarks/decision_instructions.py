"""Instructions per check through the decision service's own server: GET against POST with
policies, counted by valgrind's callgrind, which gives the same count on a loaded machine
(within about 3%) where wall-clock rates move by a factor of two.

    .venv/bin/python -m benchmarks.decision_instructions [--small 200] [--large 1200]

Each count runs this module in a child process under ``valgrind --tool=callgrind``: a fake
control plane (tests/decision/fakecp.py) with the benchmark's application (one user with
``documents:read``, the 20 policies of ``benchmarks.decision_bench.abac_policies``), the
decision app with its cache warm, and ``shared.httpserver.Connection`` serving N copies of
the request wrk sends (same headers, same body) from a socket stand-in, so httptools, the
environ, the hot path, the cache, validation and the conditions all run; the kernel's
socket calls and gevent's loop do not. The cost per request is the difference between N
= ``--large`` and N = ``--small`` requests, divided by the difference (start-up cancels
out). Needs valgrind (Debian package ``valgrind``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class _Policies:
    """Collects ``abac_policies``'s policies instead of writing them over HTTP."""

    def __init__(self):
        self.policies = []

    def policy(self, name, effect, permissions, condition=None):
        from tests.decision.fakecp import policy

        self.policies.append(policy(effect, permissions, condition, name=name))


class _Socket:
    """Hands the same request to the server ``count`` times, then end of stream."""

    def __init__(self, data: bytes, count: int):
        self.data, self.count, self.last = data, count, b""

    def settimeout(self, timeout):
        pass

    def recv(self, size):  # noqa: ARG002 -- socket.recv's signature
        if not self.count:
            return b""
        self.count -= 1
        return self.data

    def send(self, data):
        self.last = data
        return len(data)

    sendall = send

    def close(self):
        pass


def serve(kind: str, count: int) -> None:
    """Answer ``count`` requests of ``kind`` (GET or POST) and check the last answer."""
    from benchmarks.decision_bench import abac_policies
    from decision.app import create_app
    from shared.httpserver import DECISION_SERVER, Connection, base_environ
    from tests.conftest import FakeClock, make_config
    from tests.decision.conftest import wait_for
    from tests.decision.fakecp import FakeControlPlane

    cp = FakeControlPlane(FakeClock(), heartbeat=3600).start()  # no frames while counting
    try:
        app_id = cp.add_app()
        key = cp.add_key(app_id)
        user = cp.add_user(app_id)
        cp.assign(app_id, user, cp.add_role(app_id, ["documents:read"]))
        collected = _Policies()
        permission, extra = abac_policies(collected)
        cp.set_policies(app_id, collected.policies)
        config = make_config(internal_token=cp.token, control_plane_url=cp.url, public_url=cp.issuer)
        app = create_app(config, monotonic=lambda: 0.0)  # the stream stays trusted however slow valgrind is
        assert wait_for(lambda: app.service.cache.applied >= cp.head, timeout=120)
        path = f"/api/v1/applications/{app_id}/authz/check"
        if kind == "GET":
            data = (f"GET {path}?user_id={user}&permission={permission} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
                    f"Authorization: Bearer {key}\r\n\r\n").encode()
        else:
            body = json.dumps({"user_id": user, "permission": permission, **extra}).encode()
            data = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAuthorization: Bearer {key}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        sock = _Socket(data, count)
        environ = base_environ("127.0.0.1", 8000, DECISION_SERVER)
        Connection(sock, ("127.0.0.1", 5555), app, environ, timeout=None).serve()
        answer = json.loads(sock.last.partition(b"\r\n\r\n")[2])
        expected = {"allowed": True, "cached": True} | ({"policies_checked": 15} if kind == "POST" else {})
        assert all(answer[name] == value for name, value in expected.items()), answer
        app.service.follower.stop()
    finally:
        cp.stop()


def count_instructions(kind: str, requests: int) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
               "benchmarks.decision_instructions", "--serve", kind, str(requests)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    output = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", output).group(1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200, help="requests in the first count (default 200)")
    parser.add_argument("--large", type=int, default=1200, help="requests in the second count (default 1200)")
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return 0
    per_request = {}
    for kind in ("GET", "POST"):
        small, large = count_instructions(kind, args.small), count_instructions(kind, args.large)
        per_request[kind] = (large - small) / (args.large - args.small)
        print(f"{kind}: {per_request[kind]:,.0f} instructions per request", flush=True)
    print(f"GET / POST with 20 policies: {per_request['GET'] / per_request['POST']:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
