"""POST mfa/backup-codes/regenerate and DELETE mfa/totp: both need the password;
regenerating invalidates every earlier code; disabling restores the plain login."""
import threading

import pytest

from controlplane.mfa import store as mfa_store
from tests.conftest import assert_error, events_of
from tests.mfa.conftest import NO_PASSKEYS, mfa_url, rfc6238
from tests.plugins.users import fresh_address, users_url


@pytest.fixture
def regenerate(client, application):
    def do(mfa_user, body):
        return client.simulate_post(mfa_url(application, mfa_user.id, "/backup-codes/regenerate"), json=body,
                                    headers=mfa_user.headers)

    return do


@pytest.fixture
def disable(client, application):
    def do(mfa_user, body):
        return client.simulate_delete(mfa_url(application, mfa_user.id, "/totp"), json=body,
                                      headers=mfa_user.headers)

    return do


@pytest.fixture
def status(client, application):
    def do(mfa_user):
        return client.simulate_get(mfa_url(application, mfa_user.id, "/status"), headers=mfa_user.headers).json["data"]

    return do


# ---------------------------------------------------------------- regenerate


def test_regenerate_returns_a_new_set_and_invalidates_the_old_one(regenerate, status, verify, start_login,
                                                                  application, mfa_user, ctx, outbox):
    token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert verify(application, token, mfa_user.backup_codes[0]).status_code == 200
    assert status(mfa_user)["backup_codes_remaining"] == 9

    response = regenerate(mfa_user, {"password": mfa_user.password})
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    data = response.json["data"]
    assert set(data) == {"backup_codes", "message"} and data["message"]
    codes = data["backup_codes"]
    assert len(codes) == 10 == len(set(codes)) and not set(codes) & set(mfa_user.backup_codes)
    assert status(mfa_user)["backup_codes_remaining"] == 10
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": mfa_user.id}) == 10

    token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    for old in mfa_user.backup_codes[1:3]:
        assert_error(verify(application, token, old), 401, "AUTH_INVALID_MFA_CODE")
    assert verify(application, token, codes[0]).status_code == 200

    [event] = events_of(ctx, "mfa.backup_codes_regenerated")
    assert event["data"] == {"user_id": mfa_user.id} and event["subject"] == {"user_id": mfa_user.id}
    assert [m.to for m in outbox] == [mfa_user.email] and "backup codes" in outbox[0].subject.lower()
    assert not any(c in outbox[0].body for c in codes)  # the notice carries no secret


def test_regenerate_with_a_wrong_password_changes_nothing(regenerate, status, application, mfa_user, ctx,
                                                          verify, challenge):
    error = assert_error(regenerate(mfa_user, {"password": "Wrong-Horse-1"}), 422, "INVALID_PASSWORD")
    assert error["details"] == {"field": "password"}
    assert status(mfa_user)["backup_codes_remaining"] == 10
    assert events_of(ctx, "mfa.backup_codes_regenerated") == []
    assert verify(application, challenge, mfa_user.backup_codes[0]).status_code == 200


def test_regenerate_without_mfa_is_refused(client, application, user_token, ctx):
    response = client.simulate_post(mfa_url(application, user_token.user["id"], "/backup-codes/regenerate"),
                                    json={"password": user_token.password}, headers=user_token.headers)
    assert_error(response, 400, "MFA_NOT_ENABLED")
    assert ctx.store["mfa_backup_codes"].count_documents({}) == 0


def test_regenerate_with_only_a_pending_setup_is_refused(client, application, user_token):
    client.simulate_post(mfa_url(application, user_token.user["id"], "/totp/setup"), json={},
                         headers=user_token.headers)
    response = client.simulate_post(mfa_url(application, user_token.user["id"], "/backup-codes/regenerate"),
                                    json={"password": user_token.password}, headers=user_token.headers)
    assert_error(response, 400, "MFA_NOT_ENABLED")


@pytest.mark.parametrize("body, code", [
    ({}, "VALIDATION_INVALID_FORMAT"),
    ({"password": ""}, "VALIDATION_INVALID_FORMAT"),
    ({"password": 12345678}, "VALIDATION_INVALID_FORMAT"),
    ({"password": "x" * 1025}, "VALIDATION_INVALID_FORMAT"),
])
def test_regenerate_validates_its_body(regenerate, mfa_user, body, code):
    error = assert_error(regenerate(mfa_user, body), 400, code)
    assert set(error["details"]["fields"]) == {"password"}


def test_password_checks_share_the_accounts_login_budget(regenerate, disable, mfa_user, clock, ctx, client, login,
                                                         application):
    """A stolen access token cannot be used to guess the password: MFA management,
    change-password and login draw on one budget of 5 failures, counted before bcrypt."""
    for _ in range(3):
        assert_error(regenerate(mfa_user, {"password": "Wrong-Horse-1"}), 422, "INVALID_PASSWORD")
    for _ in range(2):
        assert_error(disable(mfa_user, {"password": "Wrong-Horse-1"}), 422, "INVALID_PASSWORD")
    response = regenerate(mfa_user, {"password": mfa_user.password})
    assert_error(response, 429, "AUTH_ACCOUNT_LOCKED")
    assert int(response.headers["Retry-After"]) >= 1
    assert_error(disable(mfa_user, {"password": mfa_user.password}), 429, "AUTH_ACCOUNT_LOCKED")
    assert ctx.store["mfa_methods"].count_documents({"user_id": mfa_user.id, "status": "active"}) == 1
    email = mfa_user.token.user["email"]
    locked = client.simulate_post(users_url(application, "/login"), remote_addr=fresh_address(),
                                  json={"email": email, "password": mfa_user.password})
    assert_error(locked, 429, "AUTH_ACCOUNT_LOCKED")
    clock.advance(ctx.config.lockout_seconds)
    assert login(application, email, mfa_user.password)["mfa_required"] is True


def test_parallel_regenerations_leave_one_complete_set(regenerate, status, mfa_user, application, verify,
                                                       start_login, ctx, monkeypatch):
    """Two regenerations racing between writing their set and making it current: the
    current set is complete and usable whichever wins."""
    both_written = threading.Barrier(2)
    real_swap = mfa_store.MethodStore.swap_backup_set

    def swap(self, *args):
        both_written.wait(timeout=5)
        return real_swap(self, *args)

    monkeypatch.setattr(mfa_store.MethodStore, "swap_backup_set", swap)
    results = []
    threads = [threading.Thread(target=lambda: results.append(regenerate(mfa_user, {"password": mfa_user.password})))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200, 200]
    assert status(mfa_user)["backup_codes_remaining"] == 10
    current = ctx.store["mfa_methods"].find_one({"_id": mfa_user.method_id})["backup_set_id"]
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": mfa_user.id, "set_id": current}) == 10
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": mfa_user.id}) == 10
    outcomes = []
    for result in results:
        token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
        outcomes.append(verify(application, token, result.json["data"]["backup_codes"][0]).status_code)
    assert sorted(outcomes) == [200, 401]


# ---------------------------------------------------------------- disable


def test_disable_restores_the_plain_login(disable, status, start_login, application, mfa_user, ctx, outbox):
    response = disable(mfa_user, {"password": mfa_user.password})
    assert response.status_code == 204 and response.text == ""
    assert status(mfa_user) == {"mfa_enabled": False, "methods": [], "backup_codes_remaining": 0, **NO_PASSKEYS}
    assert ctx.store["mfa_methods"].count_documents({"user_id": mfa_user.id}) == 0
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": mfa_user.id}) == 0
    pair = start_login(application, mfa_user.email, mfa_user.password)
    assert "access_token" in pair and "mfa_required" not in pair

    [event] = events_of(ctx, "mfa.disabled")
    assert event["app_id"] == application["_id"]
    assert event["data"] == {"user_id": mfa_user.id, "method": "totp"} and event["subject"] == {"user_id": mfa_user.id}
    assert [m.to for m in outbox] == [mfa_user.email] and "turned off" in outbox[0].subject


def test_disable_with_a_wrong_password_changes_nothing(disable, status, start_login, application, mfa_user, ctx):
    assert_error(disable(mfa_user, {"password": "Wrong-Horse-1"}), 422, "INVALID_PASSWORD")
    assert status(mfa_user)["mfa_enabled"] is True
    assert start_login(application, mfa_user.email, mfa_user.password)["mfa_required"] is True
    assert events_of(ctx, "mfa.disabled") == []


def test_disable_without_mfa_is_refused(client, application, user_token):
    response = client.simulate_delete(mfa_url(application, user_token.user["id"], "/totp"),
                                      json={"password": user_token.password}, headers=user_token.headers)
    assert_error(response, 400, "MFA_NOT_ENABLED")


def test_disable_twice_is_refused_the_second_time(disable, mfa_user, ctx):
    assert disable(mfa_user, {"password": mfa_user.password}).status_code == 204
    assert_error(disable(mfa_user, {"password": mfa_user.password}), 400, "MFA_NOT_ENABLED")
    assert len(events_of(ctx, "mfa.disabled")) == 1


@pytest.mark.parametrize("body", [{}, {"password": None}, {"password": ["x"]}])
def test_disable_needs_the_password(disable, status, mfa_user, body):
    error = assert_error(disable(mfa_user, body), 400, "VALIDATION_INVALID_FORMAT")
    assert set(error["details"]["fields"]) == {"password"}
    assert status(mfa_user)["mfa_enabled"] is True


def test_mfa_can_be_set_up_again_after_disabling(disable, client, application, mfa_user, clock, start_login,
                                                 verify):
    disable(mfa_user, {"password": mfa_user.password})
    setup = client.simulate_post(mfa_url(application, mfa_user.id, "/totp/setup"), json={},
                                 headers=mfa_user.headers).json["data"]
    assert setup["secret"] != mfa_user.secret
    confirm = client.simulate_post(mfa_url(application, mfa_user.id, "/totp/confirm"), headers=mfa_user.headers,
                                   json={"method_id": setup["method_id"], "code": rfc6238(setup["secret"], clock())})
    assert confirm.status_code == 201
    clock.advance(60)
    token = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    assert_error(verify(application, token, rfc6238(mfa_user.secret, clock())), 401, "AUTH_INVALID_MFA_CODE")
    assert_error(verify(application, token, mfa_user.backup_codes[0]), 401, "AUTH_INVALID_MFA_CODE")
    assert verify(application, token, rfc6238(setup["secret"], clock())).status_code == 200


def test_parallel_disables_disable_once(disable, mfa_user, ctx, monkeypatch):
    both_checked = threading.Barrier(2)
    real_delete = mfa_store.MethodStore.delete_active

    def delete_active(self, *args):
        both_checked.wait(timeout=5)
        return real_delete(self, *args)

    monkeypatch.setattr(mfa_store.MethodStore, "delete_active", delete_active)
    results = []
    threads = [threading.Thread(target=lambda: results.append(disable(mfa_user, {"password": mfa_user.password})))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in results) == [204, 400]
    assert len(events_of(ctx, "mfa.disabled")) == 1
