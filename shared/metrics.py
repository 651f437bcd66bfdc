"""Prometheus metrics for a Falcon app: request counts and latency by route and status.

Each app gets its own ``CollectorRegistry`` (several apps live in one test process).
Routes are labelled by their URI template, never the raw path, and methods outside
``METHODS`` by ``OTHER``: labels a client chooses must not grow the series without bound.
"""
from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# No ``*_created`` series: a timestamp per label set that doubles the scrape and that no
# dashboard reads (process-wide; decision/metrics.py imports this module too).
disable_created_metrics()

BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class HttpMetrics:
    def __init__(self, namespace: str):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            f"{namespace}_http_requests_total", "HTTP requests by route and status",
            ("method", "route", "status"), registry=self.registry,
        )
        self.latency = Histogram(
            f"{namespace}_http_request_duration_seconds", "HTTP request latency by route",
            ("method", "route"), buckets=BUCKETS, registry=self.registry,
        )

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    def __init__(self, metrics: HttpMetrics):
        self.metrics = metrics
        # The labelled children, looked up once per label set rather than per request
        # (``labels()`` validates and locks each time); bounded like the series themselves.
        self._children: dict = {}

    def process_request(self, req, resp):
        req.context.started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded):
        route = req.uri_template if resource is not None else "unmatched"
        status = resp.status_code if hasattr(resp, "status_code") else int(str(resp.status)[:3])
        method = req.method if req.method in METHODS else "OTHER"
        key = (method, route, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.metrics.requests.labels(method, route, str(status)),
                                              self.metrics.latency.labels(method, route))
        children[0].inc()
        children[1].observe(time.perf_counter() - req.context.started)
