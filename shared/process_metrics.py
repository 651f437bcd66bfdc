"""What every Prometheus exporter shows and the two services' own registries lacked:
``process_*`` (CPU seconds, memory, file descriptors, start time: Linux's /proc),
``python_info``, ``python_gc_*``, and ``iamgate_build_info{service,version} 1``.

prometheus_client puts its process, platform and garbage-collector collectors in its
default registry only; each iamgate app has a registry of its own (several apps live in
one test process), so none were there. With one worker they are collectors of the app's
registry (``ProcessMetrics``). With several (multiprocess mode: a scrape merges every
worker's files), a collector would report only the worker that happens to answer, so
each worker writes its own figures to its files like any other metric, merged as
``MULTIPROCESS_MODES`` says: counters (CPU seconds, collections) summed over every worker
that ran, so they never go backwards when a worker is replaced; memory and descriptors
summed over the live workers (what the pod uses); ``process_start_time_seconds`` the
oldest live worker's; the descriptor limit and the two info series as one.

prometheus_client is imported when the figures are first read (a scrape, or a worker's
first write), not when this module is: the decision service's start-up time.
"""
from __future__ import annotations

from typing import Any

BUILD_INFO = "iamgate_build_info"
# How each gauge of several workers merges (prometheus_client's multiprocess_mode).
MULTIPROCESS_MODES: dict[str, Any] = {
    "process_virtual_memory_bytes": "livesum",
    "process_resident_memory_bytes": "livesum",
    "process_open_fds": "livesum",
    "process_max_fds": "livemax",
    "process_start_time_seconds": "livemin",
    "python_info": "livemax",
    BUILD_INFO: "livemax",
}
_version: str | None = None


def version() -> str:
    """The installed iamgate package's version ("unknown" when run from a bare checkout)."""
    global _version
    if _version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as package_version

        try:
            _version = package_version("iamgate")
        except PackageNotFoundError:
            _version = "unknown"
    return _version


def families(service: str) -> list:
    """This process's figures now, as prometheus_client metric families."""
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.gc_collector import GC_COLLECTOR
    from prometheus_client.platform_collector import PLATFORM_COLLECTOR
    from prometheus_client.process_collector import PROCESS_COLLECTOR

    found: list = []
    # prometheus_client's own instances (those of its default registry): made once per process.
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        found.extend(collector.collect())
    info = GaugeMetricFamily(BUILD_INFO, "The running iamgate build: 1, labelled with its version",
                             labels=("service", "version"))
    info.add_metric((service, version()), 1)
    found.append(info)
    return found


class ProcessMetrics:
    """The figures as a collector of one registry (one worker)."""

    def __init__(self, service: str):
        self._service = service

    def collect(self):
        return iter(families(self._service))


class SharedProcessMetrics:
    """The figures written to this worker's multiprocess files through prometheus_client's
    own metric objects (made at the first ``update``, in ``registry``): ``update`` sets
    each gauge and adds to each counter what it grew by since the last one."""

    def __init__(self, service: str, registry):
        self._service = service
        self._registry = registry
        self._metrics: dict[str, Any] = {}
        self._counted: dict[tuple, float] = {}

    def update(self) -> None:
        from prometheus_client import Counter, Gauge

        for family in families(self._service):
            for sample in family.samples:
                if family.type == "counter" and not sample.name.endswith("_total"):
                    continue  # a counter's _created sample
                labelnames = tuple(sample.labels)
                metric: Any = self._metrics.get(family.name)
                if metric is None:
                    if family.type == "counter":
                        metric = Counter(family.name, family.documentation, labelnames, registry=self._registry)
                    else:
                        metric = Gauge(family.name, family.documentation, labelnames, registry=self._registry,
                                       multiprocess_mode=MULTIPROCESS_MODES.get(family.name, "livesum"))
                    self._metrics[family.name] = metric
                child = metric.labels(*sample.labels.values()) if labelnames else metric
                if family.type == "counter":
                    key = (sample.name, tuple(sample.labels.values()))
                    grown = sample.value - self._counted.get(key, 0.0)
                    if grown > 0:
                        child.inc(grown)
                        self._counted[key] = sample.value
                else:
                    child.set(sample.value)
