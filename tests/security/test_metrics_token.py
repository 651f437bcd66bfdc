"""Hardening item 11: /metrics shows per-route login counts to anyone who can reach the
port.  With IAMGATE_METRICS_TOKEN set it needs that bearer token."""
from __future__ import annotations

import falcon.testing
import pytest

from shared.config import Config, ConfigError
from tests.decision.conftest import fake_cp, make_sidecar, monotonic, sidecar_overrides  # noqa: F401

TOKEN = "m" * 40


@pytest.mark.parametrize("config_overrides", [{"metrics_token": TOKEN}])
def test_metrics_need_the_token_when_one_is_set(client):
    client.simulate_post("/api/dashboard/login", json={"email": "a@example.com", "password": "x"})
    assert client.simulate_get("/metrics").status_code == 401
    assert client.simulate_get("/metrics", headers={"Authorization": "Bearer " + "x" * 40}).status_code == 401
    r = client.simulate_get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and "/api/dashboard/login" in r.text


def test_without_a_token_metrics_stay_open(client):
    assert client.simulate_get("/metrics").status_code == 200


def test_a_short_metrics_token_stops_start_up():
    with pytest.raises(ConfigError, match="IAMGATE_METRICS_TOKEN"):
        Config.from_env(env={"IAMGATE_METRICS_TOKEN": "short"})


def test_the_decision_services_metrics_need_the_token_too(make_sidecar):  # noqa: F811
    """The decision service's /metrics names applications and permissions: with the token
    set it answers only that bearer, as the control plane's does."""
    sidecar = falcon.testing.TestClient(make_sidecar(metrics_token=TOKEN))
    for headers in ({}, {"Authorization": "Bearer " + "x" * 40}, {"Authorization": "Basic abc"}):
        refused = sidecar.simulate_get("/metrics", headers=headers)
        assert refused.status_code == 401 and refused.json["error"]["code"] == "UNAUTHORIZED", headers
    served = sidecar.simulate_get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert served.status_code == 200 and "iamgate_decision" in served.text
    assert falcon.testing.TestClient(make_sidecar()).simulate_get("/metrics").status_code == 200
