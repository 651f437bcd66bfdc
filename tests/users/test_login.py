"""POST V1/users/login: the token pair, the session behind it, user.login, the MFA hook,
max_concurrent_sessions, the per-IP throttle and the refusals (no user enumeration)."""
import ipaddress
from datetime import timedelta
from types import SimpleNamespace

import jwt
import pytest

from shared.config import Rate
from shared.ids import digest
from tests.conftest import assert_error, events_of
from tests.plugins.users import PASSWORD
from tests.users.conftest import assert_rate_limit_headers, near


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


@pytest.fixture
def user(application, make_user):
    return make_user(application, email="grace@example.com")


def creds(email="grace@example.com", password=PASSWORD, **extra):
    return {"email": email, "password": password, **extra}


def test_login_returns_a_token_pair(post, application, user, ctx, clock):
    response = post(application, "/login", creds(), headers={"User-Agent": "pytest-browser/1.0"},
                    remote_addr="192.0.2.10")
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    pair = response.json["data"]
    assert set(pair) == {"access_token", "refresh_token", "token_type", "expires_in", "user"}
    assert pair["token_type"] == "Bearer" and pair["expires_in"] == 900
    assert pair["user"] == {k: v for k, v in user.items() if k != "password"}

    header = jwt.get_unverified_header(pair["access_token"])
    assert header["alg"] == "RS256" and header["kid"] == ctx.keys.signing_key()[0]
    claims = ctx.tokens.verify(pair["access_token"], audience=application["_id"])
    assert claims["sub"] == user["id"] and claims["aud"] == application["_id"]
    assert claims["iss"] == ctx.config.public_url
    assert claims["exp"] - claims["iat"] == 900 and claims["jti"]

    session = ctx.store["sessions"].find_one({"_id": claims["sid"]})
    assert session["app_id"] == application["_id"] and session["user_id"] == user["id"]
    assert session["refresh_digest"] == digest(pair["refresh_token"])
    assert pair["refresh_token"] not in str(session)  # only the digest is stored
    assert session["device_info"] == {"ip": "192.0.2.10", "user_agent": "pytest-browser/1.0"}
    assert session["is_remember_me"] is False and session["revoked_at"] is None
    assert near(session["expires_at"], clock() + timedelta(days=7))
    assert near(session["last_used_at"], clock()) and near(session["created_at"], clock())

    [event] = events_of(ctx, "user.login")
    assert event["data"] == {"user_id": user["id"], "session_id": session["_id"]}
    assert event["subject"] == {"user_id": user["id"]}
    assert near(ctx.store["users"].find_one({"_id": user["id"]})["last_login_at"], clock())


def test_remember_me_gives_a_30_day_refresh_token(post, application, user, ctx, clock):
    pair = post(application, "/login", creds(remember_me=True)).json["data"]
    session = ctx.store["sessions"].find_one({"refresh_digest": digest(pair["refresh_token"])})
    assert session["is_remember_me"] is True
    assert near(session["expires_at"], clock() + timedelta(days=30))


@pytest.mark.parametrize("config_overrides", [{"access_token_ttl": 60}], indirect=True)
def test_access_token_lifetime_is_configurable(post, application, user):
    assert post(application, "/login", creds()).json["data"]["expires_in"] == 60


def test_email_is_matched_case_insensitively(post, application, user):
    assert post(application, "/login", creds(email="GRACE@Example.com")).status_code == 200


def test_wrong_password_and_unknown_email_answer_alike(post, application, user, ctx):
    wrong = assert_error(post(application, "/login", creds(password="Wrong-Pass-1")), 401, "AUTH_INVALID_CREDENTIALS")
    unknown = assert_error(post(application, "/login", creds(email="nobody@example.com")), 401,
                           "AUTH_INVALID_CREDENTIALS")
    assert wrong["message"] == unknown["message"] and wrong["details"] == unknown["details"] == {}
    assert ctx.store["sessions"].count_documents({}) == 0
    assert events_of(ctx, "user.login") == []


def test_unknown_email_costs_one_bcrypt_check_like_a_wrong_password(post, application, user, ctx, monkeypatch):
    """No enumeration by timing: both paths run exactly one bcrypt check at the same cost."""
    checks = []
    real_verify = ctx.hasher.verify

    def counting(password, hashed):
        checks.append(hashed)
        return real_verify(password, hashed)

    monkeypatch.setattr(ctx.hasher, "verify", counting)
    post(application, "/login", creds(password="Wrong-Pass-1"))
    post(application, "/login", creds(email="nobody@example.com"))
    assert len(checks) == 2
    assert checks[0].startswith("$2") and checks[1] is None  # None: the hasher burns a dummy hash
    assert ctx.hasher._dummy.split("$")[2] == checks[0].split("$")[2]  # same cost factor


def test_deleted_user_cannot_log_in(post, application, user, ctx):
    ctx.store["users"].update_one({"_id": user["id"]}, {"$set": {"status": "deleted"}})
    assert_error(post(application, "/login", creds()), 401, "AUTH_INVALID_CREDENTIALS")


def test_suspended_user_is_403_only_with_the_right_password(post, application, user, ctx):
    ctx.users.admin.suspend(application["_id"], user["id"])
    assert_error(post(application, "/login", creds()), 403, "AUTH_ACCOUNT_SUSPENDED")
    # A wrong password does not reveal the suspension.
    assert_error(post(application, "/login", creds(password="Wrong-Pass-1")), 401, "AUTH_INVALID_CREDENTIALS")
    assert ctx.store["sessions"].count_documents({}) == 0


def test_user_of_another_application_cannot_log_in_here(post, make_application, user):
    assert_error(post(make_application(), "/login", creds()), 401, "AUTH_INVALID_CREDENTIALS")


def test_login_validation(post, application):
    assert_error(post(application, "/login", {"email": "grace@example.com"}), 400, "VALIDATION_INVALID_FORMAT")
    error = assert_error(post(application, "/login", {}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"email", "password"}
    assert_error(post(application, "/login", creds(remember_me="yes")), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(post(application, "/login", creds(password="x" * 1025)), 400, "VALIDATION_INVALID_FORMAT")


def test_second_factor_hook_answers_a_challenge_and_issues_no_tokens(post, application, user, ctx, monkeypatch):
    calls = []
    challenge = {"mfa_required": True, "challenge_token": "ch_123", "mfa_methods": ["totp"]}

    def second_factor(app, found, *, remember_me, device_info):
        calls.append((app["_id"], found["_id"], remember_me, device_info["ip"]))
        return challenge

    monkeypatch.setattr(ctx.users.login, "second_factor", SimpleNamespace(login_challenge=second_factor))
    response = post(application, "/login", creds(remember_me=True), remote_addr="192.0.2.44")
    assert response.status_code == 200
    assert response.json == {"data": challenge}
    assert calls == [(application["_id"], user["id"], True, "192.0.2.44")]
    assert ctx.store["sessions"].count_documents({}) == 0
    assert events_of(ctx, "user.login") == []


def test_second_factor_is_not_asked_for_a_wrong_password(post, application, user, ctx, monkeypatch):
    monkeypatch.setattr(ctx.users.login, "second_factor",
                        SimpleNamespace(login_challenge=lambda *a, **k: pytest.fail("asked for a second factor")))
    assert_error(post(application, "/login", creds(password="Wrong-Pass-1")), 401, "AUTH_INVALID_CREDENTIALS")


def test_issue_session_is_what_mfa_verify_calls(application, user, ctx):
    stored = ctx.store["users"].find_one({"_id": user["id"], "app_id": application["_id"]})
    pair = ctx.users.sessions.issue(application, stored, remember_me=True,
                              device_info={"ip": "192.0.2.1", "user_agent": "ua"})
    assert pair["user"]["id"] == user["id"] and pair["token_type"] == "Bearer"
    claims = ctx.tokens.verify(pair["access_token"], audience=application["_id"])
    assert ctx.store["sessions"].find_one({"_id": claims["sid"]})["is_remember_me"] is True


def test_max_concurrent_sessions_revokes_the_oldest(post, application, user, ctx, clock):
    ctx.applications.update(application["_id"], {"max_concurrent_sessions": 2})
    pairs = []
    for _ in range(3):
        pairs.append(post(application, "/login", creds()).json["data"])
        clock.advance(1)
    sessions = {s["refresh_digest"]: s for s in ctx.store["sessions"].find({"user_id": user["id"]})}
    first, second, third = (sessions[digest(p["refresh_token"])] for p in pairs)
    assert first["revoked_at"] is not None and first["revoked_reason"] == "session_limit"
    assert second["revoked_at"] is None and third["revoked_at"] is None
    assert_error(post(application, "/token/refresh", {"refresh_token": pairs[0]["refresh_token"]}), 401)
    assert post(application, "/token/refresh", {"refresh_token": pairs[1]["refresh_token"]}).status_code == 200


def test_zero_max_concurrent_sessions_is_unlimited(post, application, user, ctx):
    for _ in range(5):
        post(application, "/login", creds())
    assert ctx.store["sessions"].count_documents({"user_id": user["id"], "revoked_at": None}) == 5


# -- the per-IP login throttle


def test_login_is_throttled_to_10_per_minute_per_ip(post, application, user, clock):
    for _ in range(10):
        assert post(application, "/login", creds(), remote_addr="198.51.100.5").status_code == 200
    response = post(application, "/login", creds(), remote_addr="198.51.100.5")
    error = assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert_rate_limit_headers(response, 10)
    assert int(response.headers["Retry-After"]) <= 60 and error["details"]["retry_after"] >= 1
    assert int(response.headers["X-RateLimit-Reset"]) > clock().timestamp()
    assert post(application, "/login", creds(), remote_addr="198.51.100.6").status_code == 200
    clock.advance(60)
    assert post(application, "/login", creds(), remote_addr="198.51.100.5").status_code == 200


def test_throttled_requests_do_not_reach_the_password_check(post, application, user, ctx, monkeypatch):
    for _ in range(10):
        post(application, "/login", creds(password="Wrong-Pass-1"), remote_addr="198.51.100.7")
    monkeypatch.setattr(ctx.hasher, "verify", lambda *a: pytest.fail("password checked"))
    assert_error(post(application, "/login", creds(), remote_addr="198.51.100.7"), 429)


@pytest.mark.parametrize("config_overrides", [{"trusted_proxies": (ipaddress.ip_network("10.0.0.0/8"),),
                                               "rate_limit_login": Rate(2, 60)}], indirect=True)
def test_login_throttle_uses_x_forwarded_for_from_trusted_proxies(post, application, user, ctx):
    via_proxy = {"X-Forwarded-For": "203.0.113.50"}
    assert post(application, "/login", creds(), headers=via_proxy, remote_addr="10.0.0.1").status_code == 200
    pair = post(application, "/login", creds(), headers=via_proxy, remote_addr="10.0.0.2").json["data"]
    assert post(application, "/login", creds(), headers=via_proxy, remote_addr="10.0.0.3").status_code == 429
    session = ctx.store["sessions"].find_one({"refresh_digest": digest(pair["refresh_token"])})
    assert session["device_info"]["ip"] == "203.0.113.50"
