"""benchmarks/audit_bench.py (``make bench``'s ``audit``) still runs against the audit log
as it is: a small run, so a change of the code it drives cannot break it unseen."""
from __future__ import annotations

from benchmarks import audit_bench


def test_the_audit_benchmark_runs_and_passes_on_a_small_export(capsys):
    assert audit_bench.main(["--records", "3000", "--emits", "20"]) == 0
    out = capsys.readouterr().out
    assert "export: 3000 records" in out and ": ok" in out
