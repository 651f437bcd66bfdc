"""Every way a passkey response can be wrong is a 400 with its own PASSKEY_* code, in the
error envelope, never a 500 and never an echo of the expected origin or RP ID; and a
failed verification leaves nothing changed."""
import os

import pytest

from controlplane.passkeys.credentials import CHALLENGE_TTL
from tests.conftest import assert_error, in_parallel
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.passkeys.conftest import passkeys_url
from tests.plugins.users import UserToken, fresh_address, users_url


@pytest.fixture
def enrolled(app_pw, make_user_token, register):
    """(user, authenticator) with a registered passkey."""
    user, key = make_user_token(app_pw), SoftAuthenticator()
    assert register(app_pw, user, key).status_code == 201
    return user, key


def _verify(client, app, challenge_id, credential, remote_addr=None):
    return client.simulate_post(passkeys_url(app, "/authentication/verify"), remote_addr=remote_addr or fresh_address(),
                                json={"challenge_id": challenge_id, "credential": credential})


def assert_no_echo(error):
    assert ORIGIN not in error["message"] and RP_ID not in error["message"], error
    assert ORIGIN not in str(error["details"]) and RP_ID not in str(error["details"])


# A ceremony run in a frame that is not same-origin with its ancestors (WebAuthn L3
# 5.8.1): the browser says crossOrigin true and names the top-level page.  iamgate's pages
# refuse every frame, so the right origin in such client data is no excuse.
FRAMED = [
    ({"cross_origin": True, "top_origin": "https://evil.example"}, "PASSKEY_ORIGIN_MISMATCH"),
    ({"cross_origin": True}, "PASSKEY_ORIGIN_MISMATCH"),
    ({"top_origin": "https://evil.example"}, "PASSKEY_ORIGIN_MISMATCH"),
    ({"top_origin": ORIGIN}, "PASSKEY_ORIGIN_MISMATCH"),
]


@pytest.mark.parametrize("falsify, code", [
    ({"origin": "https://evil.example"}, "PASSKEY_ORIGIN_MISMATCH"),
    *FRAMED,
    ({"rp_id": "evil.example"}, "PASSKEY_RP_ID_MISMATCH"),
    ({"challenge": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "PASSKEY_VERIFICATION_FAILED"),
])
def test_a_falsified_registration_is_refused(ctx, app_pw, make_user_token, register, falsify, code):
    user = make_user_token(app_pw)
    error = assert_error(register(app_pw, user, SoftAuthenticator(), **falsify), 400, code)
    assert_no_echo(error)
    assert ctx.store["passkeys"].count_documents({}) == 0


@pytest.mark.parametrize("falsify, code", [
    ({"origin": "https://evil.example"}, "PASSKEY_ORIGIN_MISMATCH"),
    ({"origin": "http://localhost:9999"}, "PASSKEY_ORIGIN_MISMATCH"),
    *FRAMED,
    ({"rp_id": "evil.example"}, "PASSKEY_RP_ID_MISMATCH"),
    ({"challenge": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "PASSKEY_VERIFICATION_FAILED"),
])
def test_a_falsified_assertion_is_refused(ctx, app_pw, enrolled, sign_in, falsify, code):
    user, key = enrolled
    error = assert_error(sign_in(app_pw, key, **falsify), 400, code)
    assert_no_echo(error)
    assert ctx.store["passkeys"].find_one({"user_id": user.user["id"]})["last_used_at"] is None


def test_client_data_without_cross_origin_is_accepted(ctx, app_pw, make_user_token, register, sign_in):
    """crossOrigin is optional (browsers of WebAuthn Level 1 leave it out): absent is
    "not framed", as false is."""
    user, key = make_user_token(app_pw), SoftAuthenticator()
    assert register(app_pw, user, key, cross_origin=None).status_code == 201
    assert sign_in(app_pw, key, cross_origin=None).status_code == 200


def test_a_bad_signature_is_refused(client, app_pw, enrolled, sign_in_options):
    _, key = enrolled
    data = sign_in_options(app_pw)
    credential = key.get(data["options"])
    credential["response"]["signature"] = SoftAuthenticator().get(data["options"])["response"]["signature"]
    assert_error(_verify(client, app_pw, data["challenge_id"], credential), 400, "PASSKEY_VERIFICATION_FAILED")


@pytest.mark.parametrize("credential", [
    {}, {"id": "x"}, {"id": "AAAA", "rawId": "AAAA", "type": "public-key", "response": {}},
    {"id": "AAAA", "rawId": "AAAA", "type": "public-key",
     "response": {"clientDataJSON": "!!", "authenticatorData": "AAAA", "signature": "AAAA"}},
])
def test_a_malformed_credential_is_a_400_not_a_500(client, app_pw, sign_in_options, credential):
    data = sign_in_options(app_pw)
    error = assert_error(_verify(client, app_pw, data["challenge_id"], credential), 400)
    assert error["code"].startswith("PASSKEY_")


def test_a_replayed_challenge_is_refused(client, app_pw, enrolled, sign_in_options):
    _, key = enrolled
    data = sign_in_options(app_pw)
    assert _verify(client, app_pw, data["challenge_id"], key.get(data["options"])).status_code == 200
    replay = _verify(client, app_pw, data["challenge_id"], key.get(data["options"]))
    assert_error(replay, 400, "PASSKEY_CHALLENGE_INVALID")


def test_a_replayed_registration_challenge_is_refused(client, ctx, app_pw, make_user_token):
    user = make_user_token(app_pw)
    data = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={},
                                headers=user.headers).json["data"]
    key = SoftAuthenticator()
    url = passkeys_url(app_pw, "/registration/verify")
    body = {"challenge_id": data["challenge_id"], "credential": key.create(data["options"])}
    assert client.simulate_post(url, json=body, headers=user.headers).status_code == 201
    body["credential"] = SoftAuthenticator().create(data["options"])
    assert_error(client.simulate_post(url, json=body, headers=user.headers), 400, "PASSKEY_CHALLENGE_INVALID")
    assert ctx.store["passkeys"].count_documents({}) == 1


def test_an_expired_challenge_is_refused(client, clock, app_pw, enrolled, sign_in_options):
    _, key = enrolled
    data = sign_in_options(app_pw)
    clock.advance(CHALLENGE_TTL + 1)
    assert_error(_verify(client, app_pw, data["challenge_id"], key.get(data["options"])), 400,
                 "PASSKEY_CHALLENGE_INVALID")


def test_challenges_live_in_mongodb_with_a_ttl_index(ctx, app_pw, sign_in_options):
    sign_in_options(app_pw)
    ctx.store.ensure_indexes()
    indexes = ctx.store["passkey_challenges"].index_information().values()
    assert any(ix.get("expireAfterSeconds") == 0 and list(ix["key"]) == [("expires_at", 1)] for ix in indexes)
    doc = ctx.store["passkey_challenges"].find_one({})
    assert (doc["expires_at"] - doc["created_at"]).total_seconds() == CHALLENGE_TTL


def test_a_registration_challenge_is_bound_to_its_user(client, ctx, app_pw, make_user_token):
    owner, other = make_user_token(app_pw), make_user_token(app_pw)
    data = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={},
                                headers=owner.headers).json["data"]
    body = {"challenge_id": data["challenge_id"], "credential": SoftAuthenticator().create(data["options"])}
    response = client.simulate_post(passkeys_url(app_pw, "/registration/verify"), json=body, headers=other.headers)
    assert_error(response, 400, "PASSKEY_CHALLENGE_INVALID")
    assert ctx.store["passkeys"].count_documents({}) == 0


def test_another_users_credential_does_not_answer_my_challenge(client, ctx, passkey_app, make_user_token, register,
                                                              sign_in_options):
    app = passkey_app("second_factor")
    victim, attacker = make_user_token(app), make_user_token(app)
    victim_key, attacker_key = SoftAuthenticator(), SoftAuthenticator()
    register(app, victim, victim_key)
    register(app, attacker, attacker_key)
    login = client.simulate_post(users_url(app, "/login"), remote_addr=fresh_address(),
                                 json={"email": victim.user["email"], "password": victim.password}).json["data"]
    data = sign_in_options(app, login["challenge_token"])
    response = _verify(client, app, data["challenge_id"], attacker_key.get(data["options"]))
    assert_error(response, 400, "PASSKEY_CREDENTIAL_UNKNOWN")
    # Refused before its signature is checked: the count it carries is not evidence.
    stored = ctx.store["passkeys"].find_one({"credential_id": attacker_key.id})
    assert stored["sign_count"] == 0 and stored["last_used_at"] is None


def test_a_user_handle_of_another_user_is_refused(app_pw, make_user_token, register, sign_in):
    first, second = make_user_token(app_pw), make_user_token(app_pw)
    key = SoftAuthenticator()
    register(app_pw, first, key)
    register(app_pw, second, SoftAuthenticator())
    key.user_handle = second.user["id"].encode()  # claims to be the second user
    assert_error(sign_in(app_pw, key), 400, "PASSKEY_USER_VERIFICATION_REQUIRED")


def test_a_sign_count_that_goes_backwards_is_refused_and_audited(ctx, app_pw, make_user_token, register, sign_in):
    user, key = make_user_token(app_pw), SoftAuthenticator(counter=5)
    register(app_pw, user, key)
    assert sign_in(app_pw, key, sign_count=7).status_code == 200
    assert_error(sign_in(app_pw, key, sign_count=7), 400, "PASSKEY_SIGN_COUNT_INVALID")  # not above
    assert_error(sign_in(app_pw, key, sign_count=3), 400, "PASSKEY_SIGN_COUNT_INVALID")
    assert ctx.store["passkeys"].find_one({"user_id": user.user["id"]})["sign_count"] == 7
    records = list(ctx.store["events"].find({"action": "passkey.sign_in", "result.status": "failure"}))
    assert [r["result"]["reason"] for r in records] == ["sign_count_invalid", "sign_count_invalid"]
    assert records[0]["target"]["id"] == user.user["id"]


def test_a_sign_count_of_zero_stays_zero_and_is_accepted(ctx, app_pw, make_user_token, register, sign_in):
    user, key = make_user_token(app_pw), SoftAuthenticator(counter=None, synced=True)
    register(app_pw, user, key)
    for _ in range(3):
        assert sign_in(app_pw, key).status_code == 200
    stored = ctx.store["passkeys"].find_one({"user_id": user.user["id"]})
    assert stored["sign_count"] == 0 and stored["backed_up"] is True


def test_a_passkey_of_application_a_never_signs_in_to_b(client, ctx, passkey_app, make_user, login, register,
                                                        sign_in_options):
    app_a, app_b = passkey_app(), passkey_app()
    email = "same.person@example.com"
    key = SoftAuthenticator()
    for app in (app_a, app_b):
        make_user(app, email=email)
    pair = login(app_a, email)
    token_a = UserToken({"id": pair["user"]["id"]}, "", pair["access_token"], pair["refresh_token"])
    assert register(app_a, token_a, key).status_code == 201
    data = sign_in_options(app_b)
    assert_error(_verify(client, app_b, data["challenge_id"], key.get(data["options"])), 400,
                 "PASSKEY_CREDENTIAL_UNKNOWN")
    # and a challenge of A is not one of B
    data_a = sign_in_options(app_a)
    assert_error(_verify(client, app_b, data_a["challenge_id"], key.get(data_a["options"])), 400,
                 "PASSKEY_CHALLENGE_INVALID")


def test_an_aaguid_allow_list_refuses_other_models(ctx, passkey_app, make_user_token, register):
    allowed = "cb69481e-8ff7-4039-93ec-0a2729a154a8"
    app = passkey_app(passkey_aaguids=[allowed])
    user = make_user_token(app)
    assert_error(register(app, user, SoftAuthenticator()), 400, "PASSKEY_AUTHENTICATOR_NOT_ALLOWED")
    assert ctx.store["passkeys"].count_documents({}) == 0
    response = register(app, user, SoftAuthenticator(aaguid=bytes.fromhex(allowed.replace("-", ""))))
    assert response.status_code == 201 and response.json["data"]["aaguid"] == allowed


def test_a_credential_id_longer_than_1023_bytes_is_refused(client, ctx, app_pw, make_user_token, register):
    """WebAuthn 7.1: a credential id is at most 1023 bytes; a longer one would be stored and
    sent back in every later options answer of the user (excludeCredentials)."""
    user = make_user_token(app_pw)
    longest, too_long = SoftAuthenticator(), SoftAuthenticator()
    longest.credential_id, too_long.credential_id = os.urandom(1023), os.urandom(1024)
    assert_error(register(app_pw, user, too_long), 400, "PASSKEY_VERIFICATION_FAILED")
    assert ctx.store["passkeys"].count_documents({}) == 0
    assert register(app_pw, user, longest).status_code == 201
    options = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={}, headers=user.headers)
    assert [c["id"] for c in options.json["data"]["options"]["excludeCredentials"]] == [longest.id]


@pytest.mark.parametrize("registered_synced", [False, True])
def test_a_passkey_cannot_change_its_backup_eligibility(ctx, app_pw, make_user_token, register, sign_in,
                                                        registered_synced):
    """WebAuthn L3 6.1.3: BE is fixed for a credential's life; a device-bound passkey that
    answers as backup-eligible (or the reverse) is not the one that was registered."""
    user, key = make_user_token(app_pw), SoftAuthenticator(synced=registered_synced)
    assert register(app_pw, user, key).status_code == 201
    key.synced = not registered_synced
    assert_error(sign_in(app_pw, key), 400, "PASSKEY_VERIFICATION_FAILED")
    stored = ctx.store["passkeys"].find_one({"user_id": user.user["id"]})
    assert stored["backup_eligible"] is registered_synced and stored["backed_up"] is registered_synced
    assert stored["last_used_at"] is None


def test_the_same_authenticator_twice_is_a_conflict(app_pw, make_user_token, register):
    user, key = make_user_token(app_pw), SoftAuthenticator()
    register(app_pw, user, key)
    assert_error(register(app_pw, user, key), 409, "PASSKEY_ALREADY_REGISTERED")


def test_sign_in_shares_the_logins_rate_limit(client, app_pw):
    ip = fresh_address()
    url = passkeys_url(app_pw, "/authentication/options")
    for _ in range(10):  # IAMGATE_RATE_LIMIT_LOGIN: 10/60
        assert client.simulate_post(url, json={}, remote_addr=ip).status_code == 200
    assert_error(client.simulate_post(url, json={}, remote_addr=ip), 429, "RATE_LIMIT_EXCEEDED")
    verify = client.simulate_post(passkeys_url(app_pw, "/authentication/verify"), remote_addr=ip,
                                  json={"challenge_id": "x", "credential": {}})
    assert verify.status_code == 429
    login = client.simulate_post(users_url(app_pw, "/login"), remote_addr=ip,
                                 json={"email": "a@example.com", "password": "x"})
    assert login.status_code == 429  # one budget with the password login


def test_passkeys_off_answers_403(client, application, user_token):
    response = client.simulate_post(passkeys_url(application, "/registration/options"), json={},
                                    headers=user_token.headers)
    assert_error(response, 403, "PASSKEY_DISABLED")


@pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": ""}], indirect=True)
def test_without_an_rp_id_passkeys_are_unavailable(client, app_pw, make_user_token):
    user = make_user_token(app_pw)
    response = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={}, headers=user.headers)
    assert_error(response, 503, "PASSKEY_UNAVAILABLE")


def test_api_keys_cannot_register(client, app_pw, make_api_key):
    response = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={},
                                    headers={"Authorization": f"Bearer {make_api_key(app_pw)}"})
    assert_error(response, 403)


def test_one_challenge_signs_in_once_whatever_the_races(client, app_pw, enrolled, sign_in_options):
    _, key = enrolled
    data = sign_in_options(app_pw)
    credential = key.get(data["options"])
    statuses = in_parallel(4, lambda _: _verify(client, app_pw, data["challenge_id"], credential).status_code)
    assert sorted(statuses) == [200, 400, 400, 400]


def test_a_suspended_user_cannot_sign_in_with_a_passkey(ctx, app_pw, enrolled, sign_in):
    user, key = enrolled
    ctx.users.admin.suspend(app_pw["_id"], user.user["id"])
    assert_error(sign_in(app_pw, key), 403, "AUTH_ACCOUNT_SUSPENDED")


def _locked_login(client, app, user: UserToken) -> dict:
    """A password login's MFA challenge, locked by IAMGATE_MFA_MAX_ATTEMPTS wrong codes."""
    login = client.simulate_post(users_url(app, "/login"), remote_addr=fresh_address(),
                                 json={"email": user.user["email"], "password": user.password}).json["data"]
    for _ in range(5):
        client.simulate_post(users_url(app, "/mfa/verify"), remote_addr=fresh_address(),
                             json={"challenge_token": login["challenge_token"], "code": "123456"})
    return login


def test_a_locked_mfa_challenge_is_not_answered_by_a_passkey(client, passkey_app, make_user_token, register,
                                                            sign_in_options):
    app = passkey_app("second_factor")
    user, key = make_user_token(app), SoftAuthenticator()
    register(app, user, key)
    login = _locked_login(client, app, user)
    data = sign_in_options(app, login["challenge_token"])
    assert_error(_verify(client, app, data["challenge_id"], key.get(data["options"])), 429, "AUTH_MFA_LOCKED")


def test_a_verified_assertion_moves_the_sign_count_whatever_the_sign_ins_fate(client, ctx, passkey_app,
                                                                             make_user_token, register,
                                                                             sign_in_options):
    """WebAuthn L3 6.1.1: the counter an authenticator signed is evidence against a clone
    whatever becomes of the sign-in.  A second factor whose assertion verified and whose
    MFA challenge then refused it still stores the count and the use, so a copy of the
    key that answers later with a count the original already signed is caught."""
    app = passkey_app("second_factor")
    user, key = make_user_token(app), SoftAuthenticator(counter=5)
    register(app, user, key)
    login = _locked_login(client, app, user)
    data = sign_in_options(app, login["challenge_token"])
    assert_error(_verify(client, app, data["challenge_id"], key.get(data["options"])), 429, "AUTH_MFA_LOCKED")
    stored = ctx.store["passkeys"].find_one({"credential_id": key.id})
    assert stored["sign_count"] == 6 and stored["last_used_at"] is not None

    login = client.simulate_post(users_url(app, "/login"), remote_addr=fresh_address(),
                                 json={"email": user.user["email"], "password": user.password}).json["data"]
    data = sign_in_options(app, login["challenge_token"])
    clone = _verify(client, app, data["challenge_id"], key.get(data["options"], sign_count=6))
    assert_error(clone, 400, "PASSKEY_SIGN_COUNT_INVALID")
