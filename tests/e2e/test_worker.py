"""The webhook worker as it runs in production: ``python -m controlplane worker`` in a
process of its own beside the control plane (gunicorn), both on one MongoDB -- the test
MongoDB when IAMGATE_TEST_MONGODB_URI names one, else tests/mongo_wire.py in the test
process. An event the control plane logs after the worker started reaches the receiver
(the worker's change-log tailer follows the log: issue 31, item 1), and the worker's own
port answers /healthz, /readyz and /metrics."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import requests

from tests import mongodb
from tests.e2e.processes import Admin, Processes, free_port, stop_process, wait_until


@pytest.fixture
def shared_uri():
    uri = mongodb.shared_database_uri("iamgate_worker_e2e")
    yield uri
    mongodb.drop_database(uri)


@pytest.fixture
def control_plane(tmp_path, shared_uri):
    processes = Processes(tmp_path, env={"IAMGATE_MONGODB_URI": shared_uri,
                                         "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"})
    processes.start_control_plane()
    yield processes
    processes.stop()


def _status(url):
    try:
        return requests.get(url, timeout=5).status_code
    except requests.RequestException:
        return None


def _metric(text: str, name: str) -> float | None:
    return next((float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " ")), None)


def test_the_worker_process_delivers_what_the_control_plane_logs_after_it_started(control_plane, receiver, tmp_path):
    port = free_port()
    worker_url = f"http://127.0.0.1:{port}"
    env = {**control_plane.env, "IAMGATE_WORKER_PORT": str(port)}
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen([sys.executable, "-m", "controlplane", "worker"], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, process_group=0)
    try:
        assert wait_until(lambda: _status(worker_url + "/readyz") == 200, 60), log.read_text()
        assert requests.get(worker_url + "/healthz", timeout=5).json() == {"status": "ok"}
        assert requests.get(worker_url + "/readyz", timeout=5).json() == {"status": "ready", "store": "ok"}

        admin = Admin(control_plane.control_url, name="worker")
        created = requests.post(f"{admin.v1}/webhooks", json={"url": receiver.url, "events": ["role.created"]},
                                headers=admin.headers, timeout=10)
        assert created.status_code == 201, created.text
        admin.role(["posts:edit"], name="editor")  # logged now, while the worker runs

        assert wait_until(lambda: len(receiver.requests) == 1, 30), log.read_text() + control_plane.logs()
        delivery = receiver.requests[0]
        assert delivery["headers"]["X-Service-Event"] == "role.created"
        assert json.loads(delivery["body"])["data"]["name"] == "editor"
        metrics = requests.get(worker_url + "/metrics", timeout=5)
        assert metrics.status_code == 200 and metrics.headers["Content-Type"].startswith("text/plain")
        # Counted once the attempt is written (and its slot freed), a moment after the receiver has it.
        assert wait_until(lambda: _metric(requests.get(worker_url + "/metrics", timeout=5).text,
                                          "iamgate_webhook_deliveries_sent_total") == 1, 10)
        # The queue depth is read in the background (every 5 s), never on the scrape's path.
        assert wait_until(lambda: _metric(requests.get(worker_url + "/metrics", timeout=5).text,
                                          "iamgate_webhook_queue_depth") == 0, 15)
    finally:
        stop_process(worker)
    assert worker.returncode == 0
    text = log.read_text()
    assert "Traceback" not in text and "poll failed" not in text, text


def test_the_worker_port_in_use_stops_it_with_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "controlplane", "worker"], capture_output=True, text=True,
                                timeout=60, env={**env, "IAMGATE_WORKER_PORT": str(port)})
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"iamgate worker: port {port} is in use (IAMGATE_WORKER_PORT={port}): stop what listens there "
        f"or choose another port")
