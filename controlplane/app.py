"""The control plane's Falcon application.

``create_app`` builds the context, declares every area's indexes, registers every
area's routes and wires the cross-cutting middleware (request id, metrics, JSON body
rules, authentication, revision header) and the error envelope.
"""
from __future__ import annotations

import importlib
import logging

import falcon

from shared.config import Config
from shared.http import JsonBodyMiddleware, RequestIdMiddleware, install_error_handlers, json_handlers, request_id
from shared.metrics import MetricsMiddleware

from controlplane import events as events_module
from controlplane import lockout, ratelimit
from controlplane.apikeys import service as apikeys_service
from controlplane.applications import store as applications_store
from controlplane.auth import AuthMiddleware
from controlplane.context import AppContext
from controlplane.dashboard import access as dashboard_access
from controlplane.dashboard import sessions as dashboard_sessions
from controlplane.openapi import Routes

log = logging.getLogger("iamgate.controlplane")

# Areas in registration order: later areas may use services earlier ones put on ctx.
AREAS = ("ops", "dashboard", "users", "mfa", "selfservice", "roles", "authz", "internal")

CORE_INDEXES = (events_module.INDEXES, ratelimit.INDEXES, lockout.INDEXES, apikeys_service.INDEXES,
                applications_store.INDEXES, dashboard_access.INDEXES, dashboard_sessions.INDEXES)


class RevisionMiddleware:
    """Writes that emitted change-log events answer ``X-Iamgate-Revision: <seq>`` so a
    client can ask a decision service for an answer at least that fresh."""

    def process_request(self, req, resp):
        events_module.reset_revision()

    def process_response(self, req, resp, resource, req_succeeded):
        revision = events_module.current_revision()
        if revision is not None:
            resp.set_header("X-Iamgate-Revision", str(revision))


class RequestLogMiddleware:
    def process_response(self, req, resp, resource, req_succeeded):
        log.info("request", extra={
            "request_id": request_id(req),
            "method": req.method,
            "route": req.uri_template if resource is not None else None,
            "status": resp.status_code,
        })


class ControlPlaneApp(falcon.App):
    """The Falcon app plus its context and route registry (tests reach them here)."""

    ctx: AppContext
    routes: Routes


def create_app(config: Config | None = None, *, store=None, clock=None, start_background: bool = True):
    """Build the WSGI app.  ``start_background`` starts the change-log tailer."""
    config = config or Config.from_env()
    ctx = AppContext(config, store=store, clock=clock)
    ctx.auth = AuthMiddleware(ctx)
    app = ControlPlaneApp(
        middleware=[
            RequestIdMiddleware(),
            MetricsMiddleware(ctx.metrics),
            RevisionMiddleware(),
            JsonBodyMiddleware(),
            ctx.auth,
            RequestLogMiddleware(),
        ],
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.resp_options.media_handlers.update(json_handlers())
    app.req_options.media_handlers.update(json_handlers())
    install_error_handlers(app)

    routes = Routes(app)
    for index_set in CORE_INDEXES:
        ctx.store.declare_indexes(index_set)
    modules = [importlib.import_module(f"controlplane.{area}.routes") for area in AREAS]
    for module in modules:
        ctx.store.declare_indexes(getattr(module, "INDEXES", {}))
    ctx.store.ensure_indexes()
    ctx.keys.ensure_active()
    ctx.applications.finish_deletions()
    for module in modules:
        module.register(ctx, routes)
    if start_background:
        ctx.tailer.start()
    app.ctx = ctx
    app.routes = routes
    return app
