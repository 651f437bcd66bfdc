"""Operations endpoints of the decision service: /healthz, /readyz, /metrics."""
from __future__ import annotations

import re

import falcon.testing
import pytest
from prometheus_client.parser import text_string_to_metric_families

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
    assert app._falcon is None  # probes alone never build the Falcon app (start-up time, issue 18)
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
    from decision.server import _STATUS_LINES, status_line

    for code in (*_STATUS_LINES, 409, 410, 422):
        assert status_line(code) == falcon.code_to_http_status(code)
