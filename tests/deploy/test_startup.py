"""Start-up as an operator meets it, with the real processes: the launcher (``make run``),
gunicorn with the services' config modules (the image and the chart), the image's own
command line, the webhook worker and ``keys rotate``."""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import falcon.testing
import pytest
import requests

from tests.deploy.late_store import GATE_VARIABLE, LateMongoDB
from tests.e2e.processes import free_port, stop_process, wait_until

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"IAMGATE_SECRET_KEY": "deploy-secret-key-0123456789abcdef", "IAMGATE_BCRYPT_ROUNDS": "4"}

# One bad value per kind of variable: (variable, value, extra settings).
BAD = [
    ("IAMGATE_PORT", "not-a-port", {}),                                 # integer
    ("IAMGATE_HOST", "999.1.1.1", {}),                                  # bind address
    ("IAMGATE_WORKERS", "0", {}),                                       # integer bounds
    ("IAMGATE_RATE_LIMIT_LOGIN", "10", {}),                             # rate
    ("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "maybe", {}),             # boolean
    ("IAMGATE_PUBLIC_URL", "ftp://id.example.com", {}),                 # URL
    ("IAMGATE_MONGODB_URI", "postgres://db", {}),                       # store URI
    ("IAMGATE_TRUSTED_PROXIES", "10.0.0.0/33", {}),                     # CIDR list
    ("IAMGATE_WEBHOOK_RETRY_DELAYS", "30,soon", {}),                    # integer list
    ("IAMGATE_SMTP_URL", "http://mail", {}),                            # SMTP URL
    ("IAMGATE_LOG_LEVEL", "verbose", {}),                               # choice
    ("IAMGATE_METRICS_DIR", "run/metrics", {}),                         # absolute path
    ("IAMGATE_SECRET_KEY", "short", {}),                                # secret length
    ("IAMGATE_INTERNAL_TOKEN", "t" * 31, {}),                           # token length
    ("IAMGATE_DECISION_API_KEY", "not-a-key", {}),                      # API key shape
    ("IAMGATE_STREAM_HEARTBEAT", "5", {"IAMGATE_DECISION_MAX_STALENESS": "5"}),  # combination
    ("IAMGATE_SECRET_KEY", "", {"IAMGATE_MONGODB_URI": "mongodb://127.0.0.1:9/iamgate"}),  # required with MongoDB
]


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
    env.update(GOOD)
    env.update({k: str(v) for k, v in settings.items()})
    return env


def _gunicorn(service: str, app: str | None = None, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gunicorn", "-c", f"python:{service}.gunicorn_conf", *extra,
            app or f"{service}.wsgi:create()"]


def _assert_one_line_naming(result, variable):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "configuration error" in lines[0] and variable in lines[0]


@pytest.mark.parametrize("variable, value, extra", BAD, ids=[b[0] for b in BAD])
def test_a_bad_setting_stops_the_launcher_with_one_line(variable, value, extra):
    result = subprocess.run([sys.executable, "-m", "controlplane.launcher"], capture_output=True, text=True,
                            env=_env(**{variable: value, **extra}), timeout=60, cwd=ROOT)
    _assert_one_line_naming(result, variable)


@pytest.mark.parametrize("service", ["controlplane", "decision"])
@pytest.mark.parametrize("variable, value, extra", BAD, ids=[b[0] for b in BAD])
def test_a_bad_setting_stops_gunicorns_master_with_exit_2(service, variable, value, extra):
    settings = {variable: value, **extra, "IAMGATE_PORT": free_port(), "IAMGATE_DECISION_PORT": free_port()}
    if variable == "IAMGATE_PORT":
        settings[variable] = value
    result = subprocess.run(_gunicorn(service), capture_output=True, text=True, env=_env(**settings), timeout=60,
                            cwd=ROOT)
    _assert_one_line_naming(result, variable)


def test_a_decision_service_without_a_credential_stops_with_exit_2():
    result = subprocess.run(_gunicorn("decision"), capture_output=True, text=True, timeout=60, cwd=ROOT,
                            env=_env(IAMGATE_DECISION_PORT=free_port()))
    _assert_one_line_naming(result, "IAMGATE_DECISION_API_KEY")


def _spawn(command, env, log_path):
    log = open(log_path, "w")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, process_group=0)


def _status(url):
    try:
        return requests.get(url, timeout=10).status_code
    except requests.RequestException:
        return None


def test_a_late_mongodb_keeps_the_control_plane_alive_and_unready_until_it_answers(tmp_path):
    gate = tmp_path / "mongodb-is-up"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = _spawn(_gunicorn("controlplane", "tests.deploy.late_store:create()"),
                     _env(IAMGATE_PORT=port, **{GATE_VARIABLE: str(gate)}), tmp_path / "control.log")
    try:
        assert wait_until(lambda: _status(url + "/healthz") == 200, 60), (tmp_path / "control.log").read_text()
        for _ in range(3):  # alive, not ready, and still running while the store refuses
            assert requests.get(url + "/readyz", timeout=10).status_code == 503
            assert process.poll() is None
        assert wait_until(lambda: "retrying" in (tmp_path / "control.log").read_text(), 20)
        gate.touch()  # MongoDB is up
        assert wait_until(lambda: _status(url + "/readyz") == 200, 60), (tmp_path / "control.log").read_text()
        # The start-up step ran: a signing key exists.
        assert requests.get(url + "/.well-known/jwks.json", timeout=10).json()["keys"]
    finally:
        stop_process(process)
    log = (tmp_path / "control.log").read_text()
    retries = [json.loads(line) for line in log.splitlines() if '"retrying"' in line or "retrying" in line]
    assert retries and all(r["logger"] == "iamgate.startup" for r in retries)


def test_a_port_in_use_stops_the_launcher_with_a_clear_error():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "controlplane.launcher"], capture_output=True, text=True,
                                env=_env(IAMGATE_PORT=port, IAMGATE_DECISION_PORT=free_port()), timeout=60, cwd=ROOT)
    assert result.returncode == 1
    assert f"port {port} is in use" in result.stderr
    assert "iamgate control plane:" not in result.stdout


def _image_command() -> list[str]:
    cmd = re.search(r"^CMD (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    command = json.loads(cmd)
    assert command[0] == "gunicorn"
    return [sys.executable, "-m", "gunicorn", *command[1:]]


def test_the_images_command_runs_one_worker_on_memory_and_logs_json_lines(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = _spawn(_image_command(), _env(IAMGATE_PORT=port, IAMGATE_WORKERS=4), tmp_path / "image.log")
    try:
        assert wait_until(lambda: _status(url + "/readyz") == 200, 60), (tmp_path / "image.log").read_text()
        body = {"email": "ada@example.com", "password": "Analytical-Engine-1843", "name": "Ada"}
        statuses = [requests.post(url + "/api/dashboard/register", json=body, timeout=10).status_code
                    for _ in range(6)]
        assert statuses == [201] + [409] * 5  # one database, whichever worker answered
        assert "_created" not in requests.get(url + "/metrics", timeout=10).text
    finally:
        stop_process(process)
    lines = (tmp_path / "image.log").read_text().splitlines()
    entries = [json.loads(line) for line in lines]  # JSON lines only, gunicorn's included
    assert any(e["logger"] == "gunicorn.error" for e in entries)
    assert any("running 1 worker (not 4)" in e["message"] for e in entries)
    assert sum("Booting worker" in e["message"] for e in entries) == 1
    assert shlex.join(_image_command()[3:5]) == "-c python:controlplane.gunicorn_conf"


# --- a MongoDB that is not up yet (issue 31, item 2): a closed port that opens later.

@pytest.fixture
def late_mongodb():
    store = LateMongoDB()
    yield store
    store.close()


def _retries(path) -> int:
    return sum(1 for line in path.read_text().splitlines() if "retrying" in line)


def test_the_worker_waits_for_a_late_mongodb_alive_and_unready_then_ready(tmp_path, late_mongodb):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "worker.log"
    process = _spawn([sys.executable, "-m", "controlplane", "worker"],
                     _env(IAMGATE_WORKER_PORT=port, IAMGATE_MONGODB_URI=late_mongodb.uri), log)
    try:
        assert wait_until(lambda: _status(url + "/healthz") == 200, 60), log.read_text()
        assert requests.get(url + "/readyz", timeout=10).json() == {"status": "unavailable", "store": "unreachable"}
        assert wait_until(lambda: _retries(log), 30), log.read_text()  # one attempt failed ...
        assert process.poll() is None  # ... and the worker is still there
        late_mongodb.open()
        assert wait_until(lambda: _status(url + "/readyz") == 200, 60), log.read_text()
    finally:
        stop_process(process)
    assert process.returncode == 0
    lines = log.read_text().splitlines()
    entries = [json.loads(line) for line in lines]  # JSON lines only: no crash's traceback on stderr
    assert not any(e["logger"] == "iamgate.events" for e in entries), lines  # the tailer never failed
    retries = [e for e in entries if "retrying" in e["message"]]
    assert retries and all(r["logger"] == "iamgate.startup" for r in retries)


def test_make_run_on_a_late_mongodb_keeps_every_process_up_until_it_answers(tmp_path, late_mongodb):
    ports = {name: free_port() for name in ("IAMGATE_PORT", "IAMGATE_DECISION_PORT", "IAMGATE_WORKER_PORT")}
    control, worker = (f"http://127.0.0.1:{ports[name]}" for name in ("IAMGATE_PORT", "IAMGATE_WORKER_PORT"))
    log = tmp_path / "launcher.log"
    launcher = _spawn([sys.executable, "-m", "controlplane.launcher"],
                      _env(IAMGATE_MONGODB_URI=late_mongodb.uri, IAMGATE_WORKERS=1, **ports), log)
    try:
        assert wait_until(lambda: "Press Ctrl-C to stop." in log.read_text(), 90), log.read_text()
        assert _status(control + "/readyz") == 503 and _status(worker + "/readyz") == 503
        # Both the control plane and the worker have failed an attempt (pymongo gives up
        # on a server after 5 s); before, the worker died of it and took the rest along.
        assert wait_until(lambda: _retries(log) >= 2, 30), log.read_text()
        assert launcher.poll() is None, log.read_text()
        late_mongodb.open()
        assert wait_until(lambda: _status(control + "/readyz") == 200 and _status(worker + "/readyz") == 200,
                          60), log.read_text()
        assert launcher.poll() is None
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGINT)
        launcher.wait(30)
    assert launcher.returncode == 0, log.read_text()
    assert not any(line.startswith("Traceback") for line in log.read_text().splitlines()), log.read_text()


def _keys_rotate(uri, *timeout):
    return [sys.executable, "-m", "controlplane", "keys", "rotate", *timeout], _env(IAMGATE_MONGODB_URI=uri)


def test_keys_rotate_waits_for_a_late_mongodb(tmp_path, late_mongodb):
    command, env = _keys_rotate(late_mongodb.uri)
    log = tmp_path / "rotate.err"
    with open(log, "w") as err:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    try:
        assert wait_until(lambda: _retries(log), 30), log.read_text()
        late_mongodb.open()
        out, _ = process.communicate(timeout=60)
    finally:
        stop_process(process)
    assert process.returncode == 0, log.read_text()
    assert out.startswith("active signing key: ")


def test_keys_rotate_gives_up_after_its_timeout_with_one_line(late_mongodb):
    command, env = _keys_rotate(late_mongodb.uri, "--timeout", "1")  # never opened
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("keys rotate: no key was rotated: MongoDB failed or did not "
                                                   "answer within 1 s: ServerSelectionTimeoutError"), result.stderr
    assert result.stdout == ""


def test_the_workers_readiness_needs_its_start_up_and_a_polling_tailer():
    """/readyz of the worker's port: starting until the start-up step is done, stalled
    while the change-log tailer (which feeds the dispatcher) does not poll, ready while it does."""
    from controlplane.ops.routes import worker_app
    from controlplane.services import build_services
    from shared.config import Config

    services = build_services(Config.from_env(env={}))
    client = falcon.testing.TestClient(worker_app(services))

    def readiness():
        response = client.simulate_get("/readyz")
        return response.status_code, response.json["status"]

    assert readiness() == (503, "starting")
    services.startup.run_once(deliver=True)
    assert readiness() == (503, "stalled")
    services.startup.follow(deliver=True)
    try:
        assert wait_until(lambda: readiness() == (200, "ready"), 10)
    finally:
        services.webhooks.worker.stop()
        services.tailer.stop()
    assert wait_until(lambda: readiness() == (503, "stalled"), 10)
    assert client.simulate_get("/healthz").json == {"status": "ok"}
    assert "iamgate_webhook_queue_depth 0.0" in client.simulate_get("/metrics").text


def test_a_process_warns_once_about_a_misspelled_variable():
    """A misspelled IAMGATE_ variable was silently ignored (issue 31, item 7): each process
    now logs one warning for it at start, naming the closest known variable."""
    result = subprocess.run([sys.executable, "-m", "controlplane", "keys", "rotate"], capture_output=True, text=True,
                            env=_env(IAMGATE_WORKER_PROT="9000"), timeout=60, cwd=ROOT)
    entries = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [e["message"] for e in entries if e["logger"] == "iamgate.config"] == [
        "IAMGATE_WORKER_PROT is not an iamgate setting and is ignored; did you mean IAMGATE_WORKER_PORT?"]
