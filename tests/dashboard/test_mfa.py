"""Two-step verification of dashboard accounts (TOTP and backup codes, the sign-in's
second step) and an organization's ``require_mfa`` (docs/dashboard.md, "Two-step
verification").

Codes come from tests/mfa/conftest.py's RFC 6238 implementation, never the server's."""
from __future__ import annotations

import pytest

from controlplane.auth import SESSION_COOKIE
from tests.conftest import assert_error, bearer
from tests.mfa.conftest import STEP, mfa_url, rfc6238
from tests.plugins.users import fresh_address, users_url

BASE = "/api/dashboard"
ME_MFA = f"{BASE}/me/mfa"
ORGS = f"{BASE}/organizations"
APPS = f"{BASE}/applications"


@pytest.fixture
def config_overrides(request):
    """Settings per test: ``@pytest.mark.parametrize("config_overrides", [{...}], indirect=True)``."""
    return getattr(request, "param", {})


def enrol(account, clock) -> tuple[str, list[str]]:
    """Set up and confirm an authenticator for ``account``; (secret, backup codes).  The
    clock then moves two steps, so the next code is one the server has not seen."""
    setup = account.post(f"{ME_MFA}/totp/setup", json={})
    assert setup.status_code == 200, setup.text
    data = setup.json["data"]
    confirm = account.post(f"{ME_MFA}/totp/confirm", json={"method_id": data["method_id"], "password": account.password,
                                                           "code": rfc6238(data["secret"], clock())})
    assert confirm.status_code == 201, confirm.text
    clock.advance(2 * STEP)
    return data["secret"], confirm.json["data"]["backup_codes"]


def password_step(account):
    response = account.client.simulate_post(f"{BASE}/login", remote_addr=account.remote_addr,
                                            json={"email": account.email, "password": account.password})
    assert response.status_code == 200, response.text
    return response


def code_step(account, challenge_token: str, code: str):
    return account.client.simulate_post(f"{BASE}/login/mfa", remote_addr=account.remote_addr,
                                        json={"challenge_token": challenge_token, "code": code})


def unconfirm(account) -> None:
    """Leave ``account``'s address unconfirmed, as an account that enrolled its factors
    before an unconfirmed account could no longer do so."""
    account.client.app.services.dashboard.accounts.store.update_account(account.id, {"email_verified": False})


def claim(account, outbox, password="Mailbox-Owner-7"):
    """The mailbox's owner claims ``account``'s address: registering it again mails the
    claim (reset) link, and setting a password through it proves the mailbox."""
    outbox.clear()
    taken = account.client.simulate_post(f"{BASE}/register", remote_addr=fresh_address(),
                                         json={"email": account.email, "password": password, "name": "Owner"})
    assert taken.status_code == 409 and [m.to for m in outbox] == [account.email]
    reset = account.client.simulate_post(f"{BASE}/password/reset", json={"token": outbox[-1].token,
                                                                         "password": password})
    assert reset.status_code == 200, reset.text
    return password


def challenge_of(account) -> str:
    data = password_step(account).json["data"]
    assert data["mfa_required"] is True and data["mfa_methods"] == ["totp"], data
    return data["challenge_token"]


# ---------------------------------------------------------------- enrolment


def test_an_account_enrols_an_authenticator_and_gets_backup_codes(dashboard_account, clock, ctx):
    status = dashboard_account.get(ME_MFA).json["data"]
    assert status == {"mfa_enabled": False, "methods": [], "backup_codes_remaining": 0,
                      "passkeys": {"count": 0, "second_factor": False}}

    setup = dashboard_account.post(f"{ME_MFA}/totp/setup", json={"label": "Phone"})
    assert setup.status_code == 200, setup.text
    assert setup.headers["Cache-Control"] == "no-store"
    data = setup.json["data"]
    assert data["provisioning_uri"].startswith("otpauth://totp/iamgate%20dashboard:")
    assert f"secret={data['secret']}" in data["provisioning_uri"]
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is False  # pending counts for nothing
    stored = ctx.store["mfa_methods"].find_one({"_id": data["method_id"]})
    assert stored["app_id"] == "dashboard" and stored["user_id"] == dashboard_account.id
    assert data["secret"] not in str(stored["secret"])  # encrypted at rest

    confirm = dashboard_account.post(f"{ME_MFA}/totp/confirm",
                                     json={"method_id": data["method_id"], "code": rfc6238(data["secret"], clock()),
                                           "password": dashboard_account.password})
    assert confirm.status_code == 201, confirm.text
    codes = confirm.json["data"]["backup_codes"]
    assert len(set(codes)) == 10
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": dashboard_account.id}) == 10
    assert not ctx.store["mfa_backup_codes"].find_one({"code_digest": {"$in": codes}})  # digests only
    status = dashboard_account.get(ME_MFA).json["data"]
    assert status["mfa_enabled"] is True and status["backup_codes_remaining"] == 10
    assert [m["label"] for m in status["methods"]] == ["Phone"]
    assert dashboard_account.get(f"{BASE}/me").json["data"]["mfa_enabled"] is True


def test_turning_it_on_ends_the_accounts_other_sessions(dashboard_account, clock):
    """A session opened elsewhere with the password alone (a thief's) does not outlive
    the factor; the one that enrolled stays."""
    other = password_step(dashboard_account).cookies[SESSION_COOKIE].value
    assert dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: other}).status_code == 200
    enrol(dashboard_account, clock)
    assert_error(dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: other}), 401, "UNAUTHORIZED")
    assert dashboard_account.get(f"{BASE}/me").status_code == 200


def test_a_wrong_confirmation_code_turns_nothing_on(dashboard_account, clock):
    data = dashboard_account.post(f"{ME_MFA}/totp/setup", json={}).json["data"]
    wrong = rfc6238(data["secret"], clock(), step_offset=5)
    assert_error(dashboard_account.post(f"{ME_MFA}/totp/confirm", json={"method_id": data["method_id"], "code": wrong,
                                                                        "password": dashboard_account.password}),
                 422, "MFA_INVALID_CODE")
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is False
    assert password_step(dashboard_account).cookies.get(SESSION_COOKIE) is not None  # still the password alone


def test_turning_it_on_takes_the_password(dashboard_account, ctx, clock):
    """Whoever holds only a session cookie plants no factor: without the account's
    password (or with a wrong one) nothing turns on, the code is not spent and no
    session ends, so the owner's right password and the same code still turn it on."""
    other = password_step(dashboard_account).cookies[SESSION_COOKIE].value
    data = dashboard_account.post(f"{ME_MFA}/totp/setup", json={}).json["data"]
    body = {"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())}
    missing = dashboard_account.post(f"{ME_MFA}/totp/confirm", json=body)
    assert_error(missing, 400, "VALIDATION_INVALID_FORMAT")
    assert missing.json["error"]["details"]["fields"] == {"password": "is required"}
    assert_error(dashboard_account.post(f"{ME_MFA}/totp/confirm", json={**body, "password": "not the password"}),
                 422, "INVALID_PASSWORD")
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is False
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": dashboard_account.id}) == 0
    assert dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: other}).status_code == 200
    right = dashboard_account.post(f"{ME_MFA}/totp/confirm", json={**body, "password": dashboard_account.password})
    assert right.status_code == 201, right.text


def test_guessing_the_password_to_turn_it_on_locks_the_account(dashboard_account, clock, ctx):
    """The password it takes is under the account's login lock: a stolen cookie buys no
    guesses beyond the sign-in's own."""
    data = dashboard_account.post(f"{ME_MFA}/totp/setup", json={}).json["data"]
    body = {"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())}
    for _ in range(ctx.config.lockout_threshold):
        assert_error(dashboard_account.post(f"{ME_MFA}/totp/confirm", json={**body, "password": "guess"}),
                     422, "INVALID_PASSWORD")
    locked = dashboard_account.post(f"{ME_MFA}/totp/confirm", json={**body, "password": dashboard_account.password})
    assert_error(locked, 429, "AUTH_ACCOUNT_LOCKED")
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is False


def test_a_second_setup_while_on_is_refused(dashboard_account, clock):
    enrol(dashboard_account, clock)
    assert_error(dashboard_account.post(f"{ME_MFA}/totp/setup", json={}), 409, "MFA_ALREADY_ENABLED")


def test_an_unconfirmed_account_cannot_set_up_an_authenticator(make_dashboard_account, clock, ctx):
    account = make_dashboard_account(verified=False)
    assert_error(account.post(f"{ME_MFA}/totp/setup", json={}), 403, "DASHBOARD_EMAIL_UNVERIFIED")
    assert ctx.store["mfa_methods"].count_documents({"user_id": account.id}) == 0

    confirmed = make_dashboard_account()
    data = confirmed.post(f"{ME_MFA}/totp/setup", json={}).json["data"]
    unconfirm(confirmed)  # a setup begun before: its confirmation is refused too
    refused = confirmed.post(f"{ME_MFA}/totp/confirm", json={"method_id": data["method_id"],
                                                             "code": rfc6238(data["secret"], clock()),
                                                             "password": confirmed.password})
    assert_error(refused, 403, "DASHBOARD_EMAIL_UNVERIFIED")
    assert confirmed.get(ME_MFA).json["data"]["mfa_enabled"] is False


def test_the_mailbox_owners_claim_removes_an_earlier_holders_authenticator(dashboard_account, clock, ctx,
                                                                           outbox):
    _secret, backup_codes = enrol(dashboard_account, clock)
    left_open = challenge_of(dashboard_account)
    unconfirm(dashboard_account)

    password = claim(dashboard_account, outbox)

    for collection in ("mfa_methods", "mfa_backup_codes", "mfa_challenges"):
        assert ctx.store[collection].count_documents({"app_id": "dashboard", "user_id": dashboard_account.id}) == 0
    assert_error(code_step(dashboard_account, left_open, backup_codes[0]), 410, "AUTH_MFA_CHALLENGE_EXPIRED")
    signed_in = dashboard_account.client.simulate_post(f"{BASE}/login", remote_addr=fresh_address(),
                                                       json={"email": dashboard_account.email, "password": password})
    assert signed_in.status_code == 200 and SESSION_COOKIE in signed_in.cookies, signed_in.text
    records = ctx.store["events"].find({"action": "dashboard_account.mfa_disabled", "actor.id": dashboard_account.id})
    assert [r["data"] for r in records] == [{"method": "totp", "confirmed_by": "account_claimed"}]


def test_mfa_routes_need_a_session(client):
    assert_error(client.simulate_get(ME_MFA), 401, "UNAUTHORIZED")
    assert_error(client.simulate_post(f"{ME_MFA}/totp/setup", json={}), 401, "UNAUTHORIZED")


# ---------------------------------------------------------------- sign-in


def test_sign_in_with_totp_on_answers_a_challenge_and_the_code_sets_the_cookie(dashboard_account, clock):
    secret, _ = enrol(dashboard_account, clock)
    first = password_step(dashboard_account)
    assert SESSION_COOKIE not in first.cookies  # no session after the password alone
    token = first.json["data"]["challenge_token"]

    response = code_step(dashboard_account, token, rfc6238(secret, clock()))
    assert response.status_code == 200, response.text
    assert response.json["data"]["id"] == dashboard_account.id
    cookie = response.cookies[SESSION_COOKIE].value
    me = dashboard_account.get(f"{BASE}/me", cookies={SESSION_COOKIE: cookie})
    assert me.status_code == 200 and me.json["data"]["mfa_enabled"] is True
    # Single use: the same challenge cannot open a second session.
    clock.advance(STEP)
    assert_error(code_step(dashboard_account, token, rfc6238(secret, clock())), 410, "AUTH_MFA_CHALLENGE_EXPIRED")


def test_a_wrong_code_is_401_with_the_attempts_left(dashboard_account, clock):
    secret, _ = enrol(dashboard_account, clock)
    token = challenge_of(dashboard_account)
    error = assert_error(code_step(dashboard_account, token, rfc6238(secret, clock(), step_offset=4)),
                         401, "AUTH_INVALID_MFA_CODE")
    assert error["details"]["attempts_remaining"] == 4
    assert code_step(dashboard_account, token, rfc6238(secret, clock())).status_code == 200


def test_a_used_code_is_refused_at_the_next_sign_in(dashboard_account, clock):
    secret, _ = enrol(dashboard_account, clock)
    code = rfc6238(secret, clock())
    assert code_step(dashboard_account, challenge_of(dashboard_account), code).status_code == 200
    error = assert_error(code_step(dashboard_account, challenge_of(dashboard_account), code),
                         401, "AUTH_INVALID_MFA_CODE")
    assert "already used" in error["message"]


def test_a_backup_code_signs_in_once(dashboard_account, clock):
    _, codes = enrol(dashboard_account, clock)
    assert code_step(dashboard_account, challenge_of(dashboard_account), codes[0].lower()).status_code == 200
    assert dashboard_account.get(ME_MFA).json["data"]["backup_codes_remaining"] == 9
    assert_error(code_step(dashboard_account, challenge_of(dashboard_account), codes[0]), 401, "AUTH_INVALID_MFA_CODE")


def test_an_expired_or_unknown_challenge_is_410(dashboard_account, clock, ctx):
    secret, _ = enrol(dashboard_account, clock)
    token = challenge_of(dashboard_account)
    clock.advance(ctx.config.mfa_challenge_ttl + 1)
    assert_error(code_step(dashboard_account, token, rfc6238(secret, clock())), 410, "AUTH_MFA_CHALLENGE_EXPIRED")
    assert_error(code_step(dashboard_account, "no-such-token", "123456"), 410, "AUTH_MFA_CHALLENGE_EXPIRED")


def test_an_end_users_challenge_does_not_open_a_dashboard_session(application, dashboard_account, clock,
                                                                  client, user_token):
    enrol(dashboard_account, clock)
    user_id, headers = user_token.user["id"], bearer(user_token.access_token)
    setup = client.simulate_post(mfa_url(application, user_id, "/totp/setup"), json={}, headers=headers).json["data"]
    confirm = client.simulate_post(mfa_url(application, user_id, "/totp/confirm"), headers=headers,
                                   json={"method_id": setup["method_id"], "code": rfc6238(setup["secret"], clock())})
    assert confirm.status_code == 201, confirm.text
    clock.advance(2 * STEP)
    login = client.simulate_post(users_url(application, "/login"),
                                 json={"email": user_token.user["email"], "password": user_token.password})
    token = login.json["data"]["challenge_token"]
    assert_error(code_step(dashboard_account, token, rfc6238(setup["secret"], clock())),
                 410, "AUTH_MFA_CHALLENGE_EXPIRED")


@pytest.mark.parametrize("config_overrides", [{"mfa_max_attempts": 2, "lockout_threshold": 10}], indirect=True)
def test_a_challenge_locks_after_its_attempts(dashboard_account, clock):
    secret, _ = enrol(dashboard_account, clock)
    token = challenge_of(dashboard_account)
    for _ in range(2):
        assert_error(code_step(dashboard_account, token, "000000"), 401, "AUTH_INVALID_MFA_CODE")
    assert_error(code_step(dashboard_account, token, rfc6238(secret, clock())), 429, "AUTH_MFA_LOCKED")


@pytest.mark.parametrize("config_overrides", [{"mfa_max_attempts": 10, "lockout_threshold": 3}], indirect=True)
def test_wrong_codes_across_sign_ins_lock_the_accounts_codes(dashboard_account, clock, ctx):
    """Signing in again brings no fresh guesses: the login lock counts the account's codes."""
    secret, _ = enrol(dashboard_account, clock)
    for _ in range(3):
        assert_error(code_step(dashboard_account, challenge_of(dashboard_account), "000000"),
                     401, "AUTH_INVALID_MFA_CODE")
    locked = code_step(dashboard_account, challenge_of(dashboard_account), rfc6238(secret, clock()))
    error = assert_error(locked, 429, "AUTH_MFA_LOCKED")
    assert error["details"]["reason"] == "locked" and "Retry-After" in locked.headers
    # A code to turn MFA off draws on the same budget.
    assert_error(dashboard_account.delete(f"{ME_MFA}/totp", json={"code": rfc6238(secret, clock())}),
                 429, "AUTH_MFA_LOCKED")
    # The password lock is another budget: the password step still answers.
    clock.advance(ctx.config.lockout_seconds + 1)
    assert code_step(dashboard_account, challenge_of(dashboard_account), rfc6238(secret, clock())).status_code == 200


# ---------------------------------------------------------------- turning it off


def test_disable_with_the_password(dashboard_account, clock, ctx):
    enrol(dashboard_account, clock)
    assert_error(dashboard_account.delete(f"{ME_MFA}/totp", json={"password": "Wrong-Horse-1"}),
                 422, "INVALID_PASSWORD")
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is True
    assert dashboard_account.delete(f"{ME_MFA}/totp", json={"password": dashboard_account.password}).status_code == 204
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is False
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": dashboard_account.id}) == 0
    assert SESSION_COOKIE in password_step(dashboard_account).cookies  # the password alone again


def test_disable_with_a_current_code(dashboard_account, clock):
    secret, _ = enrol(dashboard_account, clock)
    assert_error(dashboard_account.delete(f"{ME_MFA}/totp", json={"code": rfc6238(secret, clock(), step_offset=4)}),
                 422, "MFA_INVALID_CODE")
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is True
    assert dashboard_account.delete(f"{ME_MFA}/totp", json={"code": rfc6238(secret, clock())}).status_code == 204
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is False


def test_disable_needs_exactly_one_proof_and_mfa_on(dashboard_account, clock):
    assert_error(dashboard_account.delete(f"{ME_MFA}/totp", json={"password": dashboard_account.password}),
                 400, "MFA_NOT_ENABLED")
    secret, _ = enrol(dashboard_account, clock)
    assert_error(dashboard_account.delete(f"{ME_MFA}/totp", json={}), 400, "VALIDATION_INVALID_FORMAT")
    both = {"password": dashboard_account.password, "code": rfc6238(secret, clock())}
    assert_error(dashboard_account.delete(f"{ME_MFA}/totp", json=both), 400, "VALIDATION_INVALID_FORMAT")
    assert dashboard_account.get(ME_MFA).json["data"]["mfa_enabled"] is True


def test_regenerated_backup_codes_replace_the_old_ones(dashboard_account, clock):
    _, old = enrol(dashboard_account, clock)
    response = dashboard_account.post(f"{ME_MFA}/backup-codes/regenerate",
                                      json={"password": dashboard_account.password})
    assert response.status_code == 200, response.text
    new = response.json["data"]["backup_codes"]
    assert_error(code_step(dashboard_account, challenge_of(dashboard_account), old[0]), 401, "AUTH_INVALID_MFA_CODE")
    assert code_step(dashboard_account, challenge_of(dashboard_account), new[0]).status_code == 200


# ---------------------------------------------------------------- require_mfa


@pytest.fixture
def org(make_dashboard_account, clock):
    """An organization whose owner has MFA, with a member, an admin and a viewer who
    have none: {"id", "app", role: account}."""
    owner = make_dashboard_account(name="Olivia Owner")
    enrol(owner, clock)
    org_id = owner.post(ORGS, json={"name": "Acme"}).json["data"]["id"]
    app = owner.post(APPS, json={"name": "Shop", "organization_id": org_id}).json["data"]
    team = {"id": org_id, "app": app, "owner": owner}
    for role in ("admin", "member", "viewer"):
        account = make_dashboard_account(name=role.title())
        assert owner.post(f"{ORGS}/{org_id}/members", json={"email": account.email, "role": role}).status_code == 201
        team[role] = account
    return team


def require_mfa(account, org_id, on=True):
    return account.request("PATCH", f"{ORGS}/{org_id}", json={"require_mfa": on})


def test_require_mfa_is_off_by_default_and_an_owner_with_mfa_turns_it_on(org, ctx):
    listed = {o["id"]: o for o in org["member"].get(ORGS).json["data"]}
    assert listed[org["id"]]["require_mfa"] is False
    response = require_mfa(org["owner"], org["id"])
    assert response.status_code == 200, response.text
    assert response.json["data"] == {**response.json["data"], "id": org["id"], "require_mfa": True, "role": "owner"}
    assert ctx.store["organizations"].find_one({"_id": org["id"]})["require_mfa"] is True
    record = ctx.store["events"].find_one({"action": "organization.updated", "organization_id": org["id"]})
    assert record["data"] == {"fields": ["require_mfa"], "before": {"require_mfa": False},
                              "after": {"require_mfa": True}}


def test_an_owner_without_mfa_cannot_turn_it_on(dashboard_account, ctx):
    org_id = dashboard_account.organization_id
    error = assert_error(require_mfa(dashboard_account, org_id), 409, "ORGANIZATION_OWNER_MFA_REQUIRED")
    assert "second factor" in error["message"]
    assert not ctx.store["organizations"].find_one({"_id": org_id}).get("require_mfa")
    # Renaming needs no second factor.
    renamed = dashboard_account.request("PATCH", f"{ORGS}/{org_id}", json={"name": "Renamed"})
    assert renamed.status_code == 200 and renamed.json["data"]["name"] == "Renamed"


@pytest.mark.parametrize("role", ["admin", "member", "viewer"])
def test_only_owners_change_the_setting(org, role, clock, ctx):
    enrol(org[role], clock)  # even with a second factor
    error = assert_error(require_mfa(org[role], org["id"]), 403, "FORBIDDEN")
    assert error["details"]["role"] == role
    assert not ctx.store["organizations"].find_one({"_id": org["id"]}).get("require_mfa")


def test_another_organizations_owner_cannot_change_it(org, make_dashboard_account, clock):
    stranger = make_dashboard_account()
    enrol(stranger, clock)
    assert_error(require_mfa(stranger, org["id"]), 404, "NOT_FOUND")
    assert_error(stranger.request("PATCH", f"{ORGS}/not-a-uuid", json={"require_mfa": True}), 404, "NOT_FOUND")


def test_the_setting_is_validated(org):
    assert_error(org["owner"].request("PATCH", f"{ORGS}/{org['id']}", json={"require_mfa": "yes"}),
                 400, "VALIDATION_INVALID_FORMAT")


def test_a_member_without_mfa_is_sent_to_enrol_then_proceeds(org, clock):
    assert require_mfa(org["owner"], org["id"]).status_code == 200
    member, app_id, org_id = org["member"], org["app"]["id"], org["id"]
    gated = [
        ("GET", f"{APPS}/{app_id}"),
        ("GET", f"{APPS}/{app_id}/api-keys"),
        ("GET", f"{APPS}?organization_id={org_id}"),
        ("GET", APPS),
        ("GET", f"{ORGS}/{org_id}/members"),
        ("GET", f"{APPS}/{app_id}/users"),
    ]
    for method, path in gated:
        path, _, query = path.partition("?")
        error = assert_error(member.request(method, path, query_string=query), 403, "DASHBOARD_MFA_REQUIRED")
        assert error["details"] == {"organization_id": org_id, "enrol": "/api/dashboard/me/mfa/totp/setup"}, path
    # Admins too, on writes and on the organization's audit log.
    admin = org["admin"]
    assert_error(admin.put(f"{APPS}/{app_id}", json={"name": "Renamed"}), 403, "DASHBOARD_MFA_REQUIRED")
    assert_error(admin.post(APPS, json={"name": "New", "organization_id": org_id}), 403, "DASHBOARD_MFA_REQUIRED")
    assert_error(admin.get(f"{ORGS}/{org_id}/audit-events"), 403, "DASHBOARD_MFA_REQUIRED")

    # What stays open: the account itself, its organizations' list, enrolment, signing out.
    me = member.get(f"{BASE}/me").json["data"]
    assert me["mfa_enabled"] is False
    assert {o["id"]: o["require_mfa"] for o in me["organizations"]}[org_id] is True
    assert member.get(ORGS).status_code == 200
    assert member.get(ME_MFA).status_code == 200
    enrol(member, clock)
    assert member.get(f"{APPS}/{app_id}").status_code == 200
    assert member.get(f"{ORGS}/{org_id}/members").status_code == 200
    assert member.post(f"{BASE}/logout", json={}).status_code == 204


def test_a_member_without_a_second_factor_may_still_leave(org, ctx):
    """Leaving only takes access away: a member who will not enrol can go (the console's
    Leave too), while removing someone else still needs the second factor."""
    assert require_mfa(org["owner"], org["id"]).status_code == 200
    admin, member = org["admin"], org["member"]
    assert_error(admin.delete(f"{ORGS}/{org['id']}/members/{org['viewer'].id}"), 403, "DASHBOARD_MFA_REQUIRED")
    assert member.delete(f"{ORGS}/{org['id']}/members/{member.id}").status_code == 204
    members = ctx.store["organization_members"]
    assert members.find_one({"organization_id": org["id"], "account_id": member.id}) is None
    assert members.find_one({"organization_id": org["id"], "account_id": org["viewer"].id}) is not None


def test_the_gate_holds_only_in_the_organization_that_requires_it(org):
    """The member's personal organization does not require MFA: it stays open."""
    assert require_mfa(org["owner"], org["id"]).status_code == 200
    member = org["member"]
    personal = member.organization_id
    assert member.get(APPS, query_string=f"organization_id={personal}").status_code == 200
    assert member.post(APPS, json={"name": "Mine", "organization_id": personal}).status_code == 201


def test_a_non_member_still_gets_404_not_the_mfa_answer(org, make_dashboard_account):
    """Isolation first: the gate never tells a stranger an organization exists."""
    assert require_mfa(org["owner"], org["id"]).status_code == 200
    stranger = make_dashboard_account()
    assert_error(stranger.get(f"{APPS}/{org['app']['id']}"), 404, "NOT_FOUND")
    assert_error(stranger.get(f"{ORGS}/{org['id']}/members"), 404, "NOT_FOUND")


def test_turning_mfa_off_shuts_the_member_out_again(org, clock):
    assert require_mfa(org["owner"], org["id"]).status_code == 200
    member = org["member"]
    enrol(member, clock)
    assert member.delete(f"{ME_MFA}/totp", json={"password": member.password}).status_code == 204
    assert_error(member.get(f"{APPS}/{org['app']['id']}"), 403, "DASHBOARD_MFA_REQUIRED")


def test_api_keys_are_not_affected(org, client):
    owner, app_id = org["owner"], org["app"]["id"]
    key = owner.post(f"{APPS}/{app_id}/api-keys", json={"name": "backend"}).json["data"]["key"]
    assert require_mfa(owner, org["id"]).status_code == 200
    response = client.simulate_get(f"/api/v1/applications/{app_id}/roles", headers=bearer(key))
    assert response.status_code == 200, response.text


def test_turning_it_off_opens_the_organization_again(org):
    assert require_mfa(org["owner"], org["id"]).status_code == 200
    assert require_mfa(org["owner"], org["id"], on=False).status_code == 200
    assert org["member"].get(f"{APPS}/{org['app']['id']}").status_code == 200


# ---------------------------------------------------------------- audit


def test_mfa_changes_and_challenges_are_recorded_in_the_accounts_organizations(org, clock, ctx):
    member = org["member"]
    secret, _ = enrol(member, clock)
    enabled = ctx.store["events"].find({"action": "dashboard_account.mfa_enabled", "actor.id": member.id})
    assert {d["organization_id"] for d in enabled} == {org["id"], member.organization_id}
    token = challenge_of(member)
    code_step(member, token, "000000")
    code_step(member, token, rfc6238(secret, clock()))
    results = [d["result"] for d in ctx.store["events"].find(
        {"action": "dashboard_account.mfa_challenge", "organization_id": org["id"]}).sort("seq", 1)]
    assert results == [{"status": "failure", "reason": "invalid_code"}, {"status": "success"}]
    assert member.delete(f"{ME_MFA}/totp", json={"password": member.password}).status_code == 204
    disabled = ctx.store["events"].find_one({"action": "dashboard_account.mfa_disabled", "organization_id": org["id"]})
    assert disabled["data"] == {"confirmed_by": "password"}


# ---------------------------------------------------------------- OpenAPI


def test_the_routes_and_the_gate_are_documented(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    for path, method in [("/api/dashboard/login/mfa", "post"), ("/api/dashboard/me/mfa", "get"),
                         ("/api/dashboard/me/mfa/totp/setup", "post"), ("/api/dashboard/me/mfa/totp/confirm", "post"),
                         ("/api/dashboard/me/mfa/totp", "delete"),
                         ("/api/dashboard/me/mfa/backup-codes/regenerate", "post"),
                         ("/api/dashboard/organizations/{organizationId}", "patch")]:
        assert paths[path][method]["summary"] != "(undocumented)", path
    assert "ORGANIZATION_OWNER_MFA_REQUIRED" in paths["/api/dashboard/organizations/{organizationId}"]["patch"][
        "responses"]["409"]["description"]
    for path in ("/api/dashboard/applications/{applicationId}", "/api/dashboard/organizations/{organizationId}/members",
                 "/api/dashboard/applications"):
        assert "DASHBOARD_MFA_REQUIRED" in paths[path]["get"]["responses"]["403"]["description"], path
    assert "DASHBOARD_MFA_REQUIRED" not in str(paths["/api/dashboard/me/mfa/totp/setup"])
