"""Control-plane request cost: a cached ``GET authz/check`` and ``GET V1/roles`` against a
bare Falcon endpoint on the same worker class and number of workers, measured in one run.

Starts a bare Falcon app (``baseline()``: the check's path answering a constant dict) on
gunicorn with ONE worker of the control plane's class (``shared.httpworker.ControlPlaneWorker``:
gevent, requests parsed by httptools), then the control plane as ``make run`` starts it (one
such worker on memory://, INFO logging, so one request-log line per request) with the
general API throttle raised out of the way (it still counts every request), and the
decision service beside it. Provisions an application, an API key, a user and a role over
HTTP, warms the check's cache, then drives ``wrk -t1`` at concurrency 1 and 16:

- the bare endpoint (the yardstick of the c16 target);
- the control plane's cache-hit ``GET V1/authz/check`` (API key);
- the control plane's ``GET V1/roles`` (API key; a store read per request, by design);
- the decision service's cache-hit check at concurrency 1 (the yardstick of the c1 p50 target);
- Cerbos (``benchmarks.footprint.ensure_cerbos``: the ``@cerbos/cerbos-linux-x64`` npm
  package in ``.venv/cerbos``, the policy under ``benchmarks/cerbos/``) answering the same
  question through ``POST /api/check/resources``, one resource and action, JSON in and
  out; skipped, and reported as not measured, when the binary cannot be had.

Targets: check c16 at least 60% of the bare endpoint's c16 and at least
Cerbos's c16; check c1 p50 at most 2x the decision service's. The c16 share is the median of
``--pairs`` alternating runs of the check and the bare endpoint, a second bare server staying
up beside the control plane: this machine's speed drifts over minutes, and the rows are
minutes apart.

    .venv/bin/python -m benchmarks.controlplane_bench [--duration 4] [--warmup 2] [--pairs 5] [--no-write]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import falcon
import requests

from benchmarks.decision_bench import _answers, _until, _us, ensure_wrk, percentile, run_wrk
from benchmarks.doc import ROOT, conditions, publish
from benchmarks.footprint import CERBOS_BODY, CERBOS_CONFIG, CERBOS_VERSION, ensure_cerbos, start_timed, stop
from controlplane.launcher import _gunicorn
from tests.e2e.processes import Admin, Processes, free_port, wait_until

SECTION = "## Control-plane request cost: latest run"
TARGETS = {"check_c16_share": 0.60, "check_c1_p50_ratio": 2.0}


class _CachedAnswer:
    answer = {"allowed": True, "permission": "documents:read", "cached": True}

    def on_get(self, req, resp, applicationId):  # noqa: ARG002 -- Falcon's responder signature
        resp.media = self.answer


def baseline():
    """The yardstick: a bare Falcon endpoint on the check's path (gunicorn
    ``'benchmarks.controlplane_bench:baseline()'``, one worker of the control plane's class)."""
    app = falcon.App()
    app.add_route("/api/v1/applications/{applicationId}/authz/check", _CachedAnswer())
    return app


@contextlib.contextmanager
def bare_server(log_dir: Path, *, worker_class: str | None = None, name: str = "bare"):
    """The bare endpoint's URL, served by gunicorn with one worker of the control plane's
    class, or of ``worker_class`` (the stock ``gevent`` worker), until the block ends."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v1/applications/x/authz/check?user_id=u&permission=documents:read"
    with open(log_dir / f"{name}.log", "w") as log:
        server = subprocess.Popen(_gunicorn("benchmarks.controlplane_bench:baseline()", "127.0.0.1", port, 1,
                                            worker_class), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  process_group=0)
    try:
        if not wait_until(lambda: _answers(url), 30):
            raise RuntimeError("the baseline server did not start")
        yield url
    finally:
        server.terminate()


def measure_baseline(wrk, duration, warmup, log_dir: Path, *, worker_class: str | None = None,
                     name: str = "bare") -> dict:
    """The bare endpoint at c1 and c16 on the control plane's worker class, or on
    ``worker_class`` (the stock ``gevent`` worker: the yardstick before the control plane
    moved to the httptools server, reported for comparison only)."""
    with bare_server(log_dir, worker_class=worker_class, name=name) as url:
        run_wrk(wrk, url, connections=16, duration=warmup, headers={})
        return {f"{name}_c{c}": run_wrk(wrk, url, connections=c, duration=duration, headers={}) for c in (1, 16)}


def measure_cerbos(wrk, duration, warmup, log_dir: Path) -> dict:
    """Cerbos at c1 and c16 (``{}`` when its binary cannot be had)."""
    binary = ensure_cerbos()
    if binary is None:
        return {}
    http, grpc = free_port(), free_port()
    command = [str(binary), "server", f"--config={CERBOS_CONFIG / 'config.yaml'}",
               f"--set=server.httpListenAddr=127.0.0.1:{http}", f"--set=server.grpcListenAddr=127.0.0.1:{grpc}",
               f"--set=storage.disk.directory={CERBOS_CONFIG / 'policies'}"]
    base = f"http://127.0.0.1:{http}"
    process, *_ = start_timed(command, dict(os.environ), base + "/_cerbos/health", log_dir / "cerbos.log")
    try:
        url = base + "/api/check/resources"
        answer = requests.post(url, data=CERBOS_BODY, timeout=5).json()
        if answer["results"][0]["actions"]["read"] != "EFFECT_ALLOW":
            raise RuntimeError(f"unexpected Cerbos answer: {answer}")
        run_wrk(wrk, url, connections=16, duration=warmup, headers={}, method="POST", body=CERBOS_BODY)
        return {f"cerbos_c{c}": run_wrk(wrk, url, connections=c, duration=duration, headers={}, method="POST",
                                        body=CERBOS_BODY) for c in (1, 16)}
    finally:
        stop(process)


def run(duration: float, warmup: float, pairs: int = 0) -> dict:
    wrk = ensure_wrk()
    results = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        results.update(measure_baseline(wrk, duration, warmup, Path(tmp)))
        results.update(measure_baseline(wrk, duration, warmup, Path(tmp), worker_class="gevent", name="stock"))
        results.update(measure_cerbos(wrk, duration, warmup, Path(tmp)))
        bare = servers.enter_context(bare_server(Path(tmp), name="bare-pairs")) if pairs else None
        processes = Processes(Path(tmp), env={"IAMGATE_RATE_LIMIT_REGISTER": "0/60",
                                              "IAMGATE_RATE_LIMIT_API": "100000000/60",
                                              "IAMGATE_LOG_LEVEL": "INFO"}, decision_workers=2)
        try:
            processes.start()
            admin = Admin(processes.control_url)
            user = admin.user("bench")
            admin.assign(user, admin.role(["documents:read", "reports:read"]))
            for i in range(5):
                admin.role([f"resource{i}:read"])
            query = f"?user_id={user}&permission=documents:read"
            check = f"{admin.v1}/authz/check{query}"
            roles = f"{admin.v1}/roles"
            sidecar = f"{processes.decision_url}/api/v1/applications/{admin.app_id}/authz/check{query}"
            warm = requests.Session()
            _until(lambda: warm.get(check, headers=admin.headers).json().get("cached"))
            _until(lambda: all(warm.get(sidecar, headers=admin.headers).json().get("cached") for _ in range(10)))
            for url in (check, roles, sidecar):
                run_wrk(wrk, url, connections=16, duration=warmup, headers=admin.headers)
            for c in (1, 16):
                results[f"check_c{c}"] = run_wrk(wrk, check, connections=c, duration=duration, headers=admin.headers)
                results[f"roles_c{c}"] = run_wrk(wrk, roles, connections=c, duration=duration, headers=admin.headers)
            results["decision_c1"] = run_wrk(wrk, sidecar, connections=1, duration=duration, headers=admin.headers)
            if pairs:
                # The c16 share from alternating pairs (the bare endpoint, then the check,
                # `duration` each, both servers up throughout): on a machine whose speed
                # drifts over minutes, adjacent runs compare better than the rows above, which
                # are minutes apart, and the median of several pairs moves less than one pair.
                run_wrk(wrk, bare, connections=16, duration=warmup, headers={})
                results["pair_rps"] = [
                    (run_wrk(wrk, check, connections=16, duration=duration, headers=admin.headers)["rps"],
                     run_wrk(wrk, bare, connections=16, duration=duration, headers={})["rps"])
                    for _ in range(pairs)]
                results["share_pairs"] = [check_rps / bare_rps for check_rps, bare_rps in results["pair_rps"]]
        finally:
            processes.stop()
    return results


def verdicts(results: dict) -> dict:
    share = (percentile(results["share_pairs"], 50) if results.get("share_pairs")
             else results["check_c16"]["rps"] / results["bare_c16"]["rps"])
    ratio = results["check_c1"]["p50_us"] / results["decision_c1"]["p50_us"]
    out = {"check_c16_share": (share, share >= TARGETS["check_c16_share"]),
           "check_c1_p50_ratio": (ratio, ratio <= TARGETS["check_c1_p50_ratio"])}
    if "cerbos_c16" in results:
        versus = results["check_c16"]["rps"] / results["cerbos_c16"]["rps"]
        out["check_c16_vs_cerbos"] = (versus, versus >= 1.0)
    return out


def report(results: dict, duration: float, warmup: float) -> str:
    rows = [("bare Falcon endpoint, constant dict (baseline)", "bare"),
            ("the same on gunicorn's stock `gevent` worker (the yardstick before the server move; for comparison)",
             "stock"),
            ("control plane: GET V1/authz/check, cache hit, API key", "check"),
            ("control plane: GET V1/roles (6 roles), API key", "roles")]
    share_pairs = zip(results.get("share_pairs", ()), results.get("pair_rps", ()), strict=True)
    lines = [conditions(), "",
             f"`python -m benchmarks.controlplane_bench`: gunicorn, one worker of the control plane's class "
             f"(`shared.httpworker.ControlPlaneWorker`) for the baseline and for the control plane "
             f"(`make run`: memory://, INFO request log); wrk -t1 on the same cores, "
             f"{warmup:g} s warm-up at c16 per URL, then {duration:g} s per row. Raw wrk latencies.",
             *([f"The c16 share is the median of {len(results['share_pairs'])} alternating pairs (the check at c16, "
                f"then the bare endpoint at c16, {duration:g} s each, both servers up): "
                f"{', '.join(f'{r:.0%} ({c:,.0f}/{b:,.0f})' for r, (c, b) in share_pairs)} "
                f"(check/bare requests/s); the rows below are minutes apart."]
               if results.get("share_pairs") else []), "",
             "| request | c | requests/s | p50 | p99 | errors |", "|---|---|---|---|---|---|"]
    for label, key in rows:
        for c in (1, 16):
            r = results[f"{key}_c{c}"]
            lines.append(f"| {label} | {c} | {r['rps']:,.0f} | {_us(r['p50_us'])} | {_us(r['p99_us'])} "
                         f"| {r['status_errors'] + r['socket_errors']} |")
    r = results["decision_c1"]
    lines.append(f"| decision service: GET check, cache hit (baseline of the c1 target) | 1 | {r['rps']:,.0f} "
                 f"| {_us(r['p50_us'])} | {_us(r['p99_us'])} | {r['status_errors'] + r['socket_errors']} |")
    for c in (1, 16):
        r = results.get(f"cerbos_c{c}")
        if r is not None:
            lines.append(f"| Cerbos {CERBOS_VERSION}: POST /api/check/resources, one resource and action | {c} "
                         f"| {r['rps']:,.0f} | {_us(r['p50_us'])} | {_us(r['p99_us'])} "
                         f"| {r['status_errors'] + r['socket_errors']} |")
    found = verdicts(results)
    (share, share_met), (ratio, ratio_met) = found["check_c16_share"], found["check_c1_p50_ratio"]
    lines += ["", "| target | measured | met |", "|---|---|---|",
              f"| check at c16 >= 60% of the bare endpoint's | {share:.0%} | {'yes' if share_met else 'NO'} |",
              f"| check p50 at c1 <= 2x the decision service's | {ratio:.2f}x | {'yes' if ratio_met else 'NO'} |"]
    if "check_c16_vs_cerbos" in found:
        versus, met = found["check_c16_vs_cerbos"]
        lines.append(f"| check at c16 >= Cerbos on the same machine | {versus:.0%} of Cerbos's "
                     f"({results['check_c16']['rps']:,.0f}/s vs {results['cerbos_c16']['rps']:,.0f}/s) "
                     f"| {'yes' if met else 'NO'} |")
    else:
        lines.append("| check at c16 >= Cerbos on the same machine | not measured (no Cerbos binary: npm pack "
                     "failed) | - |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=4, help="seconds per wrk run (default 4)")
    parser.add_argument("--warmup", type=float, default=2, help="seconds of discarded c16 load per URL (default 2)")
    parser.add_argument("--pairs", type=int, default=5,
                        help="alternating check/bare c16 runs for the c16 share (default 5; 0: the rows' ratio)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args(argv)
    results = run(args.duration, args.warmup, args.pairs)
    table = report(results, args.duration, args.warmup)
    return publish(SECTION, table, verdicts(results), write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
