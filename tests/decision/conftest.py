"""Fixtures of the decision service tests: a fake control plane over real HTTP and a
decision app (``falcon.testing``) following its change stream."""
from __future__ import annotations

import time

import falcon.testing
import pytest

from decision.app import create_app
from tests.conftest import make_config
from tests.decision.fakecp import FakeControlPlane


class FakeMonotonic:
    """Real monotonic time plus an offset tests can move (the staleness bound)."""

    def __init__(self):
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def wait_for(predicate, timeout=3.0, interval=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@pytest.fixture
def fake_cp(clock):
    cp = FakeControlPlane(clock).start()
    yield cp
    cp.stop()


@pytest.fixture
def monotonic():
    return FakeMonotonic()


@pytest.fixture
def sidecar_overrides():
    """Override in a module to change the decision service's settings."""
    return {}


@pytest.fixture
def make_sidecar(fake_cp, clock, monotonic, sidecar_overrides):
    """``make_sidecar(**config)`` -> a decision app connected to ``fake_cp``."""
    apps = []

    def make(wait=True, **overrides):
        values = {"internal_token": fake_cp.token, "control_plane_url": fake_cp.url,
                  "public_url": fake_cp.issuer, **sidecar_overrides, **overrides}
        app = create_app(make_config(**values), clock=clock, monotonic=monotonic, backoff_max=0.1)
        apps.append(app)
        if wait:
            assert wait_for(lambda: app.service.follower.trusted()), "the change stream did not connect"
        return app

    yield make
    for app in apps:
        app.service.follower.stop()


@pytest.fixture
def sidecar(make_sidecar):
    return make_sidecar()


@pytest.fixture
def sidecar_client(sidecar):
    return falcon.testing.TestClient(sidecar)


def check_path(app_id: str) -> str:
    return f"/api/v1/applications/{app_id}/authz/check"


def bulk_path(app_id: str) -> str:
    return f"/api/v1/applications/{app_id}/authz/check-bulk"


class Tenant:
    """An application of the fake control plane with an API key holding authz:check,
    and helpers to check through a decision app."""

    def __init__(self, cp, client, app_id=None, key=None):
        self.cp = cp
        self.client = client
        self.app_id = app_id or cp.add_app()
        self.key = key or cp.add_key(self.app_id)

    def user_with(self, *permissions, scope=None, expires_at=None, **user) -> str:
        user_id = self.cp.add_user(self.app_id, **user)
        if permissions:
            role_id = self.cp.add_role(self.app_id, permissions)
            self.cp.assign(self.app_id, user_id, role_id, scope=scope, expires_at=expires_at)
        return user_id

    def get(self, user_id, permission, credential=None, **params):
        return self.client.simulate_get(check_path(self.app_id), params={"user_id": user_id, "permission": permission,
                                                                          **params},
                                        headers={"Authorization": f"Bearer {credential or self.key}"})

    def post(self, body, credential=None, path=None):
        return self.client.simulate_post(path or check_path(self.app_id), json=body,
                                         headers={"Authorization": f"Bearer {credential or self.key}"})

    def bulk(self, body, credential=None):
        return self.post(body, credential, bulk_path(self.app_id))

    def allowed(self, user_id, permission, **params) -> bool:
        response = self.get(user_id, permission, **params)
        assert response.status_code == 200, response.text
        return response.json["allowed"]


@pytest.fixture
def tenant(fake_cp, sidecar_client):
    return Tenant(fake_cp, sidecar_client)
