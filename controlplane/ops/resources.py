"""HTTP resources of operations: health, readiness, metrics and OpenAPI."""
from __future__ import annotations

import hmac

import falcon

from shared.errors import Unauthorized

from controlplane.auth import PUBLIC, bearer_token
from controlplane.openapi import build_document, op
from controlplane.resource import Resource


class Health(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Liveness: the process answers", response={"type": "object"}, wrapped=False, store=False)}

    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


_READINESS = {"type": "object", "required": ["status", "store"], "properties": {
    "status": {"type": "string", "enum": ["ready", "starting", "unavailable"]},
    "store": {"type": "string", "enum": ["ok", "unreachable"]}}}


class Ready(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Readiness: the start-up step is done and the store answers a ping",
                      response=_READINESS, wrapped=False, store=False,
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
    docs = {"GET": op(
        "Prometheus metrics (text exposition format)", errors=[Unauthorized], store=False,
        description="With IAMGATE_METRICS_TOKEN set, needs Authorization: Bearer <that token> (401 otherwise): "
                    "the series show per-route login and registration counts, which a stranger should not read.")}

    def __init__(self, metrics, token: str = ""):
        self.metrics = metrics
        self.token = token

    def on_get(self, req, resp):
        if self.token:
            presented = bearer_token(req) or ""
            if not hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8")):
                raise Unauthorized("/metrics needs the metrics token (IAMGATE_METRICS_TOKEN).")
        body, content_type = self.metrics.render()
        resp.data = body
        resp.content_type = content_type


class OpenApi(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("This OpenAPI 3.1 document", response={"type": "object"}, wrapped=False, store=False)}

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

