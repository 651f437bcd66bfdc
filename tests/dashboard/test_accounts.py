"""Dashboard accounts: register, login (cookie, limits, lockout), logout, me, password."""
from __future__ import annotations

import ipaddress

import bcrypt
import pytest

from controlplane.auth import SESSION_COOKIE
from shared.ids import digest
from tests.conftest import assert_error
from tests.plugins.dashboard import DASHBOARD_PASSWORD

REGISTER = "/api/dashboard/register"
LOGIN = "/api/dashboard/login"
LOGOUT = "/api/dashboard/logout"
ME = "/api/dashboard/me"


def register(client, email="owner@example.com", password=DASHBOARD_PASSWORD, name="Olivia Owner", **kw):
    return client.simulate_post(REGISTER, json={"email": email, "password": password, "name": name}, **kw)


def login(client, email="owner@example.com", password=DASHBOARD_PASSWORD, **kw):
    return client.simulate_post(LOGIN, json={"email": email, "password": password}, **kw)


def set_cookie_header(response) -> str:
    headers = [value for name, value in response.headers.items() if name.lower() == "set-cookie"]
    assert len(headers) == 1, headers
    return headers[0]


# ---------------------------------------------------------------- register


def test_register_creates_account_with_hashed_password_and_personal_organization(client, ctx):
    response = register(client, email="Owner@Example.com")

    assert response.status_code == 201
    data = response.json["data"]
    assert set(data) == {"id", "email", "name", "created_at"}
    assert data["email"] == "owner@example.com" and data["name"] == "Olivia Owner"
    stored = ctx.store["dashboard_accounts"].find_one({"_id": data["id"]})
    assert stored["password_hash"] != DASHBOARD_PASSWORD
    assert bcrypt.checkpw(DASHBOARD_PASSWORD.encode(), stored["password_hash"].encode())
    members = list(ctx.store["organization_members"].find({"account_id": data["id"]}))
    assert [m["role"] for m in members] == ["owner"]
    org = ctx.store["organizations"].find_one({"_id": members[0]["organization_id"]})
    assert org["name"] == "Olivia Owner's organization"


def test_register_with_taken_email_is_409_and_creates_nothing(client, ctx):
    assert register(client).status_code == 201
    before = {name: ctx.store[name].count_documents({})
              for name in ("dashboard_accounts", "organizations", "organization_members")}

    assert_error(register(client, email="OWNER@example.com", name="Other"), 409, "AUTH_EMAIL_ALREADY_REGISTERED")

    assert {name: ctx.store[name].count_documents({}) for name in before} == before


@pytest.mark.parametrize("password, rule", [
    ("short1A", "min_length"),
    ("alllowercaseletters", "character_classes"),
    ("password1", "not_common"),
    ("x" * 120 + "Y" * 9, "max_length"),
])
def test_register_rejects_weak_passwords_with_422(client, ctx, password, rule):
    error = assert_error(register(client, password=password), 422, "VALIDATION_PASSWORD_TOO_WEAK")
    assert rule in error["details"]["rules"]
    assert ctx.store["dashboard_accounts"].count_documents({}) == 0


def test_register_rejects_the_email_as_password(client):
    error = assert_error(register(client, email="Secret123@example.com", password="secret123@example.com"),
                         422, "VALIDATION_PASSWORD_TOO_WEAK")
    assert "not_email" in error["details"]["rules"]


def test_register_validates_fields(client):
    error = assert_error(client.simulate_post(REGISTER, json={}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"email", "password", "name"}
    assert_error(register(client, email="not-an-email"), 400, "VALIDATION_INVALID_FORMAT")
    error = assert_error(register(client, name="n" * 256), 400, "VALIDATION_INVALID_FORMAT")
    assert "name" in error["details"]["fields"]
    assert_error(client.simulate_post(REGISTER, body="{nope", content_type="application/json"),
                 400, "VALIDATION_INVALID_FORMAT")


def test_register_is_throttled_per_client_ip(client):
    for i in range(60):
        response = register(client, email=f"user{i}@example.com", remote_addr="192.0.2.7")
        assert response.status_code == 201, response.text
    limited = register(client, email="one-too-many@example.com", remote_addr="192.0.2.7")
    assert_error(limited, 429, "RATE_LIMIT_EXCEEDED")
    assert register(client, email="elsewhere@example.com", remote_addr="192.0.2.8").status_code == 201


# ---------------------------------------------------------------- login


def test_login_sets_http_only_lax_session_cookie_and_returns_the_account(client, config):
    account_id = register(client).json["data"]["id"]

    response = login(client, email=" OWNER@example.com ")

    assert response.status_code == 200
    assert response.json["data"]["id"] == account_id
    assert set(response.json["data"]) == {"id", "email", "name", "created_at"}
    cookie = response.cookies[SESSION_COOKIE]
    assert cookie.http_only and cookie.same_site == "Lax" and cookie.path == "/"
    assert cookie.max_age == config.dashboard_session_ttl
    assert not cookie.secure  # http:// public URL
    header = set_cookie_header(response)
    assert "HttpOnly" in header and "SameSite=Lax" in header and "Secure" not in header
    assert response.headers["Cache-Control"] == "no-store"


def test_session_cookie_is_opaque_and_stored_only_as_a_digest(client, ctx):
    account_id = register(client).json["data"]["id"]
    raw = login(client).cookies[SESSION_COOKIE].value

    assert len(raw) >= 40 and account_id not in raw
    stored = list(ctx.store["dashboard_sessions"].find({"account_id": account_id}))
    assert [s["_id"] for s in stored] == [digest(raw)]


@pytest.mark.parametrize("config_overrides", [{"public_url": "https://iam.example.com"}])
def test_session_cookie_is_secure_with_an_https_public_url(client):
    register(client)
    response = login(client)
    assert response.cookies[SESSION_COOKIE].secure
    assert "Secure" in set_cookie_header(response)


def test_wrong_password_and_unknown_email_get_the_same_401(client, ctx, monkeypatch):
    register(client)
    verified = []
    original = ctx.hasher.verify
    monkeypatch.setattr(ctx.hasher, "verify", lambda pw, hashed: verified.append(hashed) or original(pw, hashed))

    wrong = assert_error(login(client, password="Wrong-Password-1"), 401, "AUTH_INVALID_CREDENTIALS")
    unknown = assert_error(login(client, email="nobody@example.com"), 401, "AUTH_INVALID_CREDENTIALS")

    assert wrong["message"] == unknown["message"]
    # The unknown email still costs a bcrypt verification (against a dummy hash).
    assert len(verified) == 2 and verified[1] is None
    assert ctx.store["dashboard_sessions"].count_documents({}) == 0


def test_login_validates_the_body(client):
    error = assert_error(client.simulate_post(LOGIN, json={}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"email", "password"}
    assert_error(client.simulate_post(LOGIN, json={"email": "a@example.com", "password": 5}),
                 400, "VALIDATION_INVALID_FORMAT")


def test_login_has_its_own_per_ip_budget(client, clock):
    register(client)
    for _ in range(10):
        assert login(client, password="Wrong-Password-1", email=f"x{_}@example.com",
                     remote_addr="198.51.100.1").status_code == 401
    response = login(client, remote_addr="198.51.100.1")
    assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert response.headers["X-RateLimit-Limit"] == "10"
    assert response.headers["X-RateLimit-Remaining"] == "0"
    assert int(response.headers["Retry-After"]) >= 1
    assert int(response.headers["X-RateLimit-Reset"]) > clock().timestamp()
    assert login(client, remote_addr="198.51.100.2").status_code == 200
    clock.advance(61)
    assert login(client, remote_addr="198.51.100.1").status_code == 200


@pytest.mark.parametrize("config_overrides", [{"trusted_proxies": (ipaddress.ip_network("10.0.0.0/8"),)}])
def test_login_budget_follows_x_forwarded_for_only_from_trusted_proxies(client):
    register(client)
    for i in range(10):  # behind the proxy: ten different users, one budget each
        response = login(client, remote_addr="10.0.0.1", headers={"X-Forwarded-For": f"198.51.100.{i}"})
        assert response.status_code == 200, response.text
    # An untrusted caller cannot pick its budget by forging the header.
    for i in range(10):
        login(client, remote_addr="192.0.2.50", headers={"X-Forwarded-For": f"198.51.100.{100 + i}"})
    assert_error(login(client, remote_addr="192.0.2.50", headers={"X-Forwarded-For": "198.51.100.200"}),
                 429, "RATE_LIMIT_EXCEEDED")


def test_failed_logins_per_email_lock_the_account_for_the_lockout_period(client, clock):
    register(client)
    for i in range(5):  # different addresses: the per-IP budget is not what stops this
        assert login(client, password="Wrong-Password-1", remote_addr=f"203.0.113.{i}").status_code == 401

    locked = login(client, remote_addr="203.0.113.99")  # even the right password
    assert_error(locked, 429, "AUTH_ACCOUNT_LOCKED")
    assert locked.headers["Retry-After"] == "900"
    clock.advance(899)
    assert_error(login(client, remote_addr="203.0.113.99"), 429, "AUTH_ACCOUNT_LOCKED")
    clock.advance(1)
    assert login(client, remote_addr="203.0.113.99").status_code == 200


def test_unknown_emails_lock_like_known_ones(client):
    for i in range(5):
        login(client, email="ghost@example.com", remote_addr=f"203.0.113.{i}")
    assert_error(login(client, email="ghost@example.com", remote_addr="203.0.113.50"), 429, "AUTH_ACCOUNT_LOCKED")


def test_successful_login_clears_the_failure_count(client):
    register(client)
    for i in range(4):
        login(client, password="Wrong-Password-1", remote_addr=f"203.0.113.{i}")
    assert login(client, remote_addr="203.0.113.10").status_code == 200
    for i in range(4):
        assert login(client, password="Wrong-Password-1", remote_addr=f"203.0.113.{20 + i}").status_code == 401
    assert login(client, remote_addr="203.0.113.30").status_code == 200


# ---------------------------------------------------------------- session use, logout, expiry


def test_me_returns_the_account_and_its_organizations(dashboard_account):
    response = dashboard_account.get(ME)
    assert response.status_code == 200
    data = response.json["data"]
    assert data["id"] == dashboard_account.id and data["email"] == dashboard_account.email
    assert [(o["id"], o["role"]) for o in data["organizations"]] == [(dashboard_account.organization_id, "owner")]


@pytest.mark.parametrize("cookies", [None, {SESSION_COOKIE: "forged-session-id"}, {SESSION_COOKIE: ""}])
def test_dashboard_routes_need_a_valid_session_cookie(client, cookies):
    assert_error(client.simulate_get(ME, cookies=cookies), 401, "UNAUTHORIZED")
    assert_error(client.simulate_get("/api/dashboard/applications", cookies=cookies), 401, "UNAUTHORIZED")


def test_a_bearer_token_is_not_a_dashboard_session(client, dashboard_account, api_key):
    assert_error(client.simulate_get(ME, headers={"Authorization": f"Bearer {api_key}"}), 401, "UNAUTHORIZED")
    assert_error(client.simulate_get(ME, headers={"Authorization": f"Bearer {dashboard_account.session}"}),
                 401, "UNAUTHORIZED")


def test_logout_revokes_the_session_and_expires_the_cookie(dashboard_account, ctx):
    copied = dashboard_account.session

    response = dashboard_account.post(LOGOUT, json={})

    assert response.status_code == 204
    cookie = response.cookies[SESSION_COOKIE]
    assert cookie.value == "" and cookie.http_only and cookie.path == "/"
    assert cookie.expires is not None and cookie.expires.year == 1970
    assert ctx.store["dashboard_sessions"].find_one({"_id": digest(copied)}) is None
    # A copy of the cookie taken before logout is worthless now.
    assert_error(dashboard_account.get(ME, cookies={SESSION_COOKIE: copied}), 401, "UNAUTHORIZED")


def test_logout_only_ends_that_session(make_dashboard_account):
    account = make_dashboard_account()
    first = account.session
    account.login()
    second = account.session
    assert account.post(LOGOUT, json={}, cookies={SESSION_COOKIE: first}).status_code == 204
    assert account.get(ME, cookies={SESSION_COOKIE: second}).status_code == 200


def test_logout_without_a_session_still_clears_the_cookie(client):
    response = client.simulate_post(LOGOUT, json={})
    assert response.status_code == 204
    assert response.cookies[SESSION_COOKIE].value == ""


def test_login_again_ends_the_session_the_browser_presented(dashboard_account, ctx):
    old = dashboard_account.session
    response = dashboard_account.post(LOGIN, json={"email": dashboard_account.email,
                                                   "password": dashboard_account.password})
    assert response.status_code == 200
    assert response.cookies[SESSION_COOKIE].value != old
    assert ctx.store["dashboard_sessions"].find_one({"_id": digest(old)}) is None


def test_session_expires_after_the_configured_ttl(dashboard_account, clock, config):
    clock.advance(config.dashboard_session_ttl - 1)
    assert dashboard_account.get(ME).status_code == 200
    clock.advance(1)
    assert_error(dashboard_account.get(ME), 401, "UNAUTHORIZED")


def test_form_encoded_posts_are_refused_with_415(client, dashboard_account):
    """CSRF: a cross-site HTML form can only send form encodings, never application/json."""
    form = "email=owner%40example.com&password=x"
    assert_error(client.simulate_post(LOGIN, body=form, content_type="application/x-www-form-urlencoded"),
                 415, "UNSUPPORTED_MEDIA_TYPE")
    response = dashboard_account.post("/api/dashboard/applications", body="name=evil",
                                      content_type="application/x-www-form-urlencoded")
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    response = dashboard_account.post("/api/dashboard/applications", body='{"name": "evil"}',
                                      content_type="text/plain")
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert dashboard_account.get("/api/dashboard/applications").json["data"] == []


# ---------------------------------------------------------------- profile and password


def test_rename_account(dashboard_account):
    response = dashboard_account.put(ME, json={"name": "Dana Renamed"})
    assert response.status_code == 200 and response.json["data"]["name"] == "Dana Renamed"
    assert dashboard_account.get(ME).json["data"]["name"] == "Dana Renamed"
    assert_error(dashboard_account.put(ME, json={"name": ""}), 400, "VALIDATION_INVALID_FORMAT")


def test_change_password_ends_every_other_session_and_keeps_this_browser_signed_in(make_dashboard_account):
    account = make_dashboard_account()
    other_browser = account.session
    account.login()

    response = account.post(ME + "/password", json={"current_password": account.password,
                                                    "new_password": "Brand-New-Secret-7"})

    assert response.status_code == 200
    fresh = response.cookies[SESSION_COOKIE].value
    assert_error(account.get(ME, cookies={SESSION_COOKIE: other_browser}), 401, "UNAUTHORIZED")
    assert_error(account.get(ME), 401, "UNAUTHORIZED")  # the session used for the change was rotated
    assert account.get(ME, cookies={SESSION_COOKIE: fresh}).status_code == 200
    assert_error(login(account.client, email=account.email, password=account.password,
                       remote_addr=account.remote_addr), 401, "AUTH_INVALID_CREDENTIALS")
    assert login(account.client, email=account.email, password="Brand-New-Secret-7",
                 remote_addr=account.remote_addr).status_code == 200


def test_change_password_checks_the_current_one_and_the_rules(dashboard_account):
    path = ME + "/password"
    assert_error(dashboard_account.post(path, json={"current_password": "Wrong-Password-1",
                                                    "new_password": "Brand-New-Secret-7"}), 422, "INVALID_PASSWORD")
    assert_error(dashboard_account.post(path, json={"current_password": dashboard_account.password,
                                                    "new_password": "short"}), 422, "VALIDATION_PASSWORD_TOO_WEAK")
    assert_error(dashboard_account.post(path, json={}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert dashboard_account.get(ME).status_code == 200  # nothing changed, still signed in


def test_guessing_the_current_password_with_a_stolen_cookie_locks(dashboard_account):
    path = ME + "/password"
    for _ in range(5):
        dashboard_account.post(path, json={"current_password": "Wrong-Password-1", "new_password": "Another-Pass-9"})
    assert_error(dashboard_account.post(path, json={"current_password": dashboard_account.password,
                                                    "new_password": "Another-Pass-9"}), 429, "AUTH_ACCOUNT_LOCKED")


# ---------------------------------------------------------------- no partial state


def test_register_leaves_nothing_behind_when_the_organization_cannot_be_created(client, ctx, monkeypatch):
    def fail(doc):
        raise RuntimeError("store down")

    monkeypatch.setattr(ctx.dashboard.accounts.store, "insert_member", fail)

    assert_error(register(client), 500, "INTERNAL_ERROR")

    for name in ("dashboard_accounts", "organizations", "organization_members"):
        assert ctx.store[name].count_documents({}) == 0, name
    monkeypatch.undo()
    assert register(client).status_code == 201  # the email is free again


def test_a_registration_race_on_one_email_is_decided_by_the_unique_index(client, ctx, monkeypatch):
    assert register(client).status_code == 201
    # The second request passed the pre-check before the first one's insert landed.
    monkeypatch.setattr(ctx.dashboard.accounts.store, "account_by_email", lambda email: None)

    assert_error(register(client, name="Racer"), 409, "AUTH_EMAIL_ALREADY_REGISTERED")

    assert ctx.store["dashboard_accounts"].count_documents({}) == 1
    assert ctx.store["organizations"].count_documents({}) == 1


def test_personal_organization_name_fits_the_255_character_limit(client, ctx):
    account_id = register(client, name="N" * 255).json["data"]["id"]
    member = ctx.store["organization_members"].find_one({"account_id": account_id})
    name = ctx.store["organizations"].find_one({"_id": member["organization_id"]})["name"]
    assert len(name) == 255 and name.endswith("'s organization")
