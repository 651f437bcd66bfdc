"""HTTP resources of operations: health, readiness, metrics and OpenAPI."""
from __future__ import annotations

import falcon

from controlplane.auth import PUBLIC

from controlplane.openapi import build_document, op
from controlplane.resource import Resource

class Health(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Liveness: the process answers", response={"type": "object"}, wrapped=False)}

    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


_READINESS = {"type": "object", "required": ["status", "store"], "properties": {
    "status": {"type": "string", "enum": ["ready", "starting", "unavailable"]},
    "store": {"type": "string", "enum": ["ok", "unreachable"]}}}


class Ready(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Readiness: the start-up step is done and the store answers a ping",
                      response=_READINESS, wrapped=False,
                      also={503: (_READINESS, "Not ready: starting, or the store is unreachable")})}

    def __init__(self, store, startup):
        self.store = store
        self.startup = startup

    def on_get(self, req, resp):
        store_ok = self.store.ping()
        ok = store_ok and self.startup.done
        resp.status = falcon.HTTP_200 if ok else falcon.HTTP_503
        resp.media = {"status": "ready" if ok else ("starting" if store_ok else "unavailable"),
                      "store": "ok" if store_ok else "unreachable"}


class Metrics(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Prometheus metrics (text exposition format)")}

    def __init__(self, metrics):
        self.metrics = metrics

    def on_get(self, req, resp):
        body, content_type = self.metrics.render()
        resp.data = body
        resp.content_type = content_type


class OpenApi(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("This OpenAPI 3.1 document", response={"type": "object"}, wrapped=False)}

    def __init__(self, routes, public_url: str):
        self.routes = routes
        self.public_url = public_url
        self._document = None

    def on_get(self, req, resp):
        if self._document is None:  # routes are fixed once the app is built
            self._document = build_document(
                self.routes, title="iamgate control plane", version="1.0.0", server_url=self.public_url
            )
        resp.media = self._document

