"""Operations endpoints of the decision service: /healthz, /readyz, /metrics."""
from __future__ import annotations

import re

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
