"""The control plane's start-up step: the work that needs the store before the process
is ready -- indexes, an active signing key, deletions a crash left half-done, and the
change-log tailer's starting position -- then the background work that follows the log.

A MongoDB that is not reachable yet is not a reason to crash (docs/configuration.md,
"Start-up errors"): the process serves ``/healthz`` at once, ``/readyz`` answers 503,
and the step is retried with exponential backoff until the store answers.  Every part
is idempotent, so several replicas (or a retry after a half-done attempt) may run it
together.  The web processes and the webhook worker start the same way; the worker (and
the web process on the embedded store, which no worker can reach) also delivers
webhooks and seals the audit records into their hash chains.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, TypeVar

from controlplane.store import one_line

if TYPE_CHECKING:  # annotations only: the composition root imports these modules
    from controlplane.applications.service import ApplicationService
    from controlplane.audit.chain import Sealer
    from controlplane.events import Tailer
    from controlplane.keys import SigningKeys
    from controlplane.store import Store
    from controlplane.webhooks.delivery import DeliveryWorker
    from controlplane.webhooks.dispatcher import Dispatcher

log = logging.getLogger("iamgate.startup")

FIRST_DELAY = 0.5  # seconds before the first retry; doubled after each failure
MAX_DELAY = 30.0

T = TypeVar("T")


def with_backoff(attempt: Callable[[], T], *, sleep: Callable[[float], None] = time.sleep,
                 first_delay: float = FIRST_DELAY, max_delay: float = MAX_DELAY, give_up_after: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> T:
    """``attempt()`` until it returns, waiting ``first_delay`` after the first failure and
    twice as long after each next one (at most ``max_delay``).  Any exception counts as
    "the store does not answer yet": MongoDB late, a network blip, a failover.  With
    ``give_up_after`` (seconds), the last failure is raised once that much time has passed."""
    started = clock()
    delay = first_delay
    attempts = 0
    while True:
        attempts += 1
        try:
            result = attempt()
        except Exception as exc:
            waited = clock() - started
            if give_up_after is not None and waited + delay > give_up_after:
                raise
            log.warning("start-up: the store does not answer yet; retrying", extra={
                "attempt": attempts, "retry_in_seconds": delay, "error": one_line(exc)})
            sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        if attempts > 1:
            log.info("start-up: the store answers", extra={"attempts": attempts})
        return result


@dataclass(eq=False)
class StartUp:
    store: Store
    keys: SigningKeys
    applications: ApplicationService
    tailer: Tailer
    dispatcher: Dispatcher
    deliveries: DeliveryWorker
    sealer: Sealer
    _: KW_ONLY
    sleep: Callable[[float], None] = time.sleep
    first_delay: float = FIRST_DELAY
    max_delay: float = MAX_DELAY

    def __post_init__(self):
        self._done = threading.Event()
        self._stop_sealing = threading.Event()
        self.attempts = 0

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def run_once(self, *, deliver: bool = False) -> None:
        """One attempt; raises what the store raised.  ``deliver``: also create the
        deliveries of the events logged since the dispatcher's cursor, and give every
        queued delivery's application its lane (``WebhookStore.restore_lanes``)."""
        self.attempts += 1
        self.store.ensure_indexes()
        self.keys.ensure_active()
        self.applications.finish_deletions()
        self.tailer.begin()
        if deliver:
            self.dispatcher.catch_up(self.tailer.last_seq)
            self.deliveries.store.restore_lanes()
        self._done.set()

    def follow(self, *, deliver: bool = False) -> None:
        """After ``run_once``: start the tailer, and with ``deliver`` the dispatcher (a
        consumer of the tailer), the delivery threads and the audit sealer (one sealer
        at a time across the workers: it holds a lease)."""
        if deliver:
            self.tailer.subscribe_batches(self.dispatcher.on_events)
            self.deliveries.start()
            threading.Thread(target=self.sealer.run, args=(self._stop_sealing,), name="iamgate-audit-sealer",
                             daemon=True).start()
        self.tailer.start()

    def run(self, *, deliver: bool = False) -> None:
        """``run_once`` until the store answers, then ``follow``."""
        with_backoff(lambda: self.run_once(deliver=deliver), sleep=self.sleep, first_delay=self.first_delay,
                     max_delay=self.max_delay)
        self.follow(deliver=deliver)

    def start(self, *, deliver: bool = False) -> None:
        """``run`` on a background thread (a greenlet under gevent)."""
        threading.Thread(target=self.run, kwargs={"deliver": deliver}, name="iamgate-startup", daemon=True).start()

