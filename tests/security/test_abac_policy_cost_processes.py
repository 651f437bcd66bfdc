"""Issue 24, item 2, against the real control plane process: tenant A at every ABAC cap
editing one policy and checking, over and over, does not slow tenant B's checks.

The control plane runs as production runs it (gunicorn with the project's gevent worker,
``IAMGATE_WORKERS=1``: both tenants share one event loop, the worst case) on a MongoDB
wire-protocol server of its own process (tests/mongo_wire.py, so the store's work is not
the control plane's and its socket reads yield, as a real MongoDB's do). The API throttle
is off (``IAMGATE_RATE_LIMIT_API=0/60``): it would refuse B's thousands of checks, and it
reconciles with the store every 50 hits, a round trip that on this store queues behind
A's writes, each a scan of a thousand 4 KB documents under the server's one lock -- the
test store's slowness (on MongoDB those are index lookups), not the control plane's.

Tenant A holds IAMGATE_MAX_POLICIES_PER_APPLICATION policies,
IAMGATE_MAX_POLICIES_PER_PERMISSION of them on each of the four patterns covering
``docs:read``, every condition at IAMGATE_MAX_CONDITION_BYTES and
IAMGATE_MAX_CONDITION_NODES; the caps are the defaults and are real: the last policy of
each is created through the API, which then refuses one more.

A runs "edit one covering policy, check docs:read" in a loop on one kept-alive
connection; B's checks (one small policy) are timed over a kept-alive connection, idle
first, then while A loops, one due every PERIOD seconds and each timed from when it was due
(``Bystander.timed_checks``). A round passes when B's p99 stays within twice its idle
p99 (the quietest idle round's) plus ALLOWANCE_SECONDS. The measurement is repeated up to
ROUNDS (5) times before failing, so noisy rounds on a loaded machine do not fail it. An
idle p99 above QUIET_IDLE_P99 (10 ms) measured the machine's stalls and never excuses A;
when no idle round is that quiet the test skips, saying so.

Python's cyclic garbage collector no longer pauses B noticeably: A's policies at the caps
leave about two tracked objects each (a cached policy keeps its condition as bytes, a
compiled condition is tuples of atoms the collector stops tracking), so a full collection that A's
churn triggers walks little more than the worker's own objects (0.7-3 ms here;
9-41 ms when every compiled node was a function and every condition a parsed document,
and B's p99 then missed twice idle in rounds that caught one).

The allowance, 3 ms, is the machine's, not A's edits': while A loops the control plane
process is busy all the time (A's check evaluates 400 conditions of 32 nodes, about 2 ms,
in pieces that let B's requests in between, ``shared.authorization.PAUSE_EVERY``), and on
this 2-core machine, shared with other work (load average 2 to 6), a busy process is
preempted for a scheduler time slice now and then, while an idle one woken by B's request
is not. A loop of A's checks alone, without edits, moves B's p99 as much. During the idle
rounds a helper process makes the store as busy as A's loop makes it
(``keep_the_store_busy``), so both rounds share the cores with the same store load.

Before the patched cache every check after an edit read A's 4 MB of policies again and
indexed them in one piece on the loop: B's p99 went from 0.6 ms idle to 130-160 ms.
"""
from __future__ import annotations

import http.client
import itertools
import json
import multiprocessing
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pymongo
import pytest

from shared.ids import new_id
from tests.conftest import make_config
from tests.e2e.processes import Admin, Processes, free_port, wait_until
from tests.security.test_abac_policy_cost import COVERING, condition_at_the_caps

DEFAULTS = make_config()  # the caps' defaults, which the process runs with
ALLOWANCE_SECONDS = 0.003
# An idle round whose p99 is above this (50 times a check's median) measured the machine's
# stalls, not the server: it cannot excuse A, and if no idle round is quieter the test skips.
QUIET_IDLE_P99 = 0.010
SAMPLES = 500
ROUNDS = 5  # measurements before failing: the machine is shared, its load comes and goes
PERIOD = 0.002  # B's checks are due every 2 ms
ROOT = Path(__file__).resolve().parents[2]
SPAWN = multiprocessing.get_context("spawn")  # the test process runs threads: no fork


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A wire-protocol store in a process of its own, the control plane on it and a decision
    service following it (the internal token: every application)."""
    log_dir = tmp_path_factory.mktemp("abac-cost-processes")
    port = free_port()
    store = subprocess.Popen([sys.executable, "-m", "tests.mongo_wire", "--port", str(port)], cwd=ROOT,
                             stdout=open(log_dir / "store.log", "w"), stderr=subprocess.STDOUT)
    processes = None
    try:
        assert wait_until(lambda: _listening(port), 20), "the wire-protocol store did not start"
        uri = f"mongodb://127.0.0.1:{port}/iamgate_abac_cost"
        processes = Processes(log_dir, env={"IAMGATE_MONGODB_URI": uri, "IAMGATE_WORKERS": "1",
                                                  "IAMGATE_RATE_LIMIT_API": "0/60"})
        processes.start()
        processes.store_uri = uri
        yield processes
    finally:
        if processes is not None:
            processes.stop()
        store.terminate()
        store.wait(10)


class Tenant:
    """A tenant's application, its API key and one end user, and a kept-alive connection."""

    def __init__(self, url: str, name: str):
        self.admin = Admin(url, name=name)
        self.user_id = self.admin.user("reader")
        self.path = f"/api/v1/applications/{self.admin.app_id}"
        self.headers = {**self.admin.headers, "Content-Type": "application/json"}
        self.connection = _connection(url)
        self.checks = self.connection

    def check_through(self, url: str) -> None:
        """Ask the checks of ``url`` (the control plane's or the decision service's)."""
        self.checks = _connection(url)

    def request(self, method: str, path: str, body=None, connection=None) -> tuple[int, dict]:
        connection = connection or self.connection
        connection.request(method, self.path + path, body=None if body is None else json.dumps(body),
                           headers=self.headers)
        response = connection.getresponse()
        content = response.read()
        return response.status, json.loads(content) if content else {}

    def check(self, resource: dict) -> dict:
        status, body = self.request("POST", "/authz/check", {"user_id": self.user_id, "permission": "docs:read",
                                                            "resource": resource}, self.checks)
        assert status == 200, body
        return body


def _connection(url: str) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=30)


class Attacker(Tenant):
    """Tenant A at every cap."""

    def __init__(self, url: str, store_uri: str):
        super().__init__(url, "tenant-a")
        per_pattern, total = DEFAULTS.max_policies_per_permission, DEFAULTS.max_policies_per_application
        self.per_pattern = per_pattern
        patterns = [pattern for pattern in COVERING for _ in range(per_pattern)]
        patterns += [f"other{i}:read" for i in range(total - len(patterns))]
        # All but the last policy of each cap straight into the store (the API takes
        # minutes for a thousand), the last ones through the API, which checks each cap.
        last = [per_pattern * (k + 1) - 1 for k in range(len(COVERING))]
        now = datetime.now(UTC)
        docs = [{"_id": new_id(), "app_id": self.admin.app_id, "name": f"p{i}", "description": None,
                 "effect": "deny" if i % 2 else "allow", "permissions": [pattern], "condition": self.condition(i),
                 "is_active": True, "created_at": now, "updated_at": now}
                for i, pattern in enumerate(patterns) if i not in last and i != total - 1]
        client = pymongo.MongoClient(store_uri)
        try:
            client.get_default_database()["abac_policies"].insert_many(docs)
        finally:
            client.close()
        for index in last:
            self.create({"name": f"p{index}", "permissions": [patterns[index]], "condition": self.condition(index)},
                        201)
        one_more = {"name": "one more", "permissions": ["*:*"], "condition": self.condition(-1)}
        assert self.create(one_more, 409)["error"]["code"] == "ABAC_POLICIES_PER_PERMISSION_EXCEEDED"
        self.create({"name": f"p{total - 1}", "permissions": [patterns[-1]], "condition": self.condition(total - 1)},
                    201)
        assert self.create({**one_more, "permissions": ["x:y"]}, 409)["error"]["code"] == "ABAC_POLICY_LIMIT_EXCEEDED"
        self.covering = [doc["_id"] for doc in docs if doc["permissions"][0] in COVERING]
        self.edits = 0
        self.edits_ahead: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    @staticmethod
    def condition(seed) -> dict:
        return condition_at_the_caps(seed, DEFAULTS.max_condition_bytes, DEFAULTS.max_condition_nodes)

    def create(self, values: dict, status: int) -> dict:
        got, body = self.request("POST", "/abac/policies", {"effect": "allow", **values})
        assert got == status, body
        return body

    def prepare_edits(self, count: int) -> None:
        """Encode the next ``count`` edits' bodies now: A's loop then runs in this process
        without holding the interpreter for more than a moment, so B's timing thread never
        waits out the interpreter's switch interval (5 ms) behind it."""
        self.edits_ahead = [(self.covering[(self.edits + k) * 7 % len(self.covering)],
                             json.dumps({"condition": self.condition(10_000 + self.edits + k)}))
                            for k in range(1, count + 1)]

    def edit_and_check(self) -> None:
        if not self.edits_ahead:
            self.prepare_edits(1)
        policy_id, body = self.edits_ahead.pop(0)
        self.edits += 1
        self.connection.request("PUT", f"{self.path}/abac/policies/{policy_id}", body=body, headers=self.headers)
        response = self.connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
        answer = self.check({"k0": "nothing"})
        assert answer["allowed"] is False and answer["policies_checked"] == len(COVERING) * self.per_pattern

    def loop(self) -> None:
        try:
            while not self.stop.is_set():
                self.edit_and_check()
        except BaseException as exc:  # reported by the test's thread
            self.failure = exc


class Bystander(Tenant):
    """Tenant B: one small policy, checks timed."""

    def __init__(self, url: str):
        super().__init__(url, "tenant-b")
        status, body = self.request("POST", "/abac/policies", {
            "name": "owners", "effect": "allow", "permissions": ["docs:read"],
            "condition": {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"attr": "user.id"}}})
        assert status == 201, body

    def check_owned(self) -> None:
        answer = self.check({"owner": self.user_id})
        assert answer["allowed"] is True and answer["policies_checked"] == 1

    def timed_checks(self) -> list[float]:
        """SAMPLES checks due every PERIOD seconds, each timed from when it was due, not from
        when it was sent: a check that waited behind a stall of the server delays the
        ones due after it, and they count that wait, as separate callers' checks arriving
        during the stall would (without it, a stall of any length would cost one slow sample)."""
        samples = []
        start = time.perf_counter()
        for k in range(SAMPLES):
            due = start + k * PERIOD
            ahead = due - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
            self.check_owned()
            samples.append(time.perf_counter() - due)
        return samples


def keep_the_store_busy(store_uri: str, app_id: str, policy_ids: list[str], running, stop) -> None:
    """What A's loop makes the store do (find a policy by id, write it, read it back by id),
    minus the control plane: run while B's idle checks are timed, so that idle and
    attacked rounds share this machine's cores with an equally busy store process. (This
    store is mongomock: each of those is a scan of a thousand 4 KB documents, where
    MongoDB would do an index lookup.) In a process of its own, spawned."""
    client = pymongo.MongoClient(store_uri)
    policies = client.get_default_database()["abac_policies"]
    try:
        for n in itertools.count():
            if stop.is_set():
                return
            policy_id = policy_ids[n * 7 % len(policy_ids)]
            running.set()
            policies.find_one({"_id": policy_id, "app_id": app_id})
            policies.find_one_and_update({"_id": policy_id, "app_id": app_id}, {"$set": {"touched": n}})
            list(policies.find({"app_id": app_id, "_id": {"$in": [policy_id]}, "is_active": True}))
    finally:
        client.close()


def p99(samples: list[float]) -> float:
    return sorted(samples)[int(len(samples) * 0.99) - 1]


@pytest.fixture(scope="module")
def tenants(stack):
    a = Attacker(stack.control_url, stack.store_uri)
    b = Bystander(stack.control_url)
    return a, b


def test_tenant_b_checks_stay_within_twice_idle_while_a_edits_and_checks_at_every_cap(stack, tenants):
    a, b = tenants
    a.check_through(stack.control_url)
    b.check_through(stack.control_url)
    measure(stack, a, b)


def test_in_the_decision_service_too(stack, tenants):
    """A edits through the control plane; both tenants check through the decision service,
    whose cached set of A's policies is patched from the change stream's policy_ids."""
    a, b = tenants
    a.check_through(stack.decision_url)
    b.check_through(stack.decision_url)
    measure(stack, a, b)


def measure(stack, a: Attacker, b: Bystander) -> None:
    a.edit_and_check()  # A's set read whole once: what a process that has served A holds
    rounds, idle = [], float("inf")
    for _ in range(ROUNDS):
        running, stop = SPAWN.Event(), SPAWN.Event()
        store_load = SPAWN.Process(target=keep_the_store_busy, daemon=True,
                                   args=(stack.store_uri, a.admin.app_id, a.covering, running, stop))
        store_load.start()
        try:
            assert running.wait(60), "the store load did not start"
            time.sleep(0.5)  # past its start-up, which takes a core for a moment
            b.check_owned()
            calm = b.timed_checks()
        finally:
            stop.set()
            store_load.join(30)
        a.stop.clear()
        a.prepare_edits(1000)
        attacker = threading.Thread(target=a.loop, daemon=True)
        started = a.edits
        attacker.start()
        try:
            assert wait_until(lambda: a.edits > started + 1 or a.failure, 30)  # noqa: B023 (called here)
            edits = a.edits
            busy = b.timed_checks()
            edits = a.edits - edits
        finally:
            a.stop.set()
            attacker.join(60)
        if a.failure is not None:
            raise a.failure
        assert edits >= 1, "A did not edit while B was measured"  # else nothing was tested
        rounds.append(f"idle p99 {p99(calm) * 1e3:.2f} ms median {statistics.median(calm) * 1e3:.2f} ms; "
                      f"attacked ({edits} edits) p99 {p99(busy) * 1e3:.2f} ms "
                      f"median {statistics.median(busy) * 1e3:.2f} ms")
        print(rounds[-1])
        idle = min(idle, p99(calm))  # the quietest idle round: a noisy one must not excuse A
        if idle <= QUIET_IDLE_P99 and p99(busy) <= 2 * idle + ALLOWANCE_SECONDS:
            return
    if idle > QUIET_IDLE_P99:
        pytest.skip("the machine is too busy to measure (no idle round quiet enough): " + " | ".join(rounds))
    pytest.fail("tenant B's p99 above twice idle in every round: " + " | ".join(rounds))
