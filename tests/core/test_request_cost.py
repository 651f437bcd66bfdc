"""What every request does, made cheaper without changing what it gives
(benchmarks/NOTES.md, "Control-plane request cost"): the JSON log line, the generated
request id and the id check each equal the straightforward version they replace."""
from __future__ import annotations

import json
import logging
import os
import random
import uuid
from datetime import UTC, datetime

import pytest

from shared.ids import is_uuid
from shared.logs import JsonFormatter, encode, timestamp
from shared.request_ids import new_request_id
from shared.timeutil import isoformat


def reference_line(record: logging.LogRecord) -> str:
    """The log line as ``JsonFormatter`` wrote it before: ``json.dumps(default=str)`` of the
    entry, its timestamp through ``datetime.fromtimestamp``."""
    standard = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
    entry = {"ts": isoformat(datetime.fromtimestamp(record.created, UTC)),
             "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
    entry.update({k: v for k, v in record.__dict__.items() if k not in standard and not k.startswith("_")})
    return json.dumps(entry, default=str)


def test_timestamps_round_as_fromtimestamp_does():
    rng = random.Random(17)
    moments = [rng.uniform(0, 4e9) for _ in range(20000)]
    moments += [round(rng.uniform(1.7e9, 1.8e9), digits) for digits in range(3, 8) for _ in range(2000)]
    moments += [0.0, 1.0, 1764158400.0, 1764158400.9995, 1764158400.9999995, 1764158400.0000005,
                1764158399.999999, -1.5, -0.0000004]
    for moment in moments:
        assert timestamp(moment) == isoformat(datetime.fromtimestamp(moment, UTC)), moment


@pytest.mark.parametrize("extra", [
    {"request_id": "0" * 32, "method": "GET", "route": "/api/v1/applications/{applicationId}/authz/check",
     "status": 200},
    {"route": None, "error": "naïve \"quoted\"\n", "count": 3.5, "ok": True, "items": [1, (2, 3)],
     "when": datetime(2026, 1, 1, tzinfo=UTC), "nan": float("nan"), "object": object()},
])
def test_a_log_line_is_what_it_was(extra):
    record = logging.getLogger("iamgate.test").makeRecord(
        "iamgate.test", logging.INFO, "(unknown file)", 0, "hello %s", ("world",), None, extra=extra)
    assert JsonFormatter().format(record) == reference_line(record)


def test_a_circular_value_is_reported_as_json_reports_it():
    loop = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        encode({"loop": loop})


def test_generated_request_ids_are_uuid4_hex():
    for _ in range(1000):
        request_id = new_request_id()
        assert len(request_id) == 32 and uuid.UUID(request_id).hex == request_id
        assert uuid.UUID(request_id).version == 4 and uuid.UUID(request_id).variant == uuid.RFC_4122
    assert len({new_request_id() for _ in range(1000)}) == 1000


# Fixed ids: parameters name the tests, and every collection (each pytest-xdist worker's)
# must name them alike.
AN_ID = "5b0f3c1e-8d2a-4c6b-9e7f-1a2b3c4d5e6f"


@pytest.mark.parametrize("value", [
    AN_ID, AN_ID.upper(), AN_ID.replace("-", ""), f"{{{AN_ID}}}", "urn:uuid:" + AN_ID, AN_ID + "\n",
    AN_ID[:-1], "", "x", None, 5, "0" * 32, "g" * 8 + AN_ID[8:],
])
def test_is_uuid_answers_as_uuid_does(value):
    try:
        uuid.UUID(str(value))
        expected = True
    except ValueError:
        expected = False
    assert is_uuid(value) is expected


def test_random_bytes_give_uuid4_hex(monkeypatch):
    """Each id is ``uuid.UUID(bytes=..., version=4).hex`` of the next 16 random bytes."""
    from shared import request_ids

    raw = os.urandom(16 * request_ids._IDS_PER_READ)
    monkeypatch.setattr(request_ids, "_ids_ahead", [])
    monkeypatch.setattr(request_ids.os, "urandom", lambda n: raw[:n])
    made = sorted(request_ids.new_request_id() for _ in range(request_ids._IDS_PER_READ))
    assert made == sorted(uuid.UUID(bytes=raw[i:i + 16], version=4).hex for i in range(0, len(raw), 16))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_makes_request_ids_of_its_own():
    new_request_id()  # ids are waiting in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, " ".join(new_request_id() for _ in range(300)).encode())
        os._exit(0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 65536):
        child += chunk
    os.close(read)
    os.waitpid(pid, 0)
    parent = {new_request_id() for _ in range(300)}
    assert len(child.split()) == 300 and not parent & set(child.decode().split())




def test_seconds_of_a_clock_are_its_timestamps():
    import time

    from shared.timeutil import seconds_of, utcnow
    from tests.conftest import FakeClock

    assert seconds_of(utcnow) is time.time and abs(time.time() - utcnow().timestamp()) < 1
    clock = FakeClock()
    seconds = seconds_of(clock)
    assert seconds() == clock().timestamp()
    clock.advance(90.5)
    assert seconds() == clock().timestamp()
