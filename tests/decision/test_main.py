"""``python -m decision``: the sidecar as one process, with the real process."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.decision.conftest import check_path
from tests.e2e.processes import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
    env.update({"IAMGATE_SECRET_KEY": "decision-secret-key-0123456789abcdef", "IAMGATE_LOG_LEVEL": "WARNING"})
    env.update({k: str(v) for k, v in settings.items()})
    return env


def _run(**settings):
    return subprocess.run([sys.executable, "-m", "decision"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=_env(**settings))


def _one_line(result, status: int, *words):
    assert result.returncode == status, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert all(word in lines[0] for word in words), lines[0]


@pytest.mark.parametrize("variable, value", [("IAMGATE_DECISION_PORT", "not-a-port"),
                                             ("IAMGATE_DECISION_WORKERS", "0"), ("IAMGATE_LOG_LEVEL", "verbose")])
def test_a_bad_setting_stops_it_with_exit_2_and_one_line(variable, value):
    _one_line(_run(IAMGATE_INTERNAL_TOKEN="t" * 32, **{variable: value}), 2, "configuration error", variable)


def test_without_a_credential_it_stops_with_exit_2():
    _one_line(_run(IAMGATE_DECISION_PORT=free_port()), 2, "configuration error", "IAMGATE_DECISION_API_KEY")


def test_a_port_in_use_stops_it_with_one_line(fake_cp):
    app_id = fake_cp.add_app()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = _run(IAMGATE_DECISION_API_KEY=fake_cp.add_key(app_id), IAMGATE_CONTROL_PLANE_URL=fake_cp.url,
                      IAMGATE_PUBLIC_URL=fake_cp.issuer, IAMGATE_DECISION_PORT=port)
    _one_line(result, 1, "cannot listen", str(port))


def test_one_process_answers_checks_and_stops_on_sigterm(fake_cp, tmp_path):
    app_id = fake_cp.add_app()
    key = fake_cp.add_key(app_id)
    user = fake_cp.add_user(app_id)
    fake_cp.assign(app_id, user, fake_cp.add_role(app_id, ["documents:read"]))
    port = free_port()
    log = open(tmp_path / "decision.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "decision"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               env=_env(IAMGATE_DECISION_API_KEY=key, IAMGATE_CONTROL_PLANE_URL=fake_cp.url,
                                        IAMGATE_PUBLIC_URL=fake_cp.issuer, IAMGATE_DECISION_PORT=port))
    base = f"http://127.0.0.1:{port}"
    try:
        def ready():
            try:
                return requests.get(base + "/readyz", timeout=1).status_code == 200
            except requests.RequestException:
                return False

        assert wait_until(ready, 30), (tmp_path / "decision.log").read_text()
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout
        assert children.strip() == ""  # no gunicorn master, no forked worker
        with requests.Session() as session:
            url = base + check_path(app_id)
            headers = {"Authorization": f"Bearer {key}"}
            answers = [session.get(url, params={"user_id": user, "permission": "documents:read"}, headers=headers)
                       for _ in range(2)]
            assert [a.json() for a in answers] == [
                {"allowed": True, "permission": "documents:read", "cached": False},
                {"allowed": True, "permission": "documents:read", "cached": True}]
            assert answers[0].headers["Server"] == "iamgate-decision"
            post = session.post(url, json={"user_id": user, "permission": "documents:read",
                                           "resource": {"id": "d1"}}, headers=headers)
            assert post.status_code == 200 and post.json()["allowed"] is True
            assert "iamgate_decision_http_requests_total" in session.get(base + "/metrics").text
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        assert time.monotonic() - started < 10
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
