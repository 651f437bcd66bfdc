"""Webhook delivery: deliveries per second from the change log to a local receiver, and
the delay from event to delivery at a steady 200 events/s (target: p99 under 1 s).

    .venv/bin/python -m benchmarks.webhook_bench [--seconds 5] [--burst 2000]

Method: one control plane's services on the embedded store, started as on
``make run`` (tailer, dispatcher and delivery threads in the process), one webhook
subscribed to ``role.created``, and a threaded HTTP receiver on loopback answering 200.
Events are appended with ``EventLog.emit`` (what every request that changes state does),
each carrying its emit time; the receiver records its arrival time.

- steady, first: 200 events/s for ``--seconds`` seconds, paced by the wall clock; the
  event-to-delivery delay of each, p50 / p99 / max, and the rate achieved (when
  emitting itself cannot keep up, fewer events per second were offered than asked,
  and the delays say nothing about the target). It runs on a fresh change log: on the
  embedded store every append and every tail poll scans the whole log (mongomock has
  no indexes), so after a few thousand events emitting alone falls below 200 events/s
  there, a cost of ``memory://`` that MongoDB's indexed log does not have;
- burst: ``--burst`` events appended as fast as possible, timed until the last delivery.

Each phase also prints the process's CPU time per delivery (``time.process_time``:
emitting, dispatch, delivery and the receiver, all in this process), which depends far
less than the delays on what else the machine is running.

Prints one line per phase; exit status 1 when the steady p99 is 1 s or more, or the
achieved rate is under 95% of ``--rate``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

from shared.config import Config
from tests.e2e.processes import LoopbackReceiver

TARGET_P99 = 1.0


class _Receiver:
    """Each delivery's arrival time and data, on a loopback endpoint answering 200."""

    def __init__(self):
        self.arrivals: list[tuple[float, dict]] = []
        self.lock = threading.Lock()
        self.count = 0
        self.url = LoopbackReceiver(self.received).url

    def received(self, _headers, body: bytes) -> None:
        now = time.time()
        with self.lock:
            self.arrivals.append((now, json.loads(body)["data"]))
            self.count += 1

    def wait_for(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count >= n:
                return True
            time.sleep(0.005)
        return False


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args(argv)

    from controlplane.app import create_app

    config = Config.from_env(env={}, secret_key="bench-secret-key-0123456789abcdef",
                             webhook_allow_private_targets=True, log_level="WARNING")
    services = create_app(config).services  # memory://: dispatch and delivery in-process
    receiver = _Receiver()
    app = services.applications.create({"name": "bench"}, organization_id=None, owner_account_id=None)
    services.webhooks.management.create(app["_id"], {"url": receiver.url, "events": ["role.created"]})
    emit = services.events.emit

    total = int(args.seconds * args.rate)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(total):
        pause = start + i / args.rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        emit(app["_id"], "role.created", {"i": i, "t": time.time()})
    offered = total / (time.perf_counter() - start)  # below --rate when emitting itself fell behind
    if not receiver.wait_for(total, 60):
        print(f"steady: only {receiver.count} of {total} delivered")
        return 1
    cpu = time.process_time() - cpu
    delays = [arrived - data["t"] for arrived, data in receiver.arrivals]
    p50, p99 = statistics.median(delays), _percentile(delays, 0.99)
    print(f"steady: {args.rate:.0f} events/s for {args.seconds:.0f} s (achieved {offered:.0f} events/s): "
          f"event-to-delivery p50 {p50 * 1000:.1f} ms, "
          f"p99 {p99 * 1000:.1f} ms, max {max(delays) * 1000:.1f} ms (target p99 < {TARGET_P99:.0f} s); "
          f"CPU {cpu * 1000 / total:.2f} ms per delivery", flush=True)

    with receiver.lock:
        receiver.arrivals.clear()
        receiver.count = 0
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(args.burst):
        emit(app["_id"], "role.created", {"i": i, "t": time.time()})
    if not receiver.wait_for(args.burst, 120):
        print(f"burst: only {receiver.count} of {args.burst} delivered in 120 s")
        return 1
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"burst: {args.burst} events -> {args.burst / elapsed:.0f} deliveries/s "
          f"({elapsed:.2f} s, {config.webhook_worker_threads} delivery threads; "
          f"CPU {cpu * 1000 / args.burst:.2f} ms per delivery)", flush=True)

    services.webhooks.worker.stop()
    services.tailer.stop()
    return 0 if p99 < TARGET_P99 and offered >= 0.95 * args.rate else 1


if __name__ == "__main__":
    sys.exit(main())
