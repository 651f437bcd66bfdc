"""Fixtures of the dashboard area, shared by every test directory.

- ``make_dashboard_account(email=None, password=..., name=..., login=True, verified=True)``:
  registers an account through POST /api/dashboard/register, marks its email confirmed
  in the store (as the mailed link would; ``verified=False`` leaves it unconfirmed,
  tests/security/test_dashboard_takeover.py goes through the link) and signs it in through
  POST /api/dashboard/login; returns a ``DashboardAccount`` whose ``get/post/put/delete``
  send its session cookie.
- ``dashboard_account``: one such account (owner of its personal organization).
- ``make_dashboard_app(account, **fields)``: an application created through
  POST /api/dashboard/applications; returns the response's ``data``.
- ``dashboard_app``: an application of ``dashboard_account``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from controlplane.auth import SESSION_COOKIE

DASHBOARD_PASSWORD = "Correct-Horse-42"
_addresses = itertools.count(1)


@dataclass
class DashboardAccount:
    client: object
    id: str
    email: str
    name: str
    password: str
    organization_id: str
    remote_addr: str
    session: str | None = None

    @property
    def cookies(self) -> dict:
        return {SESSION_COOKIE: self.session} if self.session else {}

    def request(self, method: str, path: str, **kwargs):
        """A request with this account's session cookie (``cookies=`` overrides it)."""
        kwargs.setdefault("cookies", self.cookies)
        kwargs.setdefault("remote_addr", self.remote_addr)
        return self.client.simulate_request(method, path, **kwargs)

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, **kwargs):
        return self.request("POST", path, **kwargs)

    def put(self, path, **kwargs):
        return self.request("PUT", path, **kwargs)

    def delete(self, path, **kwargs):
        return self.request("DELETE", path, **kwargs)

    def login(self):
        response = self.client.simulate_post("/api/dashboard/login", remote_addr=self.remote_addr,
                                             json={"email": self.email, "password": self.password})
        assert response.status_code == 200, response.text
        self.session = response.cookies[SESSION_COOKIE].value
        return response


@pytest.fixture
def make_dashboard_account(client):
    """Each account signs up from its own client address, so fixtures never use up the
    per-IP budgets (login, register) that a test may be measuring."""

    def make(email=None, *, password=DASHBOARD_PASSWORD, name="Dana Admin", login=True,
             verified=True) -> DashboardAccount:
        n = next(_addresses)
        remote_addr = f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"
        email = email or f"dashboard-{n}@example.com"
        response = client.simulate_post("/api/dashboard/register", remote_addr=remote_addr,
                                        json={"email": email, "password": password, "name": name})
        assert response.status_code == 201, response.text
        data = response.json["data"]
        account = DashboardAccount(client, data["id"], data["email"], data["name"], password, "", remote_addr)
        if verified:
            client.app.services.dashboard.accounts.store.update_account(account.id, {"email_verified": True})
        account.login()
        me = account.get("/api/dashboard/me").json["data"]
        account.organization_id = me["organizations"][0]["id"]
        if not login:
            account.session = None
        return account

    return make


@pytest.fixture
def dashboard_account(make_dashboard_account) -> DashboardAccount:
    return make_dashboard_account()


@pytest.fixture
def make_dashboard_app():
    def make(account: DashboardAccount, name="Dashboard App", **fields) -> dict:
        response = account.post("/api/dashboard/applications", json={"name": name, **fields})
        assert response.status_code == 201, response.text
        return response.json["data"]

    return make


@pytest.fixture
def dashboard_app(dashboard_account, make_dashboard_app) -> dict:
    return make_dashboard_app(dashboard_account)
