"""Deployment modes (docs/decision-service.md, "Deployment modes"): the internal service token serves every
application from the all-applications stream; an application API key serves only the
key's application (learned from /internal/v1/whoami) from that application's stream."""
from __future__ import annotations

import subprocess
import sys
import uuid

import falcon.testing
import pytest

from decision.app import credential
from shared.config import ConfigError
from tests.conftest import assert_error, make_config
from tests.decision.conftest import Tenant, check_path, wait_for


def test_the_internal_token_serves_every_application(fake_cp, sidecar_client):
    first, second = Tenant(fake_cp, sidecar_client), Tenant(fake_cp, sidecar_client)
    assert first.allowed(first.user_with("a:b"), "a:b") and second.allowed(second.user_with("a:b"), "a:b")
    assert any(path == "/internal/v1/changes" for path in fake_cp.requests)


def test_an_api_key_serves_only_its_application(make_sidecar, fake_cp):
    app_id = fake_cp.add_app()
    key = fake_cp.add_key(app_id)
    sidecar = make_sidecar(internal_token="", decision_api_key=key)
    assert sidecar.service.follower.application_id == app_id
    assert f"/internal/v1/applications/{app_id}/changes" in fake_cp.requests
    assert "/internal/v1/changes" not in fake_cp.requests

    tenant = Tenant(fake_cp, falcon.testing.TestClient(sidecar), app_id, key)
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read") is True
    role = fake_cp.add_role(app_id, ["posts:write"])
    seq = fake_cp.assign(app_id, user, role)
    assert wait_for(lambda: sidecar.service.cache.applied >= seq)
    assert tenant.allowed(user, "posts:write") is True
    seq = fake_cp.unassign(app_id, user, role)
    assert wait_for(lambda: sidecar.service.cache.applied >= seq)
    assert tenant.get(user, "posts:write").json == {"allowed": False, "permission": "posts:write", "cached": False}

    other = Tenant(fake_cp, tenant.client)
    error = assert_error(other.get(other.user_with("posts:read"), "posts:read"), 404, "NOT_FOUND")
    assert error["details"] == {"application_id": other.app_id}


def test_an_api_key_sidecar_answers_503_until_it_knows_its_application(make_sidecar, fake_cp):
    app_id = fake_cp.add_app()
    key = fake_cp.add_key(app_id)
    fake_cp.stop()
    sidecar = make_sidecar(wait=False, internal_token="", decision_api_key=key)
    client = falcon.testing.TestClient(sidecar)
    response = client.simulate_get(check_path(app_id), params={"user_id": str(uuid.uuid4()), "permission": "a:b"},
                                   headers={"Authorization": f"Bearer {key}"})
    assert_error(response, 503, "DECISION_UNAVAILABLE")
    fake_cp.restart(wipe=False)
    assert wait_for(lambda: sidecar.service.follower.trusted(), timeout=5)
    response = client.simulate_get(check_path(app_id), params={"user_id": str(uuid.uuid4()), "permission": "a:b"},
                                   headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200 and response.json["allowed"] is False


def test_the_api_key_wins_over_the_internal_token():
    config = make_config(internal_token="t", decision_api_key="sk_live_abc")
    assert credential(config) == ("sk_live_abc", True)
    assert credential(make_config(internal_token="t")) == ("t", False)


@pytest.mark.parametrize("values, variable", [
    ({}, "IAMGATE_DECISION_API_KEY"),
    ({"decision_api_key": "not-a-key"}, "IAMGATE_DECISION_API_KEY"),
])
def test_a_sidecar_without_a_usable_credential_does_not_start(values, variable):
    with pytest.raises(ConfigError, match=variable):
        credential(make_config(**values))


def test_the_gunicorn_entry_point_stops_with_one_line_naming_the_variable():
    result = subprocess.run([sys.executable, "-c", "import decision.wsgi as w; w.create()"], capture_output=True,
                            text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "IAMGATE_DECISION_API_KEY": "nope"})
    assert result.returncode == 2
    assert "IAMGATE_DECISION_API_KEY" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
