"""gunicorn's gevent worker with the decision service's httptools connection loop
(decision/server.py), which gunicorn loads as ``decision.server.DecisionWorker``."""
from __future__ import annotations

from gunicorn.workers.ggevent import GeventWorker

from decision.server import Connection, Turns, base_environ


class DecisionWorker(GeventWorker):
    """gunicorn's gevent worker with the httptools connection loop above."""

    def init_process(self):
        self._environs = {}
        super().init_process()

    def handle(self, listener, client, addr):
        environ = self._environs.get(listener)
        if environ is None:
            name = listener.getsockname()
            host, port = (name[0], name[1]) if isinstance(name, tuple) else (str(name), "")
            environ = self._environs[listener] = base_environ(host, port)
        Connection(client, addr, self.wsgi, environ, worker=self, timeout=self.cfg.keepalive,
                   turns=Turns.gevent()).serve()

    def count_request(self) -> None:
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
