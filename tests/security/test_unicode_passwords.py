"""Hardening item 6: passwords are Unicode.

A non-ASCII password used to reach ``hmac.compare_digest`` on ``str`` and answer 500.
Every path that takes a password (end users: register, login, change, reset; dashboard:
register, login, change) must accept it, and NFKC-equivalent spellings (NIST SP 800-63B
5.1.1.2) must be the same password.
"""
from __future__ import annotations

import unicodedata
import uuid

import pytest

from controlplane.auth import SESSION_COOKIE
from tests.plugins.users import fresh_address, users_url

PASSWORDS = [
    "Pässwörd-123",
    "密码密码密码密码12",
    "🔐🔑 emoji pass 42",
    "Cafe\u0301-Combining-9",  # 'e' + COMBINING ACUTE ACCENT
]
# Another spelling of the same password: NFC for the combining one, full-width digits
# (NFKC folds them) for the others.
EQUIVALENT = {
    "Pässwörd-123": "Pa\u0308sswo\u0308rd-\uff11\uff12\uff13",
    "密码密码密码密码12": "密码密码密码密码\uff11\uff12",
    "🔐🔑 emoji pass 42": "🔐🔑 emoji pass \uff14\uff12",
    "Cafe\u0301-Combining-9": unicodedata.normalize("NFC", "Cafe\u0301-Combining-9"),
}


def _email():
    return f"uni-{uuid.uuid4().hex[:10]}@example.com"


@pytest.mark.parametrize("password", PASSWORDS)
def test_end_user_password_paths_take_unicode(client, application, outbox, password):
    email = _email()
    r = client.simulate_post(users_url(application, "/register"), remote_addr=fresh_address(),
                             json={"email": email, "password": password, "name": "Uni"})
    assert r.status_code == 201, r.text
    user_id = r.json["data"]["id"]

    r = client.simulate_post(users_url(application, "/login"), remote_addr=fresh_address(),
                             json={"email": email, "password": EQUIVALENT[password]})
    assert r.status_code == 200, r.text
    headers = {"Authorization": f"Bearer {r.json['data']['access_token']}"}

    r = client.simulate_post(users_url(application, "/login"), remote_addr=fresh_address(),
                             json={"email": email, "password": password + "x"})
    assert r.status_code == 401, r.text

    new = password[::-1] + "Zz"
    r = client.simulate_post(users_url(application, f"/{user_id}/change-password"), headers=headers,
                             remote_addr=fresh_address(),
                             json={"current_password": password, "new_password": new,
                                   "new_password_confirmation": new})
    assert r.status_code == 200, r.text

    client.simulate_post(users_url(application, "/password/forgot"), json={"email": email},
                         remote_addr=fresh_address())
    token = outbox[-1].token
    r = client.simulate_post(users_url(application, "/password/reset"), remote_addr=fresh_address(),
                             json={"token": token, "email": email, "password": password,
                                   "password_confirmation": password})
    assert r.status_code == 200, r.text
    r = client.simulate_post(users_url(application, "/login"), remote_addr=fresh_address(),
                             json={"email": email, "password": EQUIVALENT[password]})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("password", PASSWORDS)
def test_dashboard_password_paths_take_unicode(client, password):
    email, ip = _email(), fresh_address()
    r = client.simulate_post("/api/dashboard/register", remote_addr=ip,
                             json={"email": email, "password": password, "name": "Uni"})
    assert r.status_code == 201, r.text
    r = client.simulate_post("/api/dashboard/login", remote_addr=ip,
                             json={"email": email, "password": EQUIVALENT[password]})
    assert r.status_code == 200, r.text
    cookies = {SESSION_COOKIE: r.cookies[SESSION_COOKIE].value}
    new = password[::-1] + "Zz"
    r = client.simulate_post("/api/dashboard/me/password", remote_addr=ip, cookies=cookies,
                             json={"current_password": password, "new_password": new})
    assert r.status_code == 200, r.text
    r = client.simulate_post("/api/dashboard/login", remote_addr=ip, json={"email": email, "password": new})
    assert r.status_code == 200, r.text


def test_a_unicode_password_equal_to_the_email_is_refused(client, application):
    email = "jürgen.müller@example.com"
    r = client.simulate_post(users_url(application, "/register"), remote_addr=fresh_address(),
                             json={"email": email, "password": email.upper(), "name": "J"})
    assert r.status_code == 422, r.text
