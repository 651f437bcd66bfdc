"""Operations: health, readiness, metrics, OpenAPI and the JWKS."""
from __future__ import annotations

import falcon

from controlplane.auth import PUBLIC
from controlplane.openapi import build_document, op

JWKS_RESPONSE = {
    "type": "object",
    "properties": {"keys": {"type": "array", "items": {"type": "object", "properties": {
        k: {"type": "string"} for k in ("kty", "use", "alg", "kid", "n", "e")}}}},
}


class Health:
    access = {"GET": PUBLIC}
    docs = {"GET": op("Liveness: the process answers", response={"type": "object"}, wrapped=False)}

    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


class Ready:
    access = {"GET": PUBLIC}
    docs = {"GET": op("Readiness: the store answers a ping", response={"type": "object"}, wrapped=False,
                      errors=[(503, "SERVICE_UNAVAILABLE")])}

    def __init__(self, ctx):
        self.ctx = ctx

    def on_get(self, req, resp):
        ok = self.ctx.store.ping()
        resp.status = falcon.HTTP_200 if ok else falcon.HTTP_503
        resp.media = {"status": "ready" if ok else "unavailable", "store": "ok" if ok else "unreachable"}


class Metrics:
    access = {"GET": PUBLIC}
    docs = {"GET": op("Prometheus metrics (text exposition format)")}

    def __init__(self, ctx):
        self.ctx = ctx

    def on_get(self, req, resp):
        body, content_type = self.ctx.metrics.render()
        resp.data = body
        resp.content_type = content_type


class OpenApi:
    access = {"GET": PUBLIC}
    docs = {"GET": op("This OpenAPI 3.1 document", response={"type": "object"}, wrapped=False)}

    def __init__(self, ctx, routes):
        self.ctx, self.routes = ctx, routes
        self._document = None

    def on_get(self, req, resp):
        if self._document is None:  # routes are fixed once the app is built
            self._document = build_document(
                self.routes, title="iamgate control plane", version="1.0.0", server_url=self.ctx.config.public_url
            )
        resp.media = self._document


class Jwks:
    access = {"GET": PUBLIC}
    docs = {"GET": op("Public signing keys (JWKS) for access and ID tokens", response=JWKS_RESPONSE, wrapped=False)}

    def __init__(self, ctx):
        self.ctx = ctx

    def on_get(self, req, resp):
        resp.media = self.ctx.keys.jwks()
        resp.cache_control = ["public", "max-age=300"]


def register(ctx, routes):
    routes.add("/healthz", Health(), "operations")
    routes.add("/readyz", Ready(ctx), "operations")
    routes.add("/metrics", Metrics(ctx), "operations")
    routes.add("/openapi.json", OpenApi(ctx, routes), "operations")
    routes.add("/.well-known/jwks.json", Jwks(ctx), "oidc")
