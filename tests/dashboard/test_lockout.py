"""The dashboard's login lock is the end users' (``controlplane/lockout.py``): 5
consecutive failures per email lock it for 15 minutes from the locking failure, counted
atomically before bcrypt, in the ``login_attempts`` collection every replica shares."""
import math
from datetime import UTC, datetime, timedelta

import pytest

from shared.config import Rate
from tests.conftest import assert_error, count_password_checks, in_parallel
from tests.plugins.dashboard import DASHBOARD_PASSWORD
from tests.plugins.users import PASSWORD, fresh_address, users_url
from tests.users.conftest import assert_rate_limit_headers, near

LOGIN = "/api/dashboard/login"
CHANGE_PASSWORD = "/api/dashboard/me/password"
EMAIL = "owner@example.com"
WRONG = "Wrong-Password-1"


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


@pytest.fixture
def account(make_dashboard_account):
    return make_dashboard_account(EMAIL)


def sign_in(client, password, email=EMAIL):
    """A dashboard login from a client address no other request used (the per-IP
    budget is not what these tests measure)."""
    return client.simulate_post(LOGIN, json={"email": email, "password": password}, remote_addr=fresh_address())


def fail(client, times, email=EMAIL):
    for _ in range(times):
        assert_error(sign_in(client, WRONG, email), 401, "AUTH_INVALID_CREDENTIALS")


def change_password(account, current):
    return account.post(CHANGE_PASSWORD, json={"current_password": current, "new_password": "Brand-New-Secret-7"})


def test_five_failures_lock_even_the_right_password(client, account, clock):
    fail(client, 5)
    response = sign_in(client, DASHBOARD_PASSWORD)
    error = assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert_rate_limit_headers(response, 5)
    assert int(response.headers["Retry-After"]) == 900
    assert int(response.headers["X-RateLimit-Reset"]) == math.ceil(clock().timestamp() + 900)
    assert error["details"]["reason"] == "locked" and error["details"]["locked_until"]


def test_the_lock_lasts_15_minutes_from_the_locking_failure(client, account, clock):
    fail(client, 4)
    clock.advance(600)
    fail(client, 1)
    clock.advance(899)
    response = sign_in(client, DASHBOARD_PASSWORD)
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert response.headers["Retry-After"] == "1"
    clock.advance(1)
    assert sign_in(client, DASHBOARD_PASSWORD).status_code == 200


def test_a_window_boundary_lets_no_extra_guesses_through(client, account, clock):
    """A fixed window would let 4 guesses in before its boundary and 5 more after it."""
    clock.now = datetime.fromtimestamp((clock().timestamp() // 900 + 1) * 900 - 1, UTC)
    statuses = []
    for i in range(10):
        statuses.append(sign_in(client, WRONG).status_code)
        if i == 3:
            clock.advance(2)
    assert statuses == [401] * 5 + [429] * 5


def test_after_the_lapse_the_count_starts_over(client, account, clock):
    fail(client, 5)
    clock.advance(900)
    fail(client, 4)
    assert sign_in(client, DASHBOARD_PASSWORD).status_code == 200


def test_a_successful_login_forgives_the_failures(client, account):
    fail(client, 4)
    assert sign_in(client, DASHBOARD_PASSWORD).status_code == 200
    fail(client, 4)
    assert sign_in(client, DASHBOARD_PASSWORD).status_code == 200
    fail(client, 5)
    assert_error(sign_in(client, DASHBOARD_PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")


def test_locked_attempts_never_reach_bcrypt(client, account, ctx, monkeypatch):
    fail(client, 5)
    monkeypatch.setattr(ctx.hasher, "verify", lambda *a: pytest.fail("password checked while locked"))
    assert_error(sign_in(client, DASHBOARD_PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")


@pytest.mark.parametrize("config_overrides", [{"lockout_threshold": 3, "lockout_seconds": 60}], indirect=True)
def test_threshold_and_duration_are_the_end_users(client, account, clock):
    fail(client, 3)
    response = sign_in(client, DASHBOARD_PASSWORD)
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert response.headers["Retry-After"] == "60" and response.headers["X-RateLimit-Limit"] == "3"
    clock.advance(60)
    assert sign_in(client, DASHBOARD_PASSWORD).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"rate_limit_dashboard_login": Rate(0, 60)}], indirect=True)
def test_twenty_parallel_wrong_logins_let_at_most_five_password_checks_through(client, account, ctx, monkeypatch):
    checks = count_password_checks(ctx, monkeypatch)
    statuses = in_parallel(20, lambda i: client.simulate_post(
        LOGIN, json={"email": EMAIL, "password": WRONG}, remote_addr=f"198.18.2.{i}").status_code)
    assert 1 <= len(checks) <= 5
    assert sorted(statuses) == [401] * len(checks) + [429] * (20 - len(checks))
    assert_error(sign_in(client, DASHBOARD_PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")


def test_change_password_checks_draw_on_the_login_budget(client, account):
    fail(client, 3)
    for _ in range(2):
        assert_error(change_password(account, WRONG), 422, "INVALID_PASSWORD")
    response = change_password(account, DASHBOARD_PASSWORD)
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert_rate_limit_headers(response, 5)
    assert_error(sign_in(client, DASHBOARD_PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")


def test_a_right_current_password_forgives_failed_logins(client, account):
    fail(client, 4)
    assert change_password(account, DASHBOARD_PASSWORD).status_code == 200
    fail(client, 4)
    assert sign_in(client, "Brand-New-Secret-7").status_code == 200


def test_the_lock_does_not_leak_to_other_emails(client, account, make_dashboard_account):
    other = make_dashboard_account("other@example.com")
    fail(client, 5)
    assert sign_in(client, other.password, email=other.email).status_code == 200


def test_the_lock_does_not_leak_into_an_end_user_with_the_same_email(client, account, application, make_user):
    make_user(application, email=EMAIL)

    def user_login(password):
        return client.simulate_post(users_url(application, "/login"), json={"email": EMAIL, "password": password},
                                    remote_addr=fresh_address())

    fail(client, 5)
    assert user_login(PASSWORD).status_code == 200
    for _ in range(5):
        assert_error(user_login(WRONG), 401, "AUTH_INVALID_CREDENTIALS")
    assert_error(user_login(PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")
    assert_error(sign_in(client, DASHBOARD_PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")
    assert sign_in(client, DASHBOARD_PASSWORD, email="nobody@example.com").status_code == 401


def test_a_locked_end_user_does_not_lock_the_dashboard_account(client, account, application, make_user):
    make_user(application, email=EMAIL)
    for _ in range(5):
        client.simulate_post(users_url(application, "/login"), json={"email": EMAIL, "password": WRONG},
                             remote_addr=fresh_address())
    assert sign_in(client, DASHBOARD_PASSWORD).status_code == 200


def test_deleting_an_application_does_not_clear_the_dashboard_lock(client, account, make_dashboard_app, make_user,
                                                                    ctx):
    app_id = make_dashboard_app(account)["id"]
    make_user({"_id": app_id}, email=EMAIL)
    for _ in range(5):
        client.simulate_post(users_url({"_id": app_id}, "/login"), json={"email": EMAIL, "password": WRONG},
                             remote_addr=fresh_address())
    fail(client, 5)

    assert account.delete(f"/api/dashboard/applications/{app_id}").status_code == 204

    assert ctx.store["login_attempts"].count_documents({"app_id": app_id}) == 0  # the tenant's records went
    assert_error(sign_in(client, DASHBOARD_PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")


def test_dashboard_records_share_the_end_users_collection_and_expire_with_the_lock(client, account, ctx, clock):
    fail(client, 5)
    record = ctx.store["login_attempts"].find_one({"_id": f"dashboard:{EMAIL}"})
    assert record["app_id"] == "dashboard" and record["failures"] == 5
    assert near(record["locked_until"], clock() + timedelta(seconds=900))
    assert near(record["resets_at"], record["locked_until"])
    ttl = [index for index in ctx.store["login_attempts"].index_information().values()
           if list(index["key"]) == [("resets_at", 1)]]
    assert [index.get("expireAfterSeconds") for index in ttl] == [0]
