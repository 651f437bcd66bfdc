"""The control plane's cached ``GET V1/authz/check`` beside the decision service's, per
request, through the same HTTP server code: instructions (valgrind's callgrind, which
gives the same count on a loaded machine) and, with ``--wall``, in-process time.

    .venv/bin/python -m benchmarks.controlplane_instructions [--small 200] [--large 1200]
    .venv/bin/python -m benchmarks.controlplane_instructions --wall

Three rows: the control plane with its WSGI hot path (controlplane/hotpath.py), the same
app with ``hot_check = None`` (Falcon and its middlewares, the reference), and the
decision service's GET check (``benchmarks.decision_instructions``'s set-up: the tests'
fake control plane, the decision app with its cache warm). The control plane
runs as ``make run`` configures it, in process: memory:// store, the INFO request-log
line (JSON, written to /dev/null), metrics, the general throttle counting every request
(its limit out of the way), an API key with every V1 permission, a user holding
``documents:read`` whose grants are cached. Each request is the one wrk sends, served by
``shared.httpserver.Connection`` from a socket stand-in, so httptools, the environ, the
app and the response's bytes all run; the kernel's socket calls and gevent's loop do not
(the control plane's own server is gevent's pywsgi; the move onto this server is another
change). Instructions per request are the difference between ``--large`` and ``--small``
requests over the difference (start-up cancels out). The clock is frozen (a FakeClock,
and the throttle's batching timer), so the count does not depend on how slowly valgrind
runs: the throttle, its limit out of the way, batches 0.5% of it and so writes its shared
counter only at its 250 ms interval (about four writes a second at full speed: none during
the count); and start-up loads one RSA key the parent generated instead of generating its own.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.decision_instructions import ROOT, _Socket

PERMISSION = "documents:read"
KINDS = ("hot", "falcon")  # and "decision"


def use_signing_key(path: str) -> None:
    """Start-up (the control plane's signing keys, the fake control plane's) takes the RSA
    key of this PEM file instead of generating one: generating costs a number of
    instructions that varies from run to run by more than the requests being counted."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = serialization.load_pem_private_key(Path(path).read_bytes(), None)
    rsa.generate_private_key = lambda public_exponent, key_size: key  # noqa: ARG005 -- the signature it replaces


def control_plane(kind: str):
    """(app, raw GET request) for a control plane with its hot path (``kind`` "hot") or
    without ("falcon"), its check's grants cached."""
    from controlplane.app import create_app
    from shared.config import Rate
    from shared.ids import new_id
    from shared.logs import configure
    from tests.conftest import FakeClock, make_config

    configure("INFO")
    logging.getLogger().handlers[0].setStream(open(os.devnull, "w"))  # the line is formatted and written
    app = create_app(make_config(rate_limit_api=Rate(10**9, 60)), clock=FakeClock(), start_background=False)
    if kind == "falcon":
        app.hot_check = None
    services = app.services
    services.api_throttle._monotonic = lambda: 0.0  # batches by count only, whatever valgrind's pace
    application = services.applications.create({"name": "bench"}, organization_id=None, owner_account_id=None)
    _, key = services.api_keys.create(application, {"name": "bench"})
    user_id = new_id()
    now = services.clock()
    services.store["users"].insert_one({  # as tests/plugins/roles.py's stored_user
        "_id": user_id, "app_id": application["_id"], "email": "bench@example.com", "name": "Bench",
        "password_hash": None, "email_verified": True, "metadata": None, "avatar_url": None, "status": "active",
        "created_at": now, "updated_at": now, "deleted_at": None, "suspended_at": None})
    role = services.roles.create(application["_id"], {"name": "reader", "display_name": "Reader",
                                                      "permissions": [PERMISSION], "is_system_role": False})
    services.roles.assign(application["_id"], user_id, {"role_id": role["_id"], "scope": None, "expires_at": None})
    path = f"/api/v1/applications/{application['_id']}/authz/check"
    data = (f"GET {path}?user_id={user_id}&permission={PERMISSION} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            f"Authorization: Bearer {key}\r\n\r\n").encode()
    serve_requests(app, data, 2)  # warm: the key, the application and the grants are cached
    return app, data


def serve_requests(app, data: bytes, count: int) -> dict:
    """Serve ``count`` copies of ``data``; the last answer's JSON body."""
    from shared.httpserver import CONTROL_PLANE_SERVER, Connection, base_environ

    sock = _Socket(data, count)
    environ = base_environ("127.0.0.1", 8000, CONTROL_PLANE_SERVER)
    Connection(sock, ("127.0.0.1", 5555), app, environ, timeout=None).serve()
    head, _, body = sock.last.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), sock.last
    return json.loads(body)


def serve(kind: str, count: int, signing_key: str) -> None:
    use_signing_key(signing_key)
    if kind == "decision":
        (app, data), stop = _decision_app()
    else:
        (app, data), stop = control_plane(kind), lambda: None
    try:
        answer = serve_requests(app, data, count)
    finally:
        stop()
    assert answer == {"allowed": True, "permission": PERMISSION, "cached": True}, answer


def count_instructions(kind: str, requests: int, signing_key: str) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
               "benchmarks.controlplane_instructions", "--serve", kind, str(requests), signing_key]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    output = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", output).group(1))


def wall(rounds: int, requests: int) -> dict:
    """Median in-process µs per request of each row, the rows interleaved round by round
    so that other load hits them alike."""
    apps = {kind: control_plane(kind) for kind in KINDS}
    decision, stop = _decision_app()
    apps["decision"] = decision
    times = {name: [] for name in apps}
    try:
        for _ in range(rounds):
            for name, (app, data) in apps.items():
                started = time.perf_counter()
                serve_requests(app, data, requests)
                times[name].append((time.perf_counter() - started) / requests * 1e6)
    finally:
        stop()
    return {name: statistics.median(values) for name, values in times.items()}


def _decision_app():
    """((app, raw GET request), stop) of a decision service whose check is cached, in
    front of the tests' fake control plane, as ``benchmarks.decision_instructions``."""
    from decision.app import create_app
    from tests.conftest import FakeClock, make_config
    from tests.decision.conftest import wait_for
    from tests.decision.fakecp import FakeControlPlane

    cp = FakeControlPlane(FakeClock(), heartbeat=3600).start()
    app_id = cp.add_app()
    key = cp.add_key(app_id)
    user = cp.add_user(app_id)
    cp.assign(app_id, user, cp.add_role(app_id, [PERMISSION]))
    config = make_config(internal_token=cp.token, control_plane_url=cp.url, public_url=cp.issuer)
    app = create_app(config, monotonic=lambda: 0.0)
    assert wait_for(lambda: app.service.cache.applied >= cp.head, timeout=120)
    path = f"/api/v1/applications/{app_id}/authz/check"
    data = (f"GET {path}?user_id={user}&permission={PERMISSION} HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            f"Authorization: Bearer {key}\r\n\r\n").encode()
    serve_requests(app, data, 2)

    def stop():
        app.service.follower.stop()
        cp.stop()

    return (app, data), stop


def _new_key_pem() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200, help="requests in the first count (default 200)")
    parser.add_argument("--large", type=int, default=1200, help="requests in the second count (default 1200)")
    parser.add_argument("--wall", action="store_true",
                        help="time the three in process, interleaved, instead of counting instructions")
    parser.add_argument("--serve", nargs=3, metavar=("KIND", "N", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2])
        return 0
    if args.wall:
        for name, micros in wall(rounds=9, requests=2000).items():
            print(f"{name}: {micros:.1f} µs per request in process (median of 9 rounds of 2,000)")
        return 0
    rows = {}
    with tempfile.NamedTemporaryFile(suffix=".pem") as signing_key:
        signing_key.write(_new_key_pem())
        signing_key.flush()
        for kind in KINDS:
            small = count_instructions(kind, args.small, signing_key.name)
            large = count_instructions(kind, args.large, signing_key.name)
            rows[f"control plane, {kind}"] = (large - small) / (args.large - args.small)
        small = count_instructions("decision", args.small, signing_key.name)
        large = count_instructions("decision", args.large, signing_key.name)
        rows["decision service"] = decision = (large - small) / (args.large - args.small)
    for name, count in rows.items():
        print(f"{name}: {count:,.0f} instructions per request ({count / decision:.2f}x the decision service)",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
