"""Login of an MFA user and POST V1/users/mfa/verify: the challenge instead of tokens,
the token pair exactly as a password login issues it, replay, drift, single use, expiry,
the lock after 5 wrong codes, backup codes, and races."""
import threading
from datetime import timedelta

import pytest

from controlplane.mfa import store as mfa_store
from controlplane.mfa import totp
from shared.config import Rate
from shared.ids import digest
from tests.conftest import assert_error, bearer, events_of
from tests.mfa.conftest import STEP, mfa_url, rfc6238


def wrong_code(mfa_user, clock) -> str:
    """A 6-digit code the authenticator does not show at any accepted step."""
    valid = {rfc6238(mfa_user.secret, clock(), o) for o in (-1, 0, 1)}
    return next(c for c in ("000000", "111111", "222222") if c not in valid)


def session_of(ctx, pair):
    return ctx.store["sessions"].find_one({"refresh_digest": digest(pair["refresh_token"])})


def test_login_of_an_mfa_user_answers_a_challenge_and_no_tokens(client, application, mfa_user, ctx, clock):
    sessions_before = ctx.store["sessions"].count_documents({"user_id": mfa_user.id})
    logins_before = len(events_of(ctx, "user.login"))
    response = client.simulate_post(f"/api/v1/applications/{application['_id']}/users/login",
                                    json={"email": mfa_user.email, "password": mfa_user.password})
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert set(data) == {"mfa_required", "challenge_token", "mfa_methods"}
    assert data["mfa_required"] is True and data["mfa_methods"] == ["totp"]
    assert isinstance(data["challenge_token"], str) and len(data["challenge_token"]) >= 32
    assert ctx.store["sessions"].count_documents({"user_id": mfa_user.id}) == sessions_before
    assert len(events_of(ctx, "user.login")) == logins_before

    stored = ctx.store["mfa_challenges"].find_one({"_id": digest(data["challenge_token"])})
    assert stored["app_id"] == application["_id"] and stored["user_id"] == mfa_user.id
    assert stored["attempts"] == 0 and stored["consumed_at"] is None
    assert data["challenge_token"] not in str(stored)  # only the digest is stored
    assert abs(stored["expires_at"].replace(tzinfo=clock().tzinfo) - (clock() + timedelta(seconds=300))) \
        < timedelta(milliseconds=1)


def test_a_wrong_password_is_refused_before_any_challenge(client, application, mfa_user, ctx):
    response = client.simulate_post(f"/api/v1/applications/{application['_id']}/users/login",
                                    json={"email": mfa_user.email, "password": "Wrong-Horse-1"})
    assert_error(response, 401, "AUTH_INVALID_CREDENTIALS")
    assert ctx.store["mfa_challenges"].count_documents({}) == 0


def test_verify_with_the_current_code_issues_the_token_pair_and_session(verify, application, mfa_user, challenge,
                                                                        ctx, clock):
    response = verify(application, challenge, rfc6238(mfa_user.secret, clock()))
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    assert "message" not in response.json
    pair = response.json["data"]
    assert set(pair) == {"access_token", "refresh_token", "token_type", "expires_in", "user"}
    assert pair["token_type"] == "Bearer" and pair["expires_in"] == 900
    assert pair["user"] == {k: v for k, v in mfa_user.token.user.items() if k != "password"}
    claims = ctx.tokens.verify(pair["access_token"], audience=application["_id"])
    assert claims["sub"] == mfa_user.id

    session = session_of(ctx, pair)
    assert session["_id"] == claims["sid"] and session["is_remember_me"] is False
    assert abs(session["expires_at"].replace(tzinfo=clock().tzinfo) - (clock() + timedelta(days=7))) \
        < timedelta(milliseconds=1)
    login_events = [e for e in events_of(ctx, "user.login") if e["data"]["session_id"] == session["_id"]]
    assert len(login_events) == 1 and login_events[0]["subject"] == {"user_id": mfa_user.id}

    method = ctx.store["mfa_methods"].find_one({"_id": mfa_user.method_id})
    assert abs(method["last_used_at"].replace(tzinfo=clock().tzinfo) - clock()) < timedelta(milliseconds=1)


def test_the_new_access_token_works(verify, client, application, mfa_user, challenge, clock):
    pair = verify(application, challenge, rfc6238(mfa_user.secret, clock())).json["data"]
    response = client.simulate_get(mfa_url(application, mfa_user.id, "/status"), headers=bearer(pair["access_token"]))
    assert response.status_code == 200 and response.json["data"]["mfa_enabled"] is True


def test_remember_me_is_carried_over_from_the_login(verify, application, mfa_user, start_login, ctx, clock):
    token = start_login(application, mfa_user.email, mfa_user.password, remember_me=True)["challenge_token"]
    pair = verify(application, token, rfc6238(mfa_user.secret, clock())).json["data"]
    session = session_of(ctx, pair)
    assert session["is_remember_me"] is True
    assert abs(session["expires_at"].replace(tzinfo=clock().tzinfo) - (clock() + timedelta(days=30))) \
        < timedelta(milliseconds=1)


def test_the_session_records_the_device_of_the_login(verify, application, mfa_user, start_login, ctx, clock):
    token = start_login(application, mfa_user.email, mfa_user.password, remote_addr="192.0.2.44",
                        headers={"User-Agent": "pytest-phone/2.0"})["challenge_token"]
    pair = verify(application, token, rfc6238(mfa_user.secret, clock())).json["data"]
    assert session_of(ctx, pair)["device_info"] == {"ip": "192.0.2.44", "user_agent": "pytest-phone/2.0"}


@pytest.mark.parametrize("offset", [-1, 1])
def test_one_step_of_drift_is_accepted(verify, application, mfa_user, challenge, clock, offset):
    response = verify(application, challenge, rfc6238(mfa_user.secret, clock(), offset))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("offset", [-2, 2])
def test_two_steps_of_drift_are_refused(verify, application, mfa_user, challenge, clock, offset):
    code = rfc6238(mfa_user.secret, clock(), offset)
    assert code not in {rfc6238(mfa_user.secret, clock(), o) for o in (-1, 0, 1)}
    assert_error(verify(application, challenge, code), 401, "AUTH_INVALID_MFA_CODE")


def test_a_used_code_cannot_be_replayed(verify, application, mfa_user, start_login, clock):
    code = rfc6238(mfa_user.secret, clock())
    first = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert verify(application, first, code).status_code == 200
    second = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    error = assert_error(verify(application, second, code), 401, "AUTH_INVALID_MFA_CODE")
    assert "already" in error["message"]
    # nor can an earlier step's code once a later one was accepted
    assert_error(verify(application, second, rfc6238(mfa_user.secret, clock(), -1)), 401, "AUTH_INVALID_MFA_CODE")
    # the next step's code works
    clock.advance(STEP)
    assert verify(application, second, rfc6238(mfa_user.secret, clock())).status_code == 200


def test_the_challenge_is_single_use(verify, application, mfa_user, challenge, clock):
    assert verify(application, challenge, rfc6238(mfa_user.secret, clock())).status_code == 200
    clock.advance(STEP)
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 410,
                 "AUTH_MFA_CHALLENGE_EXPIRED")


def test_a_challenge_expires_after_five_minutes(verify, application, mfa_user, challenge, clock):
    clock.advance(300)
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 410,
                 "AUTH_MFA_CHALLENGE_EXPIRED")


def test_a_challenge_is_valid_until_its_last_second(verify, application, mfa_user, challenge, clock):
    clock.advance(299)
    assert verify(application, challenge, rfc6238(mfa_user.secret, clock())).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"mfa_challenge_ttl": 60}], indirect=True)
def test_the_challenge_lifetime_is_configurable(verify, application, mfa_user, challenge, clock):
    clock.advance(60)
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 410,
                 "AUTH_MFA_CHALLENGE_EXPIRED")


@pytest.mark.parametrize("token", ["not-a-challenge", "x" * 43])
def test_an_unknown_challenge_is_expired(verify, application, mfa_user, clock, token):
    assert_error(verify(application, token, rfc6238(mfa_user.secret, clock())), 410, "AUTH_MFA_CHALLENGE_EXPIRED")


def test_a_challenge_of_another_application_is_expired(verify, application, mfa_user, challenge, clock,
                                                       make_application):
    other = make_application()
    assert_error(verify(other, challenge, rfc6238(mfa_user.secret, clock())), 410, "AUTH_MFA_CHALLENGE_EXPIRED")
    # and it was not counted or spent there
    assert verify(application, challenge, rfc6238(mfa_user.secret, clock())).status_code == 200


def test_a_wrong_code_is_refused_and_counted(verify, application, mfa_user, challenge, clock, ctx):
    error = assert_error(verify(application, challenge, wrong_code(mfa_user, clock)), 401, "AUTH_INVALID_MFA_CODE")
    assert error["details"] == {"attempts_remaining": 4}
    assert ctx.store["mfa_challenges"].find_one({"_id": digest(challenge)})["attempts"] == 1
    assert verify(application, challenge, rfc6238(mfa_user.secret, clock())).status_code == 200


def test_five_wrong_codes_lock_the_challenge(verify, application, mfa_user, challenge, clock, ctx):
    for remaining in (4, 3, 2, 1, 0):
        error = assert_error(verify(application, challenge, wrong_code(mfa_user, clock)), 401,
                             "AUTH_INVALID_MFA_CODE")
        assert error["details"]["attempts_remaining"] == remaining
    response = verify(application, challenge, rfc6238(mfa_user.secret, clock()))
    assert_error(response, 429, "AUTH_MFA_LOCKED")
    assert response.headers["X-RateLimit-Limit"] == "5" and response.headers["X-RateLimit-Remaining"] == "0"
    assert 1 <= int(response.headers["Retry-After"]) <= 300
    # a locked challenge stays locked for its lifetime, even for a backup code
    assert_error(verify(application, challenge, mfa_user.backup_codes[0]), 429, "AUTH_MFA_LOCKED")
    assert ctx.store["sessions"].count_documents({"user_id": mfa_user.id, "is_remember_me": False}) == 1


def test_after_a_lock_a_new_login_gets_a_new_challenge(verify, application, mfa_user, challenge, clock,
                                                       start_login):
    for _ in range(5):
        verify(application, challenge, wrong_code(mfa_user, clock))
    fresh = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert verify(application, fresh, rfc6238(mfa_user.secret, clock())).status_code == 200


@pytest.mark.parametrize("config_overrides", [{"mfa_max_attempts": 2}], indirect=True)
def test_the_attempt_limit_is_configurable(verify, application, mfa_user, challenge, clock):
    for _ in range(2):
        assert_error(verify(application, challenge, wrong_code(mfa_user, clock)), 401, "AUTH_INVALID_MFA_CODE")
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 429, "AUTH_MFA_LOCKED")


def test_codes_tried_per_user_are_limited_across_challenges(verify, application, mfa_user, start_login, clock,
                                                            monkeypatch):
    """Logging in again and again does not buy unlimited guesses."""
    monkeypatch.setattr("controlplane.mfa.service.VERIFY_RATE", Rate(7, 900))
    for _ in range(2):
        token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
        for _ in range(3):
            assert_error(verify(application, token, wrong_code(mfa_user, clock)), 401, "AUTH_INVALID_MFA_CODE")
    token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert verify(application, token, wrong_code(mfa_user, clock)).status_code == 401
    assert_error(verify(application, token, rfc6238(mfa_user.secret, clock())), 429, "AUTH_MFA_LOCKED")
    clock.advance(900)
    token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert verify(application, token, rfc6238(mfa_user.secret, clock())).status_code == 200


@pytest.mark.parametrize("code", ["12345", "1234567", "abcdef", "ABCD-EFGH", "ABCD-EFGH-JKMN-PQRS", ""])
def test_a_malformed_code_is_a_validation_error_and_not_counted(verify, application, mfa_user, challenge, code,
                                                                ctx):
    assert_error(verify(application, challenge, code), 400, "VALIDATION_INVALID_FORMAT")
    assert ctx.store["mfa_challenges"].find_one({"_id": digest(challenge)})["attempts"] == 0


@pytest.mark.parametrize("body, code, fields", [
    ({}, "VALIDATION_MULTIPLE_ERRORS", {"challenge_token", "code"}),
    ({"challenge_token": "abc"}, "VALIDATION_INVALID_FORMAT", {"code"}),
    ({"code": "123456"}, "VALIDATION_INVALID_FORMAT", {"challenge_token"}),
    ({"challenge_token": 5, "code": "123456"}, "VALIDATION_INVALID_FORMAT", {"challenge_token"}),
    ({"challenge_token": "x" * 513, "code": "123456"}, "VALIDATION_INVALID_FORMAT", {"challenge_token"}),
])
def test_verify_validates_its_body(client, application, body, code, fields):
    response = client.simulate_post(f"/api/v1/applications/{application['_id']}/users/mfa/verify", json=body)
    error = assert_error(response, 400, code)
    assert set(error["details"]["fields"]) == fields


def test_verify_needs_a_json_body(client, application):
    response = client.simulate_post(f"/api/v1/applications/{application['_id']}/users/mfa/verify",
                                    body="challenge_token=x&code=123456",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_verify_of_an_unknown_application_is_not_found(client):
    response = client.simulate_post("/api/v1/applications/6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11/users/mfa/verify",
                                    json={"challenge_token": "abc", "code": "123456"})
    assert_error(response, 404, "NOT_FOUND")


def test_a_code_typed_with_a_space_works(verify, application, mfa_user, challenge, clock):
    code = rfc6238(mfa_user.secret, clock())
    assert verify(application, challenge, f"{code[:3]} {code[3:]}").status_code == 200


# ---------------------------------------------------------------- backup codes


@pytest.mark.parametrize("form", [str, lambda c: c.replace("-", ""), str.lower,
                                  lambda c: c.replace("-", "").lower()])
def test_a_backup_code_works_with_or_without_dashes_in_any_case(verify, application, mfa_user, challenge, form,
                                                                ctx):
    response = verify(application, challenge, form(mfa_user.backup_codes[3]))
    assert response.status_code == 200, response.text
    assert response.json["message"] == "A backup code was used; 9 remain."
    assert set(response.json["data"]) == {"access_token", "refresh_token", "token_type", "expires_in", "user"}
    [event] = events_of(ctx, "mfa.backup_code_used")
    assert event["data"] == {"user_id": mfa_user.id, "remaining": 9}


def test_a_backup_code_is_single_use(verify, client, application, mfa_user, start_login):
    code = mfa_user.backup_codes[0]
    first = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert verify(application, first, code).status_code == 200
    second = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert_error(verify(application, second, code), 401, "AUTH_INVALID_MFA_CODE")
    assert_error(verify(application, second, code.replace("-", "").lower()), 401, "AUTH_INVALID_MFA_CODE")
    # the other codes still work, and the status counts the one used
    pair = verify(application, second, mfa_user.backup_codes[1]).json["data"]
    status = client.simulate_get(mfa_url(application, mfa_user.id, "/status"), headers=bearer(pair["access_token"]))
    assert status.json["data"]["backup_codes_remaining"] == 8


def test_an_invented_backup_code_is_refused_and_counted(verify, application, mfa_user, challenge, ctx):
    invented = totp.new_backup_code()
    assert invented not in mfa_user.backup_codes
    error = assert_error(verify(application, challenge, invented), 401, "AUTH_INVALID_MFA_CODE")
    assert error["details"] == {"attempts_remaining": 4}


def test_another_users_backup_code_is_refused(verify, application, mfa_user, challenge, make_user_token,
                                              enable_mfa):
    other = enable_mfa(application, make_user_token(application))
    assert_error(verify(application, challenge, other.backup_codes[0]), 401, "AUTH_INVALID_MFA_CODE")


def test_the_last_backup_code_says_none_remain(verify, application, mfa_user, start_login):
    for i, code in enumerate(mfa_user.backup_codes):
        token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
        response = verify(application, token, code)
        assert response.status_code == 200, response.text
        if i == 8:
            assert response.json["message"] == "A backup code was used; 1 remains."
    assert response.json["message"] == "A backup code was used; 0 remain."


# ---------------------------------------------------------------- the account and the method change meanwhile


def test_a_user_suspended_after_the_password_step_gets_no_tokens(verify, application, mfa_user, challenge, clock,
                                                                 ctx):
    ctx.users.admin.suspend(application["_id"], mfa_user.id)
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 403, "AUTH_ACCOUNT_SUSPENDED")


def test_a_user_deleted_after_the_password_step_gets_no_tokens(verify, application, mfa_user, challenge, clock,
                                                               ctx):
    ctx.store["users"].update_one({"_id": mfa_user.id}, {"$set": {"status": "deleted"}})
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 410,
                 "AUTH_MFA_CHALLENGE_EXPIRED")


def test_turning_mfa_off_ends_open_challenges(verify, client, application, mfa_user, challenge, clock):
    response = client.simulate_delete(mfa_url(application, mfa_user.id, "/totp"), headers=mfa_user.headers,
                                      json={"password": mfa_user.password})
    assert response.status_code == 204
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 410,
                 "AUTH_MFA_CHALLENGE_EXPIRED")


# ---------------------------------------------------------------- races


def _race(n, target):
    results, lock = [], threading.Lock()

    def run():
        response = target()
        with lock:
            results.append(response)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_parallel_verifies_with_one_correct_code_issue_one_token_pair(verify, application, mfa_user, challenge,
                                                                      clock, ctx, monkeypatch):
    """Every request has checked the code before any records it: the replay guard and
    the challenge consumption must still let exactly one through."""
    n = 5  # the attempt limit: every request reaches the code check
    checked = threading.Barrier(n)
    real = totp.matching_step

    def slow_match(*args):
        step = real(*args)
        checked.wait(timeout=5)
        return step

    monkeypatch.setattr(totp, "matching_step", slow_match)
    sessions_before = ctx.store["sessions"].count_documents({"user_id": mfa_user.id})
    code = rfc6238(mfa_user.secret, clock())
    results = _race(n, lambda: verify(application, challenge, code))
    assert sorted(r.status_code for r in results) == [200] + [401] * (n - 1)
    assert ctx.store["sessions"].count_documents({"user_id": mfa_user.id}) == sessions_before + 1


def test_parallel_verifies_with_different_correct_codes_issue_one_token_pair(
        verify, application, mfa_user, challenge, clock, ctx, monkeypatch):
    """A TOTP code and two backup codes, all correct, racing on one challenge: the
    atomic consumption lets one of them through."""
    checked = threading.Barrier(3)
    real_consume = mfa_store.ChallengeStore.consume

    def consume(self, *args):
        checked.wait(timeout=5)
        return real_consume(self, *args)

    monkeypatch.setattr(mfa_store.ChallengeStore, "consume", consume)
    sessions_before = ctx.store["sessions"].count_documents({"user_id": mfa_user.id})
    codes = iter([rfc6238(mfa_user.secret, clock()), mfa_user.backup_codes[0], mfa_user.backup_codes[1]])
    lock = threading.Lock()

    def attempt():
        with lock:
            code = next(codes)
        return verify(application, challenge, code)

    results = _race(3, attempt)
    assert sorted(r.status_code for r in results) == [200, 410, 410]
    for r in results:
        if r.status_code == 410:
            assert_error(r, 410, "AUTH_MFA_CHALLENGE_EXPIRED")
    assert ctx.store["sessions"].count_documents({"user_id": mfa_user.id}) == sessions_before + 1


def test_parallel_wrong_codes_cannot_exceed_the_attempt_limit(verify, application, mfa_user, challenge, clock,
                                                              monkeypatch):
    """Attempts are counted before the code is checked: of 12 parallel guesses at most 5
    are ever checked."""
    checks, lock = [], threading.Lock()
    real = totp.matching_step

    def counting(*args):
        with lock:
            checks.append(args[1])
        return real(*args)

    monkeypatch.setattr(totp, "matching_step", counting)
    bad = wrong_code(mfa_user, clock)
    results = _race(12, lambda: verify(application, challenge, bad))
    assert len(checks) == 5
    assert sorted(r.status_code for r in results) == [401] * 5 + [429] * 7
