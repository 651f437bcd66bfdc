"""Helpers of the OIDC tests.

- ``oidc_client(app, **fields)`` registers a client through V1/oidc/clients and returns
  the create response's data (with ``client_secret``);
- ``pkce_pair()`` -> (verifier, S256 challenge);
- ``authorize(app_user_token, client, **overrides)`` -> the JSON-mode authorize response;
- ``exchange(client, code, verifier, **overrides)`` -> the token endpoint's response;
- ``issue_tokens(user_token, client)`` -> the token response of a whole JSON-mode flow;
- ``relying_party(client)`` -> an Authlib ``OAuth2Session`` (an independent relying
  party) whose HTTP requests go to the app through ``falcon.testing``.
"""
from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import urlsplit

import pytest
import requests
from requests.structures import CaseInsensitiveDict

from tests.plugins.users import fresh_address

REDIRECT_URI = "https://rp.example.com/callback"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def clients_url(app, path: str = "") -> str:
    return f"/api/v1/applications/{app['_id']}/oidc/clients{path}"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def assert_oauth_error(response, error: str, status: int = 400):
    """An RFC 6749 5.2 error body with ``Cache-Control: no-store``."""
    assert response.status_code == status, response.text
    assert response.json["error"] == error, response.json
    assert set(response.json) == {"error", "error_description"}
    assert response.headers.get("cache-control") == "no-store"
    return response.json


@pytest.fixture
def manager_key(application, make_api_key):
    return make_api_key(application, permissions=["oidc:manage"])


@pytest.fixture
def oidc_client(client, make_api_key):
    def make(app, **fields):
        key = make_api_key(app, permissions=["oidc:manage"])
        body = {"name": "Relying Party", "redirect_uris": [REDIRECT_URI],
                "post_logout_redirect_uris": ["https://rp.example.com/bye"], **fields}
        response = client.simulate_post(clients_url(app), json=body, headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 201, response.text
        return response.json["data"]

    return make


@pytest.fixture
def rp_client(application, oidc_client):
    return oidc_client(application)


@pytest.fixture
def hosted_app(ctx, application):
    """The test application with the hosted login switched on."""
    return ctx.applications.update(application["_id"], {"oauth_hosted_login_enabled": True})


@pytest.fixture
def authorize(client):
    def do(user, rp, *, challenge=None, headers=None, **params):
        query = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": REDIRECT_URI,
                 "scope": "openid profile email", "state": "state-1", "nonce": "nonce-1",
                 "code_challenge": challenge or pkce_pair()[1], "code_challenge_method": "S256", **params}
        query = {k: v for k, v in query.items() if v is not None}
        auth = {} if user is None else {"Authorization": f"Bearer {user.access_token}"}
        return client.simulate_get("/oidc/authorize", params=query, headers={**auth, **(headers or {})})

    return do


@pytest.fixture
def exchange(client):
    def do(rp, code, verifier, **overrides):
        body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
                "code_verifier": verifier, "client_id": rp["client_id"], "client_secret": rp["client_secret"],
                **overrides}
        body = {k: v for k, v in body.items() if v is not None}
        return client.simulate_post("/oidc/token", json=body)

    return do


@pytest.fixture
def issue_tokens(authorize, exchange):
    def do(user, rp, **params):
        verifier, challenge = pkce_pair()
        response = authorize(user, rp, challenge=challenge, **params)
        assert response.status_code == 200, response.text
        tokens = exchange(rp, response.json["code"], verifier)
        assert tokens.status_code == 200, tokens.text
        return tokens.json

    return do


@pytest.fixture
def refresh_grant(client):
    def do(rp, refresh_token, **overrides):
        body = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": rp["client_id"],
                "client_secret": rp["client_secret"], **overrides}
        return client.simulate_post("/oidc/token", json=body)

    return do


class FalconAdapter(requests.adapters.BaseAdapter):
    """A requests transport that hands each request to the Falcon app in process."""

    def __init__(self, client):
        super().__init__()
        self.client = client

    def send(self, request, **kwargs):
        url = urlsplit(request.url)
        body = request.body.encode() if isinstance(request.body, str) else (request.body or b"")
        result = self.client.simulate_request(request.method, url.path, query_string=url.query or None,
                                              headers=dict(request.headers), body=body, remote_addr=fresh_address())
        response = requests.Response()
        response.status_code = result.status_code
        response._content = result.content
        response.headers = CaseInsensitiveDict(result.headers)
        response.url, response.request, response.encoding = request.url, request, "utf-8"
        return response

    def close(self):
        pass


@pytest.fixture
def relying_party(client, config):
    from authlib.integrations.requests_client import OAuth2Session

    def make(rp, **kwargs):
        session = OAuth2Session(rp["client_id"], rp["client_secret"], scope="openid profile email",
                                redirect_uri=REDIRECT_URI, code_challenge_method="S256", **kwargs)
        session.mount(config.public_url, FalconAdapter(client))
        return session

    return make
