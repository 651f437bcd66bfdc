"""POST mfa/totp/setup, POST mfa/totp/confirm and GET mfa/status: a setup stays pending
until a correct code confirms it; confirming returns 10 backup codes once and emits
mfa.enabled."""
import re
import threading
from datetime import timedelta
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from controlplane.mfa import store as mfa_store
from shared.timeutil import parse_iso
from tests.conftest import assert_error, bearer, events_of
from tests.mfa.conftest import NO_PASSKEYS, STEP, mfa_url, rfc6238
from tests.plugins.users import UserToken


@pytest.fixture
def setup(client, application, user_token):
    def do(body=None, token=user_token):
        return client.simulate_post(mfa_url(application, token.user["id"], "/totp/setup"),
                                    json=body if body is not None else {}, headers=bearer(token.access_token))

    return do


@pytest.fixture
def confirm(client, application, user_token):
    def do(body, token=user_token):
        return client.simulate_post(mfa_url(application, token.user["id"], "/totp/confirm"), json=body,
                                    headers=bearer(token.access_token))

    return do


@pytest.fixture
def status(client, application, user_token):
    def do(token=user_token):
        response = client.simulate_get(mfa_url(application, token.user["id"], "/status"),
                                       headers=bearer(token.access_token))
        assert response.status_code == 200, response.text
        return response.json["data"]

    return do


def test_setup_returns_a_secret_and_a_provisioning_uri(setup, user_token, ctx, application):
    response = setup()
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    data = response.json["data"]
    assert set(data) == {"method_id", "provisioning_uri", "secret"}
    assert re.fullmatch(r"[A-Z2-7]{32}", data["secret"])  # 160 bits of base32
    parts = urlsplit(data["provisioning_uri"])
    assert parts.scheme == "otpauth" and parts.netloc == "totp"
    assert unquote(parts.path) == f"/Test App:{user_token.user['email']}"
    assert parse_qs(parts.query)["secret"] == [data["secret"]]
    assert parse_qs(parts.query)["issuer"] == ["Test App"]

    stored = ctx.store["mfa_methods"].find_one({"_id": data["method_id"]})
    assert stored["app_id"] == application["_id"] and stored["user_id"] == user_token.user["id"]
    assert stored["status"] == "pending" and stored["type"] == "totp" and stored["label"] == "Authenticator App"
    assert data["secret"] not in str(stored)  # encrypted at rest
    assert ctx.box.decrypt(stored["secret"]).decode() == data["secret"]


def test_the_issuer_is_the_brand_name_when_there_is_one(setup, ctx, application, user_token):
    ctx.applications.update_branding(application["_id"], {"brand_name": "Acme Cloud"})
    uri = setup().json["data"]["provisioning_uri"]
    assert unquote(urlsplit(uri).path) == f"/Acme Cloud:{user_token.user['email']}"
    assert parse_qs(urlsplit(uri).query)["issuer"] == ["Acme Cloud"]


def test_a_pending_setup_is_not_enabled_and_does_not_change_login(setup, status, application, user_token,
                                                                  start_login):
    setup({"label": "Work phone"})
    assert status() == {"mfa_enabled": False, "methods": [], "backup_codes_remaining": 0, **NO_PASSKEYS}
    pair = start_login(application, user_token.user["email"], user_token.password)
    assert "access_token" in pair and "mfa_required" not in pair


def test_confirm_activates_the_method_and_returns_ten_backup_codes(setup, confirm, status, clock, ctx,
                                                                   application, user_token):
    data = setup({"label": "Work phone"}).json["data"]
    response = confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    assert response.status_code == 201, response.text
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json["data"]
    assert set(body) == {"message", "backup_codes"} and body["message"]
    codes = body["backup_codes"]
    assert len(codes) == 10 == len(set(codes))
    assert all(re.fullmatch(r"[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}", c) for c in codes)

    stored_codes = list(ctx.store["mfa_backup_codes"].find({"user_id": user_token.user["id"]}))
    assert len(stored_codes) == 10 and all(d["app_id"] == application["_id"] for d in stored_codes)
    dump = str(stored_codes)
    assert not any(c in dump or c.replace("-", "") in dump for c in codes)  # only digests are stored

    state = status()
    assert state["mfa_enabled"] is True and state["backup_codes_remaining"] == 10
    [method] = state["methods"]
    assert method == {"id": data["method_id"], "type": "totp", "label": "Work phone", "is_primary": True,
                      "verified_at": method["verified_at"], "last_used_at": method["last_used_at"]}
    assert abs(parse_iso(method["verified_at"]) - clock()) < timedelta(milliseconds=1)
    assert method["last_used_at"] == method["verified_at"]  # the confirmation used the app

    [event] = events_of(ctx, "mfa.enabled")
    assert event["app_id"] == application["_id"]
    assert event["data"] == {"user_id": user_token.user["id"], "method_id": data["method_id"], "method": "totp"}
    assert event["subject"] == {"user_id": user_token.user["id"]}


@pytest.mark.parametrize("offset", [-1, 1])
def test_confirm_accepts_one_step_of_drift(setup, confirm, clock, offset):
    data = setup().json["data"]
    response = confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock(), offset)})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("offset", [-2, 2])
def test_confirm_refuses_two_steps_of_drift(setup, confirm, status, clock, offset):
    data = setup().json["data"]
    code = rfc6238(data["secret"], clock(), offset)
    assert code not in {rfc6238(data["secret"], clock(), o) for o in (-1, 0, 1)}
    assert_error(confirm({"method_id": data["method_id"], "code": code}), 422, "MFA_INVALID_CODE")
    assert status()["mfa_enabled"] is False


def test_confirm_with_a_wrong_code_leaves_the_setup_pending(setup, confirm, status, clock, ctx):
    data = setup().json["data"]
    wrong = "000000" if rfc6238(data["secret"], clock()) != "000000" else "111111"
    assert_error(confirm({"method_id": data["method_id"], "code": wrong}), 422, "MFA_INVALID_CODE")
    assert ctx.store["mfa_methods"].find_one({"_id": data["method_id"]})["status"] == "pending"
    assert ctx.store["mfa_backup_codes"].count_documents({}) == 0
    assert events_of(ctx, "mfa.enabled") == []
    # the setup can still be confirmed
    assert confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())}).status_code == 201


def test_a_new_setup_replaces_the_pending_one(setup, confirm, clock, ctx, user_token):
    first = setup().json["data"]
    second = setup().json["data"]
    assert first["secret"] != second["secret"]
    assert ctx.store["mfa_methods"].count_documents({"user_id": user_token.user["id"]}) == 1
    assert_error(confirm({"method_id": first["method_id"], "code": rfc6238(first["secret"], clock())}), 404,
                 "MFA_METHOD_NOT_FOUND")
    assert confirm({"method_id": second["method_id"], "code": rfc6238(second["secret"], clock())}).status_code == 201


def test_setup_while_mfa_is_active_is_a_conflict(setup, confirm, clock, ctx, user_token):
    data = setup().json["data"]
    confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    assert_error(setup(), 409, "MFA_ALREADY_ENABLED")
    assert ctx.store["mfa_methods"].count_documents({"user_id": user_token.user["id"]}) == 1


def test_confirming_twice_is_a_conflict_and_returns_no_new_codes(setup, confirm, clock, ctx, user_token):
    data = setup().json["data"]
    confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    clock.advance(STEP)
    again = confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    assert_error(again, 409, "MFA_ALREADY_ENABLED")
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": user_token.user["id"]}) == 10
    assert len(events_of(ctx, "mfa.enabled")) == 1


def test_confirm_of_an_unknown_method_is_not_found(confirm, setup):
    setup()
    error = assert_error(confirm({"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", "code": "123456"}), 404,
                         "MFA_METHOD_NOT_FOUND")
    assert error["details"] == {"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11"}


def test_confirm_of_another_users_method_is_not_found(confirm, client, application, make_user_token, clock, ctx):
    other = make_user_token(application)
    data = client.simulate_post(mfa_url(application, other.user["id"], "/totp/setup"), json={},
                                headers=bearer(other.access_token)).json["data"]
    response = confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    assert_error(response, 404, "MFA_METHOD_NOT_FOUND")
    assert ctx.store["mfa_methods"].find_one({"_id": data["method_id"]})["status"] == "pending"


def test_an_abandoned_setup_expires_after_an_hour(setup, confirm, clock, application, user_token, login):
    data = setup().json["data"]
    clock.advance(3600)
    pair = login(application, user_token.user["email"], user_token.password)  # the first access token expired
    fresh = UserToken(user_token.user, user_token.password, pair["access_token"], pair["refresh_token"])
    response = confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())}, token=fresh)
    assert_error(response, 404, "MFA_METHOD_NOT_FOUND")


def test_the_confirmation_code_cannot_be_replayed_at_login(setup, confirm, clock, application, user_token,
                                                           start_login, verify):
    data = setup().json["data"]
    code = rfc6238(data["secret"], clock())
    confirm({"method_id": data["method_id"], "code": code})
    challenge = start_login(application, user_token.user["email"], user_token.password)
    assert_error(verify(application, challenge["challenge_token"], code), 401, "AUTH_INVALID_MFA_CODE")


@pytest.mark.parametrize("body, fields", [
    ({"label": ""}, {"label"}),
    ({"label": "x" * 101}, {"label"}),
    ({"label": 7}, {"label"}),
    ({"label": None}, {"label"}),
])
def test_setup_validates_the_label(setup, body, fields):
    error = assert_error(setup(body), 400, "VALIDATION_INVALID_FORMAT")
    assert set(error["details"]["fields"]) == fields


@pytest.mark.parametrize("body, code, fields", [
    ({}, "VALIDATION_MULTIPLE_ERRORS", {"method_id", "code"}),
    ({"method_id": "not-a-uuid", "code": "123456"}, "VALIDATION_INVALID_FORMAT", {"method_id"}),
    ({"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", "code": "12345"}, "VALIDATION_INVALID_FORMAT", {"code"}),
    ({"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", "code": "1234567"}, "VALIDATION_INVALID_FORMAT",
     {"code"}),
    ({"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", "code": 123456}, "VALIDATION_INVALID_FORMAT", {"code"}),
    ({"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", "code": "ABCD-EFGH-JKMN"}, "VALIDATION_INVALID_FORMAT",
     {"code"}),
])
def test_confirm_validates_its_body(confirm, body, code, fields):
    error = assert_error(confirm(body), 400, code)
    assert set(error["details"]["fields"]) == fields


def test_confirm_accepts_a_code_typed_with_a_space(setup, confirm, clock):
    data = setup().json["data"]
    code = rfc6238(data["secret"], clock())
    assert confirm({"method_id": data["method_id"], "code": f"{code[:3]} {code[3:]}"}).status_code == 201


def test_parallel_confirms_enable_once(setup, confirm, clock, ctx, user_token, monkeypatch):
    """Two requests confirming the same setup: one activates it, the other is told it
    is already active, and only the winner's backup codes exist."""
    data = setup().json["data"]
    code = rfc6238(data["secret"], clock())
    both_checked = threading.Barrier(2)
    real_activate = mfa_store.MethodStore.activate

    def activate(self, *args, **kwargs):
        both_checked.wait(timeout=5)
        return real_activate(self, *args, **kwargs)

    monkeypatch.setattr(mfa_store.MethodStore, "activate", activate)
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        confirm({"method_id": data["method_id"], "code": code}))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in results) == [201, 409]
    winner = next(r for r in results if r.status_code == 201)
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": user_token.user["id"]}) == 10
    assert len(events_of(ctx, "mfa.enabled")) == 1
    assert len(winner.json["data"]["backup_codes"]) == 10


def test_status_of_a_user_without_mfa(status):
    assert status() == {"mfa_enabled": False, "methods": [], "backup_codes_remaining": 0, **NO_PASSKEYS}


def test_setup_and_confirm_do_not_touch_another_application(setup, confirm, clock, ctx, make_application,
                                                             make_user_token, client):
    other_app = make_application()
    other = make_user_token(other_app)
    data = setup().json["data"]
    confirm({"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    response = client.simulate_get(mfa_url(other_app, other.user["id"], "/status"), headers=bearer(other.access_token))
    assert response.json["data"]["mfa_enabled"] is False
    assert all(d["app_id"] != other_app["_id"] for d in ctx.store["mfa_methods"].find())
