"""End-to-end fixtures: the real processes, started as ``make run`` starts them
(``python -m controlplane.launcher``), on free loopback ports, spoken to over HTTP."""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass, field

import pytest
import requests

from tests import mongodb
from tests.e2e.processes import free_port, mailbox, wait_until  # noqa: F401  (tests import wait_until from here)


@dataclass
class Stack:
    control_url: str
    decision_url: str
    internal_token: str
    process: subprocess.Popen
    env: dict = field(default_factory=dict)
    log_path: str = ""
    database_uri: str | None = None  # a database of its own on the test MongoDB (tests/mongodb.py)

    def logs(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        mongodb.drop_database(self.database_uri)
        self.database_uri = None


def start_stack(tmp_path, **env_overrides) -> Stack:
    """The stack on free ports. A port another process took between ``free_port`` and the
    launcher's bind ("is in use") is chosen again, twice at the most."""
    for _ in range(2):
        try:
            return _start_stack(tmp_path, **env_overrides)
        except PortTaken:
            pass
    return _start_stack(tmp_path, **env_overrides)


class PortTaken(RuntimeError):
    """The launcher found a port it was given in use."""


def _start_stack(tmp_path, **env_overrides) -> Stack:
    smtp_url = mailbox().smtp_url  # first: its server must not take a port chosen below
    control_port, decision_port = free_port(), free_port()
    token = secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
    env.update({
        "IAMGATE_PORT": str(control_port),
        "IAMGATE_DECISION_PORT": str(decision_port),
        "IAMGATE_WORKER_PORT": str(free_port()),  # the webhook worker's, started on MongoDB
        "IAMGATE_PUBLIC_URL": f"http://127.0.0.1:{control_port}",
        "IAMGATE_CONTROL_PLANE_URL": f"http://127.0.0.1:{control_port}",
        "IAMGATE_INTERNAL_TOKEN": token,
        "IAMGATE_SECRET_KEY": "e2e-secret-key-0123456789abcdef",
        "IAMGATE_BCRYPT_ROUNDS": "4",
        "IAMGATE_DECISION_WORKERS": "1",
        "IAMGATE_LOG_LEVEL": "WARNING",
        "IAMGATE_SMTP_URL": smtp_url,
    })
    database_uri = None if "IAMGATE_MONGODB_URI" in env_overrides else mongodb.fresh_database_uri("iamgate_e2e")
    if database_uri:
        env["IAMGATE_MONGODB_URI"] = database_uri
    env.update({k: str(v) for k, v in env_overrides.items()})
    log_path = str(tmp_path / f"stack-{control_port}.log")
    log = open(log_path, "w")
    process = subprocess.Popen([sys.executable, "-m", "controlplane.launcher"], env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stack = Stack(f"http://127.0.0.1:{control_port}", f"http://127.0.0.1:{decision_port}", token, process,
                  env, log_path, database_uri)

    def up():
        if process.poll() is not None:
            logs = stack.logs()
            raise (PortTaken if " is in use (IAMGATE_" in logs else RuntimeError)("launcher exited:\n" + logs)
        try:
            return all(requests.get(u + "/healthz", timeout=1).ok for u in (stack.control_url, stack.decision_url))
        except requests.RequestException:
            return False

    try:
        came_up = wait_until(up, timeout=60)
    except PortTaken:
        stack.stop()  # its database, on MongoDB
        raise
    if not came_up:
        stack.stop()
        raise RuntimeError("stack did not come up:\n" + stack.logs())
    return stack


@pytest.fixture
def stack_factory(tmp_path):
    """``stack_factory(**IAMGATE_overrides)`` starts a stack; all are stopped at the end."""
    started = []

    def make(**overrides):
        stack = start_stack(tmp_path, **overrides)
        started.append(stack)
        return stack

    yield make
    for stack in started:
        stack.stop()


@pytest.fixture
def stack(stack_factory):
    return stack_factory()
