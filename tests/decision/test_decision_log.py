"""Decision logs (docs/decision-service.md, "Decision logs"): a sampled share of the
checks, and every check answering a denial when asked, one JSON line each on stdout (a
bulk check's with every permission's result); never holding up a check (a bounded queue
that drops and counts what it drops)."""
from __future__ import annotations

import io
import json
import logging
import random
import threading
import time

import falcon.testing
import pytest

from decision.decisionlog import DecisionLog
from shared.hotmetrics import HotCounter
from shared.logs import JsonFormatter
from tests.decision.conftest import Tenant, wait_for
from tests.decision.fakecp import policy

FIELDS = ["ts", "level", "logger", "message", "request_id", "application_id", "user_id", "permission", "result",
          "cached", "policies_checked", "latency_ms", "sampled"]


class Logged:
    """The decision lines a sidecar writes (its log's stream, read as lines)."""

    def __init__(self, app):
        self.log = app.service.decision_log
        self.stream = io.StringIO()
        self.log.stream = self.stream

    def lines(self, count: int) -> list[dict]:
        """The lines once ``count`` were written (the writer thread writes them)."""
        assert wait_for(lambda: self._count() >= count), self.stream.getvalue()
        time.sleep(0.1)  # more than expected would show by now
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def _count(self) -> int:
        return self.stream.getvalue().count("\n")


def _tenant(make_sidecar, fake_cp, *, hot: bool = True, **settings):
    app = make_sidecar(**settings)
    if not hot:
        app.hot_check = None  # Falcon answers
    return app, Tenant(fake_cp, falcon.testing.TestClient(app))


@pytest.mark.parametrize("hot", [True, False])
def test_sampling_everything_logs_every_check_with_its_fields(make_sidecar, fake_cp, hot):
    app, tenant = _tenant(make_sidecar, fake_cp, hot=hot, decision_log_sample=1.0)
    logged = Logged(app)
    user = tenant.user_with("docs:read")
    fake_cp.set_policies(tenant.app_id, [policy("deny", ["docs:read"], {
        "op": "eq", "left": {"attr": "resource.classified"}, "right": {"value": True}})])
    answers = [tenant.get(user, "docs:read"), tenant.get(user, "docs:write"),
               tenant.post({"user_id": user, "permission": "docs:read", "resource": {"classified": True}})]
    assert [a.status_code for a in answers] == [200, 200, 200]
    lines = logged.lines(3)
    assert [list(line) for line in lines] == [FIELDS] * 3
    for line, answer in zip(lines, answers, strict=True):
        assert (line["level"], line["logger"], line["message"]) == ("info", "iamgate.decisions", "decision")
        assert line["request_id"] == answer.headers["X-Request-Id"]
        assert (line["application_id"], line["user_id"], line["sampled"]) == (tenant.app_id, user, True)
        assert line["result"] == ("allow" if answer.json["allowed"] else "deny")
        assert line["cached"] is answer.json["cached"]
        assert type(line["latency_ms"]) is float and 0 <= line["latency_ms"] < 10_000
    assert [(line["permission"], line["result"], line["policies_checked"]) for line in lines] == [
        ("docs:read", "allow", 0), ("docs:write", "deny", 0), ("docs:read", "deny", 1)]
    # Each line is the one the service's JSON log format writes for these fields.
    for raw, line in zip(logged.stream.getvalue().splitlines(), lines, strict=True):
        record = logging.LogRecord("iamgate.decisions", logging.INFO, "", 0, "decision", (), None)
        record.__dict__.update({name: line[name] for name in FIELDS[4:]})
        formatted = JsonFormatter().format(record)
        assert raw[raw.index('"level"'):] == formatted[formatted.index('"level"'):]


def test_with_decision_logs_off_nothing_is_logged_and_no_metric_added(make_sidecar, fake_cp, capfd):
    app, tenant = _tenant(make_sidecar, fake_cp)  # the defaults: sample 0, denials false
    assert app.service.decision_log is None
    user = tenant.user_with("docs:read")
    assert tenant.allowed(user, "docs:read") and not tenant.allowed(user, "docs:write")
    assert "iamgate.decisions" not in capfd.readouterr().out
    assert "log_lines_dropped" not in tenant.client.simulate_get("/metrics").text


def test_denials_only_logs_every_denial_and_nothing_else(make_sidecar, fake_cp):
    app, tenant = _tenant(make_sidecar, fake_cp, decision_log_denials=True)
    logged = Logged(app)
    user = tenant.user_with("docs:read")
    for _ in range(3):
        assert tenant.allowed(user, "docs:read")
    assert not tenant.allowed(user, "docs:write")
    assert tenant.bulk({"user_id": user, "permissions": ["docs:read"]}).status_code == 200  # all allowed: no line
    assert tenant.bulk({"user_id": user, "permissions": ["docs:read", "docs:delete"]}).status_code == 200
    assert [(line.get("permission"), line.get("permissions"), line["result"], line["sampled"])
            for line in logged.lines(2)] == [
        ("docs:write", None, "deny", False),
        (None, {"docs:read": "allow", "docs:delete": "deny"}, "deny", False)]


def test_a_bulk_check_is_one_line_with_each_permissions_result(make_sidecar, fake_cp):
    app, tenant = _tenant(make_sidecar, fake_cp, decision_log_sample=1.0)
    logged = Logged(app)
    user = tenant.user_with("posts:read", "comments:*")
    fake_cp.set_policies(tenant.app_id, [policy("deny", ["posts:read"], {
        "op": "eq", "left": {"attr": "resource.hidden"}, "right": {"value": True}})])
    allowed = tenant.bulk({"user_id": user, "permissions": ["posts:read", "comments:delete"]})
    mixed = tenant.bulk({"user_id": user, "permissions": ["posts:read", "posts:write", "comments:delete"],
                         "resource": {"hidden": False}})
    assert allowed.status_code == mixed.status_code == 200
    lines = logged.lines(2)
    assert [list(line) for line in lines] == [[name if name != "permission" else "permissions" for name in FIELDS]] * 2
    assert [(line["permissions"], line["result"], line["policies_checked"]) for line in lines] == [
        ({"posts:read": "allow", "comments:delete": "allow"}, "allow", 1),
        ({"posts:read": "allow", "posts:write": "deny", "comments:delete": "allow"}, "deny", 1)]
    assert [line["request_id"] for line in lines] == [allowed.headers["X-Request-Id"], mixed.headers["X-Request-Id"]]


def test_the_sample_takes_its_share_of_checks():
    dropped = HotCounter("dropped", "d")
    assert all(DecisionLog(1.0, False, dropped).take() for _ in range(5))
    assert not any(DecisionLog(0.0, True, dropped).take() for _ in range(50))
    for seed in (1, 7, 50):
        log = DecisionLog(0.1, False, dropped, draw=random.Random(seed).random)
        taken = sum(log.take() for _ in range(100_000))
        assert 9_000 < taken < 11_000, (seed, taken)  # 10,000 expected; a standard deviation is 95


class _Blocked(io.StringIO):
    """stdout that does not take a write until released (a pipe nobody reads)."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.waiting = threading.Event()

    def write(self, text):
        self.waiting.set()
        self.release.wait(10)
        return super().write(text)


def test_a_full_queue_drops_and_counts_and_never_holds_up_a_check(make_sidecar, fake_cp):
    app, tenant = _tenant(make_sidecar, fake_cp, decision_log_sample=1.0)
    log = app.service.decision_log
    log.stream, log._queue_size = _Blocked(), 5
    user = tenant.user_with("docs:read")
    assert tenant.allowed(user, "docs:read")
    assert log.stream.waiting.wait(5)  # the writer took that line and is stuck writing it
    started = time.monotonic()
    for _ in range(20):
        assert tenant.allowed(user, "docs:read")
    assert time.monotonic() - started < 5  # generous: 20 cached checks take milliseconds
    metrics = tenant.client.simulate_get("/metrics").text
    assert "iamgate_decision_log_lines_dropped_total 15.0" in metrics  # 5 queued, 15 dropped
    log.stream.release.set()
    assert wait_for(lambda: log.stream.getvalue().count("\n") == 6)  # the first line and the 5 queued


def test_decision_log_drops_are_zero_from_the_start(make_sidecar, fake_cp):
    _, tenant = _tenant(make_sidecar, fake_cp, decision_log_denials=True)
    metrics = tenant.client.simulate_get("/metrics").text
    assert "# TYPE iamgate_decision_log_lines_dropped_total counter" in metrics
    assert "iamgate_decision_log_lines_dropped_total 0.0" in metrics
