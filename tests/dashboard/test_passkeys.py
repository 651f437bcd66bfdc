"""Passkeys of dashboard accounts (docs/dashboard.md, "Passkeys"): register, list,
rename and delete them; sign in with one alone or as the second step; an
organization's ``require_mfa``; and the boundaries: another account's passkey, and an
application's end-user passkey, are unknown here (and the other way round).

The authenticator is the software one of the end-user passkey tests
(tests/passkeys/authenticator.py), never the server's helpers."""
from __future__ import annotations

import pytest

from controlplane.auth import SESSION_COOKIE
from shared.config import Rate
from shared.ids import digest
from tests.conftest import assert_error
from tests.dashboard.test_mfa import claim, enrol, password_step, unconfirm
from tests.passkeys import conftest as end_user_passkeys
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.plugins.users import fresh_address

# The end-user passkey fixtures, for the tests across the boundary.
passkey_app, register = end_user_passkeys.passkey_app, end_user_passkeys.register
sign_in, sign_in_options = end_user_passkeys.sign_in, end_user_passkeys.sign_in_options

BASE = "/api/dashboard"
ME_PASSKEYS = f"{BASE}/me/passkeys"
ORGS = f"{BASE}/organizations"
APPS = f"{BASE}/applications"


@pytest.fixture
def config_overrides(request):
    overrides = {"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}
    return {**overrides, **getattr(request, "param", {})}


def add_passkey(account, key: SoftAuthenticator, name=None, **falsify):
    options = account.post(f"{ME_PASSKEYS}/registration/options", json={})
    assert options.status_code == 200, options.text
    data = options.json["data"]
    body = {"challenge_id": data["challenge_id"], "credential": key.create(data["options"], **falsify),
            "password": account.password}
    if name is not None:
        body["name"] = name
    return account.post(f"{ME_PASSKEYS}/registration/verify", json=body)


def passkey_options(client, challenge_token=None):
    body = {} if challenge_token is None else {"challenge_token": challenge_token}
    response = client.simulate_post(f"{BASE}/login/passkey/options", json=body, remote_addr=fresh_address())
    assert response.status_code == 200, response.text
    return response.json["data"]


def passkey_login(client, key: SoftAuthenticator, challenge_token=None, **falsify):
    data = passkey_options(client, challenge_token)
    return client.simulate_post(f"{BASE}/login/passkey", remote_addr=fresh_address(),
                                json={"challenge_id": data["challenge_id"],
                                      "credential": key.get(data["options"], **falsify)})


# ---------------------------------------------------------------- registration and management


def test_an_account_registers_lists_renames_and_deletes_a_passkey(dashboard_account, ctx):
    key = SoftAuthenticator(aaguid=bytes.fromhex("ea9b8d664d011d213ce4b6b48cb575d4"))
    options = dashboard_account.post(f"{ME_PASSKEYS}/registration/options", json={}).json["data"]["options"]
    assert options["rp"] == {"id": "localhost", "name": "iamgate dashboard"}
    assert options["user"]["name"] == dashboard_account.email
    response = add_passkey(dashboard_account, key, name="Laptop")
    assert response.status_code == 201, response.text
    passkey = response.json["data"]
    assert passkey["name"] == "Laptop" and passkey["authenticator_name"] == "Google Password Manager"
    stored = ctx.store["passkeys"].find_one({"_id": passkey["id"]})
    assert stored["app_id"] == "dashboard" and stored["user_id"] == dashboard_account.id
    assert stored["credential_id"] == key.id
    record = ctx.store["events"].find_one({"action": "dashboard_account.mfa_enabled"})
    assert record["data"] == {"method": "webauthn", "passkey_id": passkey["id"]}
    assert record["organization_id"] == dashboard_account.organization_id

    assert dashboard_account.get(ME_PASSKEYS).json["data"] == [passkey]
    status = dashboard_account.get(f"{BASE}/me/mfa").json["data"]
    assert status == {"mfa_enabled": False, "methods": [], "backup_codes_remaining": 0,
                      "passkeys": {"count": 1, "second_factor": True}}
    assert dashboard_account.get(f"{BASE}/me").json["data"]["mfa_enabled"] is True

    renamed = dashboard_account.request("PATCH", f"{ME_PASSKEYS}/{passkey['id']}", json={"name": "Work laptop"})
    assert renamed.status_code == 200 and renamed.json["data"]["name"] == "Work laptop"
    assert_error(dashboard_account.request("PATCH", f"{ME_PASSKEYS}/{passkey['id']}", json={"name": ""}),
                 400, "VALIDATION_INVALID_FORMAT")
    # Deleting asks for the password, as turning TOTP off does: a session cookie alone is not enough.
    assert_error(dashboard_account.delete(f"{ME_PASSKEYS}/{passkey['id']}", json={}), 400,
                 "VALIDATION_INVALID_FORMAT")
    assert_error(dashboard_account.delete(f"{ME_PASSKEYS}/{passkey['id']}", json={"password": "wrong"}), 422,
                 "INVALID_PASSWORD")
    assert ctx.store["passkeys"].count_documents({"app_id": "dashboard"}) == 1
    assert dashboard_account.delete(f"{ME_PASSKEYS}/{passkey['id']}",
                                    json={"password": dashboard_account.password}).status_code == 204
    assert ctx.store["passkeys"].count_documents({"app_id": "dashboard"}) == 0
    assert ctx.store["events"].find_one({"action": "dashboard_account.mfa_disabled"})["data"] == {
        "method": "webauthn", "passkey_id": passkey["id"]}
    assert_error(dashboard_account.delete(f"{ME_PASSKEYS}/{passkey['id']}",
                                          json={"password": dashboard_account.password}), 404, "PASSKEY_NOT_FOUND")


def test_passkey_routes_need_a_signed_in_account(client):
    for method, path in [("GET", ME_PASSKEYS), ("POST", f"{ME_PASSKEYS}/registration/options"),
                         ("DELETE", f"{ME_PASSKEYS}/x")]:
        response = client.simulate_request(method, path, json={} if method == "POST" else None)
        assert response.status_code == 401, (path, response.text)


def test_a_registration_challenge_is_single_use_and_the_accounts_own(dashboard_account, make_dashboard_account,
                                                                      ctx):
    data = dashboard_account.post(f"{ME_PASSKEYS}/registration/options", json={}).json["data"]
    key = SoftAuthenticator()
    other = make_dashboard_account()
    stolen = other.post(f"{ME_PASSKEYS}/registration/verify", json={
        "challenge_id": data["challenge_id"], "credential": key.create(data["options"]), "password": other.password})
    assert_error(stolen, 400, "PASSKEY_CHALLENGE_INVALID")  # and the challenge is used up
    body = {"challenge_id": data["challenge_id"], "credential": key.create(data["options"]),
            "password": dashboard_account.password}
    again = dashboard_account.post(f"{ME_PASSKEYS}/registration/verify", json=body)
    assert_error(again, 400, "PASSKEY_CHALLENGE_INVALID")
    assert ctx.store["passkeys"].count_documents({}) == 0


def test_registering_a_passkey_takes_the_password(dashboard_account, ctx):
    """A passkey signs in alone, so one planted through a stolen session cookie would
    outlive the session: without the account's password (or with a wrong one) nothing
    is stored, no session ends and the challenge stays for the owner's next try."""
    other = password_step(dashboard_account).cookies[SESSION_COOKIE].value
    data = dashboard_account.post(f"{ME_PASSKEYS}/registration/options", json={}).json["data"]
    body = {"challenge_id": data["challenge_id"], "credential": SoftAuthenticator().create(data["options"])}
    missing = dashboard_account.post(f"{ME_PASSKEYS}/registration/verify", json=body)
    assert_error(missing, 400, "VALIDATION_INVALID_FORMAT")
    assert missing.json["error"]["details"]["fields"] == {"password": "is required"}
    assert_error(dashboard_account.post(f"{ME_PASSKEYS}/registration/verify", json={**body, "password": "nope"}),
                 422, "INVALID_PASSWORD")
    assert ctx.store["passkeys"].count_documents({"app_id": "dashboard"}) == 0
    assert dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: other}).status_code == 200
    right = dashboard_account.post(f"{ME_PASSKEYS}/registration/verify",
                                   json={**body, "password": dashboard_account.password})
    assert right.status_code == 201, right.text
    assert_error(dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: other}), 401, "UNAUTHORIZED")


def test_an_unconfirmed_account_cannot_register_a_passkey(make_dashboard_account, ctx):
    account = make_dashboard_account(verified=False)
    assert_error(account.post(f"{ME_PASSKEYS}/registration/options", json={}), 403, "DASHBOARD_EMAIL_UNVERIFIED")

    confirmed = make_dashboard_account()
    data = confirmed.post(f"{ME_PASSKEYS}/registration/options", json={}).json["data"]
    unconfirm(confirmed)  # options fetched before: the registration is refused too
    refused = confirmed.post(f"{ME_PASSKEYS}/registration/verify", json={
        "challenge_id": data["challenge_id"], "credential": SoftAuthenticator().create(data["options"]),
        "password": confirmed.password})
    assert_error(refused, 403, "DASHBOARD_EMAIL_UNVERIFIED")
    assert ctx.store["passkeys"].count_documents({"app_id": "dashboard"}) == 0


def test_the_mailbox_owners_claim_removes_an_earlier_holders_passkeys(dashboard_account, client, ctx, outbox):
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    assert dashboard_account.post(f"{ME_PASSKEYS}/registration/options", json={}).status_code == 200  # left open
    unconfirm(dashboard_account)

    password = claim(dashboard_account, outbox)

    assert_error(passkey_login(client, key), 400, "PASSKEY_CREDENTIAL_UNKNOWN")
    mine = {"app_id": "dashboard", "user_id": dashboard_account.id}
    assert ctx.store["passkeys"].count_documents(mine) == 0
    assert ctx.store["passkey_challenges"].count_documents(mine) == 0
    signed_in = client.simulate_post(f"{BASE}/login", remote_addr=fresh_address(),
                                     json={"email": dashboard_account.email, "password": password})
    assert signed_in.status_code == 200 and SESSION_COOKIE in signed_in.cookies, signed_in.text
    records = ctx.store["events"].find({"action": "dashboard_account.mfa_disabled", "actor.id": dashboard_account.id})
    assert [r["data"] for r in records] == [{"method": "webauthn", "confirmed_by": "account_claimed"}]


def test_the_owners_own_verification_link_keeps_the_passkeys(make_dashboard_account, client, outbox):
    account = make_dashboard_account()
    key = SoftAuthenticator()
    assert add_passkey(account, key).status_code == 201
    unconfirm(account)
    outbox.clear()
    assert account.post(f"{BASE}/email/resend", json={}).status_code in (200, 202, 204)
    verified = client.simulate_post(f"{BASE}/email/verify", json={"token": outbox[-1].token})
    assert verified.status_code == 200, verified.text
    assert passkey_login(client, key).status_code == 200


def test_a_wrong_origin_is_refused_without_echoing_the_expected_one(dashboard_account, ctx):
    response = add_passkey(dashboard_account, SoftAuthenticator(), origin="https://evil.example")
    error = assert_error(response, 400, "PASSKEY_ORIGIN_MISMATCH")
    assert "localhost" not in error["message"]
    assert ctx.store["passkeys"].count_documents({}) == 0


@pytest.mark.parametrize("framed", [{"cross_origin": True, "top_origin": "https://evil.example"},
                                    {"top_origin": ORIGIN}])
def test_a_ceremony_in_a_cross_origin_frame_is_refused(dashboard_account, client, ctx, framed):
    """The end users' check (tests/passkeys/test_verification.py), on the dashboard's
    registration and sign-in alike."""
    key = SoftAuthenticator()
    assert_error(add_passkey(dashboard_account, key, **framed), 400, "PASSKEY_ORIGIN_MISMATCH")
    assert ctx.store["passkeys"].count_documents({}) == 0
    assert add_passkey(dashboard_account, key).status_code == 201
    response = passkey_login(client, key, **framed)
    assert_error(response, 400, "PASSKEY_ORIGIN_MISMATCH")
    assert SESSION_COOKIE not in response.cookies
    assert dashboard_account.get(ME_PASSKEYS).json["data"][0]["last_used_at"] is None


def test_the_first_passkey_ends_the_accounts_other_sessions(dashboard_account):
    first_session = dashboard_account.session
    dashboard_account.login()  # a second browser, which registers the passkey
    assert add_passkey(dashboard_account, SoftAuthenticator()).status_code == 201
    assert dashboard_account.get(f"{BASE}/me").status_code == 200
    assert_error(dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: first_session}), 401)


@pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": "", "webauthn_origins": ()}], indirect=True)
def test_without_an_rp_id_passkeys_are_unavailable(dashboard_account, client):
    assert_error(dashboard_account.post(f"{ME_PASSKEYS}/registration/options", json={}), 503, "PASSKEY_UNAVAILABLE")
    response = client.simulate_post(f"{BASE}/login/passkey/options", json={}, remote_addr=fresh_address())
    assert_error(response, 503, "PASSKEY_UNAVAILABLE")
    assert dashboard_account.get(ME_PASSKEYS).json["data"] == []


# ---------------------------------------------------------------- sign-in


def test_a_discoverable_passkey_signs_in_alone(dashboard_account, client, ctx):
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    options = passkey_options(client)["options"]
    assert options["allowCredentials"] == [] and options["userVerification"] == "required"
    response = passkey_login(client, key)
    assert response.status_code == 200, response.text
    assert response.json["data"]["id"] == dashboard_account.id
    session = response.cookies[SESSION_COOKIE].value
    me = client.simulate_get(f"{BASE}/me", cookies={SESSION_COOKIE: session})
    assert me.status_code == 200 and me.json["data"]["email"] == dashboard_account.email
    assert dashboard_account.get(ME_PASSKEYS).json["data"][0]["last_used_at"] is not None
    record = ctx.store["events"].find_one({"action": "dashboard_account.passkey_sign_in"})
    assert record["result"] == {"status": "success"} and record["data"]["second_factor"] is False


def test_a_security_key_without_storage_does_not_sign_in_alone(dashboard_account, client, ctx):
    key = SoftAuthenticator(resident=False, user_verifying=False)
    assert add_passkey(dashboard_account, key).status_code == 201
    response = passkey_login(client, key)
    assert_error(response, 400, "PASSKEY_USER_VERIFICATION_REQUIRED")
    assert SESSION_COOKIE not in response.cookies
    assert ctx.store["events"].find_one({"action": "dashboard_account.passkey_sign_in"})["result"] == {
        "status": "failure", "reason": "user_verification_required"}


def test_a_passkey_answers_the_password_sign_ins_second_step(dashboard_account, client, clock, ctx):
    key = SoftAuthenticator(resident=False, user_verifying=False)
    assert add_passkey(dashboard_account, key).status_code == 201
    enrol(dashboard_account, clock)
    step = password_step(dashboard_account)
    data = step.json["data"]
    assert SESSION_COOKIE not in step.cookies
    assert data["mfa_required"] is True and data["mfa_methods"] == ["totp", "webauthn"]
    options = passkey_options(client, data["challenge_token"])
    assert [c["id"] for c in options["options"]["allowCredentials"]] == [key.id]
    body = {"challenge_id": options["challenge_id"], "credential": key.get(options["options"])}
    response = client.simulate_post(f"{BASE}/login/passkey", json=body, remote_addr=fresh_address())
    assert response.status_code == 200, response.text
    assert response.cookies[SESSION_COOKIE].value
    challenge = ctx.store["mfa_challenges"].find_one({"_id": digest(data["challenge_token"])})
    assert challenge["consumed_at"] is not None and challenge["attempts"] == 1
    # Replayed: the passkey challenge is gone, and the MFA challenge is spent.
    replay = client.simulate_post(f"{BASE}/login/passkey", json=body, remote_addr=fresh_address())
    assert_error(replay, 400, "PASSKEY_CHALLENGE_INVALID")
    again = client.simulate_post(f"{BASE}/login/passkey/options", json={"challenge_token": data["challenge_token"]},
                                 remote_addr=fresh_address())
    assert_error(again, 410, "AUTH_MFA_CHALLENGE_EXPIRED")


def test_a_verified_second_step_moves_the_sign_count_though_a_parallel_code_won(dashboard_account, client, clock,
                                                                               ctx, monkeypatch):
    """The assertion verified, then the MFA challenge was found used (a code answered it
    meanwhile): the sign-in is refused, yet the count the authenticator signed is stored
    with the use (WebAuthn L3 6.1.1: evidence against a clone whatever the sign-in's fate)."""
    key = SoftAuthenticator(resident=False, user_verifying=False, counter=5)
    assert add_passkey(dashboard_account, key).status_code == 201
    token = password_step(dashboard_account).json["data"]["challenge_token"]
    options = passkey_options(client, token)
    credentials, factor = ctx.dashboard.passkeys.credentials, ctx.dashboard.passkeys.factor
    verify_use = credentials.verify_use

    def then_a_code_answers(*args):
        assertion = verify_use(*args)
        assert factor.consume_challenge("dashboard", {"_id": digest(token)}, clock())
        return assertion

    monkeypatch.setattr(credentials, "verify_use", then_a_code_answers)
    response = client.simulate_post(f"{BASE}/login/passkey", remote_addr=fresh_address(),
                                    json={"challenge_id": options["challenge_id"],
                                          "credential": key.get(options["options"])})
    assert_error(response, 410, "AUTH_MFA_CHALLENGE_EXPIRED")
    assert SESSION_COOKIE not in response.cookies
    stored = ctx.store["passkeys"].find_one({"credential_id": key.id})
    assert stored["sign_count"] == 6 and stored["last_used_at"] is not None


def test_a_totp_only_challenge_takes_no_passkey(dashboard_account, client, clock):
    enrol(dashboard_account, clock)
    token = password_step(dashboard_account).json["data"]["challenge_token"]
    response = client.simulate_post(f"{BASE}/login/passkey/options", json={"challenge_token": token},
                                    remote_addr=fresh_address())
    assert_error(response, 410, "AUTH_MFA_CHALLENGE_EXPIRED")


def test_an_expired_passkey_challenge_is_refused(dashboard_account, client, clock):
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    data = passkey_options(client)
    clock.advance(301)
    response = client.simulate_post(f"{BASE}/login/passkey", remote_addr=fresh_address(),
                                    json={"challenge_id": data["challenge_id"], "credential": key.get(data["options"])})
    assert_error(response, 400, "PASSKEY_CHALLENGE_INVALID")


@pytest.mark.parametrize("config_overrides", [{"rate_limit_dashboard_login": Rate(2, 60)}], indirect=True)
def test_passkey_sign_ins_draw_on_the_password_sign_ins_budget(dashboard_account, client, ctx):
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    ip = "198.51.100.77"
    options = client.simulate_post(f"{BASE}/login/passkey/options", json={}, remote_addr=ip)
    assert options.status_code == 200, options.text
    data = options.json["data"]
    assert client.simulate_post(f"{BASE}/login", json={"email": dashboard_account.email, "password": "wrong"},
                                remote_addr=ip).status_code == 401
    refused = client.simulate_post(f"{BASE}/login/passkey", remote_addr=ip,
                                   json={"challenge_id": data["challenge_id"], "credential": key.get(data["options"])})
    assert_error(refused, 429, "RATE_LIMIT_EXCEEDED")
    assert SESSION_COOKIE not in refused.cookies
    assert ctx.store["passkey_challenges"].count_documents({}) == 1  # counted before the challenge was taken


# ---------------------------------------------------------------- boundaries


def test_an_account_cannot_rename_or_delete_anothers_passkey(dashboard_account, make_dashboard_account, ctx):
    victim_key = SoftAuthenticator()
    passkey = add_passkey(dashboard_account, victim_key).json["data"]
    attacker = make_dashboard_account()
    assert_error(attacker.delete(f"{ME_PASSKEYS}/{passkey['id']}", json={"password": attacker.password}),
                 404, "PASSKEY_NOT_FOUND")
    assert_error(attacker.request("PATCH", f"{ME_PASSKEYS}/{passkey['id']}", json={"name": "mine"}),
                 404, "PASSKEY_NOT_FOUND")
    assert attacker.get(ME_PASSKEYS).json["data"] == []
    stored = ctx.store["passkeys"].find_one({"_id": passkey["id"]})
    assert stored is not None and stored["name"] == "Passkey"


def test_anothers_passkey_does_not_answer_an_accounts_second_step(dashboard_account, make_dashboard_account,
                                                                   client):
    assert add_passkey(dashboard_account, SoftAuthenticator()).status_code == 201
    attacker = make_dashboard_account()
    attacker_key = SoftAuthenticator()
    assert add_passkey(attacker, attacker_key).status_code == 201
    token = password_step(dashboard_account).json["data"]["challenge_token"]
    response = passkey_login(client, attacker_key, challenge_token=token)
    assert_error(response, 400, "PASSKEY_CREDENTIAL_UNKNOWN")
    assert SESSION_COOKIE not in response.cookies
    assert attacker.get(ME_PASSKEYS).json["data"][0]["last_used_at"] is None  # refused before it was verified


def test_an_end_users_passkey_does_not_sign_in_to_the_dashboard(client, passkey_app, make_user_token,
                                                                register, dashboard_account):
    app = passkey_app()
    end_user_key = SoftAuthenticator()
    assert register(app, make_user_token(app), end_user_key).status_code == 201
    response = passkey_login(client, end_user_key)
    assert_error(response, 400, "PASSKEY_CREDENTIAL_UNKNOWN")
    assert SESSION_COOKIE not in response.cookies


def test_a_dashboard_passkey_does_not_sign_in_to_an_application(client, passkey_app, dashboard_account, sign_in,
                                                                make_user_token):
    app = passkey_app()
    make_user_token(app, email=dashboard_account.email)  # the same person, as an end user too
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    assert_error(sign_in(app, key), 400, "PASSKEY_CREDENTIAL_UNKNOWN")


# ---------------------------------------------------------------- require_mfa


def test_a_passkey_satisfies_an_organizations_require_mfa(make_dashboard_account, clock):
    owner = make_dashboard_account(name="Olivia Owner")
    assert add_passkey(owner, SoftAuthenticator()).status_code == 201
    org_id = owner.post(ORGS, json={"name": "Acme"}).json["data"]["id"]
    app = owner.post(APPS, json={"name": "Shop", "organization_id": org_id}).json["data"]
    member = make_dashboard_account(name="Member")
    assert owner.post(f"{ORGS}/{org_id}/members", json={"email": member.email, "role": "member"}).status_code == 201
    assert owner.request("PATCH", f"{ORGS}/{org_id}", json={"require_mfa": True}).status_code == 200

    assert_error(member.get(f"{APPS}/{app['id']}"), 403, "DASHBOARD_MFA_REQUIRED")
    passkey = add_passkey(member, SoftAuthenticator())  # enrolment stays open
    assert passkey.status_code == 201, passkey.text
    assert member.get(f"{APPS}/{app['id']}").status_code == 200
    assert member.delete(f"{ME_PASSKEYS}/{passkey.json['data']['id']}",
                         json={"password": member.password}).status_code == 204
    assert_error(member.get(f"{APPS}/{app['id']}"), 403, "DASHBOARD_MFA_REQUIRED")
