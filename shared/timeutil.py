"""Time helpers.  Timestamps are timezone-aware UTC everywhere."""
from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import overload

Clock = Callable[[], datetime]  # what services are given as ``clock``: ``utcnow``, or a test's FakeClock


def utcnow() -> datetime:
    return datetime.now(UTC)


def seconds_of(clock: Clock) -> Callable[[], float]:
    """``clock()`` as POSIX seconds: ``time.time`` for ``utcnow`` (the per-request caches
    read it several times a request; ``datetime.now(UTC).timestamp()`` costs four times
    as much), ``clock().timestamp()`` for any other clock (a test's FakeClock)."""
    if clock is utcnow:
        return time.time
    return lambda: clock().timestamp()


@overload
def aware(value: datetime) -> datetime: ...
@overload
def aware(value: None) -> None: ...
def aware(value: datetime | None) -> datetime | None:
    """MongoDB may hand back naive datetimes (always UTC); make them aware."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def isoformat(value: datetime | None) -> str | None:
    """ISO 8601 with a UTC offset and millisecond precision, or None."""
    if value is None:
        return None
    return aware(value).astimezone(UTC).isoformat(timespec="milliseconds")


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 timestamp; a value without offset is taken as UTC."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    return aware(value)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def millis(value: datetime) -> int:
    """Whole milliseconds since the epoch (what MongoDB keeps of a datetime), in integer
    arithmetic, so one datetime always gives one number."""
    return (aware(value) - _EPOCH) // timedelta(milliseconds=1)
