"""Operations endpoints of the decision service: /healthz, /readyz, /metrics."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import falcon.testing
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.process_metrics import version
from tests.decision.conftest import wait_for


def samples(client) -> dict:
    response = client.simulate_get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_healthz_and_readyz(sidecar_client):
    assert sidecar_client.simulate_get("/healthz").json == {"status": "ok"}
    ready = sidecar_client.simulate_get("/readyz")
    assert ready.status_code == 200 and ready.json == {"status": "ready", "stream": "connected"}


def test_metrics_count_hits_misses_invalidations_and_requests(tenant, fake_cp, sidecar_client):
    user = tenant.user_with("posts:read")
    for _ in range(3):
        tenant.allowed(user, "posts:read")
    seq = fake_cp.set_status(tenant.app_id, user, "suspended")
    assert wait_for(lambda: tenant.client.app.service.cache.applied >= seq)
    values = samples(sidecar_client)
    assert values[("iamgate_decision_cache_hits_total", (("kind", "grants"),))] == 2
    assert values[("iamgate_decision_cache_misses_total", (("kind", "grants"),))] == 1
    assert values[("iamgate_decision_cache_misses_total", (("kind", "api_keys"),))] == 1
    assert values[("iamgate_decision_cache_invalidations_total", (("kind", "grants"),))] == 1
    assert values[("iamgate_decision_stream_connected", ())] == 1
    assert values[("iamgate_decision_stream_applied_seq", ())] >= seq
    assert values[("iamgate_decision_stream_lag", ())] == 0
    assert values[("iamgate_decision_cache_entries", ())] == 0
    assert values[("iamgate_decision_control_plane_requests_total",
                   (("outcome", "ok"), ("resource", "grants")))] == 1
    route = "/api/v1/applications/{applicationId}/authz/check"
    assert values[("iamgate_decision_http_requests_total",
                   (("method", "GET"), ("route", route), ("status", "200")))] == 3
    count = values[("iamgate_decision_http_request_duration_seconds_count", (("method", "GET"), ("route", route)))]
    inf = values[("iamgate_decision_http_request_duration_seconds_bucket",
                  (("le", "+Inf"), ("method", "GET"), ("route", route)))]
    assert count == inf == 3
    assert values[("iamgate_decision_http_request_duration_seconds_sum", (("method", "GET"), ("route", route)))] > 0


def test_histogram_buckets_are_cumulative(sidecar_client):
    sidecar_client.simulate_get("/healthz")
    text = sidecar_client.simulate_get("/metrics").text
    counts = [float(v) for v in re.findall(
        r'iamgate_decision_http_request_duration_seconds_bucket\{le="[^"]+",method="GET",route="/healthz"\} (\S+)',
        text)]
    assert counts and counts == sorted(counts) and counts[-1] == 1


@pytest.mark.filterwarnings("ignore::Warning")
def test_unmatched_routes_and_odd_methods_do_not_add_series(sidecar_client):
    for path in ("/a", "/b", "/c"):
        sidecar_client.simulate_get(path)
    sidecar_client.simulate_request("FROBNICATE", "/healthz")
    values = samples(sidecar_client)
    assert values[("iamgate_decision_http_requests_total",
                   (("method", "GET"), ("route", "unmatched"), ("status", "404")))] == 3
    assert not any(dict(labels).get("method") == "FROBNICATE" for _, labels in values)


def test_shared_files_render_what_the_worker_renders(tenant, fake_cp, sidecar_client, tmp_path):
    """Several gunicorn workers: each writes its figures to prometheus_client's
    multiprocess files and a scrape merges them (decision/metrics.py). One worker's files
    render exactly what its own registry renders: counters, histogram buckets, gauges."""
    user = tenant.user_with("posts:read")
    for _ in range(3):
        tenant.allowed(user, "posts:read")
    sidecar_client.simulate_get("/nowhere")
    own = samples(sidecar_client)
    sidecar_client.app.service.metrics.share(str(tmp_path))
    merged = samples(sidecar_client)
    scrapes = (("method", "GET"), ("route", "/metrics"), ("status", "200"))
    assert merged.pop(("iamgate_decision_http_requests_total", scrapes)) == 1 + own.pop(
        ("iamgate_decision_http_requests_total", scrapes), 0)
    for key in [key for key in merged if key[0].startswith("iamgate_decision_http_request_duration")
                and ("route", "/metrics") in key[1]]:
        merged.pop(key), own.pop(key, None)
    # The process's own figures move between two reads (memory, descriptors, CPU): the
    # same series, and the same info series.
    moving = {key for key in own if key[0].startswith(("process_", "python_gc_"))}
    assert moving and moving == {key for key in merged if key[0].startswith(("process_", "python_gc_"))}
    for key in moving:
        merged.pop(key), own.pop(key)
    assert merged == own
    assert own[("iamgate_build_info", (("service", "decision"), ("version", version())))] == 1
    assert {path.name.rsplit("_", 1)[0] for path in tmp_path.iterdir()} == {
        "counter", "histogram", "gauge_livemin", "gauge_livemax", "gauge_livesum"}


def test_a_worker_writes_its_last_counts_as_it_exits(tmp_path):
    """Counts since the last periodic flush are written at exit (a worker restarted by
    gunicorn, or scaled down, loses none)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    script = ("from decision.metrics import DecisionMetrics\n"
              "metrics = DecisionMetrics()\n"
              f"metrics.share({str(tmp_path)!r})\n"
              "metrics.requests.inc(('GET', '/healthz', '200'), 5)\n")  # then exit, well within FLUSH_SECONDS
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(tmp_path))
    assert registry.get_sample_value("iamgate_decision_http_requests_total",
                                     {"method": "GET", "route": "/healthz", "status": "200"}) == 5


def test_one_process_imports_prometheus_client_only_when_scraped():
    """``python -m decision`` (one worker) keeps its start-up small: prometheus_client
    comes with the first scrape, not with the app."""
    script = ("import sys\n"
              "from shared.config import Config\n"
              "from decision.app import create_app\n"
              "create_app(Config.from_env({'IAMGATE_INTERNAL_TOKEN': 't' * 32,\n"
              "                            'IAMGATE_CONTROL_PLANE_URL': 'http://127.0.0.1:9'}))\n"
              "print('prometheus_client' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.stdout.strip() == "False", result.stderr


def _probe_answers(app, path, method="GET", headers=None):
    """(as served, as the Falcon routes serve it) for one probe request."""
    served = falcon.testing.TestClient(app).simulate_request(method, path, headers=headers or {})
    reference = falcon.testing.TestClient(app.falcon()).simulate_request(method, path, headers=headers or {})
    return served, reference


def _same(served, reference) -> None:
    assert served.status == reference.status
    assert served.content == reference.content
    served_headers = {k.lower(): v for k, v in served.headers.items()}
    reference_headers = {k.lower(): v for k, v in reference.headers.items()}
    assert set(served_headers) == set(reference_headers) == {"content-type", "content-length", "x-request-id"}
    assert served_headers["content-type"] == reference_headers["content-type"]


def test_probes_answer_as_the_falcon_routes_do_without_building_falcon(make_sidecar, fake_cp):
    app = make_sidecar()
    client = falcon.testing.TestClient(app)
    for path in ("/healthz", "/readyz"):
        assert client.simulate_get(path).status_code == 200
        assert client.simulate_get(path, headers={"X-Request-Id": "probe-0001"}).headers["X-Request-Id"] == "probe-0001"
    assert app._falcon is None  # probes alone never build the Falcon app (start-up time)
    for path in ("/healthz", "/readyz"):
        _same(*_probe_answers(app, path))
        served, reference = _probe_answers(app, path, headers={"X-Request-Id": "probe-0002"})
        assert served.headers["X-Request-Id"] == reference.headers["X-Request-Id"] == "probe-0002"
    fake_cp.stop()
    assert wait_for(lambda: not app.service.follower.healthy(), timeout=5)
    served, reference = _probe_answers(app, "/readyz")
    _same(served, reference)
    assert served.status_code == 503 and served.json == {"status": "unavailable", "stream": "disconnected"}
    # Another method or a trailing slash: Falcon, as before (405; the route without the slash).
    for method, path in (("HEAD", "/readyz"), ("POST", "/healthz"), ("GET", "/healthz/")):
        served, reference = _probe_answers(app, path, method)
        assert served.status == reference.status, (method, path)
    counted = samples(client)
    assert counted[("iamgate_decision_http_requests_total",
                    (("method", "GET"), ("route", "/readyz"), ("status", "503")))] == 2  # served and reference


def test_falcon_is_built_once_on_the_first_request_it_answers(make_sidecar):
    app = make_sidecar()
    assert app._falcon is None
    client = falcon.testing.TestClient(app)
    assert client.simulate_get("/openapi.json").status_code == 200
    built = app._falcon
    assert built is not None
    assert client.simulate_get("/nowhere").status_code == 404
    assert app.falcon() is built


def test_status_lines_are_falcons():
    from shared.httpserver import _STATUS_LINES, status_line

    for code in (*_STATUS_LINES, 409, 410, 422):
        assert status_line(code) == falcon.code_to_http_status(code)
