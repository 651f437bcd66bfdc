"""Fixtures of the abac tests: an API key holding every V1 permission and helpers that
go through the HTTP API."""
from __future__ import annotations

import pytest

from tests.conftest import bearer


class Abac:
    """``V1/abac/...`` and ``V1/users/{userId}/attributes`` of one application."""

    def __init__(self, client, app, key):
        self.client, self.app, self.headers = client, app, bearer(key)
        self.v1 = f"/api/v1/applications/{app['_id']}"

    def request(self, method, path, headers=None, **kwargs):
        return self.client.simulate_request(method, self.v1 + path,
                                            headers=self.headers if headers is None else headers, **kwargs)

    def create(self, name="policy", effect="allow", permissions=("posts:read",), condition=None, **fields):
        body = {"name": name, "effect": effect, "permissions": list(permissions), "condition": condition, **fields}
        response = self.request("POST", "/abac/policies", json=body)
        assert response.status_code == 201, response.text
        return response.json["data"]

    def set(self, user_id, key, value):
        response = self.request("PUT", f"/users/{user_id}/attributes/{key}", json={"value": value})
        assert response.status_code == 200, response.text
        return response

    def check(self, user_id, permission, **body):
        response = self.request("POST", "/authz/check", json={"user_id": user_id, "permission": permission, **body})
        assert response.status_code == 200, response.text
        return response.json


@pytest.fixture
def abac(client, application, api_key):
    return Abac(client, application, api_key)
