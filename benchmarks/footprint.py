"""Decision-service footprint beside Cerbos, in one run.

    .venv/bin/python -m benchmarks.footprint [--duration 5] [--startups 5] [--no-write]

Starts the control plane (one gevent worker, memory://), provisions an application, its
API key and a user holding ``documents:read``, then, one after the other on free loopback
ports:

- the decision sidecar at its default configuration, as the chart and ``make run`` start
  it (``python -m decision``: one process, ``IAMGATE_DECISION_WORKERS=1``, API-key mode);
- the same with ``IAMGATE_DECISION_WORKERS=2`` (gunicorn master and two workers, the old
  default), for the before/after;
- Cerbos (the ``@cerbos/cerbos-linux-x64`` npm package, which ships the binary; fetched
  with ``npm pack`` into ``.venv/cerbos`` when missing) with the policy under
  ``benchmarks/cerbos/``, answering the same question (may a "user" read a document?).

For each: time from exec to ``/readyz`` (Cerbos: ``/_cerbos/health``) answering 200, RSS
idle (every process of the service), requests per second at concurrency 16 for
``--duration`` seconds (wrk: the sidecar's cache-hit GET check, Cerbos's
``POST /api/check/resources``), RSS after that load. For the sidecar also the RSS after
100,000 cached users: its idle RSS plus what ``benchmarks.cache_fill`` measures those users
to cost in one process (filling through HTTP would measure the control plane instead).

Start-up is then timed ``--startups`` more times for the default sidecar and Cerbos,
alternately (so both see the same load), each time with the CPU time the process had
used when it first answered 200 (user + system, from /proc/<pid>/stat): on a shared
machine the wall time mostly measures the other work, the CPU time much less so. The
readiness probe is a bare ``http.client`` request every 5 ms, so the prober takes little
CPU from the process it times. The service's own packages are byte-compiled first, as
``pip install`` does in the image (this checkout runs with PYTHONDONTWRITEBYTECODE=1,
which would otherwise compile them at every start).
Writes "## Decision-service footprint" in docs/performance.md.
"""
from __future__ import annotations

import argparse
import compileall
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.decision_bench import ensure_wrk, run_wrk
from benchmarks.doc import PERFORMANCE_DOC, ROOT, machine
from tests.e2e.processes import Admin, Processes, free_port

SECTION = "## Decision-service footprint"
CERBOS_PACKAGE = "@cerbos/cerbos-linux-x64"
CERBOS_VERSION = "0.55.0"
CERBOS_DIR = ROOT / ".venv" / "cerbos"
CERBOS_CONFIG = ROOT / "benchmarks" / "cerbos"
CERBOS_BODY = json.dumps({"requestId": "bench", "principal": {"id": "u1", "roles": ["user"]},
                          "resources": [{"actions": ["read"], "resource": {"kind": "document", "id": "d1"}}]})
TARGETS = {"idle_vs_cerbos": 1.0, "cached_100k_mb": 300, "rps_vs_cerbos": 2.0, "startup_s": 0.3}


def ensure_cerbos() -> Path | None:
    """The Cerbos binary from the npm registry's package, or None (no npm, no network)."""
    binary = CERBOS_DIR / "package" / "cerbos-linux-x64"
    if binary.exists():
        return binary
    if not shutil.which("npm"):
        return None
    CERBOS_DIR.mkdir(parents=True, exist_ok=True)
    packed = subprocess.run(["npm", "pack", f"{CERBOS_PACKAGE}@{CERBOS_VERSION}"], cwd=CERBOS_DIR,
                            capture_output=True, text=True)
    if packed.returncode != 0:
        print(f"cerbos: npm pack failed: {packed.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    subprocess.run(["tar", "xzf", packed.stdout.strip().splitlines()[-1]], cwd=CERBOS_DIR, check=True)
    return binary if binary.exists() else None


def _tree(pid: int) -> list[int]:
    """``pid`` and its children (a gunicorn master and its workers)."""
    return [pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                                   text=True).stdout.split()]


def tree_rss_mb(pid: int) -> float:
    """RSS of ``pid`` and its children."""
    total = 0.0
    for one in _tree(pid):
        try:
            with open(f"/proc/{one}/status") as status:
                total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024
        except (OSError, StopIteration):
            pass
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (every thread) so far, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _answers(url: str) -> bool:
    parts = url.split("/", 3)
    host, _, port = parts[2].partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=1)
    try:
        connection.request("GET", "/" + parts[3])
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def start_timed(command: list[str], env: dict, ready_url: str, log: Path) -> tuple[subprocess.Popen, float, float]:
    """(process, seconds from exec to the first 200 from ``ready_url``, CPU seconds it had used then)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                               process_group=0)
    while not _answers(ready_url):
        if process.poll() is not None or time.perf_counter() - started > 60:
            raise RuntimeError(f"{command[0]} did not become ready:\n{log.read_text()[-2000:]}")
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    cpu = sum(cpu_seconds(one) for one in _tree(process.pid))
    return process, elapsed, cpu


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(name, command, env, ready_url, load_url, *, wrk, duration, log_dir, headers=None, body=None) -> dict:
    process, startup, cpu = start_timed(command, env, ready_url, log_dir / f"{name}.log")
    try:
        time.sleep(1)
        idle = tree_rss_mb(process.pid)
        load = run_wrk(wrk, load_url, connections=16, duration=duration, headers=headers or {},
                       method="POST" if body else "GET", body=body)
        after = tree_rss_mb(process.pid)
    finally:
        stop(process)
    return {"startup_s": startup, "startup_cpu_s": cpu, "idle_mb": idle, "after_load_mb": after, "rps": load["rps"],
            "errors": load["status_errors"] + load["socket_errors"], "requests": load["requests"]}


def startups(services: dict, count: int, log_dir: Path) -> dict:
    """{name: [(wall seconds, CPU seconds), ...]}: ``count`` starts of each service in
    ``services`` ({name: (command, env, ready_url)}), alternating between them."""
    runs = {name: [] for name in services}
    for index in range(count):
        for name, (command, env, ready_url) in services.items():
            process, wall, cpu = start_timed(command, env, ready_url, log_dir / f"{name}-start-{index}.log")
            stop(process)
            runs[name].append((wall, cpu))
    return runs


def run(duration: float, count: int) -> dict:
    wrk = ensure_wrk()
    # The image's `pip install` byte-compiles the packages; this checkout would compile them at every start.
    compileall.compile_dir(ROOT / "decision", quiet=1)
    compileall.compile_dir(ROOT / "shared", quiet=1)
    results = {"load_before": os.getloadavg()[0]}
    binary = ensure_cerbos()
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp)
        processes = Processes(log_dir, env={"IAMGATE_RATE_LIMIT_REGISTER": "0/60",
                                            "IAMGATE_RATE_LIMIT_API": "100000000/60"})
        timed = {}
        try:
            processes.start_control_plane()
            admin = Admin(processes.control_url)
            user = admin.user("footprint")
            admin.assign(user, admin.role(["documents:read"]))
            for label, workers in (("sidecar", 1), ("sidecar_2_workers", 2)):
                port = free_port()
                env = {**processes.env, "IAMGATE_DECISION_PORT": str(port), "IAMGATE_DECISION_WORKERS": str(workers),
                       "IAMGATE_DECISION_API_KEY": admin.api_key}
                env.pop("IAMGATE_INTERNAL_TOKEN", None)
                base = f"http://127.0.0.1:{port}"
                check = (f"{base}/api/v1/applications/{admin.app_id}/authz/check"
                         f"?user_id={user}&permission=documents:read")
                results[label] = measure(label, [sys.executable, "-m", "decision"], env, base + "/readyz", check,
                                         wrk=wrk, duration=duration, log_dir=log_dir, headers=admin.headers)
                if workers == 1:
                    timed[label] = ([sys.executable, "-m", "decision"], env, base + "/readyz")
            if binary is not None:
                http, grpc = free_port(), free_port()
                command = [str(binary), "server", f"--config={CERBOS_CONFIG / 'config.yaml'}",
                           f"--set=server.httpListenAddr=127.0.0.1:{http}",
                           f"--set=server.grpcListenAddr=127.0.0.1:{grpc}",
                           f"--set=storage.disk.directory={CERBOS_CONFIG / 'policies'}"]
                base = f"http://127.0.0.1:{http}"
                results["cerbos"] = measure("cerbos", command, dict(os.environ), base + "/_cerbos/health",
                                            base + "/api/check/resources", wrk=wrk, duration=duration,
                                            log_dir=log_dir, body=CERBOS_BODY)
                timed["cerbos"] = (command, dict(os.environ), base + "/_cerbos/health")
            # With the control plane up: the sidecar is ready once its change stream has said hello.
            results["load_startups"] = os.getloadavg()[0]
            results["startups"] = startups(timed, count, log_dir)
        finally:
            processes.stop()
        fill = subprocess.run([sys.executable, "-m", "benchmarks.cache_fill", "--users", "100000"], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        results["cache_fill"] = json.loads(fill.stdout.strip().splitlines()[-1])
    return results


def _median(runs, index: int) -> float:
    return statistics.median(run[index] for run in runs)


def report(results: dict, duration: float) -> str:
    fill = results["cache_fill"]
    fill_mb = fill["rss_after_mb"] - fill["rss_before_mb"]
    runs = results["startups"]
    rows = [("decision sidecar, default (`python -m decision`, 1 process)", "sidecar", True),
            ("decision sidecar, IAMGATE_DECISION_WORKERS=2 (gunicorn master + 2 workers)", "sidecar_2_workers", True)]
    if "cerbos" in results:
        rows.append((f"Cerbos {CERBOS_VERSION} (npm `{CERBOS_PACKAGE}`)", "cerbos", False))
    lines = ["| service | exec to ready (CPU used) | RSS idle | checks/s at c16 | RSS after load | "
             "RSS after 100,000 cached users |", "|---|---|---|---|---|---|"]
    for label, key, sidecar in rows:
        r = results[key]
        cached = f"{r['idle_mb'] + fill_mb:.0f} MB" if sidecar else "-"
        if key in runs:  # the median of the start-up series
            ready = f"{_median(runs[key], 0):.2f} s ({_median(runs[key], 1):.2f} s), median of {len(runs[key])}"
        else:
            ready = f"{r['startup_s']:.2f} s ({r['startup_cpu_s']:.2f} s), 1 start"
        lines.append(f"| {label} | {ready} | {r['idle_mb']:.1f} MB | {r['rps']:,.0f} "
                     f"({r['errors']} errors) | {r['after_load_mb']:.1f} MB | {cached} |")
    names = list(runs)
    lines += ["", "Start-up, every run (wall seconds from exec to the first 200, then the CPU seconds used by "
              f"then), alternating, load average {results['load_startups']:.2f} at the start:", "",
              "| run | " + " | ".join(f"{name} wall | {name} CPU" for name in names) + " |",
              "|---|" + "---|---|" * len(names)]
    for index in range(len(runs[names[0]])):
        lines.append(f"| {index + 1} | " + " | ".join(f"{runs[name][index][0]:.3f} | {runs[name][index][1]:.2f}"
                                                     for name in names) + " |")
    side = results["sidecar"]
    lines += ["", f"The 100,000-user column is the idle RSS plus {fill_mb:.0f} MB, what `benchmarks.cache_fill` "
              f"measured 100,000 users to cost in one process ({fill['bytes_per_user']:,} bytes per user, "
              "grants shaped as the control plane's: 1 to 3 of 20 roles each).",
              f"Load average before the run: {results['load_before']:.2f} (2 cores shared with other work: compare "
              "rows within this run only).", ""]
    if "cerbos" in results:
        cerbos = results["cerbos"]
        wall, cpu = _median(runs["sidecar"], 0), _median(runs["sidecar"], 1)
        checks = [
            ("RSS idle at the default <= Cerbos's idle RSS", f"{side['idle_mb']:.1f} MB vs {cerbos['idle_mb']:.1f} MB",
             side["idle_mb"] <= cerbos["idle_mb"]),
            ("RSS after 100,000 cached users < 300 MB", f"{side['idle_mb'] + fill_mb:.0f} MB",
             side["idle_mb"] + fill_mb < 300),
            ("cache-hit checks/s at c16 >= 2x Cerbos's", f"{side['rps'] / cerbos['rps']:.1f}x",
             side["rps"] >= 2 * cerbos["rps"]),
            ("exec to /readyz 200 < 0.3 s (median)", f"{wall:.2f} s, {cpu:.2f} s of CPU (Cerbos "
             f"{_median(runs['cerbos'], 0):.2f} s, {_median(runs['cerbos'], 1):.2f} s of CPU)", wall < 0.3),
        ]
        lines += ["| target | measured | met |", "|---|---|---|"]
        lines += [f"| {name} | {value} | {'yes' if met else 'NO'} |" for name, value, met in checks]
        lines.append("")
    lines.append(f"{duration:g} s of wrk (`-t1 -c16`) per service; the sidecar answers `GET .../authz/check` from "
                 "its cache, Cerbos `POST /api/check/resources` for one resource and action.")
    return "\n".join(lines)


def write_section(table: str, command: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (f"{SECTION}\n\nMeasured with `{command}` (benchmarks/footprint.py; `make bench` runs it) on {stamp}, "
               f"on {machine()}.\n\n{table}\n")
    text = PERFORMANCE_DOC.read_text("utf-8")
    start = text.find(SECTION + "\n")
    if start >= 0:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    PERFORMANCE_DOC.write_text(text, "utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds of wrk per service (default 5)")
    parser.add_argument("--startups", type=int, default=5,
                        help="start-ups timed per service after the load runs (default 5)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args(argv)
    results = run(args.duration, args.startups)
    table = report(results, args.duration)
    print(f"\nDecision-service footprint ({machine()})\n\n{table}\n")
    if not args.no_write:
        write_section(table, " ".join(["python -m benchmarks.footprint", *(argv if argv is not None
                                                                          else sys.argv[1:])]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
