"""Run blocking CPU work (bcrypt) off the gevent event loop.

Under gunicorn's gevent worker a native thread pool runs the call while other greenlets
keep serving; bcrypt releases the GIL, so a burst of logins does not stall /healthz.
Outside gevent (tests, scripts) the call simply runs inline.

Releasing the GIL is not enough on a small machine: the kernel gives every runnable
thread its share of the cores, and the one thread that runs every greenlet would wait
behind the hashing threads.  So the CPU work gets its own pool, no larger than the
number of usable cores (more threads cannot hash faster), and on Linux its threads
lower their own scheduling priority (nice +10, per thread): the hashing still uses
the idle cycles, but the event loop runs first.  Figures: docs/performance.md, "Logins";
the measurements behind this design: benchmarks/NOTES.md, "Login load".

``BackgroundLoop`` is the other kind of thread here: a component's own loop (the control
plane's change-log tailer, the decision service's change stream).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Self


def native_lock():
    """A mutex that stays an OS lock under gevent's monkey patching. The sections it guards
    never block or yield, so greenlets (all on one OS thread) never wait on it, and it is
    cheaper than gevent's lock on a path every request takes (benchmarks/NOTES.md); under
    plain threads (tests) it is an ordinary lock."""
    from gevent.monkey import get_original

    return get_original("_thread", "allocate_lock")()


# How long ``yield_to_others`` sleeps: any positive time. Under gevent a sleep of 0
# resumes from the loop's callback queue without polling the sockets (for up to gevent's
# 5 ms switch interval), so a request that just arrived would still wait; a positive one
# resumes on the loop's next iteration, after the ready sockets were served.
YIELD_SECONDS = 0.0001


def yield_to_others() -> None:
    """Let the other greenlets run, requests that arrived meanwhile included, in the middle
    of long CPU work on the event loop (under gevent's monkey patching ``time.sleep`` is
    gevent's; under plain threads, a pause that lets the others run)."""
    time.sleep(YIELD_SECONDS)


# CFS weight of nice 0 against nice 10 is about 9:1: the loop thread wins the core.
BACKGROUND_NICENESS = 10

_thread_state = threading.local()
_pool_lock = threading.Lock()
_pool = None
_pool_pid = None


def cpu_count() -> int:
    """Cores this process may run on (the affinity mask, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _background_priority() -> None:
    if getattr(_thread_state, "lowered", False):
        return
    _thread_state.lowered = True
    # Only Linux applies PRIO_PROCESS to a single thread id; elsewhere it would renice
    # the whole process, so leave it alone.
    if sys.platform.startswith("linux"):
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICENESS))
        except OSError:
            pass  # not permitted (seccomp, containers): run at normal priority


def _in_background(fn, args):
    _background_priority()
    return fn(*args)


def _cpu_pool():
    global _pool, _pool_pid
    with _pool_lock:
        # Created lazily in the process that uses it: a pool inherited through fork
        # has no threads.
        if _pool is None or _pool_pid != os.getpid():
            from gevent.threadpool import ThreadPool

            _pool, _pool_pid = ThreadPool(cpu_count()), os.getpid()
        return _pool


def run_blocking(fn, *args):
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a hard dependency
        return fn(*args)
    if not monkey.is_module_patched("socket"):
        return fn(*args)
    return _cpu_pool().apply(_in_background, (fn, args))


class BackgroundLoop:
    """A component whose loop (``_run``) runs on its own daemon thread: ``start`` starts
    it once; ``stop`` sets ``_stop``, which the loop watches (a subclass that must also
    wake it adds to ``stop``)."""

    thread_name = "iamgate-background"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        raise NotImplementedError
