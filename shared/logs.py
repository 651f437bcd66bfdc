"""JSON-lines logging: one object per line with level, logger, message and any
``extra`` fields (request_id, route, status...).

The control plane writes one such line per request at INFO, so ``JsonFormatter`` is on
every request's path: it writes the timestamp from a per-second cache and encodes through
one encoder built once, giving the same line as ``json.dumps(entry, default=str)`` with
``isoformat(datetime.fromtimestamp(created, timezone.utc))`` as its timestamp."""
from __future__ import annotations

import json
import logging
import math
import sys
from datetime import datetime, timezone
from json import encoder as json_encoder

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_encode = json.JSONEncoder(default=str).encode
# ``json.JSONEncoder.encode``'s C encoder, made once instead of per call, without the
# circular-reference markers: a circular value falls back to ``_encode``, which reports it.
_c_encoder = (json_encoder.c_make_encoder(None, str, json_encoder.encode_basestring_ascii, None, ": ", ", ",
                                          False, False, True)
              if json_encoder.c_make_encoder is not None else None)


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
        text = datetime.fromtimestamp(whole, timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
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


def configure(level: str = "INFO") -> None:
    # No line carries the caller's file, line or function, nor the thread's or process's
    # id or name, so records skip finding them (the Python logging HOWTO,
    # "Optimization"): a request-log line per request is a few microseconds cheaper.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
