"""Change-stream fan-out: hundreds of decision-service streams on one control-plane worker.

Starts the control plane as ``make run`` does (one gevent worker on memory://, no
decision service), then, in three phases of ``--revocations`` revocations each (an
assignment, then the timed un-assignment):

1. **baseline** -- no stream open: the worker's CPU for the writes alone;
2. **fan-out** -- ``--subscribers`` lightweight SSE clients (asyncio sockets in this one
   process) on ``GET /internal/v1/applications/{id}/changes`` of the revoking
   application: the time from each revoking DELETE's response until EVERY subscriber has
   read that change (the seq of its ``X-Iamgate-Revision``), and the worker's CPU;
3. **other application** -- the same number of streams on another application: they
   must not wake for the revoking application's changes (CPU close to the baseline's).

The worker's CPU is read from /proc (utime + stime) around each phase and divided by the
change events the phase emitted (the change log's head moved by that many). Memory per
idle stream is the worker's RSS growth from opening the streams (after every subscriber
read its hello and one heartbeat interval passed) divided by their number.

    .venv/bin/python -m benchmarks.stream_fanout [--subscribers 500] [--revocations 100] [--no-write]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import requests

from benchmarks.decision_bench import percentile
from benchmarks.doc import conditions, publish
from benchmarks.oidc_token_bench import cpu_seconds
from tests.e2e.processes import Admin, Processes

SECTION = "## Change-stream fan-out: latest run"
TARGETS = {"seen_p99_ms": 250, "idle_stream_kb": 100}


def worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    if len(children) != 1:
        raise RuntimeError(f"expected one control-plane worker, found {children}")
    return int(children[0])


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Subscribers:
    """``count`` SSE connections on one path; records when each read each change's seq."""

    def __init__(self, port: int, path: str, token: str, count: int):
        self.port, self.path, self.token, self.count = port, path, token, count
        self.hello = 0
        self.seen: dict[int, list[float]] = {}
        self.tasks = []

    async def open(self):
        self.tasks = [asyncio.create_task(self._one()) for _ in range(self.count)]
        deadline = time.monotonic() + 60
        while self.hello < self.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.hello} of {self.count} streams said hello")
            await asyncio.sleep(0.05)

    async def _one(self):
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
        writer.write((f"GET {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                      f"Authorization: Bearer {self.token}\r\n\r\n").encode())
        await writer.drain()
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                if line.startswith(b"event: hello"):
                    self.hello += 1
                elif line.startswith(b"id: "):
                    self.seen.setdefault(int(line[4:]), []).append(time.perf_counter())
        finally:
            writer.close()

    async def all_saw(self, seq: int, timeout: float = 10.0) -> float:
        deadline = time.perf_counter() + timeout
        while len(self.seen.get(seq, ())) < self.count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{len(self.seen.get(seq, ()))} of {self.count} streams saw change {seq}")
            await asyncio.sleep(0.002)
        return max(self.seen[seq])

    def close(self):
        for task in self.tasks:
            task.cancel()


async def revocations(admin: Admin, user: str, role: str, count: int, pid: int, subscribers=None) -> dict:
    """``count`` assign + un-assign pairs; the worker's CPU, the events emitted, and (with
    subscribers on this application) the seconds until every one read each un-assignment."""
    loop = asyncio.get_running_loop()
    head_before = await loop.run_in_executor(None, admin.assign, user, role)
    await loop.run_in_executor(None, admin.unassign, user, role)
    cpu_before, started = cpu_seconds(pid), time.perf_counter()
    samples, head = [], head_before
    for _ in range(count):
        await loop.run_in_executor(None, admin.assign, user, role)
        head = await loop.run_in_executor(None, admin.unassign, user, role)
        answered = time.perf_counter()
        if subscribers is not None:
            samples.append(await subscribers.all_saw(head) - answered)
    cpu = cpu_seconds(pid) - cpu_before
    return {"cpu": cpu, "seconds": time.perf_counter() - started, "events": head - head_before - 1,
            "seen": samples}


async def until_streams_closed(control_url: str, timeout: float = 20.0) -> None:
    """Until the worker's ``iamgate_change_streams_open`` says no stream is open."""
    loop, deadline = asyncio.get_running_loop(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = await loop.run_in_executor(None, lambda: requests.get(control_url + "/metrics", timeout=5).text)
        if any(line.startswith("iamgate_change_streams_open ") and float(line.split()[-1]) == 0
               for line in metrics.splitlines()):
            return
        await asyncio.sleep(0.25)
    raise RuntimeError(f"the closed streams were still open after {timeout:.0f} s")


async def scenario(processes: Processes, subscribers: int, count: int) -> dict:
    admin, other = Admin(processes.control_url), Admin(processes.control_url, name="other")
    user, role = admin.user("fanout"), admin.role(["documents:read"])
    pid = worker_pid(processes.control.pid)
    token = processes.internal_token
    results = {"baseline": await revocations(admin, user, role, count, pid)}

    rss_before = rss_kb(pid)
    streams = Subscribers(processes.control_port, f"/internal/v1/applications/{admin.app_id}/changes", token,
                          subscribers)
    await streams.open()
    await asyncio.sleep(2.5)  # one heartbeat interval: every stream has sent a frame and sits idle
    results["rss_before_kb"], results["rss_streams_kb"] = rss_before, rss_kb(pid)
    idle_cpu = cpu_seconds(pid)
    await asyncio.sleep(2.0)
    results["idle_cpu_per_s"] = (cpu_seconds(pid) - idle_cpu) / 2.0
    results["fanout"] = await revocations(admin, user, role, count, pid, streams)
    streams.close()
    # The worker notices a closed stream at its next writes (heartbeats, 2 s apart). Until
    # then it holds a connection slot: 500 more streams at once would fill the worker's
    # 1,000, and a new connection that takes the last free slot closes the one that has
    # waited longest for its request head, another new stream (shared.httpserver).
    await until_streams_closed(processes.control_url)

    elsewhere = Subscribers(processes.control_port, f"/internal/v1/applications/{other.app_id}/changes", token,
                            subscribers)
    await elsewhere.open()
    await asyncio.sleep(0.5)
    results["other_app"] = await revocations(admin, user, role, count, pid)
    results["other_app_woken"] = sum(len(v) for v in elsewhere.seen.values())
    elsewhere.close()
    return results


def run(subscribers: int, count: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        processes = Processes(Path(tmp), env={"IAMGATE_RATE_LIMIT_REGISTER": "0/60",
                                              "IAMGATE_RATE_LIMIT_API": "100000000/60",
                                              "IAMGATE_LOG_LEVEL": "INFO"})
        try:
            processes.start_control_plane()
            return asyncio.run(scenario(processes, subscribers, count))
        finally:
            processes.stop()


def verdicts(results: dict, subscribers: int) -> dict:
    p99 = percentile(results["fanout"]["seen"], 99) * 1000
    per_stream = (results["rss_streams_kb"] - results["rss_before_kb"]) / subscribers
    return {"seen_p99_ms": (p99, p99 < TARGETS["seen_p99_ms"]),
            "idle_stream_kb": (per_stream, per_stream < TARGETS["idle_stream_kb"])}


def report(results: dict, subscribers: int, count: int) -> str:
    def cpu_row(label, phase, idle=True):
        r = results[phase]
        # Less what the open streams cost idle over the phase (their heartbeats).
        net = r["cpu"] - (results["idle_cpu_per_s"] * r["seconds"] if idle else 0.0)
        return (f"| {label} | {r['events']} | {r['seconds']:.1f} s | {r['cpu']:.2f} s | "
                f"{r['cpu'] / r['events'] * 1000:.2f} ms | {net / r['events'] * 1000:.2f} ms |")

    seen = results["fanout"]["seen"]
    verdict = verdicts(results, subscribers)
    lines = [conditions(), "",
             f"`python -m benchmarks.stream_fanout --subscribers {subscribers} --revocations {count}`: one gevent "
             "control-plane worker on memory:// (INFO request log), the subscribers as asyncio sockets in the "
             "benchmark's process, all on the same 2 cores. CPU is the worker's (utime + stime, /proc).", "",
             "| phase | change events | wall time | worker CPU | CPU per change event | the same, less the "
             "streams' idle cost |", "|---|---|---|---|---|---|",
             cpu_row("baseline: no stream open", "baseline", idle=False),
             cpu_row(f"{subscribers} streams on the revoking application", "fanout"),
             cpu_row(f"{subscribers} streams on another application", "other_app"), "",
             f"Time from each revoking DELETE's response until all {subscribers} subscribers had read it "
             f"({len(seen)} revocations): p50 {percentile(seen, 50) * 1000:.1f} ms, "
             f"p99 {percentile(seen, 99) * 1000:.1f} ms, max {max(seen) * 1000:.1f} ms.", "",
             f"Worker RSS {results['rss_before_kb'] / 1024:.1f} MB before the streams, "
             f"{results['rss_streams_kb'] / 1024:.1f} MB with {subscribers} idle streams: "
             f"{verdict['idle_stream_kb'][0]:.1f} KB per idle stream. Idle, the {subscribers} streams "
             f"(a heartbeat every 2 s each) cost the worker {results['idle_cpu_per_s'] * 100:.1f}% of a core.", "",
             f"Frames read by the {subscribers} streams of the other application during its phase's "
             f"revocations: {results['other_app_woken']} (expected 0).", "",
             "| target | measured | met |", "|---|---|---|",
             f"| every subscriber saw each change: p99 < 250 ms | {verdict['seen_p99_ms'][0]:.1f} ms "
             f"| {'yes' if verdict['seen_p99_ms'][1] else 'NO'} |",
             f"| memory per idle stream < 100 KB | {verdict['idle_stream_kb'][0]:.1f} KB "
             f"| {'yes' if verdict['idle_stream_kb'][1] else 'NO'} |"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--revocations", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args(argv)
    results = run(args.subscribers, args.revocations)
    table = report(results, args.subscribers, args.revocations)
    return publish(SECTION, table, verdicts(results, args.subscribers), write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
