"""Self-service over real HTTP against the real processes (`make run`): the profile, the
export and its limit, and a deletion that closes every way back in, down to the decision
service, which stops allowing the deleted user's roles within a second."""
from __future__ import annotations

import time
import uuid

import pytest
import requests

from tests.e2e.conftest import start_stack, wait_until
from tests.e2e.processes import sign_up

PASSWORD = "Analytical-Engine-1843"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack = start_stack(tmp_path_factory.mktemp("selfservice-e2e"))
    yield stack
    stack.stop()


class Tenant:
    """A dashboard account, its application and an API key, made through the public API."""

    def __init__(self, base: str):
        self.base = base
        web = sign_up(base, "Owner")
        self.app_id = web.post(f"{base}/api/dashboard/applications", json={"name": "Shop"}).json()["data"]["id"]
        self.api_key = web.post(f"{base}/api/dashboard/applications/{self.app_id}/api-keys",
                                json={"name": "backend"}).json()["data"]["key"]
        self.v1 = f"{base}/api/v1/applications/{self.app_id}"

    def key_headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"}

    def user(self) -> tuple[str, str, dict]:
        """(email, user id, token pair) of a new end user."""
        email = f"user-{uuid.uuid4().hex[:8]}@example.com"
        response = requests.post(f"{self.v1}/users/register", json={"email": email, "password": PASSWORD,
                                                                    "name": "End User"})
        assert response.status_code == 201, response.text
        pair = self.login(email)
        assert pair.status_code == 200, pair.text
        return email, response.json()["data"]["id"], pair.json()["data"]

    def login(self, email: str) -> requests.Response:
        return requests.post(f"{self.v1}/users/login", json={"email": email, "password": PASSWORD})


def owner(pair) -> dict:
    return {"Authorization": f"Bearer {pair['access_token']}"}


def test_profile_and_export_over_http(stack):
    tenant = Tenant(stack.control_url)
    _, user_id, pair = tenant.user()
    me = f"{tenant.v1}/users/{user_id}"
    response = requests.put(f"{me}/profile", json={"name": "Renamed", "metadata": {"lang": "en"}},
                            headers=owner(pair))
    assert response.status_code == 200, response.text
    assert response.json()["data"]["name"] == "Renamed"

    export = requests.get(f"{me}/data-export", headers=owner(pair))
    assert export.status_code == 200, export.text
    data = export.json()["data"]
    assert data["user"]["name"] == "Renamed" and len(data["sessions"]) == 1
    assert [e["action"] for e in data["audit_logs"]] == ["user.created", "user.login", "user.updated"]
    again = requests.get(f"{me}/data-export", headers=owner(pair))
    assert again.status_code == 429 and again.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert again.headers["X-RateLimit-Limit"] == "1" and int(again.headers["Retry-After"]) >= 1

    _, _, other_pair = tenant.user()
    refused = requests.get(f"{me}/profile", headers=owner(other_pair))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    assert requests.get(f"{me}/profile", headers=tenant.key_headers()).status_code == 403


def test_deletion_closes_every_way_back_in(stack):
    tenant = Tenant(stack.control_url)
    email, user_id, pair = tenant.user()
    role = requests.post(f"{tenant.v1}/roles", json={"name": "reader", "display_name": "Reader",
                                                     "permissions": ["posts:read"]}, headers=tenant.key_headers())
    assert role.status_code == 201, role.text
    assigned = requests.post(f"{tenant.v1}/users/{user_id}/roles", json={"role_id": role.json()["data"]["id"]},
                             headers=tenant.key_headers())
    assert assigned.status_code == 201, assigned.text

    def allowed() -> bool:
        response = requests.get(f"{stack.decision_url}/api/v1/applications/{tenant.app_id}/authz/check",
                                params={"user_id": user_id, "permission": "posts:read"},
                                headers=tenant.key_headers(), timeout=5)
        assert response.status_code == 200, response.text
        return response.json()["allowed"]

    assert wait_until(allowed, timeout=5)  # the sidecar has the grant (and caches it)

    deleted = requests.delete(f"{tenant.v1}/users/{user_id}", headers=owner(pair))
    assert deleted.status_code == 204, deleted.text
    started = time.monotonic()
    assert wait_until(lambda: not allowed(), timeout=1, interval=0.01)
    assert time.monotonic() - started < 1

    login = tenant.login(email)
    assert login.status_code == 401 and login.json()["error"]["code"] == "AUTH_INVALID_CREDENTIALS"
    refresh = requests.post(f"{tenant.v1}/users/token/refresh", json={"refresh_token": pair["refresh_token"]})
    assert refresh.status_code == 401
    profile = requests.get(f"{tenant.v1}/users/{user_id}/profile", headers=owner(pair))
    assert profile.status_code == 401 and profile.json()["error"]["code"] == "UNAUTHORIZED"
    again = requests.post(f"{tenant.v1}/users/register", json={"email": email, "password": PASSWORD, "name": "X"})
    assert again.status_code == 409
