"""Decision logs made the cheap way write exactly the lines of the plain way
(decision/decisionlog.py and ``Lookup._log_decisions``; docs/performance.md, "Decision logs").

Two worlds, two sidecars on one fake control plane holding the same data: one as it is,
one whose decision logging is the plain reference: the clock read before every check, the
sample drawn after it decides, every decision visited as a (permission, Decision) pair, and
each line made by ``shared.logs.JsonFormatter`` from the
line's fields (``latency_ms`` as ``round(ms, 3)``), as ``logging.getLogger(
"iamgate.decisions").info("decision", extra=fields)`` would make it. Both draw the sample
from the same seeded random numbers, read the same clock for ``ts`` and the same
``perf_counter`` readings for the latency (zero, sub-microsecond, exact halves of a
microsecond, milliseconds, minutes). The same scenario of checks runs in each (GET checks,
POST checks under policies, bulk checks of 50 and with duplicates, a user id that needs
escaping, a client's request id), under each mode of the sample and of denials; the lines
written must be the same, byte for byte.
"""
from __future__ import annotations

import io
import logging
import os
import random
import types

import falcon.testing
import pytest
from hypothesis import given
from hypothesis import strategies as st

import decision.service
from decision.decisionlog import DecisionLog, milliseconds
from decision.service import Lookup
from shared.hotmetrics import HotCounter
from shared.logs import JsonFormatter
from tests.decision.conftest import bulk_path, check_path
from tests.decision.fakecp import policy

PERMISSIONS = [f"res{i}:read" for i in range(48)] + ["docs:read", "docs:write"]
ODD_USER = 'not-a-uuid "quoted" \\ caf\u00e9 \u2603'


def plain_lookup(log: DecisionLog) -> type[Lookup]:
    """A lookup class logging its checks to ``log`` the plain way: the clock read before
    every check, the sample drawn after it decides, every decision visited."""

    def put_line(lookup, user_id, decisions, cached, started, *, bulk):
        taken = log.take()
        allowed = all(answer.allowed for _, answer in decisions)
        if taken or (log.denials and not allowed):
            latency = decision.service.time.perf_counter() - started
            if bulk:
                checked = [(permission, answer.allowed) for permission, answer in decisions]
            else:
                (checked, _), = decisions
            log.put(lookup, user_id, checked, allowed, cached, sum(answer.policies_checked for _, answer in decisions),
                    latency, taken)

    class PlainLookup(Lookup):
        __slots__ = ()

        def decide(self, user_id, permissions, **options):
            started = decision.service.time.perf_counter()
            decisions, cached = super().decide(user_id, permissions, **options)
            put_line(self, user_id, list(decisions.items()), cached, started, bulk=options["abac"])
            return decisions, cached

        def decide_one(self, user_id, permission, **options):
            started = decision.service.time.perf_counter()
            answer, cached = super().decide_one(user_id, permission, **options)
            put_line(self, user_id, [(permission, answer)], cached, started, bulk=False)
            return answer, cached

    return PlainLookup


def plain_line(entry: tuple) -> str:
    created, request_id, app_id, user_id, checked, allowed, cached, policies_checked, latency, sampled = entry
    record = logging.LogRecord("iamgate.decisions", logging.INFO, "", 0, "decision", (), None)
    record.created = created
    record.__dict__.update({
        "request_id": request_id, "application_id": app_id, "user_id": user_id,
        **({"permission": checked} if type(checked) is str else
           {"permissions": {permission: "allow" if answer else "deny" for permission, answer in checked}}),
        "result": "allow" if allowed else "deny", "cached": cached, "policies_checked": policies_checked,
        "latency_ms": round(latency * 1000, 3), "sampled": sampled})
    return JsonFormatter().format(record)


class Readings:
    """``perf_counter`` for both worlds, by request: a check's first reading (its start)
    and every later one (its end), the same in both worlds whichever readings each takes."""

    def __init__(self):
        self._rng = random.Random(11)
        self._request = -1
        self._readings: list[tuple[float, float]] = []

    def next_request(self, index: int) -> None:
        while len(self._readings) <= index:
            start = 1000.0 + len(self._readings) * 100.0
            self._readings.append((start, start + self._rng.choice([
                0.0, 1e-7, 0.0000005, 0.0000015, 0.0004995, 0.25, 61.0, self._rng.random() * 0.01,
                self._rng.random()])))
        self._request, self._reads = index, 0

    def __call__(self) -> float:
        self._reads += 1
        start, end = self._readings[self._request]
        return start if self._reads == 1 else end


def _world(make_sidecar, *, plain: bool, **settings):
    app = make_sidecar(**settings)
    service = app.service
    log = service.decision_log
    log.stream = io.StringIO()
    log._writing = True  # no writer thread: the test writes what waits, in order
    log._draw = random.Random(5).random
    log._until_next = log._gap()
    ticks = iter(range(10**9))
    log._clock = lambda: 1_800_000_000.0 + next(ticks) * 0.0007
    if plain:
        log._render = plain_line
        service.decision_log = None  # the plain lookup logs instead
        lookup_class, begin = plain_lookup(log), service.begin

        def plain_begin(app_id, request_id=None):
            lookup = begin(app_id, request_id)
            lookup.__class__ = lookup_class
            return lookup

        service.begin = plain_begin
    return app, log


def _scenario(client, cp_data, readings):
    app_id, key, reader, plain_user = cp_data
    headers = {"Authorization": f"Bearer {key}"}
    statuses = []
    requests = iter(range(10**6))
    for round_ in range(12):
        rid = {"X-Request-Id": f"client-req.{round_:04d}_abc"}
        for user, permission in ((reader, "docs:read"), (reader, "docs:write"), (plain_user, "res3:read")):
            readings.next_request(next(requests))
            statuses.append(client.simulate_get(check_path(app_id), query_string=f"user_id={user}&permission="
                                                f"{permission}", headers={**headers, **rid}).status_code)
        for body in ({"user_id": reader, "permission": "docs:read", "resource": {"classified": round_ % 2 == 0}},
                     {"user_id": ODD_USER, "permission": "docs:read"},
                     {"user_id": reader, "permissions": PERMISSIONS},
                     {"user_id": reader, "permissions": PERMISSIONS, "resource": {"classified": True}},
                     {"user_id": plain_user, "permissions": ["docs:read", "res1:read", "docs:read", "res9:read"]},
                     {"user_id": ODD_USER, "permissions": PERMISSIONS[:7]}):
            path = bulk_path(app_id) if "permissions" in body else check_path(app_id)
            readings.next_request(next(requests))
            statuses.append(client.simulate_post(path, json=body, headers={**headers, **rid}).status_code)
    return statuses


@pytest.mark.parametrize("settings", [
    {"decision_log_sample": 1.0},
    {"decision_log_sample": 0.25},
    {"decision_log_sample": 0.3, "decision_log_denials": True},
    {"decision_log_denials": True},
], ids=["every", "sample", "sample+denials", "denials"])
@pytest.mark.parametrize("hot", [True, False], ids=["hot", "falcon"])
def test_the_lines_are_those_of_the_plain_way(make_sidecar, fake_cp, monkeypatch, settings, hot):
    app_id = fake_cp.add_app()
    key = fake_cp.add_key(app_id)
    reader, plain_user = fake_cp.add_user(app_id), fake_cp.add_user(app_id)
    fake_cp.assign(app_id, reader, fake_cp.add_role(app_id, ["docs:read", *PERMISSIONS[::3]]))
    fake_cp.set_policies(app_id, [policy("deny", ["docs:read", "res3:read"], {
        "op": "eq", "left": {"attr": "resource.classified"}, "right": {"value": True}})])
    readings = Readings()
    monkeypatch.setattr(decision.service, "time", types.SimpleNamespace(perf_counter=readings))
    written = {}
    for plain in (False, True):
        app, log = _world(make_sidecar, plain=plain, **settings)
        if not hot:
            app.hot_check = None
        statuses = _scenario(falcon.testing.TestClient(app), (app_id, key, reader, plain_user), readings)
        assert set(statuses) == {200}
        log.write_waiting()
        written[plain] = log.stream.getvalue()
    fast, reference = written[False], written[True]
    assert fast.count("\n") > 20 and '"result": "deny"' in fast and '"policies_checked": 1' in fast
    assert '"permissions": {' in fast
    assert fast.splitlines() == reference.splitlines()
    assert fast == reference


@given(st.floats(min_value=0.0, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_milliseconds_are_those_of_round_and_repr(seconds):
    assert milliseconds(seconds) == repr(round(seconds * 1000, 3))


@pytest.mark.parametrize("seconds", [0.0, 1e-9, 5e-7, 0.0000005, 0.0000015, 0.0004995, 0.001, 0.0015, 2.0,
                                     0.1 + 0.2, 123.4565, 1e9])
def test_milliseconds_at_the_edges(seconds):
    assert milliseconds(seconds) == repr(round(seconds * 1000, 3))


class _Lookup:
    request_id, app_id = "r", "a"


def test_a_forked_child_writes_its_own_lines_not_the_parents():
    log = DecisionLog(1.0, False, HotCounter("dropped", "d"), stream=io.StringIO(), clock=lambda: 0.0)
    log._writing = True  # the parent's writer: not started here, the test writes
    log.put(_Lookup, "u", "p:read", True, True, 0, 0.0, True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what it would write, through the pipe
        try:
            os.write(write, f"{len(log._queue)} {log._writing}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        assert pipe.read() == "0 False"  # nothing of the parent's queue; its own writer to start
    assert len(log._queue) == 1 and log.write_waiting() == 1


def test_the_writer_writes_what_waits_in_one_write():
    stream = io.StringIO()
    writes = []
    stream.write = lambda text: writes.append(text)
    log = DecisionLog(1.0, False, HotCounter("dropped", "d"), stream=stream, clock=lambda: 0.0)
    log._writing = True
    for i in range(5):
        log.put(_Lookup, "u", f"p{i}:read", True, True, 0, 0.0, True)
    assert log.write_waiting() == 5
    assert len(writes) == 1 and writes[0].count("\n") == 5 and writes[0].endswith("}\n")

