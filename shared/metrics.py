"""Prometheus metrics for a Falcon app: request counts and latency by route and status.

Each app gets its own ``CollectorRegistry`` (several apps live in one test process).
Routes are labelled by their URI template, never the raw path, and methods outside
``METHODS`` by ``OTHER``: labels a client chooses must not grow the series without bound.

With more than one gunicorn worker, prometheus_client runs in its multiprocess mode
(shared/serving.py ``MetricsDirectory``): every metric object writes its value to this
worker's files in ``multiprocess_dir``, and ``render`` merges the files of every worker
of the service. Counters and histograms are summed; each gauge names how its workers'
values combine (``multiprocess_mode``). Figures of shared state (the store's webhook
queue) are ``StoreGauge``s, read in the background by the worker that answers the
scrape: a scrape never waits on the store.
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from bisect import bisect_left

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from shared.process_metrics import ProcessMetrics, SharedProcessMetrics

log = logging.getLogger("iamgate.metrics")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# No ``*_created`` series: a timestamp per label set that doubles the scrape and that no
# dashboard reads (process-wide; decision/metrics.py imports this module too).
disable_created_metrics()

BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BUCKETS_WITH_INF = (*BUCKETS, float("inf"))  # a histogram's bounds: every observation has a bucket


class StoreGauge:
    """A gauge of state every worker sees alike (the store: the webhook queue's depth),
    so whichever worker answers gives the service's value: no file, no merge.

    A scrape never waits on the store. A thread started by the first scrape reads the
    value every ``REFRESH_SECONDS``; a scrape answers the last value read, and
    ``<name>_staleness_seconds``, the seconds since that read (since the first scrape
    while no read has succeeded; the value itself is absent until one does). While the
    store is down the value stays the last known one and the staleness grows. ``inline``
    (the embedded store, in this process: it answers at once or not at all) reads at
    every scrape instead, so the staleness is 0 while it answers."""

    REFRESH_SECONDS = 5.0

    def __init__(self, name: str, documentation: str, read, *, inline: bool = False,
                 monotonic=time.monotonic):
        self._name, self._documentation, self._read = name, documentation, read
        self._inline = inline
        self._monotonic = monotonic
        self._value: float | None = None
        self._read_at: float | None = None  # monotonic time of the last successful read
        self._since = monotonic()
        self._refresher: threading.Thread | None = None
        self._starting = threading.Lock()

    def collect(self):
        if self._inline:
            self.refresh()
        elif self._refresher is None:
            self._start()
        value, read_at = self._value, self._read_at
        if value is not None:
            yield GaugeMetricFamily(self._name, self._documentation, value=value)
        yield GaugeMetricFamily(f"{self._name}_staleness_seconds",
                                f"Seconds since {self._name} was last read from the store",
                                value=max(0.0, self._monotonic() - (read_at if read_at is not None else self._since)))

    def refresh(self) -> bool:
        """Read the value now; False (and a warning) when the store does not answer."""
        try:
            value = self._read()
        except Exception as exc:  # the store is down: the last value stays, and ages
            log.warning("metrics: cannot read a gauge", extra={"metric": self._name, "error": repr(exc)[:500]})
            return False
        self._value, self._read_at = value, self._monotonic()
        return True

    def _start(self) -> None:
        with self._starting:
            if self._refresher is None:
                self._since = self._monotonic()
                self._refresher = threading.Thread(target=self._refresh_every, args=(weakref.ref(self),),
                                                   name="iamgate-metrics-refresh", daemon=True)
                self._refresher.start()

    @staticmethod
    def _refresh_every(gauge_ref) -> None:
        # A weak reference: the thread ends with the app that owned the gauge (tests build many).
        gauge = gauge_ref()
        while gauge is not None:
            gauge.refresh()
            interval = gauge.REFRESH_SECONDS
            del gauge
            time.sleep(interval)
            gauge = gauge_ref()


class _BeforeCollect:
    """The first collector of a registry: runs its hooks before any metric is read, so
    counts that wait (``MetricsMiddleware``) are in every read of the registry."""

    def __init__(self):
        self.hooks: list = []

    def collect(self):
        for hook in self.hooks:
            hook()
        return iter(())


class HttpMetrics:
    """The metrics of one app: its registry, and with ``multiprocess_dir`` (set while
    more than one worker serves) the merge of every worker's files at scrape time."""

    def __init__(self, namespace: str, multiprocess_dir: str = "", *, local_store: bool = False,
                 service: str | None = None):
        if multiprocess_dir and not values.ValueClass._multiprocess:
            # The metric objects would keep their values in memory and the merge would
            # never see them: PROMETHEUS_MULTIPROC_DIR must be set before the import.
            raise RuntimeError("prometheus_client was imported before PROMETHEUS_MULTIPROC_DIR was set")
        self.registry = CollectorRegistry()
        self._before_collect = _BeforeCollect()
        self.registry.register(self._before_collect)
        self._multiprocess_dir = multiprocess_dir
        self._syncing: threading.Thread | None = None
        self._local_store = local_store  # the embedded store: StoreGauges read it inline
        self._store_gauges: list[StoreGauge] = []
        self.requests = Counter(
            f"{namespace}_http_requests_total", "HTTP requests by route and status",
            ("method", "route", "status"), registry=self.registry,
        )
        self.latency = Histogram(
            f"{namespace}_http_request_duration_seconds", "HTTP request latency by route",
            ("method", "route"), buckets=BUCKETS, registry=self.registry,
        )
        if service is not None:  # process_*, python_* and iamgate_build_info (shared/process_metrics.py)
            if multiprocess_dir:
                self.before_collect(SharedProcessMetrics(service, self.registry).update)
            else:
                self.registry.register(ProcessMetrics(service))

    @property
    def multiprocess(self) -> bool:
        return bool(self._multiprocess_dir)

    def before_collect(self, hook) -> None:
        """Call ``hook()`` before the registry's metrics are read: it adds counts that
        wait in plain integers. With several workers another worker answers the scrape,
        from this worker's files: the hooks then run every ``SYNC_SECONDS`` on a thread of
        their own and at exit, so what this worker counted is at most that old."""
        self._before_collect.hooks.append(hook)
        if self._multiprocess_dir and self._syncing is None:
            self._syncing = threading.Thread(target=_sync_every, args=(weakref.ref(self._before_collect),),
                                             name="iamgate-metrics-sync", daemon=True)
            self._syncing.start()
            atexit.register(self._before_collect.collect)

    def add_store_gauge(self, name: str, documentation: str, read) -> StoreGauge:
        """A ``StoreGauge`` of ``read()`` in this app's metrics."""
        gauge = StoreGauge(name, documentation, read, inline=self._local_store)
        self.registry.register(gauge)
        self._store_gauges.append(gauge)
        return gauge

    def render(self) -> tuple[bytes, str]:
        if not self._multiprocess_dir:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        # A fresh registry per scrape: the merged files (no ``_created`` series: the
        # files hold none) and the store's gauges.
        self._before_collect.collect()  # this worker's waiting counts, into its files
        registry = CollectorRegistry()
        MultiProcessCollector(registry, self._multiprocess_dir)
        for gauge in self._store_gauges:
            registry.register(gauge)
        return generate_latest(registry), CONTENT_TYPE_LATEST


SYNC_SECONDS = 1.0


def _sync_every(hooks_ref) -> None:
    # A weak reference: the thread ends with the app whose hooks these are.
    hooks = hooks_ref()
    while hooks is not None:
        try:
            hooks.collect()
        except Exception:
            log.exception("metrics: adding waiting counts failed")
        del hooks
        time.sleep(SYNC_SECONDS)
        hooks = hooks_ref()


class MetricsMiddleware:
    """Counts every answered request and its latency by method, route template and status.

    With one registry in this process, answered requests wait in a list and are added to
    the metrics when the registry is read (a scrape, ``_BeforeCollect``) or when
    ``PENDING_MAX`` wait: added one after another, they cost a fraction of each added on
    its own request's path, and every read sees every request answered before it. With
    multiprocess files another worker may answer the scrape, so each request is added at
    once (to this worker's file)."""

    PENDING_MAX = 256

    def __init__(self, metrics: HttpMetrics):
        self.metrics = metrics
        # Per label set, looked up once rather than per request (``labels()`` validates and
        # locks each time): the values a request adds to, as ``Counter.inc`` and
        # ``Histogram.observe`` reach them (tests/core/test_openapi_and_metrics.py holds the
        # two ways to each other). Bounded like the series themselves.
        self._children: dict = {}
        self._pending: list | None = None if metrics.multiprocess else []
        self._flush_lock = threading.Lock()
        metrics.before_collect(self.flush)

    def process_request(self, req, _resp):
        req.context.started = time.perf_counter()

    def process_response(self, req, resp, resource, _req_succeeded):
        route = req.uri_template if resource is not None else "unmatched"
        status = resp.status_code if hasattr(resp, "status_code") else int(str(resp.status)[:3])
        self.record(req.method, route, status, req.context.started)

    def record(self, method: str, route: str, status: int, started: float) -> None:
        """Count one answered request begun at ``started`` (``time.perf_counter()``); also
        what a hot path that answers without Falcon calls."""
        if method not in METHODS:
            method = "OTHER"
        elapsed = time.perf_counter() - started
        pending = self._pending
        if pending is None:
            self._add((method, route, status), elapsed)
            return
        pending.append(((method, route, status), elapsed))  # one step under the GIL
        if len(pending) >= self.PENDING_MAX:
            self.flush()

    def flush(self) -> None:
        """Add the requests that wait to the metrics."""
        pending = self._pending
        if not pending:
            return
        with self._flush_lock:  # two flushes never take the same requests
            count = len(pending)
            batch = pending[:count]
            del pending[:count]
        totals: dict = {}  # label set -> [count, sum, count per bucket...]: one add per value touched
        for key, elapsed in batch:
            series = totals.get(key)
            if series is None:
                series = totals[key] = [0, 0.0] + [0] * len(BUCKETS_WITH_INF)
            series[0] += 1
            series[1] += elapsed
            series[2 + bisect_left(BUCKETS_WITH_INF, elapsed)] += 1
        for key, (count, total, *per_bucket) in totals.items():
            values = self._values(key)
            values[0].inc(count)
            values[1].inc(total)
            for bucket, n in zip(values[2], per_bucket, strict=True):
                if n:
                    bucket.inc(n)

    def _values(self, key: tuple) -> tuple:
        values = self._children.get(key)
        if values is None:
            method, route, status = key
            values = self._children[key] = _value_objects(self.metrics.requests.labels(method, route, str(status)),
                                                          self.metrics.latency.labels(method, route))
        return values

    def _add(self, key: tuple, elapsed: float) -> None:
        count, total, buckets = self._values(key)
        count.inc(1)
        total.inc(elapsed)
        buckets[bisect_left(BUCKETS_WITH_INF, elapsed)].inc(1)  # the first bucket whose bound >= elapsed


def _value_objects(counter, histogram) -> tuple:
    """What ``counter.inc()`` and ``histogram.observe(x)`` add to (prometheus_client's
    value objects, in memory or in this worker's multiprocess file), without the checks
    each call repeats: the counter's value, the histogram's sum and its buckets, one per
    bound of ``BUCKETS_WITH_INF``."""
    if tuple(histogram._upper_bounds) != BUCKETS_WITH_INF:
        raise RuntimeError("the latency histogram's bounds are not BUCKETS")
    return counter._value, histogram._sum, histogram._buckets
