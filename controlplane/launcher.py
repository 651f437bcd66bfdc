"""``make run``: the control plane and a decision service, side by side, on this machine.

Starts the control plane under gunicorn with gevent workers (one worker on the
embedded ``memory://`` store, whose data lives inside that process), waits until it
answers, then -- against MongoDB -- the webhook worker, then the decision service
pointed at it with a freshly generated internal service token, prints where they
listen, and stops them all on Ctrl-C. Every process answers ``/healthz`` before MongoDB
does, and waits for it (docs/configuration.md, "Start-up errors").
"""
from __future__ import annotations

import errno
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from shared.config import Config, ConfigError

STARTUP_TIMEOUT = 60.0


class PortInUse(Exception):
    """Another process listens on the port this launcher was asked to bind."""


def listen(host: str, port: int, host_variable: str, port_variable: str) -> socket.socket:
    """Bind and listen here, so a port in use is seen on the bind itself (never by a
    health check that another process answers); gunicorn inherits the socket."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn does: TIME_WAIT is no conflict
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} is in use ({port_variable}={port}): stop what listens there "
                            f"or choose another port") from None
        # Any other failure is the address's: not on this machine, or a name that does not resolve.
        raise PortInUse(f"cannot bind {host}:{port} ({host_variable}={host}): {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _gunicorn(app_factory: str, host: str, port: int, workers: int, worker_class: str | None = None,
              sock: socket.socket | None = None) -> list[str]:
    """The gunicorn command of one service: its config module (``<package>.gunicorn_conf``,
    which validates the settings in the master and sets the rest, the service's worker
    class included: shared/serving.py), the workers, and the address -- the inherited
    ``sock`` when given. ``worker_class`` overrides the config module's (benchmarks)."""
    package = app_factory.split(".", 1)[0]
    bind = f"fd://{sock.fileno()}" if sock is not None else f"{host}:{port}"
    return [
        sys.executable, "-m", "gunicorn", "-c", f"python:{package}.gunicorn_conf",
        *(("--worker-class", worker_class) if worker_class else ()),
        "--workers", str(workers),
        "--bind", bind,
        "--graceful-timeout", "5",
        app_factory,
    ]


def _decision_command(workers: int, sock: socket.socket) -> list[str]:
    """The decision service as a sidecar runs it: one process (``python -m decision``) for
    one worker, the default; gunicorn's master and workers for more (docs/decision-service.md)."""
    if workers == 1:
        return [sys.executable, "-m", "decision", "--fd", str(sock.fileno())]
    return _gunicorn("decision.wsgi:create()", "", 0, workers, sock=sock)


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
    if config.secret_key_generated:  # memory:// only (shared/config.py): one key for every process of this run
        env["IAMGATE_SECRET_KEY"] = config.secret_key
    control_url = f"http://{config.host}:{config.port}"
    worker_url = f"http://{config.host}:{config.worker_port}"
    decision_url = f"http://{config.decision_host}:{config.decision_port}"
    env.setdefault("IAMGATE_CONTROL_PLANE_URL", control_url)
    workers = 1 if config.is_memory_store else config.workers

    processes = []

    def serve(command, sock, url) -> bool:
        """Start ``command`` on the listening ``sock`` (handed over, then closed here)
        and wait until ``url`` answers as healthy."""
        process = subprocess.Popen(command, env=env, pass_fds=(sock.fileno(),))
        sock.close()
        processes.append(process)
        return _wait_healthy(url, process)

    def shutdown(_signum, _frame):
        raise KeyboardInterrupt

    # Explicit for SIGINT too: a shell starting `make run &` without job control hands us
    # SIGINT ignored, and Python keeps an inherited SIG_IGN.
    signal.signal(signal.SIGINT, shutdown)
    signal.signal(signal.SIGTERM, shutdown)
    try:
        try:
            control_sock = listen(config.host, config.port, "IAMGATE_HOST", "IAMGATE_PORT")
            decision_sock = listen(config.decision_host, config.decision_port, "IAMGATE_DECISION_HOST",
                                   "IAMGATE_DECISION_PORT")
            # Against MongoDB, webhook delivery is its own process (on memory:// it runs
            # inside the control plane, the only process that sees the store).
            worker_sock = (None if config.is_memory_store
                           else listen(config.host, config.worker_port, "IAMGATE_HOST", "IAMGATE_WORKER_PORT"))
        except PortInUse as exc:
            print(f"iamgate: {exc}", file=sys.stderr)
            return 1
        if not serve(_gunicorn("controlplane.wsgi:create()", config.host, config.port, workers, sock=control_sock),
                     control_sock, control_url):
            print("iamgate: the control plane did not start", file=sys.stderr)
            return 1
        if worker_sock is not None and not serve(
                [sys.executable, "-m", "controlplane", "worker", "--fd", str(worker_sock.fileno())], worker_sock,
                worker_url):
            print("iamgate: the webhook worker did not start", file=sys.stderr)
            return 1
        if not serve(_decision_command(config.decision_workers, decision_sock), decision_sock, decision_url):
            print("iamgate: the decision service did not start", file=sys.stderr)
            return 1
        store = "memory:// (embedded; nothing persists)" if config.is_memory_store else "MongoDB"
        print(f"iamgate control plane:    {control_url}  (store: {store})", flush=True)
        print(f"iamgate decision service: {decision_url}", flush=True)
        if worker_sock is not None:
            print(f"iamgate webhook worker:   {worker_url}/readyz", flush=True)
        print(f"OpenAPI:                  {control_url}/openapi.json", flush=True)
        if not config.webauthn_rp_id:  # browsers refuse an IP address as a passkey's RP ID
            print(f"Passkeys are unavailable on an IP address: set IAMGATE_PUBLIC_URL=http://localhost:{config.port} "
                  f"to try them (docs/passkeys.md).", flush=True)
        if config.log_email_bodies:
            print("Emails are logged WITH their bodies (reset and verification links): "
                  "IAMGATE_LOG_EMAIL_BODIES=true, for development only.", flush=True)
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
