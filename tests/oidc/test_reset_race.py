"""A sign-in with the old password racing a reset keeps no OIDC grant: the reset stamps
the account (and replaces the password) before it revokes the sessions, so no session
begun with the old password outlives it, and a code issued in one is worthless."""
from tests.conftest import assert_error
from tests.oidc.conftest import assert_oauth_error, pkce_pair
from tests.plugins.users import reset_while_a_thief_signs_in


def test_a_sign_in_racing_a_reset_keeps_no_oidc_grant(client, ctx, application, rp_client, user_token, authorize,
                                                       exchange, outbox, monkeypatch):
    ctx.store["users"].update_one({"_id": user_token.user["id"]}, {"$set": {"email_verified": True}})
    codes = []

    def ask_for_a_code(login):
        verifier, challenge = pkce_pair()
        token = type("Token", (), {"access_token": login.json["data"]["access_token"]})
        codes.append((authorize(token, rp_client, challenge=challenge).json["code"], verifier))

    login = reset_while_a_thief_signs_in(client, ctx, application, user_token.user["email"], user_token.password,
                                         outbox, monkeypatch, then=ask_for_a_code)
    if login.status_code == 200:  # signed in all the same: the code must be worthless
        assert_oauth_error(exchange(rp_client, *codes[0]), "invalid_grant")
    else:  # the password was already the new one
        assert_error(login, 401, "AUTH_INVALID_CREDENTIALS")
