"""Routes of operations: health, readiness, metrics and OpenAPI; and the webhook
worker's own port, which serves the same health, readiness and metrics resources."""
from __future__ import annotations

import falcon

from controlplane.ops import resources
from shared.http import RequestIdMiddleware, install_error_handlers, json_handlers

TAG = "operations"
# The worker is ready while its tailer's last poll is this recent (seconds): a poll
# takes tens of milliseconds, and one that delivers a large batch of events a few seconds.
WORKER_POLL_AGE = 15.0


def add_routes(routes, services):
    routes.add("/healthz", resources.Health(), TAG)
    routes.add("/readyz", resources.Ready(services.store, services.startup), TAG)
    routes.add("/metrics", resources.Metrics(services.metrics, services.config.metrics_token), TAG)
    routes.add("/openapi.json", resources.OpenApi(routes, services.config.public_url), TAG)


def worker_app(services) -> falcon.App:
    """The webhook worker's port (``IAMGATE_WORKER_PORT``): ``/healthz``; ``/readyz``, ready
    once its start-up step is done, the store answers and the change-log tailer (which
    feeds the dispatcher) keeps polling; ``/metrics``, its delivery counters and the
    queue depth."""
    app = falcon.App(middleware=[RequestIdMiddleware()])
    app.resp_options.media_handlers.update(json_handlers())
    install_error_handlers(app)
    app.add_route("/healthz", resources.Health())
    app.add_route("/readyz", resources.Ready(services.store, services.startup, services.tailer, WORKER_POLL_AGE))
    app.add_route("/metrics", resources.Metrics(services.metrics, services.config.metrics_token))
    return app
