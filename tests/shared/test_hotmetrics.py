"""Both services count their request metrics with shared.hotmetrics, and with several
workers each worker's figures reach the merged ``/metrics`` through its own files."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from shared.hotmetrics import BUCKETS, HotCounter, HotHistogram

ROOT = Path(__file__).resolve().parents[2]
CHECK = "/api/v1/applications/{applicationId}/authz/check"

# One control plane worker: its app's metrics in multiprocess mode (prometheus_client
# switched at import, as in a gunicorn worker), N requests recorded as the middleware
# does, one of prometheus_client's own counters beside them; it exits, copying its figures.
_WORKER = """
import os, sys, time
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
from prometheus_client import Counter
from shared.hotmetrics import MetricsMiddleware
from shared.metrics import HttpMetrics
metrics = HttpMetrics("iamgate", multiprocess_dir=sys.argv[1])
middleware = MetricsMiddleware(metrics)
own = Counter("iamgate_webhook_deliveries_sent_total", "sent", registry=metrics.registry)
own.inc()
for _ in range(int(sys.argv[2])):
    middleware.record("GET", %(route)r, 200, time.perf_counter())
"""

_SCRAPE = """
import os, sys
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
from shared.metrics import HttpMetrics
sys.stdout.write(HttpMetrics("iamgate", multiprocess_dir=sys.argv[1]).render()[0].decode())
"""


def _python(code: str, *args) -> str:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_both_services_count_requests_with_the_shared_hot_metrics():
    from decision.metrics import DecisionMetrics
    from shared.metrics import HttpMetrics

    for metrics in (HttpMetrics("iamgate"), DecisionMetrics()):
        assert type(metrics.requests) is HotCounter
        assert type(metrics.latency) is HotHistogram
        assert metrics.latency._bounds == BUCKETS  # one set of latency buckets for every app


def test_control_plane_workers_requests_are_summed_from_their_own_files(tmp_path):
    worker = _WORKER % {"route": CHECK}
    _python(worker, tmp_path, 7)
    _python(worker, tmp_path, 5)
    # prometheus_client's objects and the hot figures: files of their own, in each worker.
    files = sorted(re.sub(r"_[0-9]+", "_<pid>", path.name) for path in tmp_path.glob("counter_*.db"))
    assert files == ["counter_<pid>.db"] * 2 + ["counter_<pid>_hot.db"] * 2
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(_python(_SCRAPE, tmp_path)) for s in family.samples}
    assert samples[("iamgate_http_requests_total", (("method", "GET"), ("route", CHECK), ("status", "200")))] == 12
    assert samples[("iamgate_http_request_duration_seconds_count", (("method", "GET"), ("route", CHECK)))] == 12
    assert samples[("iamgate_webhook_deliveries_sent_total", ())] == 2
