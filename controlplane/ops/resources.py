"""HTTP resources of operations: health, readiness, metrics and OpenAPI."""
from __future__ import annotations

import falcon

from controlplane.auth import PUBLIC
from controlplane.openapi import build_document, op
from controlplane.resource import Resource
from shared.errors import Unauthorized
from shared.http import MetricsEndpoint


class Health(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op(response={"type": "object"}, wrapped=False, store=False)}

    def on_get(self, req, resp):
        """Liveness: the process answers"""
        resp.media = {"status": "ok"}


_READINESS = {"type": "object", "required": ["status", "store"], "properties": {
    "status": {"type": "string", "enum": ["ready", "starting", "unavailable", "stalled"]},
    "store": {"type": "string", "enum": ["ok", "unreachable"]}}}


class Ready(Resource):
    """Ready once the start-up step is done and the store answers a ping.  ``tailer``
    (the webhook worker's): also while the change-log tailer keeps polling, its last
    poll less than ``poll_age`` seconds ago ("stalled" otherwise)."""

    access = {"GET": PUBLIC}
    docs = {"GET": op(response=_READINESS, wrapped=False,
                      also={503: (_READINESS, "Not ready: starting, or the store is unreachable "
                                                "(the webhook worker's port also: its change-log tailer stalled)")})}

    def __init__(self, store, startup, tailer=None, poll_age: float = 0.0):
        self.store = store
        self.startup = startup
        self.tailer = tailer
        self.poll_age = poll_age

    def on_get(self, req, resp):
        """Readiness: the start-up step is done and the store answers a ping"""
        store_ok = self.store.ping()
        if not store_ok:
            status = "unavailable"
        elif not self.startup.done:
            status = "starting"
        elif self.tailer is not None and not self.tailer.polling(self.poll_age):
            status = "stalled"
        else:
            status = "ready"
        resp.status = falcon.HTTP_200 if status == "ready" else falcon.HTTP_503
        resp.media = {"status": status, "store": "ok" if store_ok else "unreachable"}


class Metrics(MetricsEndpoint, Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op(
        "Prometheus metrics (text exposition format)", errors=[Unauthorized], store=False,
        description="With IAMGATE_METRICS_TOKEN set, needs Authorization: Bearer <that token> (401 otherwise): "
                    "the series show per-route login and registration counts, which a stranger should not read.")}


class OpenApi(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op(response={"type": "object"}, wrapped=False, store=False)}

    def __init__(self, routes, public_url: str):
        self.routes = routes
        self.public_url = public_url
        self._document = None

    def on_get(self, req, resp):
        """This OpenAPI 3.1 document"""
        if self._document is None:  # routes are fixed once the app is built
            self._document = build_document(
                self.routes, title="iamgate control plane", version="1.0.0", server_url=self.public_url
            )
        resp.media = self._document

