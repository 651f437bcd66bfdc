"""The control plane and the decision service as separate gunicorn processes, started,
stopped and restarted one at a time (the fault tests stop only the control plane), plus
``Admin``: provisioning through the control plane's public HTTP API (dashboard account,
application, API key, end users, roles, assignments) as a tenant would do it.

Every stack sends its email to ``mailbox()``, one SMTP server of the test process: a
dashboard account builds nothing until it confirms its address (docs/dashboard.md), so
``sign_up`` does what a tenant does, register, sign in and open the mailed link.

Used by the end-to-end tests and by ``make bench`` (benchmarks/decision_bench.py).
"""
from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from controlplane.launcher import _gunicorn
from tests import mongodb
from tests.e2e.mailbox import Mailbox

PASSWORD = "Analytical-Engine-1843"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_mailbox: Mailbox | None = None
_mailbox_started = threading.Lock()


def mailbox() -> Mailbox:
    """The test process's mailbox, started on first use; its ``smtp_url`` is every
    stack's IAMGATE_SMTP_URL."""
    global _mailbox
    with _mailbox_started:
        if _mailbox is None:
            _mailbox = Mailbox(free_port())
        return _mailbox


def confirm_email(control_url: str, address: str) -> None:
    """Open the verification link mailed to a dashboard account's address."""
    token = mailbox().token(address, f"{control_url}/dashboard/verify-email")
    response = requests.post(f"{control_url}/api/dashboard/email/verify", json={"token": token}, timeout=10)
    assert response.status_code == 200, response.text


def sign_up(control_url: str, name: str = "owner") -> requests.Session:
    """A new dashboard account with a confirmed address, signed in: its session."""
    http = requests.Session()
    address = f"{name.lower()}-{secrets.token_hex(4)}@example.com"
    for path, body in (("register", {"email": address, "password": PASSWORD, "name": name}),
                       ("login", {"email": address, "password": PASSWORD})):
        response = http.post(f"{control_url}/api/dashboard/{path}", json=body, timeout=10)
        assert response.ok, f"{path}: {response.status_code} {response.text}"
    confirm_email(control_url, address)
    return http


def wait_until(predicate, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    return None


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 now (a readiness probe's question)."""
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


@dataclass
class Processes:
    """Both services on free loopback ports, sharing one environment (internal token,
    secret key, public URL). ``env`` overrides IAMGATE_ variables of both."""

    log_dir: Path
    env: dict = field(default_factory=dict)
    control_workers: int = 1
    decision_workers: int = 1
    prefix: tuple = ()  # run both under this command (the benchmark's ``nice -n N``)

    def __post_init__(self):
        self.control_port, self.decision_port = free_port(), free_port()
        self.control_url = f"http://127.0.0.1:{self.control_port}"
        self.decision_url = f"http://127.0.0.1:{self.decision_port}"
        self.internal_token = secrets.token_urlsafe(24)
        base = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_")}
        base.update({
            "IAMGATE_PORT": str(self.control_port),
            "IAMGATE_DECISION_PORT": str(self.decision_port),
            "IAMGATE_PUBLIC_URL": self.control_url,
            "IAMGATE_CONTROL_PLANE_URL": self.control_url,
            "IAMGATE_INTERNAL_TOKEN": self.internal_token,
            "IAMGATE_SECRET_KEY": "e2e-secret-key-0123456789abcdef",
            "IAMGATE_BCRYPT_ROUNDS": "4",
            "IAMGATE_LOG_LEVEL": "WARNING",
            "IAMGATE_SMTP_URL": mailbox().smtp_url,
            # 127.0.0.1 can be no passkey's RP ID; bound to localhost, the passkey routes
            # answer as a deployment's do (docs/passkeys.md) instead of 503 PASSKEY_UNAVAILABLE.
            "IAMGATE_WEBAUTHN_RP_ID": "localhost",
            "IAMGATE_WEBAUTHN_ORIGINS": f"http://localhost:{self.control_port}",
        })
        # A database of its own on the test MongoDB when there is one (tests/mongodb.py).
        self.database_uri = mongodb.fresh_database_uri("iamgate_e2e")
        if self.database_uri:
            base["IAMGATE_MONGODB_URI"] = self.database_uri
        base.update({k: str(v) for k, v in self.env.items()})
        self.env = base
        self.control: subprocess.Popen | None = None
        self.decision: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self._starts = 0

    def _spawn(self, name: str, command: list[str], env: dict) -> subprocess.Popen:
        """Start one service as `make run` (controlplane/launcher.py) starts it, in a process
        group of its own (a terminal's Ctrl-C does not reach it) but in the caller's session:
        with the kernel's session autogroups, a new session would be scheduled as a group
        of its own against the caller's (the benchmark's load generator, see
        benchmarks/NOTES.md)."""
        self._starts += 1
        log = open(self.log_dir / f"{name}-{self._starts}.log", "w")
        return subprocess.Popen([*self.prefix, *command], env=env, stdout=log, stderr=subprocess.STDOUT,
                                process_group=0)

    def start_control_plane(self) -> None:
        self.control = self._spawn(
            "control", _gunicorn("controlplane.wsgi:create()", "127.0.0.1", self.control_port, self.control_workers),
            self.env)
        if not wait_until(lambda: self.control.poll() is None and answers(self.control_url + "/healthz"), 60):
            raise RuntimeError("the control plane did not start:\n" + self.logs())

    def start_decision_service(self, **env) -> None:
        merged = {**self.env, **{k: str(v) for k, v in env.items()}}
        self.decision = self._spawn(
            "decision", _gunicorn("decision.wsgi:create()", "127.0.0.1", self.decision_port, self.decision_workers),
            merged)
        if not wait_until(lambda: self.decision.poll() is None and answers(self.decision_url + "/healthz"), 60):
            raise RuntimeError("the decision service did not start:\n" + self.logs())

    def start_worker(self, **env) -> None:
        """The webhook worker (``python -m controlplane worker``), as against MongoDB; once
        its ``/readyz`` answers. ``env`` adds to or overrides the shared environment."""
        port = free_port()
        self.worker = self._spawn("worker", [sys.executable, "-m", "controlplane", "worker"],
                                  {**self.env, **{k: str(v) for k, v in env.items()}, "IAMGATE_WORKER_PORT": str(port)})
        if not wait_until(lambda: self.worker.poll() is None and answers(f"http://127.0.0.1:{port}/readyz"), 60):
            raise RuntimeError("the webhook worker did not start:\n" + self.logs())

    def decision_ready(self, timeout=30.0) -> bool:
        return bool(wait_until(lambda: answers(self.decision_url + "/readyz"), timeout))

    def start(self) -> Processes:
        self.start_control_plane()
        self.start_decision_service()
        if not self.decision_ready():
            raise RuntimeError("the decision service did not connect its change stream:\n" + self.logs())
        return self

    def stop_control_plane(self) -> None:
        stop_process(self.control)

    def stop(self) -> None:
        stop_process(self.worker)
        stop_process(self.decision)
        stop_process(self.control)
        if self.database_uri and self.env.get("IAMGATE_MONGODB_URI") == self.database_uri:
            mongodb.drop_database(self.database_uri)

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
                         for path in sorted(self.log_dir.glob("*.log")))


class LoopbackReceiver:
    """A webhook endpoint on loopback for the benchmarks: every POST is handed to
    ``on_post(headers, body)`` and answered 200 at once."""

    def __init__(self, on_post):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                on_post(self.headers, self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_store(log_dir: Path, database: str) -> tuple[subprocess.Popen, str]:
    """A store in a process of its own, as MongoDB is (tests/mongo_wire.py: the wire
    protocol in front of the embedded store), for the benchmarks that must not count
    the data in the control plane's process; the process and the URI of ``database``.
    It binds a free port itself and says which in its first line."""
    log = log_dir / "store.log"
    with open(log, "w") as out:
        store = subprocess.Popen([sys.executable, "-m", "tests.mongo_wire", "--port", "0"], stdout=out,
                                 stderr=subprocess.STDOUT, process_group=0)
    served = re.compile(r"^serving (mongodb://\S+/)$", re.MULTILINE)
    found = wait_until(lambda: store.poll() is None and served.search(log.read_text()), 30)
    if not found:
        stop_process(store)
        raise RuntimeError("the store did not start:\n" + log.read_text())
    return store, found.group(1) + database


def stop_process(process: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL if it is still running 20 s later."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Admin:
    """A tenant's administrator, through the control plane's public API only."""

    def __init__(self, control_url: str, *, name: str = "bench"):
        self.url = control_url
        self.http = sign_up(control_url, name)
        app = self._ok(self.http.post(f"{self.url}/api/dashboard/applications", json={"name": f"{name} app"}), 201)
        self.app_id = app["data"]["id"]
        key = self._ok(self.http.post(f"{self.url}/api/dashboard/applications/{self.app_id}/api-keys",
                                      json={"name": "decision"}), 201)
        self.api_key = key["data"]["key"]
        self.headers = {"Authorization": f"Bearer {self.api_key}"}
        self.v1 = f"{self.url}/api/v1/applications/{self.app_id}"
        self.emails: dict[str, str] = {}

    @staticmethod
    def _ok(response, status):
        if response.status_code != status:
            raise AssertionError(f"{response.request.method} {response.request.url}: "
                                 f"{response.status_code} {response.text}")
        return response.json() if response.content else None

    def user(self, name: str = "user") -> str:
        """Register an end user; returns its id."""
        email = f"{name}-{secrets.token_hex(6)}@example.com"
        body = {"email": email, "password": PASSWORD, "name": name}
        user_id = self._ok(self.http.post(f"{self.v1}/users/register", json=body), 201)["data"]["id"]
        self.emails[user_id] = email
        return user_id

    def access_token(self, user_id: str) -> str:
        """Log the user in; returns its access token."""
        body = {"email": self.emails[user_id], "password": PASSWORD}
        return self._ok(self.http.post(f"{self.v1}/users/login", json=body), 200)["data"]["access_token"]

    def role(self, permissions, name=None) -> str:
        body = {"name": name or f"role-{secrets.token_hex(4)}", "display_name": "Role",
                "permissions": list(permissions)}
        return self._ok(self.http.post(f"{self.v1}/roles", json=body, headers=self.headers), 201)["data"]["id"]

    def assign(self, user_id: str, role_id: str, **fields) -> int:
        """Assign; returns the write's X-Iamgate-Revision."""
        response = self.http.post(f"{self.v1}/users/{user_id}/roles", json={"role_id": role_id, **fields},
                                  headers=self.headers)
        self._ok(response, 201)
        return int(response.headers["X-Iamgate-Revision"])

    def policy(self, name: str, effect: str, permissions, condition=None) -> int:
        """Create an ABAC policy; returns the write's X-Iamgate-Revision."""
        body = {"name": name, "effect": effect, "permissions": list(permissions), "condition": condition}
        response = self.http.post(f"{self.v1}/abac/policies", json=body, headers=self.headers)
        self._ok(response, 201)
        return int(response.headers["X-Iamgate-Revision"])

    def unassign(self, user_id: str, role_id: str) -> int:
        response = self.http.delete(f"{self.v1}/users/{user_id}/roles/{role_id}", headers=self.headers)
        self._ok(response, 204)
        return int(response.headers["X-Iamgate-Revision"])
