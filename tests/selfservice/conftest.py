"""Helpers of the self-service tests.

Users and tokens come from the users area's fixtures (tests/plugins/users.py): real
registrations and logins over HTTP.  MFA methods, OIDC consents and OIDC refresh tokens
are inserted straight into their collections (``mfa_method``, ``oidc_consent``,
``oidc_refresh_token``), with the fields their areas document, because those areas
write them.
"""
from __future__ import annotations

from datetime import timedelta

import pytest

from shared.ids import new_id
from tests.connections.conftest import make_connection  # noqa: F401  (fixture: the export of linked identities)
from tests.plugins.users import fresh_address, users_url


def self_url(app, user_id, path: str = "") -> str:
    return f"/api/v1/applications/{app['_id']}/users/{user_id}{path}"


@pytest.fixture
def call(client):
    """``call(method, app, user_token, path="", json=None, token=None)``: a request to
    V1/users/{user_token's user}{path}, authenticated with ``token`` (default: its own)."""

    def do(method, app, user, path="", json=None, token=None, headers=None):
        auth = {"Authorization": f"Bearer {token or user.access_token}", **(headers or {})}
        kwargs = {"headers": auth, "remote_addr": fresh_address()}
        if json is not None:
            kwargs["json"] = json
        return client.simulate_request(method, self_url(app, user.user["id"], path), **kwargs)

    return do


@pytest.fixture
def refresh(client):
    """``refresh(app, refresh_token)`` -> the response of V1/users/token/refresh."""

    def do(app, token):
        return client.simulate_post(users_url(app, "/token/refresh"), json={"refresh_token": token},
                                    remote_addr=fresh_address())

    return do


@pytest.fixture
def mfa_method(ctx):
    def make(app, user_id, *, status="active", secret="JBSWY3DPEHPK3PXP", label="Authenticator App",
             is_primary=True):
        now = ctx.clock()
        doc = {
            "_id": new_id(), "app_id": app["_id"], "user_id": user_id, "type": "totp", "label": label,
            "status": status, "is_primary": is_primary, "secret": ctx.box.encrypt(secret),
            "created_at": now, "verified_at": now if status == "active" else None, "last_used_at": None,
        }
        ctx.store["mfa_methods"].insert_one(doc)
        return doc

    return make


@pytest.fixture
def oidc_consent(ctx):
    def make(app, user_id, client_id=None, scopes=("openid", "profile"), withdrawn=False):
        now = ctx.clock()
        doc = {
            "_id": new_id(), "app_id": app["_id"], "user_id": user_id, "client_id": client_id or new_id(),
            "scopes": list(scopes), "granted_at": now, "withdrawn_at": now if withdrawn else None,
        }
        ctx.store["oidc_consents"].insert_one(doc)
        return doc

    return make


@pytest.fixture
def oidc_refresh_token(ctx):
    def make(app, user_id, client_id, revoked=False):
        now = ctx.clock()
        doc = {
            "_id": new_id(), "app_id": app["_id"], "user_id": user_id, "client_id": client_id,
            "token_digest": new_id().replace("-", "") * 2, "created_at": now, "revoked_at": now if revoked else None,
            "expires_at": now + timedelta(days=7),  # a grant's refresh-token lifetime, as the code exchange sets it
        }
        ctx.store["oidc_refresh_tokens"].insert_one(doc)
        return doc

    return make


@pytest.fixture
def login_from_device(client):
    """``login_from_device(app, user_token, user_agent="Device/1", remember_me=False)`` ->
    the token pair of a new session of the same user."""

    def do(app, user, user_agent="Device/1", remember_me=False):
        response = client.simulate_post(
            users_url(app, "/login"),
            json={"email": user.user["email"], "password": user.password, "remember_me": remember_me},
            headers={"User-Agent": user_agent}, remote_addr=fresh_address())
        assert response.status_code == 200, response.text
        return response.json["data"]

    return do


@pytest.fixture
def fresh_token(ctx):
    """``fresh_token(app, user_token)`` -> a new access token of the user (after the
    FakeClock moved past the first one's 15 minutes)."""

    def make(app, user):
        token, _ = ctx.tokens.issue_access_token(app["_id"], user.user["id"], None)
        return token

    return make
