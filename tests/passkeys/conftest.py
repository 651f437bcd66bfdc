"""Helpers of the passkey tests (see ``authenticator.py`` for the software authenticator).

- every test's server has RP ID ``localhost`` and origin ``http://localhost:8000``;
- ``passkey_app(mode="passwordless", **settings)``: an application with passkeys on;
- ``register(app, user_token, authenticator)`` -> the stored passkey (HTTP, both steps);
- ``sign_in_options(app, challenge_token=None)`` -> the options answer's ``data``;
- ``sign_in(app, authenticator, challenge_token=None, **falsify)`` -> the verify response.
"""
from __future__ import annotations

import pytest

from tests.mfa.conftest import enable_mfa  # noqa: F401  (fixture)
from tests.oidc.conftest import hosted_app, oidc_client  # noqa: F401  (fixtures: the hosted login's offer)
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.plugins.users import fresh_address


@pytest.fixture
def config_overrides(request):
    overrides = {"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}
    return {**overrides, **getattr(request, "param", {})}


def passkeys_url(app, path: str = "") -> str:
    return f"/api/v1/applications/{app['_id']}/auth/passkeys{path}"


@pytest.fixture
def passkey_app(ctx, make_application):
    def make(mode="passwordless", **settings):
        app = make_application("Passkey App")
        return ctx.applications.update(app["_id"], {"passkeys": mode, **settings})

    return make


@pytest.fixture
def app_pw(passkey_app):
    """An application whose passkeys sign in alone."""
    return passkey_app()


@pytest.fixture
def register(client):
    def do(app, user_token, authenticator: SoftAuthenticator, name=None, **falsify):
        options = client.simulate_post(passkeys_url(app, "/registration/options"), json={}, headers=user_token.headers)
        assert options.status_code == 200, options.text
        data = options.json["data"]
        body = {"challenge_id": data["challenge_id"], "credential": authenticator.create(data["options"], **falsify)}
        if name is not None:
            body["name"] = name
        return client.simulate_post(passkeys_url(app, "/registration/verify"), json=body, headers=user_token.headers)

    return do


@pytest.fixture
def sign_in_options(client):
    def do(app, challenge_token=None, remote_addr=None):
        body = {} if challenge_token is None else {"challenge_token": challenge_token}
        response = client.simulate_post(passkeys_url(app, "/authentication/options"), json=body,
                                        remote_addr=remote_addr or fresh_address())
        assert response.status_code == 200, response.text
        return response.json["data"]

    return do


@pytest.fixture
def sign_in(client, sign_in_options):
    def do(app, authenticator: SoftAuthenticator, challenge_token=None, **falsify):
        data = sign_in_options(app, challenge_token)
        body = {"challenge_id": data["challenge_id"], "credential": authenticator.get(data["options"], **falsify)}
        return client.simulate_post(passkeys_url(app, "/authentication/verify"), json=body,
                                    remote_addr=fresh_address())

    return do
