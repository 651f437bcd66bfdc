"""Helpers of the MFA tests.

TOTP codes are computed here from RFC 6238 by hand (HMAC-SHA1 over the big-endian step
counter, dynamic truncation, 6 digits), never with the server's helper or pyotp, so a
mistake in the server's TOTP cannot hide behind the same mistake in the test.

- ``rfc6238(secret, when, step_offset=0)``: the code an authenticator app shows;
- ``enable_mfa(app, user_token, label=None)`` -> ``MfaUser`` (setup + confirm over HTTP,
  then the clock moves two steps so the confirmation's step lies behind);
- ``mfa_user``: a user of ``application`` with MFA on;
- ``start_login(app, email, password, remember_me=False)`` -> the login's ``data``;
- ``verify(app, challenge_token, code)`` -> the response of POST V1/users/mfa/verify.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from dataclasses import dataclass
from datetime import datetime

import pytest

from tests.conftest import bearer
from tests.plugins.users import UserToken, fresh_address, users_url

STEP = 30
# What mfa/status adds for a user without passkeys (tests/passkeys/test_flows.py covers them).
NO_PASSKEYS = {"passkeys": {"count": 0, "second_factor": False}}


def rfc6238(secret: str, when: datetime, step_offset: int = 0, digits: int = 6) -> str:
    key = base64.b32decode(secret + "=" * (-len(secret) % 8), casefold=True)
    counter = int(when.timestamp()) // STEP + step_offset
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    binary = struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF
    return str(binary % 10 ** digits).zfill(digits)


@pytest.fixture
def config_overrides(request):
    """Settings per test: ``@pytest.mark.parametrize("config_overrides", [{...}], indirect=True)``."""
    return getattr(request, "param", {})


def mfa_url(app, user_id: str, path: str = "") -> str:
    return users_url(app, f"/{user_id}/mfa{path}")


@dataclass
class MfaUser:
    token: UserToken
    secret: str
    method_id: str
    backup_codes: list

    @property
    def id(self) -> str:
        return self.token.user["id"]

    @property
    def email(self) -> str:
        return self.token.user["email"]

    @property
    def password(self) -> str:
        return self.token.password

    @property
    def headers(self) -> dict:
        return bearer(self.token.access_token)


@pytest.fixture
def enable_mfa(client, clock):
    def enable(app, user_token: UserToken, label=None) -> MfaUser:
        user_id, headers = user_token.user["id"], bearer(user_token.access_token)
        body = {} if label is None else {"label": label}
        setup = client.simulate_post(mfa_url(app, user_id, "/totp/setup"), json=body, headers=headers)
        assert setup.status_code == 200, setup.text
        data = setup.json["data"]
        confirm = client.simulate_post(mfa_url(app, user_id, "/totp/confirm"), headers=headers,
                                       json={"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
        assert confirm.status_code == 201, confirm.text
        # The confirmation spent the current step; two steps on, even the code of the
        # previous step (drift) is one the server has not accepted yet.
        clock.advance(2 * STEP)
        return MfaUser(user_token, data["secret"], data["method_id"], confirm.json["data"]["backup_codes"])

    return enable


@pytest.fixture
def mfa_user(application, user_token, enable_mfa):
    return enable_mfa(application, user_token)


@pytest.fixture
def start_login(client):
    def start(app, email, password, remember_me=False, remote_addr=None, headers=None):
        response = client.simulate_post(users_url(app, "/login"), remote_addr=remote_addr or fresh_address(),
                                        headers=headers,
                                        json={"email": email, "password": password, "remember_me": remember_me})
        assert response.status_code == 200, response.text
        return response.json["data"]

    return start


@pytest.fixture
def verify(client):
    def do(app, challenge_token, code):
        return client.simulate_post(users_url(app, "/mfa/verify"), remote_addr=fresh_address(),
                                    json={"challenge_token": challenge_token, "code": code})

    return do


@pytest.fixture
def challenge(application, mfa_user, start_login):
    """A fresh login challenge of ``mfa_user``."""
    return start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
