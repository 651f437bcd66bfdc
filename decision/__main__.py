"""``python -m decision``: the decision service, as one process by default.

A sidecar runs next to every tenant pod, so its memory is paid once per pod.
With ``IAMGATE_DECISION_WORKERS=1`` (the default) this process is the worker itself: no
gunicorn master beside it (about 25 MB of RSS that answers no check) and no fork, so it
is ready sooner. It serves connections exactly as a gunicorn worker of the service does
(``shared.httpserver.Connection``, httptools on gevent, the same app from
``decision.wsgi.create``). With more workers it becomes gunicorn, as before:

    gunicorn -c python:decision.gunicorn_conf 'decision.wsgi:create()'

Start-up order: settings (exit 2 and one line naming the variable, as gunicorn's master
does), the app (its change stream starts connecting), then the listening socket (exit 1
with one line when the port is taken); ``--fd N`` serves an inherited socket instead
(``make run``'s launcher binds both ports itself). SIGTERM or SIGINT: stop accepting,
close the idle keep-alive connections, answer what is in flight with ``Connection:
close``, wait up to ``GRACEFUL_SECONDS`` for it (``ConnectionSlots.drain``), exit 0.
"""
from __future__ import annotations

import logging
import os
import sys

GRACEFUL_SECONDS = 5.0


class _Lifecycle:
    """What a connection asks its gunicorn worker: whether to keep connections alive."""

    alive = True

    def count_request(self) -> None:
        pass


def _gunicorn(argv: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "gunicorn", "-c", "python:decision.gunicorn_conf", *argv,
                              "decision.wsgi:create()"])


def _patch_all() -> None:
    """``gevent.monkey.patch_all()``, less its plugin look-up. For each of its ~25 patch
    events gevent reads every installed distribution's entry points (importlib.metadata)
    in search of ``gevent.plugins.monkey.*`` subscribers: about 70 ms of start-up
    (benchmarks/NOTES.md, "Reading the footprint figures"). The one such plugin installed is gevent's own warning about
    patching ``signal`` without ``os``, which cannot apply when both are patched. Subscribers
    registered with ``zope.event`` are still notified; what gets patched is unchanged."""
    from gevent import events, monkey

    scan = events.notify_and_call_entry_points  # looked up by name at each event
    events.notify_and_call_entry_points = events.notify
    try:
        monkey.patch_all()
    finally:
        events.notify_and_call_entry_points = scan


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    fd = None
    if argv[:1] == ["--fd"] and len(argv) == 2 and argv[1].isdigit():
        fd = int(argv[1])
    elif argv:
        print("usage: python -m decision [--fd N]", file=sys.stderr)
        return 2

    from shared.config import Config, ConfigError

    try:
        config = Config.from_env()
        config.check_decision_credential()
    except ConfigError as exc:
        print(f"iamgate-decision: configuration error: {exc}", file=sys.stderr, flush=True)
        return 2
    if config.decision_workers > 1:
        _gunicorn([f"--bind=fd://{fd}"] if fd is not None else [])

    _patch_all()  # before anything opens a socket or starts a thread, as gunicorn's gevent worker does

    import signal
    import socket

    import gevent
    from gevent.event import Event
    from gevent.pool import Pool
    from gevent.server import StreamServer

    from decision.wsgi import create
    from shared.httpserver import (
        DECISION_SERVER,
        KEEPALIVE_SECONDS,
        Connection,
        ConnectionSlots,
        Turns,
        base_environ,
        freeze_start_up,
    )

    app = create()  # checks the credential setting: exit 2 and one line
    try:
        if fd is not None:
            listener = socket.socket(fileno=fd)
        else:
            listener = socket.create_server((config.decision_host, config.decision_port), backlog=2048,
                                            reuse_port=False)
    except OSError as exc:
        print(f"iamgate-decision: cannot listen on {config.decision_host}:{config.decision_port}: "
              f"{exc.strerror or exc}", file=sys.stderr, flush=True)
        return 1
    name = listener.getsockname()
    host, port = name[:2] if isinstance(name, tuple) else (str(name), "")
    environ = base_environ(host, port, DECISION_SERVER)
    environ["wsgi.multiprocess"] = False
    lifecycle = _Lifecycle()
    slots = ConnectionSlots(config.max_connections)

    def handle(client, address):
        Connection(client, address, app, environ, worker=lifecycle, timeout=KEEPALIVE_SECONDS,
                   header_timeout=config.header_timeout, turns=Turns.gevent(), slots=slots).serve()

    # As a gunicorn worker: a pool of IAMGATE_MAX_CONNECTIONS greenlets, which stops
    # accepting while it is full.
    server = StreamServer(listener, handle, spawn=Pool(config.max_connections))
    stopping = Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, stopping.set)
    freeze_start_up()  # as a gunicorn worker of the service does once its app is loaded
    server.start()
    logging.getLogger("iamgate.decision").info("listening", extra={
        "address": f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}", "workers": 1})
    stopping.wait()
    lifecycle.alive = False  # every answer from now on says Connection: close
    server.close()  # stop accepting
    slots.drain(GRACEFUL_SECONDS)
    server.stop(timeout=0)  # what outlived the drain; the change stream's thread is a daemon: it ends with us
    return 0


if __name__ == "__main__":
    sys.exit(main())
