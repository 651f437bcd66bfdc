"""Sudo mode with a passkey: one of the account's own passkeys, verifying the user,
proves the session's holder again as the password does (POST
/api/dashboard/me/reauthenticate/passkey/options, then .../reauthenticate/passkey).

What is tried against it: an assertion without user verification, another account's
challenge or passkey, a sign-in's challenge, the re-authentication's challenge at the
sign-in, a replay, and no session.  The authenticator is the software one of the
end-user passkey tests (tests/passkeys/authenticator.py)."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.dashboard.test_passkeys import add_passkey, passkey_login, passkey_options
from tests.dashboard.test_sudo import REAUTHENTICATE, WINDOW, create_api_key, reauthenticate
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator

OPTIONS = f"{REAUTHENTICATE}/passkey/options"
PROVE = f"{REAUTHENTICATE}/passkey"


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)})


@pytest.fixture
def key(dashboard_account):
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    return key


def options_of(account) -> dict:
    response = account.post(OPTIONS, json={})
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return response.json["data"]


def prove(account, key, data=None, **falsify):
    data = data or options_of(account)
    return account.post(PROVE, json={"challenge_id": data["challenge_id"],
                                     "credential": key.get(data["options"], **falsify)})


def records(ctx) -> list[dict]:
    return list(ctx.store["events"].find({"action": "dashboard_account.reauthenticated"}).sort("seq", 1))


def test_a_passkey_reopens_sensitive_actions(dashboard_account, dashboard_app, key, ctx, clock):
    clock.advance(WINDOW)
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")

    data = options_of(dashboard_account)
    assert data["options"]["userVerification"] == "required"
    assert [c["id"] for c in data["options"]["allowCredentials"]] == [key.id]
    assert prove(dashboard_account, key, data).status_code == 204

    assert create_api_key(dashboard_account, dashboard_app, None).status_code == 201
    passkey_id = dashboard_account.get("/api/dashboard/me/passkeys").json["data"][0]["id"]
    (record,) = records(ctx)
    assert record["result"] == {"status": "success"}
    assert record["data"] == {"method": "webauthn", "passkey_id": passkey_id}
    clock.advance(WINDOW)  # the proof lasts one window, as the password's
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")


def test_the_password_proof_is_recorded_with_its_method(dashboard_account, ctx):
    assert reauthenticate(dashboard_account).status_code == 204
    assert records(ctx)[0]["data"] == {"method": "password"}


def test_an_assertion_without_user_verification_proves_nothing(dashboard_account, dashboard_app, key, ctx, clock):
    clock.advance(WINDOW)
    assert_error(prove(dashboard_account, key, user_verified=False), 400, "PASSKEY_USER_VERIFICATION_REQUIRED")
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")
    assert records(ctx)[0]["result"] == {"status": "failure", "reason": "user_verification_required"}


def test_a_challenge_is_single_use(dashboard_account, key):
    data = options_of(dashboard_account)
    assert prove(dashboard_account, key, data).status_code == 204
    assert_error(prove(dashboard_account, key, data), 400, "PASSKEY_CHALLENGE_INVALID")


def test_another_accounts_challenge_or_passkey_proves_nothing(dashboard_account, make_dashboard_account,
                                                             dashboard_app, key, clock):
    other = make_dashboard_account()
    other_key = SoftAuthenticator()
    assert add_passkey(other, other_key).status_code == 201
    clock.advance(WINDOW)
    # The other account's challenge, answered with this account's own passkey.
    assert_error(prove(dashboard_account, key, options_of(other)), 400, "PASSKEY_CHALLENGE_INVALID")
    # This account's challenge, answered with the other account's passkey (the
    # authenticator is told to use its own credential whatever the options list).
    data = options_of(dashboard_account)
    data["options"]["allowCredentials"] = []
    assert_error(prove(dashboard_account, other_key, data), 400, "PASSKEY_CREDENTIAL_UNKNOWN")
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")


def test_a_sign_ins_challenge_and_a_re_authentications_never_stand_in_for_each_other(dashboard_account, client,
                                                                                   key, clock):
    clock.advance(WINDOW)
    sign_in = passkey_options(client)
    assert_error(prove(dashboard_account, key, sign_in), 400, "PASSKEY_CHALLENGE_INVALID")
    proof = options_of(dashboard_account)
    response = client.simulate_post("/api/dashboard/login/passkey", json={
        "challenge_id": proof["challenge_id"], "credential": key.get(proof["options"])})
    assert_error(response, 400, "PASSKEY_CHALLENGE_INVALID")
    assert passkey_login(client, key).status_code == 200  # the key itself still signs in


def test_re_authenticating_with_a_passkey_needs_a_session(client, dashboard_account, key):
    data = options_of(dashboard_account)
    assert_error(client.simulate_post(OPTIONS, json={}), 401, "UNAUTHORIZED")
    response = client.simulate_post(PROVE, json={"challenge_id": data["challenge_id"],
                                                 "credential": key.get(data["options"])})
    assert_error(response, 401, "UNAUTHORIZED")


@pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": "", "webauthn_origins": ()}], indirect=True)
def test_without_an_rp_id_a_passkey_cannot_re_authenticate(dashboard_account):
    assert_error(dashboard_account.post(OPTIONS, json={}), 503, "PASSKEY_UNAVAILABLE")
