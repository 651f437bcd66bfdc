"""Saturation fairness of the decision service: ``wrk -t1 -c16`` against a
cache-hit ``GET .../authz/check``, the service as shipped beside the same server without
``shared.httpserver.Turns`` (benchmarks/fairness_worker.py), in the same run.

Starts the control plane (one gevent worker, memory://), provisions an application, an
API key and a user holding ``documents:read``, then for ``--rounds`` rounds starts, in
turn, each layout of the decision service with and without turns:

- one process (``python -m decision``, the default, ``IAMGATE_DECISION_WORKERS=1``);
- gunicorn's master and two ``DecisionWorker`` workers (``IAMGATE_DECISION_WORKERS=2``);

warms its cache, gives it ``--warmup`` seconds of discarded c16 load, then measures
``--duration`` seconds of ``wrk -t1 -c16`` (closed loop, on the same cores). Each round
runs every variant once, so foreign load on this shared machine reaches them alike.
Targets: the shipped one-process layout's p99 under 20 ms, and its throughput at least
90% of the server without turns (medians over the rounds).

    .venv/bin/python -m benchmarks.fairness [--rounds 3] [--duration 5] [--warmup 2] [--no-write]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import requests

from benchmarks.decision_bench import _until, _us, ensure_wrk, run_wrk
from benchmarks.doc import conditions, publish
from benchmarks.footprint import start_timed, stop
from controlplane.launcher import _gunicorn
from tests.e2e.processes import Admin, Processes, free_port

SECTION = "## Saturation fairness: latest run"
TARGETS = {"p99_ms": 20.0, "rps_share": 0.90}
WITHOUT_TURNS_WORKER = "benchmarks.fairness_worker.WorkerWithoutTurns"

# (key, label, workers, turns)
VARIANTS = [
    ("one_before", "one process, without turns (before)", 1, False),
    ("one_after", "one process, with turns (shipped default)", 1, True),
    ("two_before", "gunicorn, 2 workers, without turns (before)", 2, False),
    ("two_after", "gunicorn, 2 workers, with turns", 2, True),
]


def command(workers: int, turns: bool, port: int) -> list[str]:
    if turns:
        return [sys.executable, "-m", "decision"]  # IAMGATE_DECISION_WORKERS picks the layout
    if workers == 1:
        return [sys.executable, "-m", "benchmarks.fairness_worker"]
    return _gunicorn("decision.wsgi:create()", "127.0.0.1", port, workers, worker_class=WITHOUT_TURNS_WORKER)


def measure(wrk, processes: Processes, admin: Admin, user: str, workers: int, turns: bool, *, duration: float,
            warmup: float, log_dir: Path) -> dict:
    port = free_port()
    env = {**processes.env, "IAMGATE_DECISION_PORT": str(port), "IAMGATE_DECISION_WORKERS": str(workers)}
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/api/v1/applications/{admin.app_id}/authz/check?user_id={user}&permission=documents:read"
    process, *_ = start_timed(command(workers, turns, port), env, base + "/readyz",
                             log_dir / f"decision-{workers}-{turns}.log")
    try:
        session = requests.Session()
        _until(lambda: all(session.get(url, headers=admin.headers).json().get("cached") for _ in range(10)))
        session.close()
        run_wrk(wrk, url, connections=16, duration=warmup, headers=admin.headers)
        result = run_wrk(wrk, url, connections=16, duration=duration, headers=admin.headers)
        result["load"] = os.getloadavg()[0]
        result["c1"] = run_wrk(wrk, url, connections=1, duration=min(duration, 3), headers=admin.headers)
        return result
    finally:
        stop(process)


def run(rounds: int, duration: float, warmup: float) -> dict:
    wrk = ensure_wrk()
    results: dict = {key: [] for key, *_ in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        processes = Processes(Path(tmp), env={"IAMGATE_RATE_LIMIT_REGISTER": "0/60",
                                              "IAMGATE_RATE_LIMIT_API": "100000000/60"})
        try:
            processes.start_control_plane()
            admin = Admin(processes.control_url)
            user = admin.user("fairness")
            admin.assign(user, admin.role(["documents:read"]))
            for round_ in range(rounds):
                for key, label, workers, turns in VARIANTS:
                    result = measure(wrk, processes, admin, user, workers, turns, duration=duration, warmup=warmup,
                                     log_dir=Path(tmp))
                    results[key].append(result)
                    print(f"round {round_ + 1}: {label}: {result['rps']:,.0f}/s, p50 {_us(result['p50_us'])}, "
                          f"p99 {_us(result['p99_us'])} (load {result['load']:.1f}); "
                          f"c1 p50 {_us(result['c1']['p50_us'])}", flush=True)
        finally:
            processes.stop()
    return results


def medians(runs: list[dict]) -> tuple[float, float]:
    return statistics.median(r["rps"] for r in runs), statistics.median(r["p99_us"] for r in runs) / 1000


def verdicts(results: dict) -> dict:
    before_rps, _ = medians(results["one_before"])
    after_rps, after_p99 = medians(results["one_after"])
    share = after_rps / before_rps
    return {"p99_ms": (after_p99, after_p99 < TARGETS["p99_ms"]),
            "rps_share": (share, share >= TARGETS["rps_share"])}


def report(results: dict, rounds: int, duration: float, warmup: float) -> str:
    lines = [conditions(), "",
             f"`python -m benchmarks.fairness --rounds {rounds} --duration {duration:g} --warmup {warmup:g}` "
             "(`make bench`): the decision service's cache-hit GET check under `wrk -t1 -c16` (closed loop, on the "
             "same 2 cores), each layout with `shared.httpserver.Turns` (as shipped) and without (the server "
             "before, benchmarks/fairness_worker.py), interleaved round by round. Raw wrk latencies; the "
             "load average was read at the end of each c16 run; \"c1 p50\" is 3 s at concurrency 1 after it (a "
             "client that waits for each answer, whose connection turns never make yield: each of its reads "
             "waits for a poll).", "",
             "| layout, server | round | requests/s | p50 | p90 | p99 | max | load | c1 p50 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, label, *_ in VARIANTS:
        for index, r in enumerate(results[key], 1):
            lines.append(f"| {label} | {index} | {r['rps']:,.0f} | {_us(r['p50_us'])} | {_us(r['p90_us'])} "
                         f"| {_us(r['p99_us'])} | {_us(r['max_us'])} | {r['load']:.1f} | {_us(r['c1']['p50_us'])} |")
    lines += ["", "| layout, server | median requests/s | median p99 |", "|---|---|---|"]
    for key, label, *_ in VARIANTS:
        rps, p99 = medians(results[key])
        lines.append(f"| {label} | {rps:,.0f} | {p99:.2f} ms |")
    (p99, p99_met), (share, share_met) = verdicts(results).values()
    two_share = medians(results["two_after"])[0] / medians(results["two_before"])[0]
    lines += ["", "| target (one process, the default) | measured | met |", "|---|---|---|",
              f"| wrk -c16 p99 < 20 ms | {p99:.2f} ms | {'yes' if p99_met else 'NO'} |",
              f"| throughput >= 90% of the same server without turns | {share:.0%} | {'yes' if share_met else 'NO'} |",
              "", f"Two workers: {two_share:.0%} of the throughput without turns, median p99 "
              f"{medians(results['two_after'])[1]:.2f} ms (without: {medians(results['two_before'])[1]:.2f} ms)."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the four variants (default 3)")
    parser.add_argument("--duration", type=float, default=5, help="seconds of measured wrk per variant (default 5)")
    parser.add_argument("--warmup", type=float, default=2, help="seconds of discarded c16 load first (default 2)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args(argv)
    results = run(args.rounds, args.duration, args.warmup)
    table = report(results, args.rounds, args.duration, args.warmup)
    return publish(SECTION, table, verdicts(results), write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
