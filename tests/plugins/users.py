"""Fixtures of the users area, shared by every test directory.

They go through the HTTP API (registration, login) so other areas test against real
users and real tokens.  Each helper call comes from its own client address, so the
per-IP login and registration throttles never get in the way of a test that is not
about them.

- ``make_user(app, email=None, password=PASSWORD, name=..., metadata=None)`` -> the
  User (spec shape) plus ``"password"``;
- ``login(app, email, password, remember_me=False)`` -> the response ``data`` (a token
  pair, or an MFA challenge);
- ``user_token`` -> ``UserToken(user, password, access_token, refresh_token, headers)``
  for a fresh user of ``application``; ``make_user_token(app)`` makes more;
- ``outbox`` -> the emails sent so far (``Email(to, subject, body)``, ``.token``), captured
  instead of being logged.
"""
from __future__ import annotations

import itertools
import re
import uuid
from dataclasses import dataclass

import pytest

PASSWORD = "Correct-Horse-9"
_addresses = itertools.count(1)


def users_url(app, path: str = "") -> str:
    return f"/api/v1/applications/{app['_id']}/users{path}"


def fresh_address() -> str:
    """A client address no other request used (keeps per-IP throttles out of the way)."""
    n = next(_addresses)
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


@dataclass
class Email:
    to: str
    subject: str
    body: str

    @property
    def token(self) -> str:
        match = re.search(r"[?&]token=([A-Za-z0-9_\-]+)", self.body)
        assert match, self.body
        return match.group(1)


@dataclass
class UserToken:
    user: dict
    password: str
    access_token: str
    refresh_token: str

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.access_token}"}


@pytest.fixture
def outbox(ctx, monkeypatch):
    sent: list[Email] = []
    monkeypatch.setattr(ctx.mailer, "send", lambda to, subject, body: sent.append(Email(to, subject, body)))
    return sent


@pytest.fixture
def make_user(client):
    def make(app, email=None, password=PASSWORD, name="Test User", metadata=None):
        email = email or f"user-{uuid.uuid4().hex[:12]}@example.com"
        body = {"email": email, "password": password, "name": name}
        if metadata is not None:
            body["metadata"] = metadata
        response = client.simulate_post(users_url(app, "/register"), json=body, remote_addr=fresh_address())
        assert response.status_code == 201, response.text
        return {**response.json["data"], "password": password}

    return make


@pytest.fixture
def login(client):
    def do(app, email, password=PASSWORD, remember_me=False):
        body = {"email": email, "password": password, "remember_me": remember_me}
        response = client.simulate_post(users_url(app, "/login"), json=body, remote_addr=fresh_address())
        assert response.status_code == 200, response.text
        return response.json["data"]

    return do


@pytest.fixture
def make_user_token(make_user, login):
    def make(app, **kwargs):
        user = make_user(app, **kwargs)
        pair = login(app, user["email"], user["password"])
        return UserToken(user, user["password"], pair["access_token"], pair["refresh_token"])

    return make


@pytest.fixture
def user_token(application, make_user_token):
    return make_user_token(application)


def reset_while_a_thief_signs_in(client, ctx, app, email: str, old_password: str, outbox, monkeypatch,
                                 then=lambda login: None):
    """Reset the password of ``email``; just after the reset revokes the sessions, a thief
    signs in with ``old_password`` and, when that works, ``then(login)`` runs (still inside
    the reset).  Returns the thief's login response."""
    sessions, thief = ctx.users.passwords.sessions, []
    revoke_user = sessions.revoke_user

    def revoke_then_sign_in(*args, **kwargs):
        revoked = revoke_user(*args, **kwargs)
        if not thief:
            login = client.simulate_post(users_url(app, "/login"), remote_addr=fresh_address(),
                                         json={"email": email, "password": old_password})
            thief.append(login)
            if login.status_code == 200:
                then(login)
        return revoked

    monkeypatch.setattr(sessions, "revoke_user", revoke_then_sign_in)
    outbox.clear()
    client.simulate_post(users_url(app, "/password/forgot"), json={"email": email}, remote_addr=fresh_address())
    reset = client.simulate_post(users_url(app, "/password/reset"), remote_addr=fresh_address(),
                                 json={"token": outbox[-1].token, "email": email, "password": "Fresh-Secret-42"})
    assert reset.status_code == 200, reset.text
    monkeypatch.undo()
    assert thief, "the reset revoked no sessions"
    return thief[0]
