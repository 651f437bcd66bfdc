"""``make soak``: a mixed workload against the real processes for a while, at bounded
request rates on loopback.

    .venv/bin/python -m benchmarks.soak [--minutes 10] [--rate 20] [--store memory]

Each operation runs in its own thread at its own share of ``--rate`` requests per
second: end-user registrations, logins, token refreshes, role assignments and
revocations, and permission checks on the control plane and on the decision service.
A webhook on loopback subscribes to the events of the registrations, logins,
assignments and revocations. Reported: every unexpected status (and the 5xx count),
p50/p99 per operation, the deliveries against the events logged, and the RSS of every
process (gunicorn master plus workers) at start, after warm-up and at the end, with the
slope after warm-up. Pass: zero 5xx, zero lost writes (every registered user logs in at
the end; every revoked assignment denies on both services), every subscribed event
delivered once (a retry keeps its delivery id), and RSS growth under 10% after warm-up
of every process that holds no data.

Where the data lives (``--store``):

- ``wire`` (the default): a production layout. The store is a process of its own
  (tests/mongo_wire.py, the MongoDB wire protocol in front of the embedded store), the
  control plane reaches it as ``mongodb://``, and the webhook worker runs beside it
  (``python -m controlplane worker``). The control plane, the worker and the decision
  service hold no data, so their RSS growth is the leak test; the store's RSS is reported.
- ``memory``: ``make run``'s layout. The embedded store is inside the control plane, whose
  RSS then grows with every user, session, audit record and delivery written (about 4 KB a write):
  it is reported, per write too, and not judged.
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
from tests.e2e.processes import (
    PASSWORD,
    Admin,
    LoopbackReceiver,
    Processes,
    start_store,
    stop_process,
    wait_until,
)

# The soak measures steady state, not the per-IP login and registration budgets.
ENV = {
    "IAMGATE_RATE_LIMIT_LOGIN": "1000000/60",
    "IAMGATE_RATE_LIMIT_REGISTER": "1000000/60",
    "IAMGATE_RATE_LIMIT_API": "1000000/60",
    "IAMGATE_RATE_LIMIT_IP": "1000000/60",
    "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",  # the soak's receiver is on loopback
}

# Share of the request rate per operation.
MIX = {"register": 1, "login": 2, "refresh": 2, "assign": 1, "revoke": 1, "check (control plane)": 4,
       "check (decision)": 8}
WRITES = ("register", "login", "refresh", "assign", "revoke")
DELIVERY_WAIT = 60.0  # seconds the deliveries of the run may take after it
# The events the soak's webhook subscribes to, by the operation that logs each.
HOOKED = {"user.created": "register", "user.login": "login", "role.assigned": "assign", "role.removed": "revoke"}


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


class Deliveries:
    """The delivery ids the soak's webhook received, per event (a retry reuses its
    delivery's id)."""

    def __init__(self):
        self.ids: dict[str, set[str]] = {event: set() for event in HOOKED}
        self.lock = threading.Lock()
        self.receiver = LoopbackReceiver(self.received)

    def received(self, headers, _body) -> None:
        with self.lock:
            self.ids.setdefault(headers["X-Service-Event"], set()).add(headers["X-Service-Delivery-Id"])

    def counted(self) -> dict[str, int]:
        with self.lock:
            return {event: len(ids) for event, ids in self.ids.items()}


class Soak:
    def __init__(self, processes: Processes, sampled: dict[str, int]):
        """``sampled``: the processes whose RSS is sampled, by name (their pids)."""
        self.p = processes
        self.sampled = sampled
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
        self.succeeded: dict[str, int] = {name: 0 for name in MIX}
        self.deliveries = Deliveries()
        hook = self.session().post(f"{self.admin.v1}/webhooks",
                                   json={"url": self.deliveries.receiver.url, "events": list(HOOKED)},
                                   headers=self.admin.headers, timeout=30)
        hook.raise_for_status()

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
            else:
                self.succeeded[name] += 1
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
        samples: list[tuple[float, dict[str, int], int]] = []

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
            samples.append((time.monotonic() - begun, self.rss(), self.writes()))
            time.sleep(sample_every)
        for thread in threads:
            thread.join(60)
        samples.append((time.monotonic() - begun, self.rss(), self.writes()))
        return samples

    def rss(self) -> dict[str, int]:
        return {name: rss_kib(pid) for name, pid in self.sampled.items()}

    def writes(self) -> int:
        """The writes made so far (registrations, logins, refreshes, assignments and
        revocations that succeeded or not: each leaves at least an audit record)."""
        with self.lock:
            return sum(len(self.latencies[name]) for name in WRITES)

    def verify(self) -> dict:
        """Lost writes: every registered user logs in; every revoked assignment denies on
        both services (read-your-writes with the revocation's revision). Lost deliveries:
        every subscribed event of a write that succeeded reaches the webhook once (waited
        for up to ``DELIVERY_WAIT`` seconds)."""
        lost_logins = 0
        for email in self.registered.values():
            r = self.session().post(f"{self.admin.v1}/users/login", json={"email": email, "password": PASSWORD},
                                    timeout=30)
            lost_logins += r.status_code != 200
            self.succeeded["login"] += r.status_code == 200
        still_allowed = 0
        revoked = {user: revision for user, revision in self.revoked.items() if revision is not None}
        for user, revision in revoked.items():
            for base in (self.p.control_url, self.p.decision_url):
                r = self.session().get(f"{base}/api/v1/applications/{self.admin.app_id}/authz/check",
                                       params={"user_id": user, "permission": "docs:read", "min_revision": revision},
                                       headers=self.admin.headers, timeout=30)
                still_allowed += r.status_code != 200 or r.json()["allowed"]
        expected = {event: self.succeeded[operation] for event, operation in HOOKED.items()}
        wait_until(lambda: self.deliveries.counted() == expected, DELIVERY_WAIT)
        delivered = self.deliveries.counted()
        self.deliveries.receiver.close()
        return {"users": len(self.registered), "lost_logins": lost_logins, "revoked": len(revoked),
                "revoked_still_allowed": still_allowed, "deliveries_expected": expected,
                "deliveries": delivered}


def slope_and_growth(samples, name, warmup):
    """KiB a minute (least squares) and percent growth of ``name``'s RSS after ``warmup`` s."""
    after = [(sample[0], sample[1][name]) for sample in samples if sample[0] >= warmup]
    if len(after) < 2:
        return 0.0, 0.0
    xs, ys = [t / 60 for t, _ in after], [v for _, v in after]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sum((x - mx) ** 2 for x in xs) or 1)
    return slope, 100.0 * (ys[-1] - ys[0]) / ys[0]


def _ms(value):
    return f"{value * 1000:.1f}"


def report(seconds, rate, soak: Soak, samples, verdict, warmup, holding_data: str) -> tuple[str, bool]:
    """The report and the verdict. ``holding_data``: the process the data lives in, whose
    RSS is reported (with its growth per write after warm-up) but not judged."""
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
    warm_sample = next((sample for sample in samples if sample[0] >= warmup), samples[-1])
    writes = samples[-1][2] - warm_sample[2]
    lines += ["", f"Writes after warm-up: {writes}.", "",
              "| process | RSS start MiB | RSS after warm-up MiB | RSS end MiB | slope after warm-up KiB/min "
              "| growth after warm-up | judged |", "|---|---|---|---|---|---|---|"]
    growths = []
    for name in soak.sampled:
        start, warm, end = samples[0][1][name], warm_sample[1][name], samples[-1][1][name]
        slope, growth = slope_and_growth(samples, name, warmup)
        if name == holding_data:
            judged = f"no: holds the data ({(end - warm) * 1024 / max(writes, 1):.0f} bytes a write)"
        else:
            judged = "yes"
            growths.append(growth)
        lines.append(f"| {name} | {start / 1024:.1f} | {warm / 1024:.1f} | {end / 1024:.1f} | {slope:+.0f} | "
                     f"{growth:+.1f}% | {judged} |")
    lines += ["", f"5xx: {five_xx}. Registered users: {verdict['users']}, of which could not log in at the end: "
                  f"{verdict['lost_logins']}. Revoked assignments: {verdict['revoked']}, still allowed "
                  f"(control plane or decision service): {verdict['revoked_still_allowed']}."]
    expected, delivered = verdict["deliveries_expected"], verdict["deliveries"]
    lines.append("Webhook deliveries (delivered / events logged): " + ", ".join(
        f"{event} {delivered.get(event, 0)} / {count}" for event, count in expected.items()) + ".")
    passed = (five_xx == 0 and verdict["lost_logins"] == 0 and verdict["revoked_still_allowed"] == 0
              and delivered == expected and all(g < 10 for g in growths))
    lines.append(f"Verdict: {'PASS' if passed else 'FAIL'}.")
    return "\n".join(lines), passed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second, all operations together")
    parser.add_argument("--store", choices=("wire", "memory"), default="wire",
                        help="where the data lives: a store process of its own (default), or memory:// "
                             "inside the control plane, as make run")
    args = parser.parse_args(argv)
    seconds = args.minutes * 60
    warmup = min(60.0, seconds / 5)
    with tempfile.TemporaryDirectory(prefix="iamgate-soak-") as logs:
        store, env = None, dict(ENV)
        try:
            if args.store == "wire":
                store, env["IAMGATE_MONGODB_URI"] = start_store(Path(logs), "iamgate_soak")
            processes = Processes(Path(logs), env=env)
            try:
                processes.start()
                sampled = {"control plane": processes.control.pid, "decision service": processes.decision.pid}
                if store is not None:
                    processes.start_worker()
                    sampled |= {"webhook worker": processes.worker.pid, "store": store.pid}
                soak = Soak(processes, sampled)
                samples = soak.run(seconds, args.rate)
                verdict = soak.verify()
            finally:
                processes.stop()
        finally:
            stop_process(store)
    holding_data = "store" if args.store == "wire" else "control plane"
    text, passed = report(seconds, args.rate, soak, samples, verdict, warmup, holding_data)
    print(text)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
