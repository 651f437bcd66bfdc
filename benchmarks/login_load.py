"""Login load: does a burst of logins stall other requests?

Starts the real stack (``python -m controlplane.launcher``: gunicorn, one gevent worker
on ``memory://``) at IAMGATE_BCRYPT_ROUNDS=12, creates a dashboard account, an
application and an end user over HTTP, then runs ``--concurrency`` login loops for
``--duration`` seconds while another thread times ``GET /healthz`` every 20 ms.
bcrypt runs in the gevent hub's thread pool (``shared.concurrency.run_blocking``), so
the event loop keeps answering; the figure to watch is the /healthz p99 under load.

    .venv/bin/python -m benchmarks.login_load [--duration 10] [--concurrency 20] [--rounds 12]

Not a test: it prints the figures (docs/performance.md, "Login load", records them).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

import requests

from tests.e2e.conftest import start_stack

PASSWORD = "Bench-Marked-2024"
HEALTH_INTERVAL = 0.02


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def _ms(seconds):
    return f"{seconds * 1000:.1f}"


def setup_application(base: str, users: int) -> tuple[str, list[str]]:
    """A dashboard account, its application and ``users`` end users; returns (app id, emails)."""
    dashboard = requests.Session()
    account = {"email": "bench@example.com", "password": PASSWORD, "name": "Bench"}
    dashboard.post(f"{base}/api/dashboard/register", json=account).raise_for_status()
    dashboard.post(f"{base}/api/dashboard/login",
                   json={"email": account["email"], "password": PASSWORD}).raise_for_status()
    created = dashboard.post(f"{base}/api/dashboard/applications", json={"name": "Login load"})
    created.raise_for_status()
    app_id = created.json()["data"]["id"]
    emails = [f"user{i}@example.com" for i in range(users)]
    for email in emails:
        requests.post(f"{base}/api/v1/applications/{app_id}/users/register",
                      json={"email": email, "password": PASSWORD, "name": "Load User"}).raise_for_status()
    return app_id, emails


def time_health(base: str, seconds: float, results) -> None:
    """Time GET /healthz every 20 ms for ``seconds``; put the latencies on ``results``.

    Runs in its own process so the login threads' GIL traffic in this process does
    not inflate what it measures."""
    session, samples = requests.Session(), []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        response = session.get(f"{base}/healthz", timeout=10)
        elapsed = time.perf_counter() - started
        if response.status_code == 200:
            samples.append(elapsed)
        time.sleep(max(0.0, HEALTH_INTERVAL - elapsed))
    results.put(samples)


def login_loop(url: str, email: str, stop: threading.Event, samples: list, failures: list) -> None:
    session = requests.Session()
    while not stop.is_set():
        started = time.perf_counter()
        response = session.post(url, json={"email": email, "password": PASSWORD}, timeout=60)
        if response.status_code == 200:
            samples.append(time.perf_counter() - started)
        else:
            failures.append(response.status_code)


class HealthProbe:
    """Times /healthz for ``seconds`` in another process."""

    def __init__(self, base: str, seconds: float):
        self._results = multiprocessing.Queue()
        self._process = multiprocessing.Process(target=time_health, args=(base, seconds, self._results), daemon=True)
        self._process.start()

    def samples(self) -> list:
        """Wait for the probe to finish; its latencies in seconds."""
        samples = self._results.get(timeout=120)
        self._process.join()
        return samples


def run(duration: float, concurrency: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), IAMGATE_BCRYPT_ROUNDS=rounds, IAMGATE_RATE_LIMIT_LOGIN="1000000/60",
                            IAMGATE_RATE_LIMIT_REGISTER="0/60", IAMGATE_LOG_LEVEL="WARNING")
        try:
            base = stack.control_url
            # One user per loop: 20 people signing in at once (one email allows only
            # IAMGATE_LOCKOUT_THRESHOLD password checks in flight).
            app_id, emails = setup_application(base, concurrency)
            idle = HealthProbe(base, 3).samples()

            stop, logins, failures = threading.Event(), [], []
            url = f"{base}/api/v1/applications/{app_id}/users/login"
            workers = [threading.Thread(target=login_loop, args=(url, email, stop, logins, failures))
                       for email in emails]
            for thread in workers:
                thread.start()
            time.sleep(1)  # let the login burst build up before timing /healthz
            prober = HealthProbe(base, duration)
            started, before = time.perf_counter(), len(logins)
            health = prober.samples()
            elapsed, completed = time.perf_counter() - started, len(logins) - before
            stop.set()
            for thread in workers:
                thread.join()
        finally:
            stack.stop()
    return {"idle": idle, "health": health, "logins": logins, "completed": completed, "failures": failures,
            "elapsed": elapsed}


def report(result: dict, concurrency: int, rounds: int) -> str:
    health, idle, logins = result["health"], result["idle"], result["logins"]
    lines = [
        f"machine: {platform.machine()}, {os.cpu_count()} CPU(s), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        f"load: {concurrency} concurrent login loops, IAMGATE_BCRYPT_ROUNDS={rounds}, "
        f"{result['elapsed']:.1f} s",
        "",
        "| measure | samples | p50 ms | p99 ms | max ms |",
        "|---|---|---|---|---|",
        f"| /healthz, idle | {len(idle)} | {_ms(statistics.median(idle))} | {_ms(percentile(idle, 99))} "
        f"| {_ms(max(idle))} |",
        f"| /healthz, under login load | {len(health)} | {_ms(statistics.median(health))} "
        f"| {_ms(percentile(health, 99))} | {_ms(max(health))} |",
        f"| login (200) | {len(logins)} | {_ms(statistics.median(logins))} | {_ms(percentile(logins, 99))} "
        f"| {_ms(max(logins))} |",
        "",
        f"logins per second while timing /healthz: {result['completed'] / result['elapsed']:.1f}; "
        f"failed logins: {len(result['failures'])}",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load (default 10)")
    parser.add_argument("--concurrency", type=int, default=20, help="concurrent login loops (default 20)")
    parser.add_argument("--rounds", type=int, default=12, help="IAMGATE_BCRYPT_ROUNDS (default 12)")
    args = parser.parse_args(argv)
    result = run(args.duration, args.concurrency, args.rounds)
    print(report(result, args.concurrency, args.rounds))
    p99 = percentile(result["health"], 99)
    print(f"\n/healthz p99 under load: {_ms(p99)} ms ({'within' if p99 < 0.050 else 'OVER'} the 50 ms budget)")
    return 0 if p99 < 0.050 and not result["failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
