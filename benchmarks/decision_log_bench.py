"""What decision logs cost the decision service: checks per second with
``IAMGATE_DECISION_LOG_SAMPLE`` at 0.01 against decision logs off (docs/performance.md,
"Decision logs").

    .venv/bin/python -m benchmarks.decision_log_bench [--duration 5] [--pairs 6] [--sample 0.01]
    .venv/bin/python -m benchmarks.decision_log_bench --in-process [--pairs 10]

One control plane and two decision services side by side (the same workers, cache and
data), one with decision logs off and one sampling; ``wrk`` at concurrency 16 against a
cache-hit ``GET .../authz/check`` and a 50-permission ``POST .../authz/check-bulk``, the
two services in alternating order, ``--pairs`` times each: on a machine shared with other
work the load moves between runs seconds apart, and the median of adjacent pairs moves
less than any one run. Beside each run's rate, its workers' CPU time (every thread, the
decision-log writer included, from /proc) over its answers: what an answer costs, which
the other work on the machine moves less than the rate. Prints the runs and the medians.

``--in-process``: what the decision log adds to a check's CPU time, without the network,
the load generator or the scheduler of a shared machine: one sidecar (on a fake control
plane) answers the same two checks through its WSGI callable in rounds of 4,000, its
decision log switched on and off between rounds (alternating order), and the process's
CPU time (the writer thread's included) over the round's checks is compared.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import requests

from benchmarks.decision_bench import ensure_wrk, run_wrk
from benchmarks.oidc_token_bench import _children, cpu_seconds
from tests.e2e.processes import Admin, Processes, _answers, _gunicorn, free_port, wait_until


def start_sampling_service(processes: Processes, workers: int, sample: float) -> tuple:
    """A second decision service on the same control plane, logging decisions."""
    port = free_port()
    env = {**processes.env, "IAMGATE_DECISION_PORT": str(port), "IAMGATE_DECISION_LOG_SAMPLE": str(sample)}
    process = processes._spawn("decision-sampling", _gunicorn("decision.wsgi:create()", "127.0.0.1", port, workers),
                               env)
    url = f"http://127.0.0.1:{port}"
    if not wait_until(lambda: _answers(url + "/readyz"), 60):
        process.kill()
        raise RuntimeError("the sampling decision service did not start:\n" + processes.logs())
    return process, url


def measured_run(wrk: str, url: str, master: int, **options) -> dict:
    """One wrk run with ``cpu_us``: the service's workers' CPU microseconds per answer."""
    workers = _children(master)
    before = sum(cpu_seconds(pid) for pid in workers)
    result = run_wrk(wrk, url, **options)
    result["cpu_us"] = (sum(cpu_seconds(pid) for pid in workers) - before) / result["requests"] * 1e6
    return result


def run(duration: float, pairs: int, sample: float, workers: int) -> dict:
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory() as tmp:
        processes = Processes(Path(tmp), env={"IAMGATE_RATE_LIMIT_REGISTER": "0/60",
                                              "IAMGATE_RATE_LIMIT_API": "100000000/60"}, decision_workers=workers)
        sampling = None
        try:
            processes.start()
            sampling, sampling_url = start_sampling_service(processes, workers, sample)
            admin = Admin(processes.control_url)
            permissions = [f"resource{i}:read" for i in range(50)]
            user = admin.user("bench")
            admin.assign(user, admin.role(["documents:read", *permissions[::2]]))
            bulk_body = json.dumps({"user_id": user, "permissions": permissions})
            services = {"off": processes.decision_url, f"sample {sample}": sampling_url}
            masters = {"off": processes.decision.pid, f"sample {sample}": sampling.pid}
            kinds = {
                "GET check": (f"/api/v1/applications/{admin.app_id}/authz/check?user_id={user}"
                              "&permission=documents:read", {}),
                "check-bulk(50)": (f"/api/v1/applications/{admin.app_id}/authz/check-bulk",
                                   {"method": "POST", "body": bulk_body}),
            }
            for url in services.values():  # warm each cache, then a discarded run
                path = kinds["GET check"][0]
                wait_until(lambda url=url, path=path: requests.get(url + path, headers=admin.headers).json()
                           .get("cached"), 30)
                for path, extra in kinds.values():
                    run_wrk(wrk, url + path, connections=16, duration=2, headers=admin.headers, **extra)
            results = {}
            for kind, (path, extra) in kinds.items():
                runs = {name: [] for name in services}
                for i in range(pairs):
                    order = list(services) if i % 2 == 0 else list(reversed(services))
                    for name in order:
                        runs[name].append(measured_run(wrk, services[name] + path, masters[name], connections=16,
                                                       duration=duration, headers=admin.headers, **extra))
                results[kind] = runs
                print(kind, {name: [(round(r["rps"]), round(r["cpu_us"])) for r in measured]
                             for name, measured in runs.items()}, flush=True)
            results["lines"] = sum(path.read_text().count('"logger": "iamgate.decisions"')
                                   for path in Path(tmp).glob("decision-sampling-*.log"))
            return results
        finally:
            if sampling is not None:
                sampling.terminate()
                sampling.wait(20)
            processes.stop()


def in_process(pairs: int, sample: float, checks: int = 4000) -> dict:
    """CPU microseconds per check, decision log off and on, ``pairs`` rounds each."""
    import falcon.testing

    from decision.app import create_app
    from tests.conftest import FakeClock, make_config
    from tests.decision.conftest import Tenant, wait_for
    from tests.decision.fakecp import FakeControlPlane

    clock = FakeClock(datetime.now(UTC))
    control_plane = FakeControlPlane(clock).start()
    app = create_app(make_config(internal_token=control_plane.token, control_plane_url=control_plane.url,
                                 public_url=control_plane.issuer, decision_log_sample=sample), clock=clock)
    try:
        if not wait_for(lambda: app.service.follower.trusted(), 10):
            raise RuntimeError("the decision service did not follow the fake control plane")
        log = app.service.decision_log
        log.stream = open(os.devnull, "w")  # noqa: SIM115 (the process's whole life)
        tenant = Tenant(control_plane, falcon.testing.TestClient(app))
        permissions = [f"resource{i}:read" for i in range(50)]
        user = tenant.user_with("documents:read", *permissions[::2])
        key = {"Authorization": f"Bearer {tenant.key}"}
        kinds = {
            "GET check": {"path": f"/api/v1/applications/{tenant.app_id}/authz/check", "headers": key,
                          "query_string": f"user_id={user}&permission=documents:read"},
            "check-bulk(50)": {"method": "POST", "path": f"/api/v1/applications/{tenant.app_id}/authz/check-bulk",
                               "headers": {**key, "Content-Type": "application/json"},
                               "body": json.dumps({"user_id": user, "permissions": permissions}).encode()},
        }

        def start_response(status, _headers, _exc_info=None):
            if not status.startswith("200"):
                raise RuntimeError(f"a check answered {status}")

        def cpu_us(on: bool, request: dict) -> float:
            app.service.decision_log = log if on else None
            environs = [falcon.testing.create_environ(**request) for _ in range(checks)]
            started = time.process_time()
            for environ in environs:
                for _ in app(environ, start_response):
                    pass
            return (time.process_time() - started) / checks * 1e6

        results = {}
        for kind, request in kinds.items():
            cpu_us(True, request)  # the caches and the writer thread warm
            runs: dict[bool, list[float]] = {False: [], True: []}
            for i in range(pairs):
                for on in (False, True) if i % 2 == 0 else (True, False):
                    runs[on].append(cpu_us(on, request))
            results[kind] = runs
        return results
    finally:
        app.service.follower.stop()
        control_plane.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run (default 5)")
    parser.add_argument("--pairs", type=int, default=6, help="alternating runs per service and kind (default 6)")
    parser.add_argument("--sample", type=float, default=0.01, help="IAMGATE_DECISION_LOG_SAMPLE (default 0.01)")
    parser.add_argument("--workers", type=int, default=2, help="decision service workers (default 2)")
    parser.add_argument("--in-process", action="store_true", help="CPU per check in this process, no network")
    args = parser.parse_args(argv)
    if args.in_process:
        for kind, runs in in_process(args.pairs, args.sample).items():
            off, on = statistics.median(runs[False]), statistics.median(runs[True])
            ratios = [b / a for a, b in zip(runs[False], runs[True], strict=True)]
            print(f"{kind}: median {off:.2f} CPU us/check off, {on:.2f} with decision logs at {args.sample} "
                  f"(+{on - off:.2f} us, {on / off:.1%}); median pair {statistics.median(ratios):.1%}")
        return 0
    results = run(args.duration, args.pairs, args.sample, args.workers)
    for kind in ("GET check", "check-bulk(50)"):
        (off_name, off_runs), (on_name, on_runs) = results[kind].items()
        for unit, key in (("/s", "rps"), (" CPU us/answer", "cpu_us")):
            off, on = [r[key] for r in off_runs], [r[key] for r in on_runs]
            ratios = [b / a for a, b in zip(off, on, strict=True)]
            off_median, on_median = statistics.median(off), statistics.median(on)
            print(f"{kind} at c16: median {off_median:,.1f}{unit} {off_name}, "
                  f"{on_median:,.1f}{unit} {on_name} ({on_median / off_median:.1%}); "
                  f"per pair {', '.join(f'{r:.1%}' for r in ratios)}, median {statistics.median(ratios):.1%}")
    print(f"decision lines written by the sampling service: {results['lines']:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
