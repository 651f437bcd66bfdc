"""OIDC token endpoint throughput: the authorization_code exchange, the refresh_token
grant and the client_credentials grant, at concurrency 1 and 16, each beside its floor.

    make bench oidc
    .venv/bin/python -m benchmarks.oidc_token_bench [--seconds 5] [--codes 3000] [--store wire]

Method: the real stack (``python -m controlplane.launcher``: gunicorn, one gevent
worker, ``memory://``) at IAMGATE_BCRYPT_ROUNDS=4; over HTTP a dashboard account, an
application, an API key with oidc:manage, a client and one end user.  Then, per
concurrency level:

- code exchange: ``--codes`` codes are issued first through the JSON mode of
  ``GET /oidc/authorize`` (untimed; a code lives 60 s), then ``c`` threads exchange
  them (``client_secret_post``, PKCE verifier) until the pool is spent; wall time ->
  exchanges per second, and each request's latency;
- refresh grant: each of ``c`` threads rotates its own refresh-token chain (from one of
  the exchanges) for ``--seconds`` seconds;
- client credentials: ``c`` threads ask a machine client's token for ``--seconds``
  seconds.

The floor of a grant is what one worker could answer if it did nothing but the RSA
signatures the answer needs: the code and refresh answers sign two JWTs (access and ID
token), the client credentials answer one.  The cost of one RS256 signature with a
2048-bit key (the provider's key size) is measured in this process in the same run,
before the load, before each concurrency level and after the load (the median of the
four: the machine's speed drifts, and one reading moved the floor by a tenth), so the
floor is 1 / (signatures x that cost) answers per second, per worker.

The load generator shares the machine's cores with the server, so the wall-clock rate
says little about the worker.  The control-plane worker's own CPU time (the scheduler's
nanosecond count of every thread, /proc/<pid>/task/*/schedstat) is read before each
phase and again ``DRAIN`` seconds after it: the work an answer leaves for later is its
own too (the audit sealer chains each answer's event once it is 5 seconds old, in the
same worker on ``memory://``), and would otherwise land in whichever phase runs then.
What the idle worker spends meanwhile is taken off: its rate is read right after each
drain, with the data that phase left in the store (the median of ``IDLE`` one-second
readings). The CPU seconds per answer give the worker's capacity, 1 / (CPU seconds per
answer) answers per second, which is compared with the floor ("per worker").  Prints a
table; not a pass/fail benchmark (exit status 1 only on errors).

``--store wire`` runs the same against a store in a process of its own, reached as
``mongodb://`` (tests/mongo_wire.py), the layout of a deployment on MongoDB: the worker
then pays the driver's round trips instead of the embedded store's operations, and the
audit sealer runs in the webhook worker, whose CPU is not counted.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import os
import platform
import secrets
import statistics
import tempfile
import threading
import time
from pathlib import Path

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from benchmarks.login_load import PASSWORD, percentile, setup_application
from tests.e2e.conftest import start_stack
from tests.e2e.processes import start_store, stop_process

REDIRECT_URI = "http://127.0.0.1/callback"
LEVELS = (1, 16)
SIGNATURES = {"authorization_code": 2, "refresh_token": 2, "client_credentials": 1}
# Seconds after a phase whose CPU is the phase's: the sealer's settle time (5 s), its
# interval (1 s), and one more.
DRAIN = 7.0
# Seconds over which the idle worker's rate is read after each drain (a reading a second).
IDLE = 3.0


def worker_pid(launcher: int) -> int:
    """The control plane's one gunicorn worker: the child of the launcher's gunicorn
    master whose config module is the control plane's."""
    for child in _children(launcher):
        if b"controlplane.gunicorn_conf" in Path(f"/proc/{child}/cmdline").read_bytes():
            workers = _children(child)
            if len(workers) != 1:
                raise RuntimeError(f"expected one control-plane worker, found {workers}")
            return workers[0]
    raise RuntimeError("no control-plane gunicorn master under the launcher")


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def cpu_seconds(pid: int) -> float:
    """The CPU time of ``pid``'s threads so far, to the nanosecond (``/proc/<pid>/stat``
    counts in clock ticks of 10 ms: over a 3 s idle reading, 3 ms a second)."""
    return sum(int((task / "schedstat").read_text().split()[0])
               for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


def idle_rate(pid: int, seconds: float = IDLE) -> float:
    """The worker's CPU seconds per second while nothing asks it anything: the median of
    one-second readings, so that a pass of the audit sealer over the whole log (once a
    minute) in one of them does not make the idle worker look busier than it is."""
    rates = []
    for _ in range(max(1, round(seconds))):
        before = cpu_seconds(pid)
        time.sleep(1.0)
        rates.append(cpu_seconds(pid) - before)
    return statistics.median(rates)


def measured(pid: int, phase, *args, drain: float = 0.0) -> dict:
    """``phase(*args)``'s result with ``cpu``: the worker's CPU seconds during it and the
    ``drain`` seconds after it, less what the idle worker spends over the drain (read
    just after it), and that ``idle`` rate."""
    before = cpu_seconds(pid)
    result = phase(*args)
    time.sleep(drain)
    spent = cpu_seconds(pid) - before
    idle = idle_rate(pid) if drain else 0.0
    return {**result, "cpu": spent - idle * drain, "idle": idle}


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def setup(base: str) -> dict:
    app_id, (email,), dashboard = setup_application(base, 1)
    created = dashboard.post(f"{base}/api/dashboard/applications/{app_id}/api-keys",
                             json={"name": "bench", "permissions": ["oidc:manage"]})
    created.raise_for_status()
    key = created.json()["data"]["key"]
    client = requests.post(f"{base}/api/v1/applications/{app_id}/oidc/clients",
                           headers={"Authorization": f"Bearer {key}"},
                           json={"name": "Bench RP", "redirect_uris": [REDIRECT_URI]})
    client.raise_for_status()
    login = requests.post(f"{base}/api/v1/applications/{app_id}/users/login",
                          json={"email": email, "password": PASSWORD})
    login.raise_for_status()
    machine = requests.post(f"{base}/api/v1/applications/{app_id}/oidc/clients",
                            headers={"Authorization": f"Bearer {key}"},
                            json={"name": "Bench machine", "redirect_uris": [REDIRECT_URI],
                                  "grant_types": ["client_credentials"]})
    machine.raise_for_status()
    return {"client": client.json()["data"], "machine": machine.json()["data"],
            "user_token": login.json()["data"]["access_token"]}


def signature_cost(samples: int = 200) -> float:
    """Median seconds of one RS256 signature of an access-token-sized JWT (2048-bit key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": "http://127.0.0.1:8000", "sub": secrets.token_hex(16), "aud": "http://127.0.0.1:8000",
              "iat": 0, "exp": 3600, "jti": secrets.token_hex(16), "client_id": "oc_" + secrets.token_hex(12),
              "scope": "openid profile email", "app_id": secrets.token_hex(16)}
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1", "typ": "at+jwt"})
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def issue_codes(base: str, ctx: dict, n: int) -> list[tuple[str, str]]:
    session, codes = requests.Session(), []
    headers = {"Authorization": f"Bearer {ctx['user_token']}"}
    for _ in range(n):
        verifier, challenge = _pkce()
        response = session.get(f"{base}/oidc/authorize", headers=headers, params={
            "response_type": "code", "client_id": ctx["client"]["client_id"], "redirect_uri": REDIRECT_URI,
            "scope": "openid profile email", "code_challenge": challenge, "code_challenge_method": "S256"})
        response.raise_for_status()
        codes.append((response.json()["code"], verifier))
    return codes


def _token_request(session, base, ctx, body, client_key="client"):
    client = ctx[client_key]
    started = time.perf_counter()
    response = session.post(f"{base}/oidc/token", data={**body, "client_id": client["client_id"],
                                                         "client_secret": client["client_secret"]})
    return time.perf_counter() - started, response


def exchange_phase(base: str, ctx: dict, codes: list, concurrency: int) -> dict:
    lock, latencies, refresh_tokens, errors = threading.Lock(), [], [], []
    pool = list(codes)

    def worker():
        session = requests.Session()
        while True:
            with lock:
                if not pool:
                    return
                code, verifier = pool.pop()
            elapsed, response = _token_request(session, base, ctx, {
                "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
                "code_verifier": verifier})
            with lock:
                if response.status_code == 200:
                    latencies.append(elapsed)
                    refresh_tokens.append(response.json()["refresh_token"])
                else:
                    errors.append(response.status_code)

    wall = _run_threads(worker, concurrency)
    return {"latencies": latencies, "errors": errors, "wall": wall, "refresh_tokens": refresh_tokens}


def refresh_phase(base: str, ctx: dict, refresh_tokens: list, concurrency: int, seconds: float) -> dict:
    lock, latencies, errors = threading.Lock(), [], []
    deadline = time.perf_counter() + seconds

    def worker(token):
        session = requests.Session()
        while time.perf_counter() < deadline:
            elapsed, response = _token_request(session, base, ctx,
                                               {"grant_type": "refresh_token", "refresh_token": token})
            with lock:
                if response.status_code == 200:
                    latencies.append(elapsed)
                    token = response.json()["refresh_token"]
                else:
                    errors.append(response.status_code)
                    return

    wall = _run_threads(worker, concurrency, args=[(t,) for t in refresh_tokens[:concurrency]])
    return {"latencies": latencies, "errors": errors, "wall": wall}


def client_credentials_phase(base: str, ctx: dict, concurrency: int, seconds: float) -> dict:
    lock, latencies, errors = threading.Lock(), [], []
    deadline = time.perf_counter() + seconds

    def worker():
        session = requests.Session()
        while time.perf_counter() < deadline:
            elapsed, response = _token_request(session, base, ctx, {"grant_type": "client_credentials"},
                                               client_key="machine")
            with lock:
                if response.status_code == 200:
                    latencies.append(elapsed)
                else:
                    errors.append(response.status_code)
                    return

    wall = _run_threads(worker, concurrency)
    return {"latencies": latencies, "errors": errors, "wall": wall}


def _run_threads(target, n: int, args=None) -> float:
    threads = [threading.Thread(target=target, args=(args[i] if args else ())) for i in range(n)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def _row(name: str, concurrency: int, result: dict, signature: float) -> str:
    lat, floor = result["latencies"], 1 / (SIGNATURES[name] * signature)
    if not lat:
        return f"| {name} | {concurrency} | 0 | - | - | - | {floor:.0f} | - | - | - | - | {len(result['errors'])} |"
    rate, cpu = len(lat) / result["wall"], result["cpu"] / len(lat)
    capacity = 1 / cpu if cpu else float("inf")
    return (f"| {name} | {concurrency} | {len(lat)} | {rate:.1f} | {cpu * 1000:.2f} | {capacity:.0f} | {floor:.0f} "
            f"| {100 * capacity / floor:.0f}% | {statistics.median(lat) * 1000:.1f} | {percentile(lat, 99) * 1000:.1f} "
            f"| {result['idle'] * 1000:.1f} | {len(result['errors'])} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of refresh load per level (default 5)")
    parser.add_argument("--codes", type=int, default=3000, help="codes exchanged per level (default 3000)")
    parser.add_argument("--store", choices=("memory", "wire"), default="memory",
                        help="memory:// in the worker (default, as make run), or a store process of its own "
                             "reached as mongodb:// (tests/mongo_wire.py), as MongoDB is")
    args = parser.parse_args(argv)
    results, failed = [], False
    signatures = [signature_cost()]
    store = None
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        env = {}
        if args.store == "wire":
            store, env["IAMGATE_MONGODB_URI"] = start_store(Path(tmp), "iamgate_bench")
            cleanup.callback(stop_process, store)
            env["IAMGATE_WORKERS"] = "1"
        stack = start_stack(Path(tmp), IAMGATE_RATE_LIMIT_LOGIN="1000000/60", IAMGATE_RATE_LIMIT_REGISTER="0/60",
                            IAMGATE_RATE_LIMIT_API="1000000/60", IAMGATE_LOG_LEVEL="WARNING", **env)
        cleanup.callback(stack.stop)
        base, worker = stack.control_url, worker_pid(stack.process.pid)
        ctx = setup(base)
        time.sleep(DRAIN)  # the set-up's own deferred work
        for concurrency in LEVELS:
            codes = issue_codes(base, ctx, args.codes)
            started = time.monotonic()
            signatures.append(signature_cost())
            time.sleep(max(0.0, DRAIN - (time.monotonic() - started)))
            exchanged = measured(worker, exchange_phase, base, ctx, codes, concurrency, drain=DRAIN)
            refreshed = measured(worker, refresh_phase, base, ctx, exchanged["refresh_tokens"], concurrency,
                                 args.seconds, drain=DRAIN)
            machine = measured(worker, client_credentials_phase, base, ctx, concurrency, args.seconds, drain=DRAIN)
            results += [("authorization_code", concurrency, exchanged), ("refresh_token", concurrency, refreshed),
                        ("client_credentials", concurrency, machine)]
            failed |= bool(exchanged["errors"] or refreshed["errors"] or machine["errors"])
    signatures.append(signature_cost())
    signature = statistics.median(signatures)
    rows = [_row(name, concurrency, result, signature) for name, concurrency, result in results]
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU(s), {platform.system()} {platform.release()}, "
          f"Python {platform.python_version()}; one gunicorn gevent worker on "
          + ("memory://" if store is None else "mongodb:// (tests/mongo_wire.py, a process of its own)"))
    print(f"one RS256 signature (2048-bit key): {signature * 1000:.3f} ms, the median of "
          f"{', '.join(f'{cost * 1000:.3f}' for cost in signatures)}")
    print(f"worker CPU per answer: the phase and the {DRAIN:.0f} s after it, less the idle worker's rate over those "
          f"{DRAIN:.0f} s (read for {IDLE:.0f} s after them: the last column)")
    print("\n| grant | concurrency | requests | per second (wall) | worker CPU ms per answer | per worker /s "
          "| floor /s | per worker of floor | p50 ms | p99 ms | idle ms/s | errors |"
          "\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
