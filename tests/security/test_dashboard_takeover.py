"""Organization takeover through unverified dashboard emails.

Hardening item 1.  The attack: a stranger registers a dashboard account for
alice@victim.com before Alice does; an owner later adds "alice@victim.com" as an admin
and the stranger's account joins, able to mint ``*:*`` API keys.  Member additions now
need a confirmed address; an unconfirmed holder cannot squat the address (whoever proves
the mailbox owns it); dashboard accounts get password reset; member additions are rate
limited.

The attack: the stranger, from the unconfirmed alice@victim.com,
makes its own confirmed account an owner of the personal organization; when Alice claims
the address, the planted owner stays, reads her applications and mints keys on them.
Now an unconfirmed account writes nothing (403 DASHBOARD_EMAIL_UNVERIFIED), and the claim
(verification or reset) undoes whatever the earlier holder granted, as built here with
that rule lifted, as a holder could before it.
"""
from __future__ import annotations

import pytest

from controlplane.auth import SESSION_COOKIE
from tests.plugins.dashboard import DashboardAccount
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


@pytest.mark.parametrize("config_overrides",
                         [{"rate_limit_member_add": __import__("shared.config").config.Rate(3, 3600)}])
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


# ------------------------------------------------ unverified accounts build nothing; a claim undoes their grants


def _signed_in(client, email, password, account_id="") -> DashboardAccount:
    response = _login(client, email, password)
    assert response.status_code == 200, response.text
    return DashboardAccount(client, account_id or response.json["data"]["id"], email, "", password, "",
                            fresh_address(), response.cookies[SESSION_COOKIE].value)


def _squatter(client) -> DashboardAccount:
    """alice@victim.com, registered and signed in by a stranger, never confirmed."""
    assert _register(client, VICTIM).status_code == 201
    squatter = _signed_in(client, VICTIM, PASSWORD)
    squatter.organization_id = squatter.get("/api/dashboard/me").json["data"]["organizations"][0]["id"]
    return squatter


def _key_works(client, app_id, key) -> bool:
    response = client.simulate_get(f"/api/v1/applications/{app_id}/roles", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code in (200, 401), response.text
    return response.status_code == 200


def _unverified(response):
    assert response.status_code == 403, response.text
    assert response.json["error"]["code"] == "DASHBOARD_EMAIL_UNVERIFIED"


def test_an_unverified_account_reads_and_manages_itself_but_builds_nothing(client, ctx, make_dashboard_account,
                                                                            mails):
    mallory = make_dashboard_account("mallory@evil.example")
    squatter = _squatter(client)
    org = squatter.organization_id
    # An application from before the rule: the account may look at it, not touch it.
    app = ctx.applications.create({"name": "Old"}, organization_id=org, owner_account_id=squatter.id)

    _unverified(squatter.post(f"/api/dashboard/organizations/{org}/members",
                              json={"email": mallory.email, "role": "owner"}))
    _unverified(squatter.post("/api/dashboard/organizations", json={"name": "Corp"}))
    _unverified(squatter.post("/api/dashboard/applications", json={"name": "Shop"}))
    _unverified(squatter.post(f"/api/dashboard/applications/{app['_id']}/api-keys", json={"name": "k"}))
    _unverified(squatter.put(f"/api/dashboard/applications/{app['_id']}", json={"name": "Renamed"}))
    _unverified(squatter.put(f"/api/dashboard/applications/{app['_id']}/branding", json={"brand_color": "#000"}))
    _unverified(squatter.delete(f"/api/dashboard/applications/{app['_id']}"))
    _unverified(squatter.put(f"/api/dashboard/organizations/{org}/members/{squatter.id}", json={"role": "admin"}))

    members = squatter.get(f"/api/dashboard/organizations/{org}/members").json["data"]
    assert [(m["email"], m["role"]) for m in members] == [(VICTIM, "owner")]
    assert [o["id"] for o in squatter.get("/api/dashboard/organizations").json["data"]] == [org]
    assert ctx.api_keys.list(app["_id"]) == []
    assert squatter.get(f"/api/dashboard/applications/{app['_id']}").json["data"]["name"] == "Old"
    assert squatter.put("/api/dashboard/me", json={"name": "Mal"}).status_code == 200
    assert squatter.post("/api/dashboard/email/resend", json={}).status_code == 202

    # The mailbox owner confirms the address: the account writes from then on.
    assert client.simulate_post("/api/dashboard/email/verify", json={"token": mails[-1].token}).status_code == 200
    assert squatter.post("/api/dashboard/applications", json={"name": "Shop"}).status_code == 201


def _plant(client, ctx, make_dashboard_account, monkeypatch):
    """The attack of item 3 through the API, with the confirmation rule lifted: from
    the unconfirmed alice@victim.com the stranger mints a key, makes its confirmed
    account Mallory an owner; Mallory demotes alice@victim.com to viewer, mints a key on
    her application and adds a second accomplice, who mints one too."""
    mallory = make_dashboard_account("mallory@evil.example")
    accomplice = make_dashboard_account("trent@evil.example")
    squatter = _squatter(client)
    org = squatter.organization_id
    with monkeypatch.context() as lifted:
        lifted.setattr(ctx.dashboard.access, "require_verified", lambda account_id: None, raising=False)
        app = squatter.post("/api/dashboard/applications", json={"name": "Shop"}).json["data"]
        keys = {"squatter": squatter.post(f"/api/dashboard/applications/{app['id']}/api-keys", json={"name": "s"})}
        assert squatter.post(f"/api/dashboard/organizations/{org}/members",
                             json={"email": mallory.email, "role": "owner"}).status_code == 201
    keys["mallory"] = mallory.post(f"/api/dashboard/applications/{app['id']}/api-keys", json={"name": "m"})
    assert mallory.put(f"/api/dashboard/organizations/{org}/members/{squatter.id}",
                       json={"role": "viewer"}).status_code == 200
    assert mallory.post(f"/api/dashboard/organizations/{org}/members",
                        json={"email": accomplice.email, "role": "admin"}).status_code == 201
    keys["accomplice"] = accomplice.post(f"/api/dashboard/applications/{app['id']}/api-keys", json={"name": "t"})
    keys = {who: r.json["data"]["key"] for who, r in keys.items()}
    # Mallory's own organization is hers: the claim leaves it alone.
    own_app = mallory.post("/api/dashboard/applications",
                           json={"name": "Mine", "organization_id": mallory.organization_id}).json["data"]
    own_key = mallory.post(f"/api/dashboard/applications/{own_app['id']}/api-keys", json={"name": "own"})
    assert all(_key_works(client, app["id"], key) for key in keys.values())  # and now cached
    return squatter, mallory, accomplice, app, keys, (own_app["id"], own_key.json["data"]["key"])


def _claim_by_reset(client, mails):
    mails.clear()
    assert _register(client, VICTIM, password="Alice-Real-Pass-7", name="Alice").status_code == 409
    r = client.simulate_post("/api/dashboard/password/reset",
                             json={"token": mails[-1].token, "password": "Alice-Real-Pass-7"})
    assert r.status_code == 200, r.text
    return "Alice-Real-Pass-7"


def _claim_by_verification(client, mails):
    (link,) = [m for m in mails if m.to == VICTIM and "verify-email" in m.body]
    assert client.simulate_post("/api/dashboard/email/verify", json={"token": link.token}).status_code == 200
    return PASSWORD


@pytest.mark.parametrize("claim", [_claim_by_reset, _claim_by_verification], ids=["reset", "verification"])
def test_the_claim_removes_what_the_unverified_holder_granted(client, ctx, make_dashboard_account, mails,
                                                              monkeypatch, claim):
    squatter, mallory, accomplice, app, keys, (own_app_id, own_key) = _plant(client, ctx, make_dashboard_account,
                                                                             monkeypatch)
    org = squatter.organization_id

    alice = _signed_in(client, VICTIM, claim(client, mails), squatter.id)

    for planted in (mallory, accomplice):
        assert org not in [o["id"] for o in planted.get("/api/dashboard/organizations").json["data"]]
        assert planted.get(f"/api/dashboard/applications/{app['id']}").status_code == 404
        assert planted.post(f"/api/dashboard/applications/{app['id']}/api-keys",
                            json={"name": "again"}).status_code == 404
        assert planted.get(f"/api/dashboard/organizations/{org}/members").status_code == 404
    # Every key the planted chain minted is refused at once, cached or not.
    assert [who for who, key in keys.items() if _key_works(client, app["id"], key)] == []
    assert ctx.api_keys.list(app["id"]) == []
    assert _key_works(client, own_app_id, own_key)
    # The mailbox owner is the organization's one owner again, and can act.
    members = alice.get(f"/api/dashboard/organizations/{org}/members").json["data"]
    assert [(m["email"], m["role"]) for m in members] == [(VICTIM, "owner")]
    assert ctx.dashboard.accounts.store.organization(org)["owners_count"] == 1
    assert alice.post(f"/api/dashboard/applications/{app['id']}/api-keys", json={"name": "a"}).status_code == 201


def test_members_added_after_the_claim_stay_through_later_resets(client, ctx, make_dashboard_account, mails,
                                                                 monkeypatch):
    squatter, mallory, _, app, _, _ = _plant(client, ctx, make_dashboard_account, monkeypatch)
    org = squatter.organization_id
    alice = _signed_in(client, VICTIM, _claim_by_reset(client, mails), squatter.id)
    colleague = make_dashboard_account("bob@victim.com")
    assert alice.post(f"/api/dashboard/organizations/{org}/members",
                      json={"email": colleague.email, "role": "admin"}).status_code == 201
    key = colleague.post(f"/api/dashboard/applications/{app['id']}/api-keys", json={"name": "b"}).json["data"]["key"]

    mails.clear()
    assert client.simulate_post("/api/dashboard/password/forgot", json={"email": VICTIM}).status_code == 200
    r = client.simulate_post("/api/dashboard/password/reset", json={"token": mails[-1].token,
                                                                    "password": "Alice-Newer-Pass-8"})
    assert r.status_code == 200, r.text

    assert colleague.get(f"/api/dashboard/applications/{app['id']}").status_code == 200
    assert _key_works(client, app["id"], key)
    members = colleague.get(f"/api/dashboard/organizations/{org}/members").json["data"]
    assert sorted(m["email"] for m in members) == sorted([VICTIM, colleague.email])


def test_an_interrupted_claim_leaves_the_account_writing_nothing_and_the_next_link_finishes(
        client, ctx, make_dashboard_account, mails, monkeypatch):
    squatter, mallory, accomplice, app, keys, _ = _plant(client, ctx, make_dashboard_account, monkeypatch)
    org = squatter.organization_id
    store = ctx.dashboard.accounts.store
    removals = []

    def crash_after_one(organization_id, account_id):
        if removals:
            raise RuntimeError("the control plane died here")
        removals.append(account_id)
        return type(store).remove_member(store, organization_id, account_id)

    with monkeypatch.context() as crashing:
        crashing.setattr(store, "remove_member", crash_after_one, raising=False)
        mails.clear()
        assert _register(client, VICTIM, password="Alice-Real-Pass-7", name="Alice").status_code == 409
        r = client.simulate_post("/api/dashboard/password/reset",
                                 json={"token": mails[-1].token, "password": "Alice-Real-Pass-7"})
        assert r.status_code == 500
    assert removals == [accomplice.id]  # the deepest grant first: Mallory's stays reachable
    assert [who for who, key in keys.items() if _key_works(client, app["id"], key)] == []

    alice = _signed_in(client, VICTIM, "Alice-Real-Pass-7", squatter.id)
    assert alice.get("/api/dashboard/me").json["data"]["email_verified"] is False
    _unverified(alice.post("/api/dashboard/organizations", json={"name": "Corp"}))

    mails.clear()
    assert client.simulate_post("/api/dashboard/password/forgot", json={"email": VICTIM}).status_code == 200
    r = client.simulate_post("/api/dashboard/password/reset",
                             json={"token": mails[-1].token, "password": "Alice-Real-Pass-7"})
    assert r.status_code == 200, r.text
    alice = _signed_in(client, VICTIM, "Alice-Real-Pass-7", squatter.id)
    assert mallory.get(f"/api/dashboard/applications/{app['id']}").status_code == 404
    members = alice.get(f"/api/dashboard/organizations/{org}/members").json["data"]
    assert [(m["email"], m["role"]) for m in members] == [(VICTIM, "owner")]
