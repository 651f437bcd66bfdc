"""Schemathesis in the test suite: both OpenAPI documents against the real
processes, ``test`` profile (a fixed seed, a few examples per operation, credential and
generation mode; ``make fuzz`` runs the longer profile). See tests/e2e/fuzz.py."""
from __future__ import annotations

import pytest

from shared.config import Config
from tests.e2e import fuzz
from tests.e2e.processes import Processes


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    started = Processes(tmp_path_factory.mktemp("fuzz"), env=fuzz.ENV).start()
    yield started
    started.stop()


def test_both_documents_hold_against_the_running_services(processes, capsys):
    examples, seed = fuzz.PROFILES["test"]
    report = fuzz.run_against(processes, examples=examples, base_seed=seed, log=lambda line: None)
    with capsys.disabled():
        print("\nschemathesis:", report.summary().splitlines()[0])
    assert len(report.operations) >= 100, sorted(report.operations)
    assert not report.unexercised(), report.unexercised()
    assert not report.failures, report.summary() + "\n" + processes.logs()[-8000:]


@pytest.mark.parametrize("limit", ["rate_limit_login", "rate_limit_dashboard_login", "rate_limit_register",
                                   "rate_limit_api", "rate_limit_ip", "rate_limit_authorize"])
def test_the_fuzzers_own_requests_meet_no_rate_limit(limit):
    """Every limit the fuzzer's own logins, registrations and API calls count against is
    lifted, the per-IP password budget included (``make fuzz`` stopped on a 429 of its own
    login: issue 31, item 8); the 429s themselves are tested where each limit lives."""
    rate = getattr(Config.from_env(env=fuzz.ENV), limit)
    assert rate.limit / rate.window >= 1000, (limit, str(rate))
