"""The decision service's Falcon app: the control plane's check routes, answered locally.

``create_app`` wires the control-plane client (internal token: every application and the
all-applications stream; API key: the key's application and its stream),
the per-worker cache, the change-stream follower, caller token verification and the
routes. The middleware is only what every response needs (request id, request line,
metrics, the JSON content-type rule): nothing on the hot path does I/O, and its request
lines are sampled when busy (``shared.logs.Sampling``; docs/decision-service.md,
"Request log").

Falcon is imported and the Falcon app built on the first request that neither
``HotCheck`` nor ``Probes`` answers (decision/hotpath.py): a sidecar is ready, and answers
its plain checks, about 80 ms sooner without it (benchmarks/NOTES.md, "Reading the footprint
figures").
"""
from __future__ import annotations

import logging
import threading
import time

from decision.cache import DecisionCache
from decision.client import ControlPlaneClient
from decision.decisionlog import DecisionLog
from decision.hotpath import HotCheck, Probes
from decision.metrics import DecisionMetrics
from decision.service import DecisionService
from decision.stream import BACKOFF_MAX, ChangeFollower
from decision.tokens import TokenVerifier
from shared import tracing
from shared.checks import CHECK_BULK_ROUTE, CHECK_ROUTE
from shared.config import Config, ConfigError
from shared.credentials import API_KEY_PREFIXES
from shared.hotmetrics import MetricsMiddleware
from shared.logs import RequestLog, Sampling
from shared.timeutil import utcnow


class DecisionApp:
    """The WSGI app, and the service behind it (tests and the benchmark reach it here).
    A plain check (GET, POST or bulk) is answered by ``HotCheck``, ``GET /healthz`` and
    ``/readyz`` by ``Probes``, anything else by the Falcon app, built when first needed.
    ``hot_check = None`` sends them all to Falcon: the reference the tests compare with,
    and how every request is traced (shared/tracing.py)."""

    hot_check: HotCheck | None = None

    def __init__(self, service: DecisionService, probes: Probes, build):
        self.service = service
        self._probes = probes
        self._build = build
        self._falcon = None
        self._building = threading.Lock()  # a gevent lock once patched: one build, others wait

    def __call__(self, environ, start_response):
        if self.hot_check is not None:
            answered = self.hot_check(environ, start_response)
            if answered is not None:
                return answered
            answered = self._probes(environ, start_response)
            if answered is not None:
                return answered
        return (self._falcon or self.falcon())(environ, start_response)

    def falcon(self):
        """The Falcon app (routes, middleware, error handlers), built on first use."""
        with self._building:
            if self._falcon is None:
                self._falcon = self._build()
        return self._falcon


def credential(config: Config) -> tuple[str, bool]:
    """(bearer credential for the control plane, whether only one application is served).

    An API key, when set, wins: a tenant's sidecar serves only the key's application
    (learned from ``/internal/v1/whoami``). Otherwise the internal service token serves
    every application."""
    if config.decision_api_key:
        if not config.decision_api_key.startswith(API_KEY_PREFIXES):
            raise ConfigError("IAMGATE_DECISION_API_KEY: expected an application API key (sk_test_... or sk_live_...)")
        return config.decision_api_key, True
    if config.internal_token:
        return config.internal_token, False
    raise ConfigError("IAMGATE_DECISION_API_KEY: set it, or IAMGATE_INTERNAL_TOKEN, so the decision service "
                      "can read from the control plane")


def create_app(config: Config | None = None, *, clock=None, monotonic=time.monotonic,
               backoff_max: float = BACKOFF_MAX) -> DecisionApp:
    """Build the WSGI app and start its change-stream follower. Tests pass a clock
    (token and cache expiry), a monotonic clock (the staleness bound) and a short
    reconnect backoff."""
    config = config or Config.from_env()
    token, single_application = credential(config)
    traced = tracing.start(config, tracing.DECISION)
    clock = clock or utcnow
    client = ControlPlaneClient(config.control_plane_url, token)
    metrics = DecisionMetrics()

    if clock is utcnow:
        timer = time.time
    else:
        def timer() -> float:  # tests move the clock; cache expiry follows it
            return clock().timestamp()

    cache = DecisionCache(ttl=config.decision_cache_ttl, maxsize=config.decision_cache_size, timer=timer)
    follower = ChangeFollower(
        client, cache, metrics, single_application=single_application, monotonic=monotonic,
        max_staleness=config.decision_max_staleness,
        # Heartbeats come every IAMGATE_STREAM_HEARTBEAT seconds: silence well beyond both
        # bounds means a hung connection, so reconnect (trust has lapsed already).
        read_timeout=config.decision_max_staleness + 2 * config.stream_heartbeat, backoff_max=backoff_max,
    )
    verifier = TokenVerifier(client, clock, issuer=config.public_url, timer=timer, monotonic=monotonic)
    metrics.watch(cache, follower)
    if config.multiprocess_metrics_dir:  # several gunicorn workers: /metrics answers for all of them
        metrics.share(config.multiprocess_metrics_dir)
    decision_log = None
    if config.decision_log_sample > 0 or config.decision_log_denials:
        decision_log = DecisionLog(config.decision_log_sample, config.decision_log_denials,
                                   metrics.decision_log_drops())
    service = DecisionService(client=client, cache=cache, follower=follower, verifier=verifier, metrics=metrics,
                              clock=clock, single_application=single_application, decision_log=decision_log)

    request_log = RequestLog(logging.getLogger("iamgate.decision"), config.trusted_proxies,
                             Sampling(config.decision_request_log_rate, config.decision_request_log_sample))
    app = DecisionApp(service, Probes(follower, metrics, request_log),
                      lambda: _falcon_app(service, follower, metrics, request_log, config.metrics_token))
    if not traced:  # traced, every request goes through Falcon and its request spans
        app.hot_check = HotCheck(service, metrics, request_log)
    follower.start()
    return app


def _falcon_app(service: DecisionService, follower: ChangeFollower, metrics: DecisionMetrics,
                request_log: RequestLog, metrics_token: str = ""):
    import falcon

    from decision.openapi import OpenApiDocument
    from decision.resources import Check, CheckBulk, Health, Metrics, Ready
    from shared.http import (
        JsonBodyMiddleware,
        RequestIdMiddleware,
        RequestLogMiddleware,
        install_error_handlers,
        json_handlers,
    )

    app = falcon.App(middleware=[*tracing.request_middleware(), RequestIdMiddleware(),
                                 RequestLogMiddleware(request_log), MetricsMiddleware(metrics), JsonBodyMiddleware()])
    app.req_options.strip_url_path_trailing_slash = True
    app.resp_options.media_handlers.update(json_handlers())
    app.req_options.media_handlers.update(json_handlers())
    install_error_handlers(app)
    app.add_route(CHECK_ROUTE, Check(service))
    app.add_route(CHECK_BULK_ROUTE, CheckBulk(service))
    app.add_route("/healthz", Health())
    app.add_route("/readyz", Ready(follower))
    app.add_route("/metrics", Metrics(metrics, metrics_token))
    app.add_route("/openapi.json", OpenApiDocument())
    return app
