"""``make soak``: a mixed workload against the real processes for a while, at bounded
request rates on loopback.

    .venv/bin/python -m benchmarks.soak [--minutes 10] [--rate 20]

Each operation runs in its own thread at its own share of ``--rate`` requests per
second: end-user registrations, logins, token refreshes, role assignments and
revocations, and permission checks on the control plane and on the decision service.
Reported: every unexpected status (and the 5xx count), p50/p99 per operation, and the
RSS of every process (gunicorn master plus workers) at start, after warm-up and at the
end, with the slope after warm-up. Pass: zero 5xx, zero lost writes (every registered
user logs in at the end; every revoked assignment denies on both services), and RSS
growth under 10% after warm-up.
"""
from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import threading
import time
from pathlib import Path

import requests

from benchmarks.login_load import percentile
from tests.e2e.processes import PASSWORD, Admin, Processes

# The soak measures steady state, not the per-IP login and registration budgets.
ENV = {
    "IAMGATE_RATE_LIMIT_LOGIN": "1000000/60",
    "IAMGATE_RATE_LIMIT_REGISTER": "1000000/60",
    "IAMGATE_RATE_LIMIT_API": "1000000/60",
    "IAMGATE_RATE_LIMIT_IP": "1000000/60",
}

# Share of the request rate per operation.
MIX = {"register": 1, "login": 2, "refresh": 2, "assign": 1, "revoke": 1, "check (control plane)": 4,
       "check (decision)": 8}


def rss_kib(pid: int) -> int:
    """RSS of ``pid`` and its children (the gunicorn master and its workers), in KiB."""
    total = 0
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total


class Soak:
    def __init__(self, processes: Processes):
        self.p = processes
        self.admin = Admin(processes.control_url, name="soak")
        self.role = self.admin.role(["docs:read"])
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = {name: [] for name in MIX}
        self.errors: dict[str, dict[int, int]] = {name: {} for name in MIX}
        self.registered: dict[str, str] = {}     # user id -> email
        self.refresh_tokens: list[str] = []
        self.assigned: list[str] = []            # user ids holding the role
        self.revoked: dict[str, int | None] = {}  # user id -> revision of the revocation
        self.http = threading.local()

    def session(self) -> requests.Session:
        if not hasattr(self.http, "s"):
            self.http.s = requests.Session()
        return self.http.s

    def record(self, name, started, response, expected=(200,)):
        elapsed = time.monotonic() - started
        with self.lock:
            self.latencies[name].append(elapsed)
            if response.status_code not in expected:
                self.errors[name][response.status_code] = self.errors[name].get(response.status_code, 0) + 1
        return response.status_code in expected

    # ---------------------------------------------------------------- operations

    def register(self):
        email = f"soak-{secrets.token_hex(6)}@example.com"
        started = time.monotonic()
        r = self.session().post(f"{self.admin.v1}/users/register",
                                json={"email": email, "password": PASSWORD, "name": "soak"}, timeout=30)
        if self.record("register", started, r, (201,)):
            with self.lock:
                self.registered[r.json()["data"]["id"]] = email

    def login(self):
        with self.lock:
            if not self.registered:
                return
            email = secrets.choice(list(self.registered.values()))
        started = time.monotonic()
        r = self.session().post(f"{self.admin.v1}/users/login", json={"email": email, "password": PASSWORD},
                                timeout=30)
        if self.record("login", started, r):
            with self.lock:
                self.refresh_tokens.append(r.json()["data"]["refresh_token"])
                del self.refresh_tokens[:-200]

    def refresh(self):
        with self.lock:
            if not self.refresh_tokens:
                return
            token = self.refresh_tokens.pop()
        started = time.monotonic()
        r = self.session().post(f"{self.admin.v1}/users/token/refresh", json={"refresh_token": token}, timeout=30)
        if self.record("refresh", started, r):
            with self.lock:
                self.refresh_tokens.append(r.json()["data"]["refresh_token"])

    def assign(self):
        with self.lock:
            candidates = [u for u in self.registered if u not in self.assigned and u not in self.revoked]
        if not candidates:
            return
        user = secrets.choice(candidates)
        started = time.monotonic()
        r = self.session().post(f"{self.admin.v1}/users/{user}/roles", json={"role_id": self.role},
                                headers=self.admin.headers, timeout=30)
        if self.record("assign", started, r, (201,)):
            with self.lock:
                self.assigned.append(user)

    def revoke(self):
        with self.lock:
            if len(self.assigned) < 2:
                return
            user = self.assigned.pop(0)
            self.revoked[user] = None  # being revoked: not a candidate for assign
        started = time.monotonic()
        r = self.session().delete(f"{self.admin.v1}/users/{user}/roles/{self.role}", headers=self.admin.headers,
                                  timeout=30)
        ok = self.record("revoke", started, r, (204,))
        with self.lock:
            if ok:
                self.revoked[user] = int(r.headers["X-Iamgate-Revision"])
            else:
                del self.revoked[user]

    def _check(self, name, base):
        with self.lock:
            users = self.assigned[-50:] or list(self.registered)[:1]
        if not users:
            return
        started = time.monotonic()
        r = self.session().get(f"{base}/api/v1/applications/{self.admin.app_id}/authz/check",
                               params={"user_id": secrets.choice(users), "permission": "docs:read"},
                               headers=self.admin.headers, timeout=30)
        self.record(name, started, r)

    def check_control(self):
        self._check("check (control plane)", self.p.control_url)

    def check_decision(self):
        self._check("check (decision)", self.p.decision_url)

    # ---------------------------------------------------------------- running

    def run(self, seconds: float, rate: float, sample_every: float = 5.0):
        actions = {"register": self.register, "login": self.login, "refresh": self.refresh, "assign": self.assign,
                   "revoke": self.revoke, "check (control plane)": self.check_control,
                   "check (decision)": self.check_decision}
        share = sum(MIX.values())
        stop = time.monotonic() + seconds
        samples: list[tuple[float, int, int]] = []

        def worker(name):
            interval = share / (rate * MIX[name])
            next_at = time.monotonic()
            while time.monotonic() < stop:
                try:
                    actions[name]()
                except requests.RequestException as exc:
                    kind = type(exc).__name__
                    with self.lock:
                        self.errors[name][kind] = self.errors[name].get(kind, 0) + 1
                next_at += interval
                time.sleep(max(0.0, next_at - time.monotonic()))

        threads = [threading.Thread(target=worker, args=(name,), daemon=True) for name in MIX]
        begun = time.monotonic()
        for thread in threads:
            thread.start()
        while time.monotonic() < stop:
            samples.append((time.monotonic() - begun, rss_kib(self.p.control.pid), rss_kib(self.p.decision.pid)))
            time.sleep(sample_every)
        for thread in threads:
            thread.join(60)
        samples.append((time.monotonic() - begun, rss_kib(self.p.control.pid), rss_kib(self.p.decision.pid)))
        return samples

    def verify(self) -> dict:
        """Lost writes: every registered user logs in; every revoked assignment denies on
        both services (read-your-writes with the revocation's revision)."""
        lost_logins = 0
        for email in self.registered.values():
            r = self.session().post(f"{self.admin.v1}/users/login", json={"email": email, "password": PASSWORD},
                                    timeout=30)
            lost_logins += r.status_code != 200
        still_allowed = 0
        revoked = {user: revision for user, revision in self.revoked.items() if revision is not None}
        for user, revision in revoked.items():
            for base in (self.p.control_url, self.p.decision_url):
                r = self.session().get(f"{base}/api/v1/applications/{self.admin.app_id}/authz/check",
                                       params={"user_id": user, "permission": "docs:read", "min_revision": revision},
                                       headers=self.admin.headers, timeout=30)
                still_allowed += r.status_code != 200 or r.json()["allowed"]
        return {"users": len(self.registered), "lost_logins": lost_logins, "revoked": len(revoked),
                "revoked_still_allowed": still_allowed}


def slope_and_growth(samples, index, warmup):
    after = [(sample[0], sample[index]) for sample in samples if sample[0] >= warmup]
    if len(after) < 2:
        return 0.0, 0.0
    xs, ys = [t / 60 for t, _ in after], [v for _, v in after]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sum((x - mx) ** 2 for x in xs) or 1)
    return slope, 100.0 * (ys[-1] - ys[0]) / ys[0]


def _ms(value):
    return f"{value * 1000:.1f}"


def report(seconds, rate, soak: Soak, samples, verdict, warmup) -> tuple[str, bool]:
    lines = [f"Duration {seconds / 60:.1f} min at {rate:g} requests/s in total (bounded), warm-up {warmup:.0f} s.", "",
             "| operation | requests | p50 ms | p99 ms | unexpected answers |", "|---|---|---|---|---|"]
    five_xx = 0
    for name, values in soak.latencies.items():
        errors = soak.errors[name]
        five_xx += sum(count for status, count in errors.items() if isinstance(status, int) and status >= 500)
        shown = ", ".join(f"{status}: {count}" for status, count in errors.items()) or "none"
        if values:
            lines.append(f"| {name} | {len(values)} | {_ms(statistics.median(values))} | "
                         f"{_ms(percentile(values, 99))} | {shown} |")
    lines += ["", "| process | RSS start MiB | RSS after warm-up MiB | RSS end MiB | slope after warm-up KiB/min "
              "| growth after warm-up |", "|---|---|---|---|---|---|"]
    growths = []
    for index, name in ((1, "control plane"), (2, "decision service")):
        start = samples[0][index]
        warm = next((s[index] for s in samples if s[0] >= warmup), samples[-1][index])
        slope, growth = slope_and_growth(samples, index, warmup)
        growths.append(growth)
        lines.append(f"| {name} | {start / 1024:.1f} | {warm / 1024:.1f} | {samples[-1][index] / 1024:.1f} | "
                     f"{slope:+.0f} | {growth:+.1f}% |")
    lines += ["", f"5xx: {five_xx}. Registered users: {verdict['users']}, of which could not log in at the end: "
                  f"{verdict['lost_logins']}. Revoked assignments: {verdict['revoked']}, still allowed "
                  f"(control plane or decision service): {verdict['revoked_still_allowed']}."]
    passed = (five_xx == 0 and verdict["lost_logins"] == 0 and verdict["revoked_still_allowed"] == 0
              and all(g < 10 for g in growths))
    lines.append(f"Verdict: {'PASS' if passed else 'FAIL'}.")
    return "\n".join(lines), passed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second, all operations together")
    args = parser.parse_args(argv)
    seconds = args.minutes * 60
    warmup = min(60.0, seconds / 5)
    with tempfile.TemporaryDirectory(prefix="iamgate-soak-") as logs:
        processes = Processes(Path(logs), env=ENV).start()
        try:
            soak = Soak(processes)
            samples = soak.run(seconds, args.rate)
            verdict = soak.verify()
        finally:
            processes.stop()
    text, passed = report(seconds, args.rate, soak, samples, verdict, warmup)
    print(text)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
