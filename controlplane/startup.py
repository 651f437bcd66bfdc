"""The control plane's start-up step: the work that needs the store before the process
is ready -- indexes, an active signing key, deletions a crash left half-done, and the
change-log tailer's starting position.

A MongoDB that is not reachable yet is not a reason to crash (docs/configuration.md,
"Start-up errors"): the process serves ``/healthz`` at once, ``/readyz`` answers 503,
and the step is retried with exponential backoff until the store answers.  Every part
is idempotent, so several replicas (or a retry after a half-done attempt) may run it
together.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Callable

from controlplane.store import one_line

if TYPE_CHECKING:  # annotations only: the composition root imports these modules
    from controlplane.applications.service import ApplicationService
    from controlplane.events import Tailer
    from controlplane.keys import SigningKeys
    from controlplane.store import Store

log = logging.getLogger("iamgate.startup")

FIRST_DELAY = 0.5  # seconds before the first retry; doubled after each failure
MAX_DELAY = 30.0


@dataclass(eq=False)
class StartUp:
    store: Store
    keys: SigningKeys
    applications: ApplicationService
    tailer: Tailer
    _: KW_ONLY
    sleep: Callable[[float], None] = time.sleep
    first_delay: float = FIRST_DELAY
    max_delay: float = MAX_DELAY

    def __post_init__(self):
        self._done = threading.Event()
        self.attempts = 0

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def run_once(self) -> None:
        """One attempt; raises what the store raised."""
        self.attempts += 1
        self.store.ensure_indexes()
        self.keys.ensure_active()
        self.applications.finish_deletions()
        self.tailer.begin()
        self._done.set()

    def run(self, *, start_tailer: bool) -> None:
        """Attempt until the store answers, then start the tailer (when asked)."""
        delay = self.first_delay
        while True:
            try:
                self.run_once()
                break
            except Exception as exc:  # any driver failure: MongoDB late, a network blip, a failover
                log.warning("start-up: the store does not answer yet; retrying", extra={
                    "attempt": self.attempts, "retry_in_seconds": delay, "error": one_line(exc)})
                self.sleep(delay)
                delay = min(delay * 2, self.max_delay)
        if self.attempts > 1:
            log.info("start-up: the store answers; indexes and signing keys are in place",
                     extra={"attempts": self.attempts})
        if start_tailer:
            self.tailer.start()

    def start(self) -> None:
        """``run`` on a background thread (a greenlet under gevent)."""
        threading.Thread(target=self.run, kwargs={"start_tailer": True}, name="iamgate-startup", daemon=True).start()
