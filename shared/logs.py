"""JSON-lines logging: one object per line with level, logger, message and any
``extra`` fields (request_id, route, status...).

The control plane writes one such line per request at INFO, so the line is on every
request's path:

- ``JsonFormatter`` writes the timestamp from a per-second cache and encodes through one
  encoder built once, giving the same line as ``json.dumps(entry, default=str)`` with
  ``isoformat(datetime.fromtimestamp(created, timezone.utc))`` as its timestamp;
- ``JsonLinesHandler`` writes lines below WARNING in batches, at most
  ``IAMGATE_LOG_FLUSH_INTERVAL`` milliseconds after they were logged, instead of one
  ``write`` and ``flush`` per line (docs/configuration.md, "Logging");
- ``InfoLine`` gives that handler the line of a ``logger.info`` call without building
  the ``LogRecord``, when the handler is where the record would go and nothing else
  would see it;
- ``RequestLog`` is the request line of both services, ``Sampling`` the decision
  service's rule for writing fewer of them when busy.
"""
from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
import weakref
from datetime import UTC, datetime
from json import encoder as json_encoder

from shared.config import warn_unknown_variables

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_encode = json.JSONEncoder(default=str).encode
# ``json.JSONEncoder.encode``'s C encoder, made once instead of per call, without the
# circular-reference markers: a circular value falls back to ``_encode``, which reports it.
_c_make_encoder = getattr(json_encoder, "c_make_encoder", None)  # CPython's C accelerator; not in typeshed
_c_encoder = (_c_make_encoder(None, str, json_encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)
              if _c_make_encoder is not None else None)


def encode(entry: dict) -> str:
    """``json.dumps(entry, default=str)``."""
    if _c_encoder is not None:
        try:
            return "".join(_c_encoder(entry, 0))
        except (RecursionError, ValueError):
            pass
    return _encode(entry)


_second: tuple[float, str] = (math.nan, "")  # (whole second, its "YYYY-MM-DDTHH:MM:SS")


def timestamp(created: float) -> str:
    """``shared.timeutil.isoformat(datetime.fromtimestamp(created, timezone.utc))`` (ISO 8601,
    milliseconds, ``+00:00``), rounding to the microsecond as ``fromtimestamp`` does (half
    to even), with the date and time of the second worked out once per second."""
    global _second
    fraction, whole = math.modf(created)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    elif micros < 0:  # before 1970
        whole, micros = whole - 1, micros + 1_000_000
    second, text = _second
    if second != whole:
        text = datetime.fromtimestamp(whole, UTC).replace(tzinfo=None).isoformat(timespec="seconds")
        _second = (whole, text)
    return f"{text}.{micros // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return encode(entry)


class JsonLinesHandler(logging.StreamHandler):
    """JSON lines on ``stream``, written in batches.

    A record below WARNING is formatted at once and kept in memory (an ``InfoLine``
    entry is kept as it is and formatted when written); a flusher thread (a greenlet
    under gevent's monkey-patching) writes what waits every ``flush_interval`` seconds,
    in one ``write``. A WARNING or worse is written at once, after every line
    logged before it, and so is the batch when ``MAX_PENDING`` lines wait. ``flush()``
    (``logging.shutdown`` at exit, a gunicorn worker's included) writes what waits.
    ``flush_interval`` 0 writes every line at once.

    The price: a process killed with SIGKILL loses at most its last ``flush_interval`` of
    INFO and DEBUG lines, and those lines can reach the stream up to that long after
    lines of another handler (gunicorn's own) logged later. Envoy's access log makes the
    same trade, with a 1 s default (``file_flush_interval_msec``)."""

    MAX_PENDING = 256

    def __init__(self, stream=None, *, flush_interval: float = 0.1):
        super().__init__(stream)
        self.setFormatter(JsonFormatter())
        self.flush_interval = flush_interval
        # Lines, and ``InfoLine`` entries to format when written. Appended to without the
        # handler's lock (``write_later``): ``list.append`` and the prefix
        # ``del`` in ``flush`` are each one step under the GIL, so no line is lost or
        # written twice; the lock keeps two flushes apart.
        self._pending: list = []
        self._flusher: threading.Thread | None = None
        _HANDLERS.add(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._pending.append(line)
        if record.levelno >= logging.WARNING:
            self.flush()
        else:
            self._wait_or_write()

    def write_later(self, entry: tuple) -> None:
        """Log ``InfoLine``'s ``(info_line, created, fields)``, formatted when written: in
        the flush, the lines of a batch are made one after the other, which costs a
        fraction of making each on its own request's path."""
        self._pending.append(entry)
        self._wait_or_write()

    def _wait_or_write(self) -> None:
        if self._flusher is None or len(self._pending) >= self.MAX_PENDING:
            if self.flush_interval <= 0 or len(self._pending) >= self.MAX_PENDING:
                self.flush()
            else:
                self._start_flusher()

    def flush(self) -> None:
        self.acquire()
        try:
            pending = self._pending
            count = len(pending)
            stream = self.stream
            if count and stream is not None:
                lines = pending[:count]
                del pending[:count]
                for i, line in enumerate(lines):
                    if type(line) is tuple:
                        lines[i] = line[0].line(line[1], line[2])
                stream.write("\n".join(lines) + "\n")
            if stream is not None and hasattr(stream, "flush"):
                stream.flush()
        except (OSError, ValueError):  # a closed or broken stream (at exit): the lines are lost
            pass
        finally:
            self.release()

    def setStream(self, stream):
        self.flush()  # what waits belongs to the stream it was logged for
        return super().setStream(stream)

    def _start_flusher(self) -> None:
        self.acquire()
        try:
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_every, args=(weakref.ref(self),),
                                                 name="iamgate-log-flush", daemon=True)
                self._flusher.start()
        finally:
            self.release()

    @staticmethod
    def _flush_every(handler_ref) -> None:
        # A weak reference: a handler that was replaced (tests configure again) ends its thread.
        handler = handler_ref()
        while handler is not None and handler._flusher is threading.current_thread():
            interval = handler.flush_interval
            del handler
            time.sleep(interval)
            handler = handler_ref()
            if handler is not None and handler._pending:
                handler.flush()

    def _after_fork_in_child(self) -> None:
        # The lines waiting at the fork are the parent's to write; the thread is the parent's.
        del self._pending[:]
        self._flusher = None


_HANDLERS: weakref.WeakSet[JsonLinesHandler] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for handler in list(_HANDLERS):
        handler._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class InfoLine:
    """``InfoLine(logger, message)(fields)`` logs what ``logger.info(message,
    extra=fields)`` logs. When that record would reach exactly one handler, a
    ``JsonLinesHandler`` at INFO or below with no filters, from a logger without filters,
    the entry is handed to it (``write_later``) without the ``LogRecord`` and the
    handler's lock, and made into the same line (``tests/shared/test_logs.py``) when the
    handler writes its batch. ``fields`` is read then, up to ``flush_interval`` later:
    give values that do not change (the request log gives strings, integers and floats).
    Fields whose values are all strings, integers, finite floats or None are written by
    hand; any other value goes through ``encode``. Anything else (another or a second handler, such as pytest's
    ``caplog``; a filter; a level that drops INFO) goes through ``logger.info``."""

    __slots__ = ("_logger", "_message", "_head", "_opening", "_middle")

    def __init__(self, logger: logging.Logger, message: str):
        self._logger = logger
        self._message = message
        self._head = {"level": "info", "logger": logger.name, "message": message}
        # '{"ts": "' + timestamp + '", "level": "info", "logger": ..., "message": ...' + fields + '}'
        self._opening = '{"ts": "'
        self._middle = '", ' + encode(self._head)[1:-1]

    def __call__(self, fields: dict) -> None:
        logger = self._logger
        if not logger.isEnabledFor(logging.INFO):
            return
        handler = _only_handler(logger)
        if handler is None:
            logger.info(self._message, extra=fields)
        else:
            handler.write_later((self, time.time(), fields))

    def line(self, created: float, fields: dict) -> str:
        """The line of ``fields`` logged at ``created`` (``time.time()``): what
        ``JsonFormatter`` makes of ``logger.info``'s record."""
        parts = [self._opening, timestamp(created), self._middle]
        for key, value in fields.items():
            kind = type(value)
            if kind is str:
                text = _escape(value)
            elif kind is int:
                text = int.__repr__(value)
            elif kind is float and _FINITE(value):
                text = float.__repr__(value)  # json's own spelling of a finite float
            elif value is None:
                text = "null"
            else:
                break
            parts += (", ", _escape(key), ": ", text)
        else:
            parts.append("}")
            return "".join(parts)
        entry = {"ts": timestamp(created)}
        entry.update(self._head)
        entry.update(fields)
        try:
            return encode(entry)
        except Exception as exc:  # a circular value, a failing __str__: say so rather than lose the line
            return encode({"ts": entry["ts"], **self._head, "log_error": repr(exc)})


class Sampling:
    """Which request lines a busy process writes: every request while no more than
    ``rate`` were answered in the current second (of ``monotonic``), beyond that one in
    ``every`` (none with 0); a server error (5xx) or a request that took ``slow`` seconds
    or more, always. The counts are plain integers: two threads may both take the same
    place in a second, never a line that was not to be written."""

    __slots__ = ("_rate", "_every", "_slow", "_monotonic", "_second", "_count")

    def __init__(self, rate: int, every: int, *, slow: float = 0.1, monotonic=time.monotonic):
        self._rate, self._every, self._slow, self._monotonic = rate, every, slow, monotonic
        self._second, self._count = -1, 0

    def keep(self, status: int, duration: float) -> bool:
        if status >= 500 or duration >= self._slow:
            return True
        second = int(self._monotonic())
        if second != self._second:
            self._second, self._count = second, 0
        self._count = count = self._count + 1
        return count <= self._rate or (self._every > 0 and (count - self._rate) % self._every == 0)


class RequestLog:
    """The request line both services write (INFO ``"request"``, through ``InfoLine``):
    ``request_id``, ``method``, ``route`` (the route's template), ``status``,
    ``duration_ms`` (to the microsecond), ``client_ip`` (``shared.http.client_address``:
    X-Forwarded-For believed from ``trusted_proxies`` only) and ``application_id`` (the
    route's ``{applicationId}``, None without one). With ``sampling``, only the requests
    it keeps are logged. The Falcon middleware (``shared.http.RequestLogMiddleware``) and
    the hot paths call it alike, so a request's line does not depend on which answered it."""

    def __init__(self, logger: logging.Logger, trusted_proxies=(), sampling: Sampling | None = None):
        from shared.http import client_address

        self._line = InfoLine(logger, "request")
        self._trusted = trusted_proxies
        self._sampling = sampling
        self._client_address = client_address

    def __call__(self, request_id: str, method: str, route: str | None, status: int, started: float,
                 remote: str, forwarded_for: str | None, application_id: str | None) -> None:
        """Log one request begun at ``started`` (``time.perf_counter()``)."""
        duration = time.perf_counter() - started
        if self._sampling is not None and not self._sampling.keep(status, duration):
            return
        self._line({"request_id": request_id, "method": method, "route": route, "status": status,
                    "duration_ms": round(duration * 1000, 3),
                    "client_ip": self._client_address(remote, forwarded_for, self._trusted),
                    "application_id": application_id})


_escape = json_encoder.encode_basestring_ascii  # json.dumps's own string encoder (C when available)
_FINITE = math.isfinite


def _only_handler(logger: logging.Logger) -> JsonLinesHandler | None:
    """The one handler an INFO record of ``logger`` would reach and that would write it
    unchanged, if that is a ``JsonLinesHandler``; else None."""
    if logger.filters:
        return None
    found = None
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if found is not None or type(handler) is not JsonLinesHandler or handler.filters \
                    or handler.level > logging.INFO:
                return None
            found = handler
        if not current.propagate:
            break
        current = current.parent
    return found


def configure_from(config) -> None:
    """``configure`` with a ``shared.config.Config``'s log level and flush interval (the
    services' entry points and commands, once per process), then the configuration's
    warnings that need the log: the ``IAMGATE_`` variables it does not know."""
    configure(config.log_level, flush_interval=config.log_flush_interval / 1000)
    warn_unknown_variables(config, logging.getLogger("iamgate.config"))


def configure(level: str = "INFO", *, flush_interval: float = 0.1) -> None:
    # No line carries the caller's file, line or function, nor the thread's or process's
    # id or name, so records skip finding them (the Python logging HOWTO,
    # "Optimization"): a request-log line per request is a few microseconds cheaper.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = JsonLinesHandler(sys.stderr, flush_interval=flush_interval)
    root = logging.getLogger()
    for old in root.handlers:
        old.flush()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
