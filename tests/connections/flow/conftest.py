"""Fixtures and a scripted browser for the sign-in tests: a local provider
(``provider.Provider``), an application whose own UI returns to ``REDIRECT``, connections
to the provider saved in the store, and ``Browser``, a client without a browser that
follows the provider's redirect as a browser would."""
from __future__ import annotations

import secrets
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from controlplane.connections.model import Endpoints, secret_box
from controlplane.connections.store import ConnectionStore
from tests.connections.flow.provider import CLIENT_ID, CLIENT_SECRET, Provider
from tests.mfa.conftest import enable_mfa  # noqa: F401  (a fixture of the MFA tests, used here)
from tests.passkeys.conftest import register  # noqa: F401  (registers a passkey: test_link_passkey.py)
from tests.plugins.users import fresh_address

REDIRECT = "https://app.example.com/signed-in"


def auth_url(app, path: str) -> str:
    return f"/api/v1/applications/{app['_id']}/auth/connections{path}"


def identities_url(app, user_id: str, path: str = "") -> str:
    return f"/api/v1/applications/{app['_id']}/users/{user_id}/identities{path}"


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True}


@pytest.fixture
def provider():
    """The sign-in tests' provider (``flow/provider.py``: it signs ID tokens and scripts its
    answers), in place of the root conftest's discovery-only one."""
    running = Provider()
    yield running
    running.close()


@pytest.fixture
def provider_b():
    """A second provider (the mix-up defence)."""
    running = Provider()
    yield running
    running.close()


@pytest.fixture
def idp_app(ctx, make_application):
    app = make_application("Connections App")
    return ctx.applications.update(app["_id"], {"oauth_redirect_uris": [REDIRECT]})


@pytest.fixture
def add_connection(ctx, make_connection, config):
    """``add_connection(app, provider, **fields)`` -> a saved ``Connection`` to ``provider``."""
    box = secret_box(config.secret_key)

    def add(app, provider, **fields):
        endpoints = Endpoints(issuer=provider.issuer, authorization_endpoint=f"{provider.issuer}/authorize",
                              token_endpoint=f"{provider.issuer}/token",
                              userinfo_endpoint=f"{provider.issuer}/userinfo", jwks_uri=f"{provider.issuer}/jwks",
                              iss_parameter_supported=provider.iss_parameter, fetched_at=None)
        values = {"issuer": provider.issuer, "client_id": CLIENT_ID,
                  "client_secret_enc": box.encrypt(CLIENT_SECRET), "endpoints": endpoints,
                  "name": f"idp-{secrets.token_hex(3)}", **fields}
        connection = make_connection(app["_id"], **values)
        ConnectionStore(ctx.store).insert(connection)
        return connection

    return add


class Browser:
    """One browser of the application's own UI: its binding, and the steps of a sign-in."""

    def __init__(self, client, app, binding: str | None = None):
        self.client, self.app = client, app
        self.binding = binding or secrets.token_urlsafe(24)
        self.address = fresh_address()

    def post(self, path: str, body: dict):
        return self.client.simulate_post(auth_url(self.app, path), json=body, remote_addr=self.address)

    def start(self, connection_id: str, **body) -> str:
        response = self.post(f"/{connection_id}/start", {"redirect_uri": REDIRECT, "binding": self.binding, **body})
        assert response.status_code == 200, response.text
        return response.json["data"]["authorization_url"]

    @staticmethod
    def at_provider(authorization_url: str) -> dict:
        """Follow the authorization URL to the provider, which signs its ``login_as``
        account in at once and redirects back: the query the redirect_uri receives."""
        answer = requests.get(authorization_url, allow_redirects=False, timeout=10)
        assert answer.status_code == 302, answer.text
        location = answer.headers["Location"]
        assert location.startswith(REDIRECT + "?")
        return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}

    def callback(self, params: dict, **body):
        return self.post("/callback", {"params": params, "binding": self.binding, **body})

    def sign_in(self, connection_id: str, **body):
        return self.callback(self.at_provider(self.start(connection_id)), **body)
