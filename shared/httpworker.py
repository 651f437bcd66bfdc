"""gunicorn's gevent worker with the services' httptools connection loop
(shared/httpserver.py). shared/serving.py names the class of each service:

    ``shared.httpworker.ControlPlaneWorker``  the control plane
    ``shared.httpworker.DecisionWorker``      the decision service

gevent stays the concurrency model (one greenlet per connection, the standard library
patched by gunicorn's worker); only the parsing and formatting of HTTP/1.1 change.
"""
from __future__ import annotations

import gevent
from gunicorn.workers.ggevent import GeventWorker

from shared.http import MAX_BODY_BYTES
from shared.httpserver import (
    CONTROL_PLANE_SERVER,
    DECISION_SERVER,
    HEADER_TIMEOUT,
    Connection,
    ConnectionSlots,
    Turns,
    base_environ,
)


class HttpWorker(GeventWorker):
    """gunicorn's gevent worker whose connections are served by ``Connection``. Its
    connection cap is gunicorn's ``worker_connections`` (the size of the gevent pool the
    worker accepts into, which IAMGATE_MAX_CONNECTIONS sets), so the two cannot disagree;
    ``header_timeout`` is IAMGATE_HEADER_TIMEOUT, set by the config module's
    ``post_worker_init`` (shared/serving.py)."""

    alive: bool  # gunicorn's Worker sets it; typed here for mypy (gunicorn has no type information)

    server = ""  # the Server header
    large_bodies_to_app = False  # see Connection
    header_timeout = HEADER_TIMEOUT

    def init_process(self):
        self._environs = {}
        self._slots = ConnectionSlots(self.worker_connections)
        super().init_process()

    def handle(self, listener, client, addr):
        environ = self._environs.get(listener)
        if environ is None:
            name = listener.getsockname()
            host, port = (name[0], name[1]) if isinstance(name, tuple) else (str(name), "")
            environ = self._environs[listener] = base_environ(host, port, self.server)
        Connection(client, addr, self.wsgi, environ, worker=self, timeout=self.cfg.keepalive,
                   header_timeout=self.header_timeout, max_body=MAX_BODY_BYTES, turns=Turns.gevent(),
                   slots=self._slots, large_bodies_to_app=self.large_bodies_to_app).serve()

    def handle_exit(self, sig, frame):
        """SIGTERM: gunicorn's graceful stop (``alive`` turns false: its run loop stops
        accepting within a second and waits up to ``graceful_timeout`` for the open
        connections), and the idle keep-alive ones closed at once rather than waited
        for until their keep-alive timeout (``ConnectionSlots.drain``)."""
        super().handle_exit(sig, frame)
        gevent.spawn(self._slots.drain, self.cfg.graceful_timeout)  # off the signal handler, as gunicorn's own

    def count_request(self) -> None:
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False


class ControlPlaneWorker(HttpWorker):
    """The control plane: its SSE change streams are streamed responses, and a body over
    ``MAX_BODY_BYTES`` is answered by the app (its 413 PAYLOAD_TOO_LARGE, or the OIDC
    endpoints' 400 invalid_request), with the app's own headers, as on any server."""

    server = CONTROL_PLANE_SERVER
    large_bodies_to_app = True


class DecisionWorker(HttpWorker):
    """The decision service: a body over ``MAX_BODY_BYTES`` is refused (413) before its app runs."""

    server = DECISION_SERVER
