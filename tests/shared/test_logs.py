"""The services' log handler (shared/logs.py): JSON lines written in batches, a WARNING at
once after everything before it, nothing lost at a flush or at exit, nothing written
twice; and ``InfoLine``, which writes the line ``logger.info`` would write, or calls it."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta

import pytest

from shared.config import Config
from shared.logs import InfoLine, JsonLinesHandler, _only_handler, configure, configure_from
from tests.decision.conftest import wait_for

FIELDS = {"request_id": "0" * 32, "method": "GET", "route": "/api/v1/applications/{applicationId}/authz/check",
          "status": 200}


class Writes(io.StringIO):
    """A stream that remembers each ``write``."""

    def __init__(self):
        super().__init__()
        self.writes: list[str] = []

    def write(self, text):
        self.writes.append(text)
        return super().write(text)


@pytest.fixture
def logger():
    """A logger outside the hierarchy: its records reach its own handlers only (pytest
    attaches its capture to the root and to every registered non-propagating logger)."""
    logger = logging.Logger("iamgate.test.logs", logging.DEBUG)
    yield logger
    for handler in logger.handlers:
        handler.close()
    logger.handlers.clear()


def attach(logger, flush_interval: float) -> tuple[JsonLinesHandler, Writes]:
    stream = Writes()
    handler = JsonLinesHandler(stream, flush_interval=flush_interval)
    logger.addHandler(handler)
    return handler, stream


def lines(stream: Writes) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_info_lines_wait_and_are_written_together_within_the_interval(logger):
    handler, stream = attach(logger, flush_interval=0.05)
    for i in range(5):
        logger.info("line %d", i)
    assert stream.writes == []
    assert wait_for(lambda: len(lines(stream)) == 5, timeout=5)
    assert [entry["message"] for entry in lines(stream)] == [f"line {i}" for i in range(5)]
    assert len(stream.writes) == 1


def test_a_warning_is_written_at_once_after_every_line_before_it(logger):
    handler, stream = attach(logger, flush_interval=60)
    logger.info("first")
    logger.debug("second")
    logger.warning("third")
    assert [(e["level"], e["message"]) for e in lines(stream)] == [
        ("info", "first"), ("debug", "second"), ("warning", "third")]


def test_an_interval_of_zero_writes_every_line_at_once(logger):
    handler, stream = attach(logger, flush_interval=0)
    logger.info("now")
    assert [e["message"] for e in lines(stream)] == ["now"]
    assert handler._flusher is None


def test_a_full_batch_is_written_without_waiting(logger):
    handler, stream = attach(logger, flush_interval=60)
    for _ in range(JsonLinesHandler.MAX_PENDING):
        logger.info("line")
    assert len(lines(stream)) == JsonLinesHandler.MAX_PENDING and handler._pending == []


def test_flush_writes_what_waits_once(logger):
    handler, stream = attach(logger, flush_interval=60)
    logger.info("one")
    handler.flush()
    handler.flush()
    assert [e["message"] for e in lines(stream)] == ["one"]


def test_threads_logging_at_once_lose_and_repeat_nothing(logger):
    handler, stream = attach(logger, flush_interval=0.001)
    line = InfoLine(logger, "request")

    def log(n):
        for i in range(2000):
            line({"n": n, "i": i})

    threads = [threading.Thread(target=log, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handler.flush()
    seen = [(e["n"], e["i"]) for e in lines(stream)]
    assert sorted(seen) == [(n, i) for n in range(4) for i in range(2000)]
    for n in range(4):  # each thread's lines in its order
        assert [i for m, i in seen if m == n] == list(range(2000))


def test_a_process_writes_what_waits_when_it_exits(tmp_path):
    script = ("import logging\nfrom shared.logs import configure, InfoLine\nconfigure('INFO', flush_interval=60)\n"
              "log = logging.getLogger('iamgate.exit')\nlog.info('plain')\n"
              "InfoLine(log, 'request')({'status': 200})\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["message"] for line in result.stderr.splitlines()] == ["plain", "request"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_does_not_write_its_parents_lines_again(logger):
    handler, stream = attach(logger, flush_interval=60)
    logger.info("before the fork")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what waits in its copy, and whether its flusher is its own
        os.write(write, json.dumps([len(handler._pending), handler._flusher is None]).encode())
        os._exit(0)
    os.close(write)
    child = json.loads(os.read(read, 100))
    os.close(read)
    os.waitpid(pid, 0)
    assert child == [0, True]
    assert len(handler._pending) == 1


@pytest.mark.parametrize("fields", [
    FIELDS,
    {"request_id": "naïve \"quoted\"\n\u2028", "route": None, "status": -7, "big": 10 ** 30, "empty": ""},
    {"flag": True, "ratio": 0.5, "nan": float("nan"), "items": [1, "x"], "nested": {"a": None}},
    {"duration_ms": 0.213, "tiny": -1.5e-07, "huge": 1e300, "whole": 3.0, "status": 200},
    {"duration_ms": float("inf"), "status": 200},
    {"when": datetime(2026, 1, 1), "object": object(), "status": 200},
    {},
])
def test_info_line_writes_the_line_logger_info_writes(logger, fields):
    handler, stream = attach(logger, flush_interval=0)
    assert _only_handler(logger) is handler
    InfoLine(logger, "request")(fields)
    logger.info("request", extra=fields)
    fast_text, slow_text = stream.getvalue().splitlines()
    fast, slow = json.loads(fast_text), json.loads(slow_text)
    apart = datetime.fromisoformat(slow.pop("ts")) - datetime.fromisoformat(fast.pop("ts"))
    assert timedelta(0) <= apart < timedelta(seconds=1)
    assert fast_text[fast_text.index('"level"'):] == slow_text[slow_text.index('"level"'):]
    assert fast_text[:8] == slow_text[:8] == '{"ts": "' and len(fast_text) == len(slow_text)


@pytest.mark.parametrize("change", ["second handler", "other handler", "handler filter", "logger filter",
                                    "handler level", "logger level", "disabled"])
def test_info_line_leaves_any_other_arrangement_to_logging(logger, change):
    handler, stream = attach(logger, flush_interval=0)
    seen = []
    if change == "second handler":
        logger.addHandler(CollectingHandler(seen))
    elif change == "other handler":
        logger.removeHandler(handler)
        logger.addHandler(CollectingHandler(seen))
    elif change == "handler filter":
        handler.addFilter(lambda record: seen.append(record) or False)
    elif change == "logger filter":
        logger.addFilter(lambda record: seen.append(record) or False)
    elif change == "handler level":
        handler.setLevel(logging.WARNING)
    elif change == "logger level":
        logger.setLevel(logging.WARNING)
    elif change == "disabled":
        logger.disabled = True
    assert _only_handler(logger) is None or change in ("logger level", "disabled")
    InfoLine(logger, "request")(FIELDS)
    if change in ("handler filter", "logger filter"):
        assert len(seen) == 1 and stream.getvalue() == ""
    elif change in ("second handler", "other handler"):
        assert [record.getMessage() for record in seen] == ["request"] and seen[0].status == 200
        assert len(lines(stream)) == (1 if change == "second handler" else 0)
    else:
        assert stream.getvalue() == "" and seen == []


def test_info_line_follows_propagation_to_the_root_handler(monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    stream = Writes()
    handler = JsonLinesHandler(stream, flush_interval=0)
    root.addHandler(handler)
    child = logging.getLogger("iamgate.test.propagates")
    monkeypatch.setattr(child, "level", logging.INFO)
    assert _only_handler(child) is handler
    InfoLine(child, "request")(FIELDS)
    assert lines(stream)[0]["logger"] == "iamgate.test.propagates"


def test_configure_writes_what_the_handler_it_replaces_kept(monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    stream = Writes()
    old = JsonLinesHandler(stream, flush_interval=60)
    root.handlers[:] = [old]
    root.setLevel(logging.INFO)
    logging.getLogger("iamgate.test.replaced").info("kept")
    configure("INFO")
    assert [e["message"] for e in lines(stream)] == ["kept"]


@pytest.mark.parametrize("env, interval", [({}, 0.1), ({"IAMGATE_LOG_FLUSH_INTERVAL": "0"}, 0.0),
                                           ({"IAMGATE_LOG_FLUSH_INTERVAL": "250"}, 0.25)])
def test_the_services_configure_from_their_settings(monkeypatch, env, interval):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    configure_from(Config.from_env(env={"IAMGATE_LOG_LEVEL": "warning", **env}))
    (handler,) = root.handlers
    assert type(handler) is JsonLinesHandler and handler.flush_interval == interval
    assert root.level == logging.WARNING


class CollectingHandler(logging.Handler):
    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def emit(self, record):
        self.seen.append(record)


def test_a_value_json_cannot_write_is_reported_in_the_line_and_nothing_is_lost(logger):
    handler, stream = attach(logger, flush_interval=60)
    loop = []
    loop.append(loop)
    line = InfoLine(logger, "request")
    line({"status": 200, "loop": loop})
    line({"status": 201})
    handler.flush()
    first, second = lines(stream)
    assert first["message"] == "request" and "Circular reference" in first["log_error"]
    assert second["status"] == 201
