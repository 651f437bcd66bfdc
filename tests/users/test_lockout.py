"""The login lock: 5 consecutive failures per email per application lock it for 15
minutes, counted atomically before bcrypt, so parallel guesses cannot get past it."""
import math
from datetime import timedelta

import pytest

from shared.config import Rate
from tests.conftest import assert_error, count_password_checks, in_parallel
from tests.plugins.users import PASSWORD, users_url
from tests.users.conftest import assert_rate_limit_headers

WRONG = "Wrong-Pass-1"


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


@pytest.fixture
def user(application, make_user):
    return make_user(application, email="alan@example.com")


def attempt(post, app, password, email="alan@example.com", **kwargs):
    return post(app, "/login", {"email": email, "password": password}, **kwargs)


def fail(post, app, times, email="alan@example.com"):
    for _ in range(times):
        assert_error(attempt(post, app, WRONG, email), 401, "AUTH_INVALID_CREDENTIALS")


def test_five_failures_lock_even_the_right_password(post, application, user, clock):
    fail(post, application, 5)
    response = attempt(post, application, PASSWORD)
    error = assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert_rate_limit_headers(response, 5)
    assert int(response.headers["Retry-After"]) == 900
    assert int(response.headers["X-RateLimit-Reset"]) == math.ceil(clock().timestamp() + 900)
    assert error["details"]["reason"] == "locked" and error["details"]["locked_until"]


def test_the_lock_lapses_after_15_minutes(post, application, user, clock):
    fail(post, application, 5)
    clock.advance(899)
    response = attempt(post, application, PASSWORD)
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert response.headers["Retry-After"] == "1"
    clock.advance(1)
    assert attempt(post, application, PASSWORD).status_code == 200


def test_after_the_lapse_the_count_starts_over(post, application, user, clock):
    fail(post, application, 5)
    clock.advance(900)
    fail(post, application, 4)
    assert attempt(post, application, PASSWORD).status_code == 200


def test_a_successful_login_resets_the_count(post, application, user):
    fail(post, application, 4)
    assert attempt(post, application, PASSWORD).status_code == 200
    fail(post, application, 4)
    assert attempt(post, application, PASSWORD).status_code == 200


def test_the_lock_is_per_email_not_per_ip(post, application, user):
    for i in range(5):
        assert_error(attempt(post, application, WRONG, remote_addr=f"192.0.2.{i}"), 401)
    assert_error(attempt(post, application, PASSWORD, remote_addr="192.0.2.99"), 429, "AUTH_ACCOUNT_LOCKED")


def test_the_lock_is_per_application(post, application, make_application, make_user, user):
    other = make_application()
    make_user(other, email="alan@example.com")
    fail(post, application, 5)
    assert attempt(post, other, PASSWORD).status_code == 200


def test_other_emails_are_not_locked(post, application, user, make_user):
    make_user(application, email="other@example.com")
    fail(post, application, 5)
    assert attempt(post, application, PASSWORD, email="other@example.com").status_code == 200


def test_unknown_emails_lock_the_same_way(post, application):
    """Otherwise the lock would reveal which emails have accounts."""
    fail(post, application, 5, email="ghost@example.com")
    assert_error(attempt(post, application, WRONG, email="ghost@example.com"), 429, "AUTH_ACCOUNT_LOCKED")


def test_locked_attempts_never_reach_bcrypt(post, application, user, ctx, monkeypatch):
    fail(post, application, 5)
    monkeypatch.setattr(ctx.hasher, "verify", lambda *a: pytest.fail("password checked while locked"))
    assert_error(attempt(post, application, PASSWORD), 429, "AUTH_ACCOUNT_LOCKED")


def test_failures_are_forgotten_after_15_quiet_minutes(post, application, user, clock):
    fail(post, application, 4)
    clock.advance(900)
    fail(post, application, 4)
    assert attempt(post, application, PASSWORD).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"lockout_threshold": 3, "lockout_seconds": 60}], indirect=True)
def test_threshold_and_duration_are_configurable(post, application, user, clock):
    fail(post, application, 3)
    response = attempt(post, application, PASSWORD)
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert response.headers["Retry-After"] == "60" and response.headers["X-RateLimit-Limit"] == "3"
    clock.advance(60)
    assert attempt(post, application, PASSWORD).status_code == 200


def test_checks_lost_in_a_crash_block_the_email_only_until_the_record_lapses(post, application, user, ctx,
                                                                              clock):
    # Five checks taken by requests that died before recording their outcome.
    ctx.store["login_attempts"].insert_one({
        "_id": f"{application['_id']}:alan@example.com", "app_id": application["_id"], "email": "alan@example.com",
        "used": 5, "failures": 0, "locked_until": None, "resets_at": clock() + timedelta(seconds=900)})
    response = attempt(post, application, PASSWORD)
    assert assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")["details"]["reason"] == "attempts_in_progress"
    assert response.headers["Retry-After"] == "1"
    clock.advance(900)
    assert attempt(post, application, PASSWORD).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"rate_limit_login": Rate(0, 60)}], indirect=True)
def test_twenty_parallel_wrong_logins_let_at_most_five_password_checks_through(
        client, application, user, ctx, monkeypatch):
    checks = count_password_checks(ctx, monkeypatch)
    statuses = in_parallel(20, lambda i: client.simulate_post(
        users_url(application, "/login"), json={"email": "alan@example.com", "password": WRONG},
        remote_addr=f"198.18.0.{i}").status_code)
    assert 1 <= len(checks) <= 5
    assert sorted(statuses) == [401] * len(checks) + [429] * (20 - len(checks))
    assert_error(client.simulate_post(users_url(application, "/login"),
                                      json={"email": "alan@example.com", "password": PASSWORD}), 429,
                 "AUTH_ACCOUNT_LOCKED")


def test_a_success_does_not_forgive_checks_still_running(application, user, ctx):
    """The real user's success racing an attacker's guesses keeps the guesses counted."""
    guard, app_id = ctx.password_guard, application["_id"]
    guard.check(app_id, "alan@example.com", WRONG, None)                      # one failure
    key = guard.take(app_id, "alan@example.com")                              # a guess still running
    assert guard.check(app_id, "alan@example.com", PASSWORD, ctx.store["users"].find_one(
        {"email": "alan@example.com"})["password_hash"])
    record = ctx.store["login_attempts"].find_one({"_id": key})
    assert (record["used"], record["failures"]) == (1, 0)


@pytest.mark.parametrize("config_overrides", [{"rate_limit_login": Rate(0, 60)}], indirect=True)
def test_parallel_right_logins_never_lock_the_account(client, application, user, ctx, monkeypatch):
    """At most 5 checks run at once for one email; the others are told to retry in a
    second, and the account does not lock."""
    # Only the guard is under test: mongomock's counters are not thread-safe the way
    # MongoDB's are, so the sessions and events of 20 threads are left out.
    monkeypatch.setattr(ctx.users.sessions, "issue", lambda *a, **k: {"session": "stub"})

    def login(i):
        response = client.simulate_post(users_url(application, "/login"),
                                        json={"email": "alan@example.com", "password": PASSWORD},
                                        remote_addr=f"198.18.1.{i}")
        return response.status_code, response.headers.get("Retry-After")

    statuses = in_parallel(20, login)
    assert 1 <= sum(1 for status, _ in statuses if status == 200) <= 20
    assert all(status == 200 or (status == 429 and retry == "1") for status, retry in statuses)
    assert client.simulate_post(users_url(application, "/login"),
                                json={"email": "alan@example.com", "password": PASSWORD}).status_code == 200


def test_change_password_guesses_count_toward_the_lock(client, application, make_user_token, post):
    token = make_user_token(application, email="kay@example.com")
    url = users_url(application, f"/{token.user['id']}/change-password")
    body = {"current_password": WRONG, "new_password": "New-Secret-42", "new_password_confirmation": "New-Secret-42"}
    for _ in range(5):
        assert_error(client.simulate_post(url, json=body, headers=token.headers), 422, "INVALID_PASSWORD")
    response = client.simulate_post(url, json={**body, "current_password": PASSWORD}, headers=token.headers)
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert_rate_limit_headers(response, 5)
    assert_error(attempt(post, application, PASSWORD, email="kay@example.com"), 429, "AUTH_ACCOUNT_LOCKED")
