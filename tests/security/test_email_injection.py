"""Hardening item 7: email injection.

- ``x,victim@corp.com`` was a separate account whose mail went to the victim too;
  addresses are now checked by ``email-validator`` and stored normalized;
- a ``name`` with line breaks was placed into emails verbatim (forged lines in a reset
  mail); control characters are now removed from names.
"""
from __future__ import annotations

import pytest

from tests.plugins.users import fresh_address, users_url

HOSTILE = ["x,victim@corp.com", "x;victim@corp.com", "victim@corp.com>", "<victim@corp.com>",
           '"x"@corp.com', "a b@corp.com", "victim@corp.com\nBcc: all@corp.com", "victim@localhost"]


@pytest.mark.parametrize("email", HOSTILE)
def test_an_address_that_is_not_one_mailbox_is_refused(client, application, outbox, email):
    r = client.simulate_post(users_url(application, "/register"), remote_addr=fresh_address(),
                             json={"email": email, "password": "Sturdy-Pass-42", "name": "X"})
    assert r.status_code == 400, r.text
    assert r.json["error"]["details"]["fields"].keys() == {"email"}
    r = client.simulate_post("/api/dashboard/register", remote_addr=fresh_address(),
                             json={"email": email, "password": "Sturdy-Pass-42", "name": "X"})
    assert r.status_code == 400, r.text
    assert outbox == []


def test_addresses_are_stored_normalized(client, application, ctx):
    r = client.simulate_post(users_url(application, "/register"), remote_addr=fresh_address(),
                             json={"email": "  Ada.Lovelace@EXAMPLE.com ", "password": "Sturdy-Pass-42", "name": "A"})
    assert r.status_code == 201 and r.json["data"]["email"] == "ada.lovelace@example.com"
    again = client.simulate_post(users_url(application, "/register"), remote_addr=fresh_address(),
                                 json={"email": "ada.lovelace@example.com", "password": "Sturdy-Pass-42", "name": "A"})
    assert again.status_code == 409


def test_line_breaks_in_a_name_do_not_reach_the_mail(client, application, outbox):
    name = "Eve\r\n\r\nYour account is suspended. Log in at https://evil.example/login\u2028\u202eX\x00"
    r = client.simulate_post(users_url(application, "/register"), remote_addr=fresh_address(),
                             json={"email": "eve@example.com", "password": "Sturdy-Pass-42", "name": name})
    assert r.status_code == 201
    assert r.json["data"]["name"] == "Eve Your account is suspended. Log in at https://evil.example/login X"
    body = outbox[-1].body
    assert body.startswith("Hello Eve Your account is suspended. Log in at https://evil.example/login X,\n")
    assert not any(c in body for c in "\r\u2028\u202e\x00")


def test_a_dashboard_name_and_an_application_brand_are_one_line(dashboard_account, make_dashboard_app):
    r = dashboard_account.put("/api/dashboard/me", json={"name": "Dana\nAdmin\t"})
    assert r.status_code == 200 and r.json["data"]["name"] == "Dana Admin"
    app = make_dashboard_app(dashboard_account, name="Shop\r\nBcc: x@y.z")
    assert app["name"] == "Shop Bcc: x@y.z"
