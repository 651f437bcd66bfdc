"""What /metrics across workers costs (docs/performance.md, "Metrics of
several workers").

    .venv/bin/python -m benchmarks.metrics_bench [--runs N]

Two figures, each beside its baseline measured in the same run, each run in fresh
processes so prometheus_client picks its value class at import as in a worker:

- the control plane's per-request metrics (``shared.hotmetrics.MetricsMiddleware.record``:
  one shared.hotmetrics counter increment and histogram observation): one worker's
  in-process registry against the multiprocess files of several;
- the copy of a worker's figures into its files (shared/hotmetrics.py
  ``HotMetrics.flush``, here the decision service's ``DecisionMetrics.flush``; the
  control plane's is the same code), which runs once a second in each worker, for a
  worker with ``SERIES`` request series, beside one render of the same figures (a scrape
  of a single worker).
"""
from __future__ import annotations

import argparse
import subprocess
import sys

SERIES = 40  # (method, route, status) label sets: a busy sidecar's whole route table
REQUESTS = 100_000

_CONTROL_PLANE = """
import os, sys, tempfile, time
if sys.argv[1] == "multiprocess":
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp()
from shared.hotmetrics import MetricsMiddleware
from shared.metrics import HttpMetrics
middleware = MetricsMiddleware(HttpMetrics("bench", multiprocess_dir=os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")))
record, route = middleware.record, "/api/v1/applications/{applicationId}/users"
best = float("inf")
for _ in range(5):
    started = time.perf_counter()
    for _ in range(%(n)d):
        record("GET", route, 200, started)
    best = min(best, (time.perf_counter() - started) / %(n)d)
print(best)
"""

_DECISION = """
import tempfile, time
from decision.metrics import DecisionMetrics
metrics = DecisionMetrics()
for i in range(%(series)d):
    for _ in range(3):
        metrics.record("GET", f"/route/{i}", 200, time.perf_counter())
metrics.hits.inc(("grants",)); metrics.misses.inc(("grants",))
metrics.render()  # prometheus_client imported, as after a first scrape
def best(action):
    fastest = float("inf")
    for _ in range(50):
        started = time.perf_counter()
        action()
        fastest = min(fastest, time.perf_counter() - started)
    return fastest
render = best(metrics.render)
metrics.share(tempfile.mkdtemp())
print(render, best(metrics.flush))
"""


def _run(code: str, *args: str) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout
    return [float(v) for v in out.split()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for run in range(1, args.runs + 1):
        single = _run(_CONTROL_PLANE % {"n": REQUESTS}, "single")[0]
        shared = _run(_CONTROL_PLANE % {"n": REQUESTS}, "multiprocess")[0]
        render, flush = _run(_DECISION % {"series": SERIES})
        print(f"run {run}: control plane per request: one worker {single * 1e6:.1f} us, "
              f"several workers {shared * 1e6:.1f} us (+{(shared - single) * 1e6:.1f} us); "
              f"flush of {SERIES} request series: {flush * 1e3:.2f} ms a second per worker "
              f"(one scrape's render: {render * 1e3:.2f} ms)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
