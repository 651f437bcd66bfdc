"""Attempts that fail are audit records with a reason code; none holds a secret.

The successful attempts, and every other action, are in test_catalogue.py."""
from __future__ import annotations

import json

import pytest

from tests.audit.test_catalogue import IP, WEBHOOK_URL, Env, failure, newest, ok
from tests.mfa.conftest import rfc6238
from tests.oidc.conftest import REDIRECT_URI, pkce_pair
from tests.plugins.users import PASSWORD, users_url

WRONG_PASSWORD = "Wrong-Horse-1"


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True}


@pytest.fixture
def env(request):
    return Env(request)


def login(env, email, password):
    return env.call("POST", users_url(env.application, "/login"), json={"email": email, "password": password})


def assert_attempt(ctx, action, reason, response, target, *, actor=None):
    doc = newest(ctx, action, failure(reason))
    assert (doc["target"]["type"], doc["target"]["id"]) == target[:2], doc["target"]
    if len(target) > 2:
        assert doc["target"]["display"] == target[2]
    assert (doc["actor"]["type"], doc["actor"]["id"]) == (actor or target)[:2], doc["actor"]
    assert (doc["request_id"], doc["ip"]) == (response.headers["X-Request-Id"], IP)
    return doc


# ---------------------------------------------------------------- logins

def test_a_wrong_password_is_recorded_as_invalid_credentials_against_the_account(env, ctx):
    user = env.make_user(env.application)
    response = login(env, user["email"], WRONG_PASSWORD)
    assert response.status_code == 401
    doc = assert_attempt(ctx, "user.login", "invalid_credentials", response, ("user", user["id"], user["email"]))
    assert doc["data"] == {"method": "password"} and doc["app_id"] == env.application["_id"]


def test_an_unknown_email_is_recorded_with_the_email_typed_and_no_account(env, ctx):
    response = login(env, "nobody@example.com", WRONG_PASSWORD)
    assert response.status_code == 401
    assert_attempt(ctx, "user.login", "invalid_credentials", response, ("user", None, "nobody@example.com"))


def test_a_login_while_locked_is_recorded_as_locked_even_with_the_right_password(env, ctx):
    user = env.make_user(env.application)
    for _ in range(ctx.config.lockout_threshold):
        login(env, user["email"], WRONG_PASSWORD)
    response = login(env, user["email"], PASSWORD)
    assert response.status_code == 429
    assert_attempt(ctx, "user.login", "locked", response, ("user", user["id"]))
    locks = list(ctx.store["events"].find({"action": "user.locked"}))
    assert len(locks) == 1  # the lock is recorded once, by the failure that placed it


def test_a_suspended_user_with_the_right_password_is_recorded_as_suspended(env, ctx):
    user = env.make_user(env.application)
    ctx.users.admin.suspend(env.application["_id"], user["id"])
    response = login(env, user["email"], PASSWORD)
    assert response.status_code == 403
    assert_attempt(ctx, "user.login", "suspended", response, ("user", user["id"]))


def test_a_login_that_owes_a_code_is_recorded_as_mfa_required(env, ctx):
    mfa = env.enable_mfa(env.application, env.user())
    response = ok(login(env, mfa.email, mfa.password))
    assert response.json["data"]["mfa_required"] is True
    assert_attempt(ctx, "user.login", "mfa_required", response, ("user", mfa.id))


def test_a_login_writes_one_record_whether_it_succeeds_or_fails(env, ctx):
    user = env.make_user(env.application)
    head = ctx.events.head()
    ok(login(env, user["email"], PASSWORD))
    assert [d["action"] for d in ctx.store["events"].find({"seq": {"$gt": head}})] == ["user.login"]
    head = ctx.events.head()
    login(env, user["email"], WRONG_PASSWORD)
    docs = list(ctx.store["events"].find({"seq": {"$gt": head}}))
    assert [(d["action"], d["result"]["status"]) for d in docs] == [("user.login", "failure")]


# ---------------------------------------------------------------- MFA

@pytest.mark.parametrize("kind", ["totp", "backup_code"])
def test_a_wrong_code_is_recorded_as_a_failed_challenge_of_its_kind(env, ctx, kind):
    mfa = env.enable_mfa(env.application, env.user())
    challenge = env.start_login(env.application, mfa.email, mfa.password)["challenge_token"]
    right = rfc6238(mfa.secret, env.clock())
    code = str((int(right) + 1) % 10**6).zfill(6) if kind == "totp" else "aaaa-bbbb-cccc"
    response = env.call("POST", users_url(env.application, "/mfa/verify"),
                        json={"challenge_token": challenge, "code": code})
    assert response.status_code == 401, response.text
    doc = assert_attempt(ctx, "mfa.challenge", "invalid_code", response, ("user", mfa.id))
    assert doc["data"] == {"method": kind}


# ---------------------------------------------------------------- password resets

def forgot(env, email):
    return env.call("POST", users_url(env.application, "/password/forgot"), json={"email": email})


def reset(env, token, email):
    return env.call("POST", users_url(env.application, "/password/reset"),
                    json={"token": token, "email": email, "password": "Brand-New-Horse-5"})


def test_a_reset_asked_for_an_unknown_email_is_recorded_but_answered_as_any_other(env, ctx, outbox):
    user = env.make_user(env.application)
    outbox.clear()  # the registration's verification email
    known, unknown = forgot(env, user["email"]), forgot(env, "nobody@example.com")
    assert (known.status_code, {**known.json["data"]}) == (unknown.status_code, {**unknown.json["data"]})
    assert_attempt(ctx, "user.password_reset_requested", "unknown_email", unknown,
                   ("user", None, "nobody@example.com"))
    assert [mail.to for mail in outbox] == [user["email"]]


def test_a_reset_with_an_unknown_token_is_recorded_against_the_email_typed(env, ctx):
    response = reset(env, "not-a-token", "someone@example.com")
    assert response.status_code == 400
    assert_attempt(ctx, "user.password_reset", "invalid_token", response, ("user", None, "someone@example.com"))


def test_a_reset_with_a_used_or_expired_token_is_recorded_against_the_account(env, ctx, outbox):
    user = env.make_user(env.application)
    ok(forgot(env, user["email"]))
    token = outbox[-1].token
    ok(reset(env, token, user["email"]))
    response = reset(env, token, user["email"])
    assert response.status_code == 400
    assert_attempt(ctx, "user.password_reset", "token_used", response, ("user", user["id"]))
    ok(forgot(env, user["email"]))
    env.clock.advance(ctx.config.reset_token_ttl + 1)
    response = reset(env, outbox[-1].token, user["email"])
    assert response.status_code == 410
    assert_attempt(ctx, "user.password_reset", "token_expired", response, ("user", user["id"]))


# ---------------------------------------------------------------- branding and limits

def test_a_branding_change_names_the_fields_with_their_values(env, ctx):
    app_id = env.dashboard_app["id"]
    response = ok(env.dashboard("PUT", f"/applications/{app_id}/branding", json={"brand_color": "#112233"}))
    doc = newest(ctx, "application.updated", {"status": "success"})
    assert doc["request_id"] == response.headers["X-Request-Id"]
    assert doc["data"] == {"fields": ["brand_color"], "before": {"brand_color": None},
                           "after": {"brand_color": "#112233"}}


# ---------------------------------------------------------------- no secret in any record

def test_no_record_holds_a_password_code_token_or_secret(env, ctx, outbox):
    """Every flow that handles a secret runs once; the stored records are then searched
    for each secret it saw."""
    secrets = [PASSWORD, WRONG_PASSWORD, "Brand-New-Horse-5", env.api_key]
    user = env.user()
    secrets += [user.access_token, user.refresh_token]
    login(env, user.user["email"], WRONG_PASSWORD)
    refreshed = ok(env.call("POST", users_url(env.application, "/token/refresh"),
                            json={"refresh_token": user.refresh_token})).json["data"]
    secrets += [refreshed["access_token"], refreshed["refresh_token"]]
    env.clock.advance(ctx.config.refresh_reuse_grace + 1)
    env.call("POST", users_url(env.application, "/token/refresh"), json={"refresh_token": user.refresh_token})
    ok(env.call("POST", users_url(env.application, "/logout"), token=env.api_key,
                json={"refresh_token": refreshed["refresh_token"]}), 204)

    mfa = env.enable_mfa(env.application, env.user())
    secrets += [mfa.secret, *mfa.backup_codes]
    for code in (rfc6238(mfa.secret, env.clock()), mfa.backup_codes[1], "000000"):
        challenge = env.start_login(env.application, mfa.email, mfa.password)["challenge_token"]
        secrets += [challenge, code]
        env.call("POST", users_url(env.application, "/mfa/verify"), json={"challenge_token": challenge, "code": code})

    ok(env.call("POST", users_url(env.application, "/password/forgot"), json={"email": mfa.email}))
    secrets.append(outbox[-1].token)
    ok(env.call("POST", users_url(env.application, "/password/reset"),
                json={"token": outbox[-1].token, "email": mfa.email, "password": "Brand-New-Horse-5"}))

    rp = env.oidc_client(env.application)
    secrets.append(rp["client_secret"])
    verifier, challenge = pkce_pair()
    signed_in = env.user()  # ``user``'s session was logged out above: its codes get no grant
    secrets += [signed_in.access_token, signed_in.refresh_token]
    code = ok(env.authorize(signed_in, rp, challenge=challenge)).json["code"]
    body = {"client_id": rp["client_id"], "client_secret": rp["client_secret"]}
    exchange = {**body, "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
                "code_verifier": verifier}
    tokens = ok(env.call("POST", "/oidc/token", json=exchange)).json
    env.call("POST", "/oidc/token", json=exchange)  # replayed
    secrets += [code, verifier, tokens["access_token"], tokens["refresh_token"], tokens["id_token"]]
    ok(env.call("POST", "/oidc/revoke", json={**body, "token": tokens["refresh_token"]}))

    created = ok(env.v1("POST", "/webhooks", json={"url": WEBHOOK_URL, "events": ["user.created"]})).json["data"]
    rotated = ok(env.v1("POST", f"/webhooks/{created['id']}/rotate-secret", json={})).json["data"]
    ok(env.v1("PUT", f"/webhooks/{created['id']}", json={"url": WEBHOOK_URL + "-2"}))
    secrets += [created["secret"], rotated["secret"], "url-token-0123456789"]
    key = ok(env.dashboard("POST", f"/applications/{env.dashboard_app['id']}/api-keys", json={"name": "k"}))
    secrets.append(key.json["data"]["key"])

    records = json.dumps(list(ctx.store["events"].find({}, {"_id": 0})), default=str)
    assert ctx.store["events"].count_documents({"action": "mfa.challenge"}) == 3
    leaked = [secret for secret in secrets if secret and secret in records]
    assert leaked == []

