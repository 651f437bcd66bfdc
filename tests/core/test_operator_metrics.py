"""The figures an operator expects of the control plane's /metrics (issue 31, item 10):
``process_*``, ``python_*`` and ``iamgate_build_info``, and the authorization cache's
hits and misses, counted alike by the check's hot path and the Falcon routes.
(Several workers: tests/deploy/test_metrics_workers.py.)"""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.process_metrics import version
from tests.conftest import bearer


def samples(client) -> dict:
    response = client.simulate_get("/metrics")
    assert response.status_code == 200
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text) for sample in family.samples}


def test_process_python_and_build_figures(client):
    values = samples(client)
    assert values[("iamgate_build_info", (("service", "controlplane"), ("version", version())))] == 1
    assert values[("process_resident_memory_bytes", ())] > 0
    assert values[("process_open_fds", ())] > 0
    assert ("process_cpu_seconds_total", ()) in values and ("process_start_time_seconds", ()) in values
    assert [value for (name, _), value in values.items() if name == "python_info"] == [1]
    assert ("python_gc_collections_total", (("generation", "0"),)) in values


def cache_counts(client) -> dict:
    values = samples(client)
    return {(outcome, kind): values[(f"iamgate_authz_cache_{outcome}_total", (("kind", kind),))]
            for outcome in ("hits", "misses") for kind in ("grants", "policies")}


@pytest.mark.parametrize("hot", [True, False])
def test_authz_cache_hits_and_misses(app, client, application, api_key, stored_user, hot):
    if not hot:
        app.hot_check = None  # the Falcon route counts the same lookups
    user = stored_user(application)
    check = f"/api/v1/applications/{application['_id']}/authz/check"
    assert cache_counts(client) == {key: 0 for key in cache_counts(client)}
    for _ in range(3):
        response = client.simulate_get(check, params={"user_id": user["_id"], "permission": "docs:read"},
                                       headers=bearer(api_key))
        assert response.status_code == 200
    body = {"user_id": user["_id"], "permission": "docs:read", "resource": {"owner": "x"}}
    for _ in range(2):
        assert client.simulate_post(check, json=body, headers=bearer(api_key)).status_code == 200
    assert cache_counts(client) == {("hits", "grants"): 4, ("misses", "grants"): 1,
                                    ("hits", "policies"): 1, ("misses", "policies"): 1}
