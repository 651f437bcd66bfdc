"""Fault tests of webhook delivery with real worker processes.

Each worker is ``python -m controlplane worker`` in a process of its own, over one store
shared with the test: the test MongoDB when IAMGATE_TEST_MONGODB_URI names one, else
tests/mongo_wire.py in the test process (mongomock behind the MongoDB wire protocol; see
tests/mongodb.py).  The test's app (falcon.testing) creates the webhooks and the events
on that store; the workers dispatch them from the change log and deliver to a real
HTTP receiver in the test process.

tests/webhooks/test_faults.py checks the same guarantees with worker objects over
one in-process store and a FakeClock; here a worker really dies (SIGKILL) and its lease
really lapses, with a short lease (IAMGATE_WEBHOOK_TIMEOUT + IAMGATE_WEBHOOK_LEASE_MARGIN).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter as Tally
from pathlib import Path

import pytest
import requests

from tests import mongodb
from tests.conftest import TEST_SECRET
from tests.e2e.processes import free_port, stop_process, wait_until

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT, MARGIN = 3, 1  # a lease of 4 s: long enough to kill the worker mid-send, short to wait out


@pytest.fixture
def shared_uri():
    """A database of its own for the test's app and its worker processes."""
    uri = mongodb.shared_database_uri("iamgate_workers")
    yield uri
    mongodb.drop_database(uri)


@pytest.fixture
def config_overrides(shared_uri):
    return {"webhook_allow_private_targets": True, "webhook_timeout": TIMEOUT, "mongodb_uri": shared_uri,
            "webhook_lease_margin": MARGIN}


class Worker:
    def __init__(self, uri: str, log: Path, **env):
        port = free_port()
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"  # the worker's own port (IAMGATE_WORKER_PORT)
        environment = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
        environment.update({
            "IAMGATE_MONGODB_URI": uri,
            "IAMGATE_SECRET_KEY": TEST_SECRET,  # the webhook secrets are encrypted with the app's key
            "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
            "IAMGATE_WEBHOOK_TIMEOUT": str(TIMEOUT),
            "IAMGATE_WEBHOOK_LEASE_MARGIN": str(MARGIN),
            "IAMGATE_LOG_LEVEL": "WARNING",
            "IAMGATE_WORKER_PORT": str(port),
            **{f"IAMGATE_{k}": str(v) for k, v in env.items()},
        })
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "controlplane", "worker"], cwd=ROOT,
                env=environment, stdout=out, stderr=subprocess.STDOUT, process_group=0)
        if not wait_until(lambda: self.process.poll() is None and self.metric() is not None, timeout=60):
            self.stop()
            raise RuntimeError(f"the worker did not start:\n{log.read_text()[-3000:]}")

    def metric(self, name: str = "iamgate_webhook_deliveries_sent_total") -> float | None:
        try:
            text = requests.get(self.metrics_url, timeout=2).text
        except requests.RequestException:
            return None
        return next((float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " ")), None)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture
def start_worker(shared_uri, tmp_path):
    started: list[Worker] = []

    def start(**env) -> Worker:
        worker = Worker(shared_uri, tmp_path / f"worker-{len(started) + 1}.log", **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def test_a_worker_killed_mid_delivery_loses_nothing(ctx, make_webhook, receiver, make_role, application,
                                                   start_worker):
    deliveries, queue = ctx.store["webhook_deliveries"], ctx.store["webhook_queue"]
    make_webhook(receiver.url, events=["role.created"])
    held = threading.Event()
    receiver.hold = held  # the receiver keeps the first request open: the worker is mid-send
    make_role(application, "editor", ["posts:edit"])

    doomed = start_worker(WEBHOOK_WORKER_THREADS=1)
    assert wait_until(lambda: len(receiver.requests) == 1, timeout=30), doomed.log.read_text()
    doomed.kill()
    claimed = deliveries.find_one({})
    assert claimed["status"] == "pending" and claimed["lease"] is not None and claimed["attempts"] == 0
    lease_until = queue.find_one({"_id": claimed["_id"]})["due_at"]
    receiver.hold = None
    held.set()  # the killed worker's request ends; its connection is gone with the process

    survivor = start_worker(WEBHOOK_WORKER_THREADS=1)
    assert wait_until(lambda: len(receiver.requests) == 2, timeout=30), survivor.log.read_text()
    assert wait_until(lambda: deliveries.find_one({"_id": claimed["_id"]})["status"] == "delivered", timeout=10)
    time.sleep(0.5)  # a third send, if any, would arrive now

    first, again = receiver.requests
    assert first["headers"]["X-Service-Delivery-Id"] == again["headers"]["X-Service-Delivery-Id"] == claimed["_id"]
    assert first["body"] == again["body"] == claimed["body"].encode()
    # Not before the killed worker's lease lapsed (the header is the send time, in whole seconds).
    assert int(again["headers"]["X-Service-Timestamp"]) >= int(lease_until.timestamp())
    delivered = deliveries.find_one({"_id": claimed["_id"]})
    assert delivered["attempts"] == 1 and delivered["retry_count"] == 0 and delivered["response_status"] == 200
    assert delivered["lease"] is None and queue.count_documents({}) == 0
    assert deliveries.count_documents({}) == 1 and survivor.metric() == 1


def test_two_worker_processes_over_200_events_never_send_one_delivery_twice(ctx, make_webhook, receiver, make_role,
                                                                            application, start_worker):
    make_webhook(receiver.url, events=["permission.granted"])
    for i in range(100):
        make_role(application, f"role{i}", ["a:b", "c:d"])  # two permission.granted each
    held = threading.Event()
    receiver.hold = held  # until both workers run, so that both have deliveries in hand
    # The default timeout and lease: no lease lapses, so no delivery may be sent twice. The
    # per-application cap above both workers' threads, so that both race for every delivery.
    settings = {"WEBHOOK_WORKER_THREADS": 4, "WEBHOOK_TIMEOUT": 30, "WEBHOOK_LEASE_MARGIN": 30,
                "WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION": 8}
    workers = [start_worker(**settings), start_worker(**settings)]
    receiver.hold = None
    held.set()

    assert wait_until(lambda: len(receiver.requests) >= 200, timeout=60), [w.log.read_text() for w in workers]
    assert wait_until(lambda: ctx.store["webhook_deliveries"].count_documents({"status": "delivered"}) == 200,
                      timeout=10)
    time.sleep(0.5)  # anything sent twice would arrive now
    ids = Tally(r["headers"]["X-Service-Delivery-Id"] for r in receiver.requests)
    assert len(ids) == 200 and max(ids.values()) == 1
    assert ctx.store["webhook_deliveries"].count_documents({"attempts": 1}) == 200
    sent = [w.metric() for w in workers]
    assert sum(sent) == 200 and all(sent)  # both workers delivered
