"""Prometheus metrics of a decision service worker (``GET /metrics``, its own registry).

- ``iamgate_decision_http_requests_total{method,route,status}`` and
  ``iamgate_decision_http_request_duration_seconds{method,route}`` (histogram), as every
  iamgate app has;
- ``iamgate_decision_cache_hits_total{kind}`` / ``..._cache_misses_total{kind}``
  (kind: grants, policies, api_keys), ``..._cache_invalidations_total{kind}`` (entries
  dropped by change events), ``..._cache_resets_total`` (whole-cache drops),
  ``..._stale_fills_discarded_total`` (fills refused by the no-stale-re-fill rule),
  ``..._cache_entries`` (users with cached grants);
- ``..._unavailable_total`` (checks failed closed with 503) and
  ``..._control_plane_requests_total{resource,outcome}``;
- ``..._log_lines_dropped_total`` (decision log lines dropped, while decision logs are
  on: decision/decisionlog.py);
- ``..._stream_connected`` (0/1), ``..._stream_applied_seq`` and ``..._stream_lag`` (the
  head seq the stream announced minus the applied seq), ``..._stream_events_total``.

The request path counts with ``shared.hotmetrics`` (as the control plane does): plain
numbers under a native lock, rendered by prometheus_client at scrape time, which is
imported at the first scrape, not at start-up (a sidecar's start-up time).

Several gunicorn workers (``IAMGATE_DECISION_WORKERS`` > 1): each has its own cache and
figures, and ``/metrics`` must answer for all of them. The master
names a directory (``PROMETHEUS_MULTIPROC_DIR``, shared/serving.py ``MetricsDirectory``);
each worker copies its figures into its own files there in prometheus_client's
multiprocess format (``share``, ``shared.hotmetrics.MetricFiles``): every ``FLUSH_SECONDS``, before it answers a scrape,
and when it exits. A scrape merges every worker's files with prometheus_client's
``MultiProcessCollector``: counters and histograms are summed, and counters of a worker
that ended stay in the sum. The request path is unchanged (no file write per check); the
price is that another worker's figures are up to ``FLUSH_SECONDS`` old, and a worker
killed with SIGKILL loses at most its last ``FLUSH_SECONDS`` of counts. The gauges are
per-worker state, each merged as ``DecisionMetrics.watch`` says; a dead worker's gauges are dropped
(``mark_process_dead`` in the master).
"""
from __future__ import annotations

import atexit
import logging
import threading
import time

from shared.hotmetrics import HotCounter, HotHistogram, HotMetrics, MetricFiles

PREFIX = "iamgate_decision"
FLUSH_SECONDS = 1.0
log = logging.getLogger("iamgate.decision")


class _State:
    """Gauges read from the live state at scrape time (and at each flush when shared)."""

    def __init__(self, gauges):
        self._gauges = gauges  # (name, documentation, read, multiprocess mode)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        for name, documentation, read, _ in self._gauges:
            yield GaugeMetricFamily(name, documentation, value=read())

    def write(self, files: MetricFiles) -> None:
        for name, documentation, read, mode in self._gauges:
            files.write(f"gauge_{mode}", name, name, (), (), documentation, read())


class _Process:
    """``process_*``, ``python_*`` and ``iamgate_build_info`` (shared/process_metrics.py):
    read at each scrape, and at each flush when shared (counters as this worker's totals,
    gauges merged as ``MULTIPROCESS_MODES`` says)."""

    def collect(self):
        from shared.process_metrics import families

        return iter(families("decision"))

    def write(self, files: MetricFiles) -> None:
        from shared.process_metrics import MULTIPROCESS_MODES, families

        for family in families("decision"):
            kind = "counter" if family.type == "counter" else f"gauge_{MULTIPROCESS_MODES.get(family.name, 'livesum')}"
            for sample in family.samples:
                if kind == "counter" and not sample.name.endswith("_total"):
                    continue  # a counter's _created sample
                files.write(kind, family.name, sample.name, tuple(sample.labels), tuple(sample.labels.values()),
                            family.documentation, sample.value)


class DecisionMetrics:
    def __init__(self):
        self.requests = HotCounter(f"{PREFIX}_http_requests", "HTTP requests by route and status",
                                   ("method", "route", "status"))
        self.latency = HotHistogram(f"{PREFIX}_http_request_duration_seconds", "HTTP request latency by route",
                                    ("method", "route"))
        self.hits = HotCounter(f"{PREFIX}_cache_hits", "Lookups answered from the cache", ("kind",))
        self.misses = HotCounter(f"{PREFIX}_cache_misses", "Lookups that went to the control plane", ("kind",))
        self.invalidations = HotCounter(f"{PREFIX}_cache_invalidations", "Cache entries dropped by change events",
                                        ("kind",))
        self.resets = HotCounter(f"{PREFIX}_cache_resets", "Whole-cache drops (reset frames, change log rewound)")
        self.stale_fills = HotCounter(f"{PREFIX}_stale_fills_discarded",
                                      "Fills older than an applied invalidation: used once, not stored")
        self.unavailable = HotCounter(f"{PREFIX}_unavailable", "Checks answered 503 DECISION_UNAVAILABLE")
        self.control_plane = HotCounter(f"{PREFIX}_control_plane_requests", "Lookups sent to the control plane",
                                        ("resource", "outcome"))
        self.events = HotCounter(f"{PREFIX}_stream_events", "Change events applied")
        self._hot = HotMetrics()
        for collector in (self.requests, self.latency, self.hits, self.misses, self.invalidations, self.resets,
                          self.stale_fills, self.unavailable, self.control_plane, self.events, _Process()):
            self._hot.add(collector)
        self._registry = None
        self._directory: str | None = None

    def share(self, directory: str) -> None:
        """Write this worker's figures to ``directory`` (prometheus_client's multiprocess
        files) every ``FLUSH_SECONDS`` and at exit; scrapes then merge every worker's."""
        self._directory = directory
        self._hot.share(directory)
        self.flush()
        threading.Thread(target=self._flush_forever, name="metrics-flush", daemon=True).start()
        atexit.register(self.flush)  # a worker that stops (restart, scale-down) keeps its last counts

    def _flush_forever(self) -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except OSError as exc:  # the directory went away: the next flush tries again
                log.warning("metrics flush failed", extra={"error": str(exc)})

    def flush(self) -> None:
        self._hot.flush()

    def watch(self, cache, follower) -> None:
        """Export the cache's and the stream's state as gauges.

        Each worker has its own stream and cache; with several workers the gauges merge
        as a pod-level alert reads them: connected is the minimum (0 while any worker's
        stream is down), the applied seq the minimum and the lag the maximum (the
        stalest worker bounds how fresh the pod's answers are), the entries the sum
        (what the pod holds in memory). ``live``: only workers alive now count.
        """
        self._add(_State((
            (f"{PREFIX}_stream_connected", "1 while the change stream is connected",
             lambda: 1 if follower.connected else 0, "livemin"),
            (f"{PREFIX}_stream_applied_seq", "Highest change-log seq whose invalidations are applied",
             lambda: cache.applied, "livemin"),
            (f"{PREFIX}_stream_lag", "Head seq announced by the stream minus the applied seq", lambda: cache.lag,
             "livemax"),
            (f"{PREFIX}_cache_entries", "Users with cached grants", lambda: len(cache), "livesum"),
        )))

    def decision_log_drops(self) -> HotCounter:
        """``iamgate_decision_log_lines_dropped_total``, in the metrics from now on (decision
        logs are on; decision/decisionlog.py)."""
        dropped = HotCounter(f"{PREFIX}_log_lines_dropped",
                             "Decision log lines dropped because the queue to stdout was full")
        dropped.inc(amount=0)  # the series exists from the start, for an alert on its rate
        self._add(dropped)
        return dropped

    def _add(self, collector) -> None:
        self._hot.add(collector)
        if self._registry is not None:
            self._registry.register(collector)

    @property
    def registry(self):
        """The prometheus_client registry of every collector, built at the first scrape."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry

            registry = CollectorRegistry()
            for collector in self._hot.collectors:
                registry.register(collector)
            self._registry = registry
        return self._registry

    def record(self, method: str, route: str, status: int, started: float) -> None:
        """One response: its count and its latency since ``started`` (``time.perf_counter``)."""
        self.requests.inc((method, route, str(status)))
        self.latency.observe((method, route), time.perf_counter() - started)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        if self._directory is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        self.flush()  # this worker's figures as of now; the others' at their last flush
        registry = CollectorRegistry()
        MultiProcessCollector(registry, self._directory)
        return generate_latest(registry), CONTENT_TYPE_LATEST
