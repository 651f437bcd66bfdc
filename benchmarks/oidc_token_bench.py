"""OIDC token endpoint throughput: the authorization_code exchange and the refresh_token
grant, at concurrency 1 and 16.

    .venv/bin/python -m benchmarks.oidc_token_bench [--seconds 5] [--codes 300]

Method: the real stack (``python -m controlplane.launcher``: gunicorn, one gevent
worker, ``memory://``) at IAMGATE_BCRYPT_ROUNDS=4; over HTTP a dashboard account, an
application, an API key with oidc:manage, a client and one end user.  Then, per
concurrency level:

- code exchange: ``--codes`` codes are issued first through the JSON mode of
  ``GET /oidc/authorize`` (untimed; a code lives 60 s), then ``c`` threads exchange
  them (``client_secret_post``, PKCE verifier) until the pool is spent; wall time ->
  exchanges per second, and each request's latency;
- refresh grant: each of ``c`` threads rotates its own refresh-token chain (from one of
  the exchanges) for ``--seconds`` seconds.

Every token response is an RS256 access token plus an ID token, so each request signs
two JWTs.  Prints a table; not a pass/fail benchmark (exit status 1 only on errors).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import secrets
import statistics
import tempfile
import threading
import time
from pathlib import Path

import requests

from benchmarks.login_load import PASSWORD, percentile, setup_application
from tests.e2e.conftest import start_stack

REDIRECT_URI = "http://127.0.0.1/callback"
LEVELS = (1, 16)


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
    return {"client": client.json()["data"], "user_token": login.json()["data"]["access_token"]}


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


def _token_request(session, base, ctx, body):
    client = ctx["client"]
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


def _run_threads(target, n: int, args=None) -> float:
    threads = [threading.Thread(target=target, args=(args[i] if args else ())) for i in range(n)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def _row(name: str, concurrency: int, result: dict) -> str:
    lat = result["latencies"]
    if not lat:
        return f"| {name} | {concurrency} | 0 | - | - | - | {len(result['errors'])} |"
    return (f"| {name} | {concurrency} | {len(lat)} | {len(lat) / result['wall']:.1f} "
            f"| {statistics.median(lat) * 1000:.1f} | {percentile(lat, 99) * 1000:.1f} | {len(result['errors'])} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of refresh load per level (default 5)")
    parser.add_argument("--codes", type=int, default=300, help="codes exchanged per level (default 300)")
    args = parser.parse_args(argv)
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), IAMGATE_RATE_LIMIT_LOGIN="1000000/60", IAMGATE_RATE_LIMIT_REGISTER="0/60",
                            IAMGATE_RATE_LIMIT_API="1000000/60", IAMGATE_LOG_LEVEL="WARNING")
        try:
            base = stack.control_url
            ctx = setup(base)
            for concurrency in LEVELS:
                codes = issue_codes(base, ctx, args.codes)
                exchanged = exchange_phase(base, ctx, codes, concurrency)
                rows.append(_row("authorization_code", concurrency, exchanged))
                refreshed = refresh_phase(base, ctx, exchanged["refresh_tokens"], concurrency, args.seconds)
                rows.append(_row("refresh_token", concurrency, refreshed))
                failed |= bool(exchanged["errors"] or refreshed["errors"])
        finally:
            stack.stop()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU(s), {platform.system()} {platform.release()}, "
          f"Python {platform.python_version()}; one gunicorn gevent worker on memory://")
    print("\n| grant | concurrency | requests | per second | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
