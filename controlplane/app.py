"""The control plane's Falcon application (Falcon's ``create_app(store)`` pattern).

``create_app`` builds every service (``controlplane.services.build_services``), wires the
cross-cutting middleware (request id, metrics, revision header, JSON body rules,
authentication, request log) and the error envelope, creates the indexes the stores
declared (``controlplane.startup``), and lets each area map its paths to resources.  Adding an area is one line
in ``AREAS``.
"""
from __future__ import annotations

import functools
import logging

import falcon

from controlplane import events as events_module
from controlplane.abac import routes as abac_routes
from controlplane.audit import routes as audit_routes
from controlplane.audit.context import AuditMiddleware
from controlplane.auth import AuthMiddleware
from controlplane.authz import resources as authz_resources
from controlplane.authz import routes as authz_routes
from controlplane.connections import routes as connections_routes
from controlplane.connections.signin import routes as connection_sign_in_routes
from controlplane.console import routes as console_routes
from controlplane.dashboard import routes as dashboard_routes
from controlplane.hotpath import HotCheck
from controlplane.internal import routes as internal_routes
from controlplane.mfa import routes as mfa_routes
from controlplane.oidc import routes as oidc_routes
from controlplane.oidc.cors import CorsMiddleware
from controlplane.oidc.errors import InvalidRequest, OAuthError, TemporarilyUnavailable
from controlplane.oidc.resources.common import wants_html
from controlplane.oidc.resources.hosted import error_page
from controlplane.oidc.wire import OAUTH_PATHS, oauth_error_handler
from controlplane.openapi import Routes
from controlplane.ops import routes as ops_routes
from controlplane.pages import Pages
from controlplane.passkeys import routes as passkeys_routes
from controlplane.roles import routes as roles_routes
from controlplane.selfservice import routes as selfservice_routes
from controlplane.services import Services, build_services
from controlplane.store import UNREACHABLE, unavailable
from controlplane.users import routes as users_routes
from controlplane.webhooks import routes as webhooks_routes
from shared import checks, tracing
from shared.config import Config
from shared.errors import UnsupportedMediaType
from shared.hotmetrics import MetricsMiddleware
from shared.http import (
    JsonBodyMiddleware,
    RequestIdMiddleware,
    RequestLogMiddleware,
    install_error_handlers,
    json_handlers,
    no_store,
    render_domain_error,
)
from shared.logs import RequestLog

log = logging.getLogger("iamgate.controlplane")

# Each area's ``add_routes(routes, services)``; the order is that of the OpenAPI document.
AREAS = (ops_routes, dashboard_routes, users_routes, mfa_routes, passkeys_routes, selfservice_routes, roles_routes,
         authz_routes, abac_routes, webhooks_routes, connections_routes, audit_routes, internal_routes, oidc_routes,
         connection_sign_in_routes, console_routes)


class RevisionMiddleware:
    """Writes that emitted change-log events answer ``X-Iamgate-Revision: <seq>`` so a
    client can ask a decision service for an answer at least that fresh."""

    def process_request(self, _req, _resp):
        events_module.reset_revision()

    def process_response(self, _req, resp, _resource, _req_succeeded):
        revision = events_module.current_revision()
        if revision is not None:
            resp.set_header("X-Iamgate-Revision", str(revision))


def store_unreachable(req, resp, ex, params):
    """The store did not answer (``controlplane.store.UNREACHABLE``), wherever the request
    was (authentication, a rate limit, a service): 503 with ``Retry-After``, in the
    envelope, or at the OAuth endpoints as RFC 6749's ``temporarily_unavailable``."""
    error = unavailable(ex)
    if req.path.startswith(OAUTH_PATHS):
        oauth_error_handler(req, resp, TemporarilyUnavailable(error.retry_after), params)
    else:
        render_domain_error(req, resp, error, params)


# The OIDC endpoints only programs call: every other one under /oidc/ is where a browser
# may land (authorize, logout, the hosted steps, upstream callbacks).
_PROGRAM_ENDPOINTS = frozenset({"/oidc/token", "/oidc/userinfo", "/oidc/revoke", "/oidc/introspect"})


def unsupported_media_type(req, resp, ex: UnsupportedMediaType, params, *, pages: Pages):
    """A body in a media type the route does not take (``JsonBodyMiddleware``): 415 in the
    envelope, or at the OAuth endpoints RFC 6749 5.2's ``invalid_request`` (400), the
    error of an "otherwise malformed" request there, which OAuth clients read; a browser
    that lands on an endpoint it navigates to (a relying party's form posted with another
    ``enctype``) gets that error as a page, as every other error there, never JSON."""
    if not req.path.startswith(OAUTH_PATHS):
        render_domain_error(req, resp, ex, params)
    elif wants_html(req) and req.path not in _PROGRAM_ENDPOINTS:
        no_store(resp)
        error_page(pages, resp, InvalidRequest(ex.message), app=None)
    else:
        oauth_error_handler(req, resp, InvalidRequest(ex.message), params)


class ControlPlaneApp(falcon.App):
    """The Falcon app plus its services and route registry (tests reach them here).

    The plain cached check is answered by ``hot_check`` (controlplane/hotpath.py) before
    Falcon sees it; ``hot_check = None`` sends it to Falcon, the reference the tests
    compare with. Everything else, and whatever ``hot_check`` declines, is Falcon's."""

    services: Services
    routes: Routes
    hot_check: HotCheck | None = None

    def __call__(self, environ, start_response):
        hot_check = self.hot_check
        if hot_check is not None:
            answered = hot_check(environ, start_response)
            if answered is not None:
                return answered
        return super().__call__(environ, start_response)


def create_app(config: Config | None = None, *, store=None, clock=None, resolver=None, start_background: bool = True):
    """Build the WSGI app.  ``start_background`` starts the change-log tailer, and on the
    embedded ``memory://`` store (which no other process can reach) webhook dispatch and
    delivery too; against MongoDB those run in ``python -m controlplane worker``.  On
    MongoDB the start-up step (indexes, keys) runs in the background, retried until the
    store answers (``controlplane.startup``); otherwise it runs here, once."""
    config = config or Config.from_env()
    traced = tracing.start(config, tracing.CONTROL_PLANE)  # before the store opens: its listener
    services = build_services(config, store=store, clock=clock, resolver=resolver)
    metrics = MetricsMiddleware(services.metrics)
    auth = AuthMiddleware(services.authenticator, services.api_throttle)
    # The request line of every answered request (INFO, ``iamgate.controlplane``), the hot path's too.
    request_log = RequestLog(log, config.trusted_proxies)
    app = ControlPlaneApp(
        middleware=[
            *tracing.request_middleware(),
            RequestIdMiddleware(),
            RequestLogMiddleware(request_log),
            metrics,
            RevisionMiddleware(),
            JsonBodyMiddleware(),
            services.password_work,
            auth,
            AuditMiddleware(config.trusted_proxies),  # after auth: the principal is the actor
            CorsMiddleware(services.oidc.clients),  # the OIDC endpoints browser apps call
        ],
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.resp_options.media_handlers.update(json_handlers())
    app.req_options.media_handlers.update(json_handlers())
    install_error_handlers(app)
    app.add_error_handler(OAuthError, oauth_error_handler)  # RFC 6749 bodies at the OIDC endpoints
    app.add_error_handler(UNREACHABLE, store_unreachable)
    app.add_error_handler(UnsupportedMediaType, functools.partial(unsupported_media_type, pages=services.pages))

    routes = Routes(app)
    for area in AREAS:
        area.add_routes(routes, services)
    if not start_background:
        services.startup.run_once()
    elif services.store.is_memory:
        # No other process reaches the embedded store: this one delivers webhooks too.
        services.startup.run_once(deliver=True)
        services.startup.follow(deliver=True)
    else:
        # MongoDB may come up after us: serve /healthz now, /readyz once this is done.
        services.startup.start()
    app.services = services
    app.routes = routes
    app.hot_check = HotCheck(route=checks.CHECK_ROUTE, access=authz_resources.Check.access["GET"], auth=auth,
                             authz=services.authz, metrics=metrics, log_request=request_log)
    if traced:  # every request through Falcon and its request spans (docs/configuration.md, "Tracing")
        app.hot_check = None
    return app
