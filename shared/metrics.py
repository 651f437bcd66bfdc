"""Prometheus metrics for a Falcon app: request counts and latency by route and status.

Each app gets its own ``CollectorRegistry`` (several apps live in one test process).
Routes are labelled by their URI template, never the raw path, and methods outside
``shared.hotmetrics.METHODS`` by ``OTHER``: labels a client chooses must not grow the series without bound.

The request path counts with ``shared.hotmetrics`` (``HotCounter``, ``HotHistogram``),
as the decision service does: no prometheus_client object, no gevent lock per request.

With more than one gunicorn worker, prometheus_client runs in its multiprocess mode
(shared/serving.py ``MetricsDirectory``): every metric object writes its value to this
worker's files in ``multiprocess_dir``, the hot figures write through to files of their
own (``<kind>_<pid>_hot.db``), and ``render`` merges the files of every worker of the
service: a scrape counts every request answered before it, whichever worker answered.
Counters and histograms are summed; each gauge names how its workers' values combine
(``multiprocess_mode``). Figures of shared state (the store's webhook queue) are
``StoreGauge``s, read in the background by the worker that answers the scrape: a scrape
never waits on the store.
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from shared.hotmetrics import HotCounter, HotHistogram, HotMetrics
from shared.process_metrics import ProcessMetrics, SharedProcessMetrics

log = logging.getLogger("iamgate.metrics")


# No ``*_created`` series: a timestamp per label set that doubles the scrape and that no
# dashboard reads (process-wide).
disable_created_metrics()


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
    counts that wait in plain integers are in every read of the registry."""

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
        self._hot = HotMetrics()
        self._before_collect = _BeforeCollect()
        self.registry.register(self._before_collect)
        self._multiprocess_dir = multiprocess_dir
        self._syncing: threading.Thread | None = None
        self._local_store = local_store  # the embedded store: StoreGauges read it inline
        self._store_gauges: list[StoreGauge] = []
        self.requests = self.add_hot(HotCounter(f"{namespace}_http_requests", "HTTP requests by route and status",
                                                ("method", "route", "status")))
        self.latency = self.add_hot(HotHistogram(f"{namespace}_http_request_duration_seconds",
                                                 "HTTP request latency by route", ("method", "route")))
        if multiprocess_dir:
            # prometheus_client's objects write this process's ``<kind>_<pid>.db``.
            self._hot.share(multiprocess_dir, tag="_hot", write_through=True)
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

    def add_hot(self, collector):
        """A ``shared.hotmetrics`` counter or histogram in this app's metrics."""
        self._hot.add(collector)
        self.registry.register(collector)
        return collector

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

