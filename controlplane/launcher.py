"""``make run``: the control plane and a decision service, side by side, on this machine.

Starts the control plane under gunicorn with gevent workers (one worker on the
embedded ``memory://`` store, whose data lives inside that process), waits until it
answers, then starts the decision service pointed at it with a freshly generated
internal service token, prints where both listen, and stops both on Ctrl-C.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request

from shared.config import Config, ConfigError

STARTUP_TIMEOUT = 60.0
# The decision service's own gunicorn worker: gevent, with requests parsed by httptools
# (decision/server.py); a check's whole budget is a few dozen microseconds.
DECISION_WORKER_CLASS = "decision.server.DecisionWorker"


def _gunicorn(app_factory: str, host: str, port: int, workers: int, worker_class: str = "gevent") -> list[str]:
    import gunicorn

    # Gunicorn 27 opens a control socket at one fixed path per user; two servers (or two
    # test runs) would fight over it, and nothing here uses it.
    extra = ["--no-control-socket"] if gunicorn.version_info >= (27,) else []
    return [
        sys.executable, "-m", "gunicorn", *extra,
        "--worker-class", worker_class,
        "--workers", str(workers),
        "--worker-connections", "1000",
        "--bind", f"{host}:{port}",
        "--graceful-timeout", "5",
        "--timeout", "60",
        "--keep-alive", "75",
        app_factory,
    ]


def _wait_healthy(url: str, process: subprocess.Popen) -> bool:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def _stop(processes) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> int:
    env = dict(os.environ)
    try:
        config = Config.from_env(env)
    except ConfigError as exc:
        print(f"iamgate: configuration error: {exc}", file=sys.stderr)
        return 2
    env.setdefault("IAMGATE_INTERNAL_TOKEN", secrets.token_urlsafe(32))
    if not env.get("IAMGATE_SECRET_KEY"):
        env["IAMGATE_SECRET_KEY"] = secrets.token_urlsafe(32)
    control_url = f"http://{config.host}:{config.port}"
    decision_url = f"http://{config.decision_host}:{config.decision_port}"
    env.setdefault("IAMGATE_CONTROL_PLANE_URL", control_url)
    workers = 1 if config.is_memory_store else config.workers

    processes = []

    def shutdown(signum, frame):
        raise KeyboardInterrupt

    # Explicit for SIGINT too: a shell starting `make run &` without job control hands us
    # SIGINT ignored, and Python keeps an inherited SIG_IGN.
    signal.signal(signal.SIGINT, shutdown)
    signal.signal(signal.SIGTERM, shutdown)
    try:
        control = subprocess.Popen(
            _gunicorn("controlplane.wsgi:create()", config.host, config.port, workers), env=env)
        processes.append(control)
        if not _wait_healthy(control_url, control):
            print("iamgate: the control plane did not start", file=sys.stderr)
            return 1
        if not config.is_memory_store:
            # Against MongoDB, webhook delivery is its own process (on memory:// it runs
            # inside the control plane, the only process that sees the store).
            processes.append(subprocess.Popen([sys.executable, "-m", "controlplane", "worker"], env=env))
        decision = subprocess.Popen(
            _gunicorn("decision.wsgi:create()", config.decision_host, config.decision_port, config.decision_workers,
                      worker_class=DECISION_WORKER_CLASS),
            env=env)
        processes.append(decision)
        if not _wait_healthy(decision_url, decision):
            print("iamgate: the decision service did not start", file=sys.stderr)
            return 1
        store = "memory:// (embedded; nothing persists)" if config.is_memory_store else "MongoDB"
        print(f"iamgate control plane:    {control_url}  (store: {store})", flush=True)
        print(f"iamgate decision service: {decision_url}", flush=True)
        print(f"OpenAPI:                  {control_url}/openapi.json", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        while all(p.poll() is None for p in processes):
            time.sleep(0.5)
        print("iamgate: a process exited; stopping the other", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\niamgate: stopping", flush=True)
        return 0
    finally:
        _stop(processes)


if __name__ == "__main__":
    sys.exit(main())
