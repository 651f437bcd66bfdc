"""Request-path metrics of both services: counters and histograms the hot path adds to
without allocating or taking a gevent lock, rendered through prometheus_client.

prometheus_client's own metric objects take a gevent lock per increment under the gevent
worker, a cost paid several times per request. ``HotCounter`` and ``HotHistogram`` add to
plain numbers under a native lock (``shared.concurrency.native_lock``); prometheus_client
reads them at scrape time as collectors, and is not imported before (a sidecar's start-up
time). This module imports nothing of it at import time.

Several gunicorn workers: each worker's figures reach its own files in prometheus_client's
multiprocess format (``MetricFiles``), and a scrape merges every worker's files with
prometheus_client's ``MultiProcessCollector``: counters and histograms summed, the counts
of a worker that ended kept in the sum. Two ways to reach the files (``HotMetrics.share``):

- copied at intervals, before a scrape and at exit (``HotMetrics.flush``; the decision
  service): the request path writes no file, and another worker's figures are up to an
  interval old;
- written through at each increment (the control plane): a scrape, whichever worker
  answers it, counts every request answered before it, as prometheus_client's own
  objects do in this mode, for one memory-mapped write per figure touched.
"""
from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left

from shared.concurrency import native_lock

# Methods counted by name; any other is counted as OTHER (a client chooses it: it must
# not grow the series without bound).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# The latency buckets of every iamgate app.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class HotCounter:
    """A counter family with labels, incremented without per-call allocation."""

    def __init__(self, name: str, documentation: str, labelnames: tuple = ()):
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._sample = f"{name}_total"
        self._values: dict[tuple, float] = {}
        self._lock = native_lock()
        self.files: MetricFiles | None = None  # set to write through (HotMetrics.share)

    def inc(self, labels: tuple = (), amount: float = 1) -> None:
        with self._lock:
            value = self._values[labels] = self._values.get(labels, 0) + amount
            if self.files is not None:
                self.files.write("counter", self.name, self._sample, self.labelnames, labels, self.documentation,
                                 value)

    def value(self, labels: tuple = ()) -> float:
        return self._values.get(labels, 0)

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in list(self._values.items()):
            family.add_metric(list(labels), value)
        yield family

    def write(self, files: MetricFiles) -> None:
        for labels, value in list(self._values.items()):
            files.write("counter", self.name, self._sample, self.labelnames, labels, self.documentation, value)


class HotHistogram:
    """A histogram family with labels (``BUCKETS`` unless told)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple, buckets=BUCKETS):
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._bounds = tuple(buckets)
        self._series: dict[tuple, list] = {}  # labels -> [count per bucket ..., +Inf count, sum]
        self._lock = native_lock()
        self._bucket_sample, self._sum_sample = f"{name}_bucket", f"{name}_sum"
        self._written_bounds: tuple = ()  # the ``le`` of each bucket, once written through
        self.files: MetricFiles | None = None  # set to write through (HotMetrics.share)

    def observe(self, labels: tuple, value: float) -> None:
        index = bisect_left(self._bounds, value)  # the first bucket whose bound >= value
        with self._lock:
            series = self._series.get(labels)
            if series is None:
                series = self._series[labels] = [0] * (len(self._bounds) + 2)
            series[index] += 1
            series[-1] += value
            files = self.files
            if files is not None:
                self._write_through(files, labels, series, index)

    def _write_through(self, files: MetricFiles, labels: tuple, series: list, index: int) -> None:
        if not self._written_bounds:
            self._written_bounds = (*map(_go_float, self._bounds), "+Inf")
        files.write("histogram", self.name, self._bucket_sample, (*self.labelnames, "le"),
                    (*labels, self._written_bounds[index]), self.documentation, series[index])
        files.write("histogram", self.name, self._sum_sample, self.labelnames, labels, self.documentation,
                    series[-1])

    def collect(self):
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        bounds = (*map(_go_float, self._bounds), "+Inf")
        for labels, series in list(self._series.items()):
            cumulative, buckets = 0, []
            for bound, count in zip(bounds, series[:-1], strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            family.add_metric(list(labels), buckets, series[-1])
        yield family

    def write(self, files: MetricFiles) -> None:
        # The multiprocess format keeps each bucket's own count (not cumulative) and the
        # sum; the merge accumulates the buckets and derives ``_count``.
        bucket_labelnames = (*self.labelnames, "le")
        bounds = (*map(_go_float, self._bounds), "+Inf")
        for labels, series in list(self._series.items()):
            for bound, count in zip(bounds, series[:-1], strict=True):
                files.write("histogram", self.name, self._bucket_sample, bucket_labelnames, (*labels, bound),
                            self.documentation, count)
            files.write("histogram", self.name, self._sum_sample, self.labelnames, labels, self.documentation,
                        series[-1])


def _go_float(value: float) -> str:
    """A bucket bound as prometheus_client writes ``le`` (``floatToGoString``)."""
    from prometheus_client.utils import floatToGoString

    return floatToGoString(value)


class MetricFiles:
    """One worker's files in prometheus_client's multiprocess format:
    ``<kind>_<pid><tag>.db`` (``gauge_<mode>_<pid>.db``), as its own metric objects write them.

    ``tag`` names files of their own where prometheus_client's metric objects also write
    this process's ``<kind>_<pid>.db`` (the control plane): two writers of one file would
    overwrite each other's entries. The merge reads the kind from the name's first part and
    a gauge's pid from its third, so a tagged file holds counters and histograms only."""

    def __init__(self, directory: str, pid: int, tag: str = ""):
        from prometheus_client.mmap_dict import MmapedDict, mmap_key

        self._directory, self._name = directory, f"{pid}{tag}"
        self._open, self._mmap_key = MmapedDict, mmap_key
        self._files: dict = {}
        self._keys: dict = {}
        # Figures written through from the request path and copied by a flush thread share
        # one file, whose new entries must not interleave.
        self._lock = native_lock()

    def write(self, kind: str, metric_name: str, name: str, labelnames: tuple, labelvalues: tuple,
              documentation: str, value: float) -> None:
        with self._lock:
            file = self._files.get(kind)
            if file is None:
                file = self._files[kind] = self._open(os.path.join(self._directory, f"{kind}_{self._name}.db"))
            key = self._keys.get((name, labelvalues))
            if key is None:
                key = self._keys[(name, labelvalues)] = self._mmap_key(metric_name, name, list(labelnames),
                                                                      list(labelvalues), documentation)
            file.write_value(key, value, 0.0)


_open_files: dict[tuple, MetricFiles] = {}
_opening = threading.Lock()


def metric_files(directory: str, pid: int, tag: str = "") -> MetricFiles:
    """The process's one ``MetricFiles`` of that name: two would each append their own
    entries to one file, over each other's (an app built twice in a worker)."""
    with _opening:
        files = _open_files.get((directory, pid, tag))
        if files is None:
            files = _open_files[(directory, pid, tag)] = MetricFiles(directory, pid, tag)
        return files


class HotMetrics:
    """A service's hot collectors (anything with ``collect()`` and ``write(files)``) and,
    once ``share``d, this worker's files they reach."""

    def __init__(self):
        self.collectors: list = []
        self._files: MetricFiles | None = None
        self._write_through = False
        self._flush_lock = threading.Lock()

    def add(self, collector):
        self.collectors.append(collector)
        if self._write_through:
            self._write_through_from_now(collector)
        return collector

    def share(self, directory: str, *, tag: str = "", write_through: bool = False) -> None:
        """This worker's figures into its files in ``directory``: copied at each ``flush``,
        or ``write_through`` at each increment (counters and histograms only)."""
        self._files = metric_files(directory, os.getpid(), tag)
        self._write_through = write_through
        if write_through:
            for collector in self.collectors:
                self._write_through_from_now(collector)

    def _write_through_from_now(self, collector) -> None:
        collector.write(self._files)  # what it counted before
        collector.files = self._files

    def flush(self) -> None:
        """This worker's figures as of now, into its files (nothing to do while not
        shared, or written through)."""
        if self._files is None or self._write_through:
            return
        with self._flush_lock:
            for collector in self.collectors:
                collector.write(self._files)


class MetricsMiddleware:
    """Counts every answered request and its latency by method, route template and status."""

    def __init__(self, metrics):
        # Its ``requests`` (a HotCounter by method, route and status) and ``latency`` (a
        # HotHistogram by method and route): shared.metrics.HttpMetrics, DecisionMetrics.
        self.metrics = metrics

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
        self.metrics.requests.inc((method, route, str(status)))
        self.metrics.latency.observe((method, route), time.perf_counter() - started)
