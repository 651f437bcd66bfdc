"""``make bench``: every load benchmark against the real processes, one after the other.

    .venv/bin/python -m benchmarks.run [NAME ...]      (make bench [NAME ...])

NAME: decision, abac, footprint, controlplane, fairness, fanout, login, webhooks, oidc, metrics,
decisionlog, audit, consoleusers.

With no argument all run: the decision service (benchmarks/decision_bench.py, which
installs wrk when missing and writes docs/performance.md "## Decision service"), the ABAC
evaluator's share of a check with 1, 20 and 100 policies and what a tenant at every cap
leaves the garbage collector (benchmarks/abac_bench.py), the decision service's
footprint beside Cerbos (benchmarks/footprint.py), the control plane's request cost
against a bare Falcon endpoint (benchmarks/controlplane_bench.py), the decision service's
saturation fairness under wrk -c16 with and without turns (benchmarks/fairness.py), change-stream fan-out
to 500 subscribers (benchmarks/stream_fanout.py), the login load
(benchmarks/login_load.py), webhook delivery (benchmarks/webhook_bench.py) and the OIDC
token endpoint (benchmarks/oidc_token_bench.py), what /metrics across workers costs
(benchmarks/metrics_bench.py), what decision logs cost the decision service
(benchmarks/decision_log_bench.py), the audit log's export memory and emit cost
(benchmarks/audit_bench.py), and the console's users list and search with 100,000 users
on memory:// (benchmarks/console_users_bench.py). The exit status is non-zero when a benchmark
misses its targets.
"""
from __future__ import annotations

import importlib
import sys

BENCHMARKS = {"decision": "benchmarks.decision_bench", "abac": "benchmarks.abac_bench",
              "footprint": "benchmarks.footprint",
              "controlplane": "benchmarks.controlplane_bench", "fairness": "benchmarks.fairness",
              "fanout": "benchmarks.stream_fanout",
              "login": "benchmarks.login_load", "webhooks": "benchmarks.webhook_bench",
              "oidc": "benchmarks.oidc_token_bench", "metrics": "benchmarks.metrics_bench",
              "decisionlog": "benchmarks.decision_log_bench", "audit": "benchmarks.audit_bench",
              "consoleusers": "benchmarks.console_users_bench"}


def main(argv=None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(BENCHMARKS)
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        status |= importlib.import_module(BENCHMARKS[name]).main([])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
