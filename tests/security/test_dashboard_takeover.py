"""Hardening item 1: organization takeover through unverified dashboard emails.

The attack: a stranger registers a dashboard account for alice@victim.com before Alice
does; an owner later adds "alice@victim.com" as an admin and the stranger's account
joins, able to mint ``*:*`` API keys.  Member additions now need a confirmed address;
an unconfirmed holder cannot squat the address (whoever proves the mailbox owns it);
dashboard accounts get password reset; member additions are rate limited.
"""
from __future__ import annotations

import pytest

from controlplane.auth import SESSION_COOKIE
from tests.plugins.users import fresh_address

VICTIM = "alice@victim.com"
PASSWORD = "Attacker-Pass-1"


@pytest.fixture
def mails(ctx, monkeypatch):
    from tests.plugins.users import Email
    sent = []
    monkeypatch.setattr(ctx.mailer, "send", lambda to, subject, body: sent.append(Email(to, subject, body)))
    return sent


def _register(client, email, password=PASSWORD, name="Mallory"):
    return client.simulate_post("/api/dashboard/register", remote_addr=fresh_address(),
                                json={"email": email, "password": password, "name": name})


def _login(client, email, password):
    return client.simulate_post("/api/dashboard/login", remote_addr=fresh_address(),
                                json={"email": email, "password": password})


def test_an_unverified_squatter_cannot_be_added_to_an_organization(client, dashboard_account, mails):
    assert _register(client, VICTIM).status_code == 201
    assert [m.to for m in mails] == [VICTIM]  # the link goes to the mailbox, not to the squatter
    r = dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                               json={"email": VICTIM, "role": "admin"})
    assert r.status_code == 409, r.text
    assert r.json["error"]["code"] == "ACCOUNT_EMAIL_UNVERIFIED"
    members = dashboard_account.get(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members")
    assert VICTIM not in [m["email"] for m in members.json["data"]]


def test_the_mailbox_owner_verifies_and_then_can_be_added(client, dashboard_account, mails):
    assert _register(client, VICTIM, name="Alice").status_code == 201
    r = client.simulate_post("/api/dashboard/email/verify", json={"token": mails[-1].token})
    assert r.status_code == 200, r.text
    assert r.json["data"]["email_verified"] is True
    again = client.simulate_post("/api/dashboard/email/verify", json={"token": mails[-1].token})
    assert again.status_code == 400 and again.json["error"]["code"] == "AUTH_INVALID_VERIFICATION_TOKEN"
    r = dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                               json={"email": VICTIM, "role": "admin"})
    assert r.status_code == 201, r.text


def test_a_verification_link_expires(client, clock, mails):
    _register(client, VICTIM)
    clock.advance(24 * 3600 + 1)
    r = client.simulate_post("/api/dashboard/email/verify", json={"token": mails[-1].token})
    assert r.status_code == 410 and r.json["error"]["code"] == "AUTH_VERIFICATION_TOKEN_EXPIRED"


def test_the_mailbox_owner_claims_an_address_an_unverified_squatter_holds(client, mails):
    assert _register(client, VICTIM).status_code == 201
    squatter = _login(client, VICTIM, PASSWORD)
    squatter_cookie = {SESSION_COOKIE: squatter.cookies[SESSION_COOKIE].value}
    mails.clear()

    r = _register(client, VICTIM, password="Alice-Real-Pass-7", name="Alice")
    assert r.status_code == 409 and r.json["error"]["code"] == "AUTH_EMAIL_ALREADY_REGISTERED"
    assert [m.to for m in mails] == [VICTIM]  # a claim link: a reset link to the mailbox
    r = client.simulate_post("/api/dashboard/password/reset",
                             json={"token": mails[-1].token, "password": "Alice-Real-Pass-7"})
    assert r.status_code == 200, r.text

    assert client.simulate_get("/api/dashboard/me", cookies=squatter_cookie).status_code == 401
    assert _login(client, VICTIM, PASSWORD).status_code == 401
    signed_in = _login(client, VICTIM, "Alice-Real-Pass-7")
    assert signed_in.status_code == 200
    me = client.simulate_get("/api/dashboard/me", cookies={SESSION_COOKIE: signed_in.cookies[SESSION_COOKIE].value})
    assert me.json["data"]["email_verified"] is True


def test_a_verified_account_gets_no_claim_mail(client, make_dashboard_account, mails):
    make_dashboard_account(VICTIM)
    mails.clear()
    assert _register(client, VICTIM).status_code == 409
    assert mails == []


def test_a_locked_owner_resets_the_password(client, make_dashboard_account, mails):
    owner = make_dashboard_account("owner@example.com", login=False)
    for _ in range(6):
        _login(client, owner.email, "Wrong-Pass-123")
    assert _login(client, owner.email, owner.password).status_code == 429
    mails.clear()
    r = client.simulate_post("/api/dashboard/password/forgot", json={"email": owner.email})
    assert r.status_code == 200
    unknown = client.simulate_post("/api/dashboard/password/forgot", json={"email": "nobody@example.com"})
    assert unknown.status_code == 200 and unknown.json == r.json
    assert [m.to for m in mails] == [owner.email]
    weak = client.simulate_post("/api/dashboard/password/reset", json={"token": mails[-1].token, "password": "short"})
    assert weak.status_code == 422
    r = client.simulate_post("/api/dashboard/password/reset",
                             json={"token": mails[-1].token, "password": "Brand-New-Pass-9"})
    assert r.status_code == 200, r.text
    assert _login(client, owner.email, "Brand-New-Pass-9").status_code == 200
    bad = client.simulate_post("/api/dashboard/password/reset",
                               json={"token": mails[-1].token, "password": "Brand-New-Pass-9"})
    assert bad.status_code == 400 and bad.json["error"]["code"] == "AUTH_INVALID_RESET_TOKEN"


def test_forgot_is_limited_per_email(client, make_dashboard_account, mails):
    owner = make_dashboard_account(login=False)
    codes = [client.simulate_post("/api/dashboard/password/forgot", remote_addr=fresh_address(),
                                  json={"email": owner.email}).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]


@pytest.mark.parametrize("config_overrides", [{"rate_limit_member_add": __import__("shared.config").config.Rate(3, 3600)}])
def test_member_additions_are_limited_per_account_and_per_ip(client, dashboard_account, make_dashboard_account):
    url = f"/api/dashboard/organizations/{dashboard_account.organization_id}/members"
    codes = [dashboard_account.post(url, remote_addr=fresh_address(),
                                    json={"email": f"probe-{i}@example.com", "role": "viewer"}).status_code
             for i in range(4)]
    assert codes == [404, 404, 404, 429]  # per account, whatever address the caller comes from
    other = make_dashboard_account()
    url = f"/api/dashboard/organizations/{other.organization_id}/members"
    ip = fresh_address()
    codes = [other.post(url, remote_addr=ip, json={"email": f"p-{i}@example.com", "role": "viewer"}).status_code
             for i in range(3)]
    third = make_dashboard_account()
    r = third.post(f"/api/dashboard/organizations/{third.organization_id}/members", remote_addr=ip,
                   json={"email": "p@example.com", "role": "viewer"})
    assert codes == [404, 404, 404] and r.status_code == 429  # per IP, whichever account calls
