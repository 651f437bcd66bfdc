"""Decision logs: one JSON line per logged check (docs/decision-service.md, "Decision
logs").

Opt-in, per check (a GET check, a POST check and a bulk check are one each): a check is
logged when the sample of ``IAMGATE_DECISION_LOG_SAMPLE`` (0 to 1, the share of checks)
takes it, and a check answering a denial always when ``IAMGATE_DECISION_LOG_DENIALS`` is
true. A bulk check is one line, its permissions' results in one object. With both off the
service holds no ``DecisionLog`` and a check pays one ``is None`` test.

Logging never holds up a check: the check puts a tuple on a bounded queue, or, when the
queue is full (stdout blocked or too slow), drops it and counts the drop
(``iamgate_decision_log_lines_dropped_total``). A native thread (an OS thread even under
gevent's monkey patching, so a blocking write stalls it alone, not the worker's event
loop) makes the lines and writes them to stdout, in the format of every other log line
(``shared.logs``), logger ``iamgate.decisions``: the service's own logs go to stderr,
so a log shipper can send decisions elsewhere by stream.
"""
from __future__ import annotations

import atexit
import logging
import math
import os
import random
import sys
import time
import weakref
from collections import deque
from json import encoder as json_encoder

from shared.logs import timestamp

_escape = json_encoder.encode_basestring_ascii  # json.dumps's own string encoder

QUEUE_SIZE = 10_000  # decisions waiting for the writer: a few seconds of a busy sidecar's
IDLE_SECONDS = 0.05  # the writer's pause when nothing waits
BATCH = 512  # lines per write
_NEVER = sys.maxsize  # the gap to the next decision sampled at 0: centuries of checks


class DecisionLog:
    """The checks to log, queued for the writer thread (started with the first one).

    Which checks the sample takes: each with probability ``sample``, independently, drawn
    as the gap to the next one taken (geometric): a check pays one integer subtraction
    (``take``), not a random draw."""

    def __init__(self, sample: float, denials: bool, dropped, *, stream=None, queue_size: int = QUEUE_SIZE,
                 draw=random.random, clock=time.time):
        self.sample = sample
        self.denials = denials
        self._dropped = dropped  # a shared.hotmetrics.HotCounter
        self.stream = stream  # None: sys.stdout, as it is when written
        self._queue_size = queue_size
        self._draw = draw
        self._clock = clock
        self._queue: deque = deque()  # append and popleft are each one step under the GIL
        self._writing = False  # this process's writer thread is started
        self._log_unsampled = math.log(1.0 - sample) if 0.0 < sample < 1.0 else 0.0
        self._until_next = self._gap()  # checks until the next one sampled, that one included
        _LOGS.add(self)

    def _gap(self) -> int:
        if self.sample <= 0.0:
            return _NEVER
        if self.sample >= 1.0:
            return 1
        return 1 + int(math.log(1.0 - self._draw()) / self._log_unsampled)

    def take(self) -> bool:
        """Whether the sample takes the next check. Two threads may both take one gap: a
        sample's share, not a line that should not be written."""
        until_next = self._until_next - 1
        if until_next > 0:
            self._until_next = until_next
            return False
        self._until_next = self._gap()
        return True

    def put(self, lookup, user_id: str, permission, allowed: bool, cached: bool, policies_checked: int,
            latency: float, sampled: bool) -> None:
        """Queue one check's line, or drop and count it when the queue is full. ``permission``:
        a GET or POST check's permission (a str), or a bulk check's ``(permission, allowed)``
        pairs, in its order (``allowed``: all of them are)."""
        if len(self._queue) >= self._queue_size:
            self._dropped.inc()
            return
        self._queue.append((self._clock(), lookup.request_id, lookup.app_id, user_id, permission, allowed, cached,
                            policies_checked, latency, sampled))
        if not self._writing:  # the first line of this process (a forked worker included)
            self._start_writer()

    def _start_writer(self) -> None:
        from gevent.monkey import get_original

        if self._writing:
            return
        self._writing = True
        get_original("_thread", "start_new_thread")(self._write_forever, ())
        atexit.register(self.write_waiting)

    def _after_fork_in_child(self) -> None:
        # The lines waiting at the fork are the parent's to write; the thread is the parent's.
        self._queue.clear()
        self._writing = False

    def _write_forever(self) -> None:
        from gevent.monkey import get_original

        sleep = get_original("time", "sleep")
        while True:
            try:
                self.write_waiting()
            except Exception:  # a line that cannot be made: the others still go out
                logging.getLogger("iamgate.decision").exception("decision log: a line could not be written")
            # Even after a write: the lines of the next IDLE_SECONDS go out together, not one
            # write (and one turn of the GIL taken from the checks) for every few lines.
            sleep(IDLE_SECONDS)

    def write_waiting(self) -> int:
        """Write the lines that wait, in batches; how many were written."""
        queue, written, render = self._queue, 0, self._render
        stream = self.stream or sys.stdout
        while queue:
            lines: list[str] = []
            while queue and len(lines) < BATCH:
                lines.append(render(queue.popleft()))
            lines.append("")  # the last line's end
            try:
                stream.write("\n".join(lines))
                stream.flush()
            except (OSError, ValueError):  # a closed or broken stdout: the lines are lost
                return written
            written += len(lines) - 1
        return written

    @staticmethod
    def _render(entry: tuple) -> str:
        created, request_id, app_id, user_id, permission, allowed, cached, policies_checked, latency, sampled = entry
        if type(permission) is str:
            line, checked = _LINE, _escape(permission)
        else:  # a bulk check
            results = ", ".join([f"{_escape(name)}: {_RESULT[answer]}" for name, answer in permission])
            line, checked = _BULK_LINE, "{" + results + "}"
        return line % (timestamp(created), "null" if request_id is None else _escape(request_id), _escape(app_id),
                       _escape(user_id), checked, "allow" if allowed else "deny", _BOOLEAN[cached],
                       policies_checked, milliseconds(latency), _BOOLEAN[sampled])


def milliseconds(seconds: float) -> str:
    """``repr(round(seconds * 1000, 3))`` for a latency (0 to 10^12 ms, where repr writes no
    exponent), from the same correctly rounded digits ('%.3f' rounds the product as
    ``round`` does) without ``round``'s trip back to a float and ``repr``'s second
    conversion, which made it the dearest field of a line."""
    text = ("%.3f" % (seconds * 1000)).rstrip("0")
    return text + "0" if text[-1] == "." else text


# The line shared.logs.JsonFormatter writes for ``logging.getLogger("iamgate.decisions")
# .info("decision", extra=fields)``, made from a template: the writer makes thousands a
# second on a busy sidecar, beside its checks. A bulk check's line has ``permissions`` (an
# object: each permission's result) where a check of one permission has ``permission``.
_LINE = ('{"ts": "%s", "level": "info", "logger": "iamgate.decisions", "message": "decision", "request_id": %s, '
         '"application_id": %s, "user_id": %s, "permission": %s, "result": "%s", "cached": %s, '
         '"policies_checked": %d, "latency_ms": %s, "sampled": %s}')
_BULK_LINE = _LINE.replace('"permission": %s', '"permissions": %s')
_BOOLEAN = {True: "true", False: "false"}
_RESULT = {True: '"allow"', False: '"deny"'}
_LOGS: weakref.WeakSet[DecisionLog] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for log in list(_LOGS):
        log._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
