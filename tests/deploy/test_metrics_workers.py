"""``/metrics`` answers for every worker of a service, with the real
processes: gunicorn's master and 2 workers of each service, prometheus_client's
multiprocess files in ``IAMGATE_METRICS_DIR`` (shared/serving.py ``MetricsDirectory``).

Whichever worker answers a scrape, the request counters are the sum over both workers,
one series per label set (no ``pid`` label); a worker killed and replaced keeps its
counts in the sum; files left by an earlier run are removed at start.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.parser import text_string_to_metric_families

from decision.metrics import FLUSH_SECONDS
from shared.process_metrics import version
from tests.deploy.late_store import GATE_VARIABLE
from tests.e2e.processes import Admin, Processes, free_port, stop_process, wait_until

ROOT = Path(__file__).resolve().parents[2]
STALE_PID = 999999
HEALTHZ = (("method", "GET"), ("route", "/healthz"), ("status", "200"))


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IAMGATE_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update({"IAMGATE_SECRET_KEY": "metrics-secret-key-0123456789abcdef", "IAMGATE_BCRYPT_ROUNDS": "4",
                "IAMGATE_LOG_LEVEL": "WARNING"})
    env.update({k: str(v) for k, v in settings.items()})
    return env


def _spawn(command, env, log_path) -> subprocess.Popen:
    log = open(log_path, "w")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, process_group=0)


def workers(master: subprocess.Popen) -> set[int]:
    """The pids of gunicorn's workers: the master's children."""
    try:
        return {int(pid) for pid in Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()}
    except FileNotFoundError:
        return set()


def scrape(url: str, **headers) -> dict:
    """The samples of one scrape, {(name, labels): value}, checking the exposition has one
    series per name and label set and no ``pid`` label or ``_created`` series."""
    response = requests.get(url + "/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert "_created" not in response.text
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, key  # one series, not one per worker
            assert "pid" not in sample.labels, key
            samples[key] = sample.value
    return samples


def count(samples: dict, name: str, labels=()) -> float:
    return samples.get((name, tuple(sorted(labels))), 0.0)


def per_worker(directory: Path, sample_name: str, labels) -> dict[int, float]:
    """What each worker's own file holds for one counter series."""
    values = {}
    for path in directory.glob("counter_*.db"):
        pid = int(path.stem.split("_")[1])
        for key, value, _, _ in MmapedDict.read_all_values_from_file(str(path)):
            _, name, key_labels, _ = json.loads(key)
            if name == sample_name and tuple(sorted(key_labels.items())) == tuple(sorted(labels)):
                values[pid] = value
    return values


def stale_counter(directory: Path, metric: str, labels, value: float) -> Path:
    """A counter file of a worker of an earlier run, as prometheus_client writes it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"counter_{STALE_PID}.db"
    names, label_values = zip(*labels, strict=True)
    stale = MmapedDict(str(path))
    stale.write_value(mmap_key(metric, f"{metric}_total", list(names), list(label_values), "stale"), value, 0.0)
    stale.close()
    return path


def _status(url):
    try:
        return requests.get(url, timeout=5).status_code
    except requests.RequestException:
        return None


def get_many(url: str, n: int) -> None:
    for _ in range(n):  # a new connection each: either worker may accept it
        assert requests.get(url, timeout=10, headers={"Connection": "close"}).status_code == 200


def spread(url: str, directory: Path, sample_name: str, labels, pids: set[int], batch: int = 20) -> int:
    """GET ``url`` in batches until each of ``pids`` has answered some; returns how many were sent."""
    sent = 0
    while sent < 1000:
        get_many(url, batch)
        sent += batch
        if wait_until(lambda: set(per_worker(directory, sample_name, labels)) >= pids, 2 * FLUSH_SECONDS + 1):
            return sent
    pytest.fail(f"the requests did not reach every worker: {per_worker(directory, sample_name, labels)}")


def booted(master: subprocess.Popen, files: Path, first_file: str) -> set[int] | None:
    """Both workers' pids once each has built its app (which writes ``<first_file>_<pid>.db``):
    a signal sent before a worker installs its handlers would be lost."""
    pids = workers(master)
    if len(pids) == 2 and all((files / f"{first_file}_{pid}.db").exists() for pid in pids):
        return pids
    return None


def replace_a_worker(master: subprocess.Popen, victim: int, files: Path, first_file: str,
                     sig=signal.SIGKILL) -> set[int]:
    """Signal one worker and wait until gunicorn has booted its replacement."""
    os.kill(victim, sig)
    after = wait_until(lambda: (lambda pids: pids if pids and victim not in pids else None)(
        booted(master, files, first_file)), 60)
    assert after, (victim, workers(master))
    return after


def test_the_control_planes_metrics_sum_both_workers_and_survive_a_worker_restart(tmp_path):
    metrics_dir = tmp_path / "metrics"
    files = metrics_dir / "controlplane"  # IAMGATE_METRICS_DIR/<service>
    stale = stale_counter(files, "iamgate_http_requests", HEALTHZ, 1000)
    (tmp_path / "mongodb-is-up").touch()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The production config module with a MongoDB URI, so 2 workers (memory:// runs one);
    # the store is tests/deploy/late_store.py's, up from the start (no MongoDB needed).
    master = _spawn([sys.executable, "-m", "gunicorn", "-c", "python:controlplane.gunicorn_conf",
                     "tests.deploy.late_store:create()"],
                    _env(IAMGATE_PORT=port, IAMGATE_WORKERS=2, IAMGATE_MONGODB_URI="mongodb://late.invalid/iamgate",
                         IAMGATE_METRICS_DIR=metrics_dir, **{GATE_VARIABLE: tmp_path / "mongodb-is-up"}),
                    tmp_path / "control.log")
    try:
        # Each worker opens its counter file when its app is built (unlabelled counters).
        pids = wait_until(lambda: booted(master, files, "counter"), 60)
        assert pids, (tmp_path / "control.log").read_text()
        assert not stale.exists()  # emptied at start

        sent = spread(url + "/healthz", files, "iamgate_http_requests_total", HEALTHZ, pids)
        for scrapes in range(4):  # whichever worker answers: the sum of both
            samples = scrape(url)
            assert count(samples, "iamgate_http_requests_total", HEALTHZ) == sent
            assert count(samples, "iamgate_http_requests_total",
                         (("method", "GET"), ("route", "/metrics"), ("status", "200"))) == scrapes
            assert count(samples, "iamgate_http_request_duration_seconds_count",
                         (("method", "GET"), ("route", "/healthz"))) == sent
            assert count(samples, "iamgate_change_streams_open") == 0  # livesum: one series
            # The store's figure, read in the background: its staleness at once, its value once read.
            assert ("iamgate_webhook_queue_depth_staleness_seconds", ()) in samples
            # Each worker's process figures, merged: one series each (issue 31, item 10).
            assert count(samples, "iamgate_build_info", (("service", "controlplane"), ("version", version()))) == 1
            assert count(samples, "process_resident_memory_bytes") > 0  # livesum over the workers
            assert ("process_cpu_seconds_total", ()) in samples
            assert [value for (name, _), value in samples.items() if name == "python_info"] == [1]
        by_worker = per_worker(files, "iamgate_http_requests_total", HEALTHZ)
        assert sum(by_worker.values()) == sent and all(by_worker.values())
        waits = []  # scrapes until the queue depth was read (in the background) by the worker answering
        assert wait_until(lambda: waits.append(1) or ("iamgate_webhook_queue_depth", ()) in scrape(url), 10)

        # A worker dies (SIGKILL: no goodbye) and gunicorn starts another: its counts stay.
        victim = max(by_worker, key=by_worker.get)
        replace_a_worker(master, victim, files, "counter")
        get_many(url + "/healthz", 10)
        samples = scrape(url)
        assert count(samples, "iamgate_http_requests_total", HEALTHZ) == sent + 10
        assert count(samples, "iamgate_http_requests_total",
                     (("method", "GET"), ("route", "/metrics"), ("status", "200"))) == 4 + len(waits)
    finally:
        stop_process(master)
    log = (tmp_path / "control.log").read_text()
    assert "Traceback" not in log, log


def test_one_control_plane_worker_keeps_its_own_registry(tmp_path):
    """memory:// runs one worker: no files, nothing to merge, the same exposition."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    master = _spawn([sys.executable, "-m", "gunicorn", "-c", "python:controlplane.gunicorn_conf",
                     "controlplane.wsgi:create()"],
                    _env(IAMGATE_PORT=port, IAMGATE_WORKERS=2, IAMGATE_METRICS_DIR=tmp_path / "metrics",
                         PROMETHEUS_MULTIPROC_DIR=tmp_path / "inherited"),
                    tmp_path / "control.log")
    try:
        assert wait_until(lambda: _status(url + "/healthz") == 200, 60), (tmp_path / "control.log").read_text()
        get_many(url + "/healthz", 5)
        samples = scrape(url)
        assert count(samples, "iamgate_http_requests_total", HEALTHZ) >= 5
        assert not (tmp_path / "metrics").exists() and not (tmp_path / "inherited").exists()
    finally:
        stop_process(master)


def test_an_unusable_metrics_dir_stops_the_master_with_exit_2(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "python:decision.gunicorn_conf", "decision.wsgi:create()"],
        env=_env(IAMGATE_DECISION_PORT=free_port(), IAMGATE_DECISION_WORKERS=2, IAMGATE_INTERNAL_TOKEN="t" * 32,
                 IAMGATE_METRICS_DIR=tmp_path / "file"),
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert "configuration error: IAMGATE_METRICS_DIR" in result.stderr.strip().splitlines()[-1]


class FakeArbiter:
    def __init__(self, num_workers):
        self.num_workers = num_workers


@pytest.fixture
def environ(monkeypatch):
    """The process environment, restored afterwards (MetricsDirectory writes it)."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # records its absence, restored afterwards
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    return os.environ


def test_the_directory_is_per_service_and_emptied_of_metric_files_only(tmp_path, environ):
    from shared.serving import MetricsDirectory

    files = tmp_path / "decision"
    files.mkdir()
    (files / "counter_1.db").write_bytes(b"x")
    (files / "gauge_livesum_1.db").write_bytes(b"x")
    (files / "README").write_text("not ours")
    directory = MetricsDirectory("decision", str(tmp_path))
    directory.start(FakeArbiter(2))
    assert environ["PROMETHEUS_MULTIPROC_DIR"] == str(files)
    assert sorted(p.name for p in files.iterdir()) == ["README"]
    for name in ("counter_7.db", "gauge_livesum_7.db", "gauge_livemin_7.db", "gauge_all_7.db"):
        (files / name).write_bytes(b"")
    directory.worker_exited(7)  # counters stay in the sum; live gauges go; others are kept as they are
    assert sorted(p.name for p in files.iterdir()) == ["README", "counter_7.db", "gauge_all_7.db"]
    directory.stop()
    assert files.is_dir()  # a configured directory stays (emptied at the next start)


def test_without_a_configured_directory_a_temporary_one_is_used_and_removed(environ):
    from shared.serving import MetricsDirectory

    directory = MetricsDirectory("controlplane", "")
    directory.start(FakeArbiter(3))
    path = Path(environ["PROMETHEUS_MULTIPROC_DIR"])
    assert path.is_dir() and f"iamgate-metrics-controlplane-{os.getpid()}" == path.name
    directory.stop()
    assert not path.exists()


def test_one_worker_keeps_one_registry(tmp_path, environ):
    from shared.serving import MetricsDirectory

    environ["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "inherited")
    directory = MetricsDirectory("controlplane", str(tmp_path))
    directory.start(FakeArbiter(1))
    assert "PROMETHEUS_MULTIPROC_DIR" not in environ and not (tmp_path / "controlplane").exists()
    directory.worker_exited(7)
    directory.stop()


def test_a_configuration_reload_keeps_the_directory(tmp_path, environ, monkeypatch):
    """gunicorn reads its config module again on SIGHUP: the workers that exit after it
    still leave the merge of gauges."""
    from types import SimpleNamespace

    from shared import serving

    monkeypatch.setattr(serving, "_metrics_directories", {})
    for name, value in _env(IAMGATE_MONGODB_URI="mongodb://db.invalid/iamgate", IAMGATE_METRICS_DIR=tmp_path).items():
        monkeypatch.setenv(name, value)
    serving.settings(serving.CONTROL_PLANE)["on_starting"](FakeArbiter(2))
    (tmp_path / "controlplane" / "gauge_livesum_7.db").write_bytes(b"")
    reloaded = serving.settings(serving.CONTROL_PLANE)
    reloaded["child_exit"](FakeArbiter(2), SimpleNamespace(pid=7))
    assert not (tmp_path / "controlplane" / "gauge_livesum_7.db").exists()


def test_http_metrics_refuse_a_directory_prometheus_client_does_not_write():
    """prometheus_client chose its value class at import: without PROMETHEUS_MULTIPROC_DIR
    then, the files would stay empty and /metrics would show nothing of the workers."""
    from shared.metrics import HttpMetrics

    with pytest.raises(RuntimeError, match="PROMETHEUS_MULTIPROC_DIR"):
        HttpMetrics("iamgate", multiprocess_dir="/tmp")


SCRAPES = (("method", "GET"), ("route", "/metrics"), ("status", "200"))
CHECKS = (("method", "GET"), ("route", "/api/v1/applications/{applicationId}/authz/check"), ("status", "200"))


@pytest.fixture
def stack(tmp_path):
    """A control plane (one worker) and a decision service with 2 workers, sharing nothing
    but the network; the decision service's metrics files in ``tmp_path/metrics``."""
    files = tmp_path / "metrics" / "decision"
    stale_counter(files, "iamgate_decision_http_requests", CHECKS, 1000)
    processes = Processes(tmp_path, env={"IAMGATE_METRICS_DIR": tmp_path / "metrics"}, decision_workers=2)
    processes.files = files
    try:
        yield processes.start()
    finally:
        processes.stop()


def test_the_decision_services_metrics_sum_both_workers_and_survive_a_worker_restart(stack):
    files = stack.files
    # Each worker writes its gauges when its app is built.
    pids = wait_until(lambda: booted(stack.decision, files, "gauge_livemin"), 30)
    assert pids
    assert not (files / f"counter_{STALE_PID}.db").exists()  # emptied at start
    admin = Admin(stack.control_url, name="metrics")
    user = admin.user()
    admin.assign(user, admin.role(["docs:read"]))
    check = f"{stack.decision_url}/api/v1/applications/{admin.app_id}/authz/check"

    def checks(n):
        for _ in range(n):
            response = requests.get(check, params={"user_id": user, "permission": "docs:read"},
                                    headers={**admin.headers, "Connection": "close"}, timeout=10)
            assert response.status_code == 200 and response.json()["allowed"], response.text
        return n

    sent, wanted = 0, pids
    while not set(per_worker(files, "iamgate_decision_http_requests_total", CHECKS)) >= wanted:
        assert sent < 1000, per_worker(files, "iamgate_decision_http_requests_total", CHECKS)
        sent += checks(20)
        time.sleep(FLUSH_SECONDS + 0.5)  # each worker writes its files every FLUSH_SECONDS

    scrapes = []

    def totals():
        samples = scrape(stack.decision_url)
        scrapes.append(count(samples, "iamgate_decision_http_requests_total", SCRAPES))
        lookups = sum(count(samples, f"iamgate_decision_cache_{kind}_total", (("kind", "grants"),))
                      for kind in ("hits", "misses"))
        return samples, lookups

    def converged():  # each worker's last flush after its last check, each stream connected
        samples, lookups = totals()
        return (count(samples, "iamgate_decision_http_requests_total", CHECKS) == lookups == sent
                and count(samples, "iamgate_decision_stream_connected") == 1)

    assert wait_until(converged, 10 * FLUSH_SECONDS, interval=FLUSH_SECONDS / 4)
    for _ in range(3):  # whichever worker answers: the sum of both
        samples, lookups = totals()
        assert count(samples, "iamgate_decision_http_requests_total", CHECKS) == sent
        assert count(samples, "iamgate_decision_http_request_duration_seconds_count",
                     CHECKS[:2]) == sent
        assert lookups == sent  # one grants lookup per check, a hit or a miss, in either worker
        # Per-worker state, merged: one series each.
        assert count(samples, "iamgate_decision_stream_connected") == 1  # livemin: both connected
        assert 1 <= count(samples, "iamgate_decision_cache_entries") <= 2  # livesum: the user, in each worker
    # A scrape is counted after its answer, by the worker that answered it: once every
    # worker has flushed, a scrape shows every scrape before it.
    assert wait_until(lambda: totals() and scrapes[-1] == len(scrapes) - 1, 10 * FLUSH_SECONDS,
                      interval=1.5 * FLUSH_SECONDS), scrapes

    # A worker killed with SIGKILL (its figures were flushed: the scrapes above show
    # them), then each worker stopped with SIGTERM right after answering, as gunicorn
    # restarts them: every check stays counted.
    by_worker = per_worker(files, "iamgate_decision_http_requests_total", CHECKS)
    victim = max(by_worker, key=by_worker.get)
    pids = replace_a_worker(stack.decision, victim, files, "gauge_livemin")
    sent += checks(10)
    for pid in pids:
        replace_a_worker(stack.decision, pid, files, "gauge_livemin", signal.SIGTERM)
    assert wait_until(lambda: count(scrape(stack.decision_url), "iamgate_decision_http_requests_total",
                                    CHECKS) == sent, 10 * FLUSH_SECONDS)
    samples, lookups = totals()
    assert lookups == sent
    assert count(samples, "iamgate_decision_stream_connected") in (0, 1)  # the new workers' streams only
