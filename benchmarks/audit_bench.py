"""The audit log: memory while exporting, and what recording adds to a change-log append.

    .venv/bin/python -m benchmarks.audit_bench [--records 200000] [--emits 2000]

Export: ``--records`` audit records of one application on the embedded ``memory://``
store (written straight into it, as tests/audit/test_export.py does), then the export
generator of ``GET V1/audit-events/export`` is read to its end, as the HTTP server would
send it. The process's resident set (``VmRSS``) is read before the first chunk and after
every chunk; the peak growth must stay under 30 MB (the export holds one batch of
records, never the result). Prints the growth, the records exported and their rate.

Emit: ``EventLog.emit`` of a ``role.created`` event inside a request's audit context (what
every write pays), ``--emits`` times on a fresh store, median of five rounds in
microseconds per emit. Run the same on the commit before the audit log for the
comparison in docs/performance.md.

Exit status 1 when the RSS growth is 30 MB or more.
"""
from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime

from controlplane.audit import context as audit_context
from controlplane.audit.service import AuditLog
from controlplane.audit.store import AuditStore
from controlplane.events import EventLog
from controlplane.store import Store
from tests.audit.conftest import bulk_insert, record_doc

TARGET_MB = 30


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def export(records: int) -> tuple[float, int, float]:
    store = Store("memory://")
    events = EventLog(store, lambda: datetime.now(UTC))
    audit = AuditLog(AuditStore(store, events.records), events)
    start = datetime.now(UTC)
    bulk_insert(store, [record_doc(i + 1, start, app_id="app") for i in range(records)])
    before = peak = rss_mb()
    lines, began = 0, time.perf_counter()
    for chunk in audit.export("app_id", "app", {}):
        lines += chunk.count(b"\n")
        peak = max(peak, rss_mb())
    return peak - before, lines, time.perf_counter() - began


def emit_cost(emits: int) -> float:
    rounds = []
    for _ in range(5):
        events = EventLog(Store("memory://"), lambda: datetime.now(UTC))
        audit_context.begin(audit_context.AuditContext(
            request_id="bench", ip="192.0.2.1", user_agent="bench", actor=audit_context.actor("api_key", "key")))
        began = time.perf_counter()
        for i in range(emits):
            events.emit("app", "role.created", {"role_id": f"r{i}", "name": "editor"}, subject={"role_id": f"r{i}"})
        rounds.append((time.perf_counter() - began) / emits * 1e6)
        audit_context.begin(None)
    return statistics.median(rounds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--emits", type=int, default=2000)
    args = parser.parse_args(argv)
    print(f"emit: {emit_cost(args.emits):.1f} us per change-log append (memory://, median of 5 rounds "
          f"of {args.emits})", flush=True)
    growth, lines, seconds = export(args.records)
    ok = growth < TARGET_MB and lines == args.records
    print(f"export: {lines} records in {seconds:.1f} s ({lines / seconds:.0f}/s), RSS growth {growth:.1f} MB "
          f"(target < {TARGET_MB} MB): {'ok' if ok else 'MISSED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
