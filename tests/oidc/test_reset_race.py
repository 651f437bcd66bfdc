"""A sign-in with the old password racing a reset keeps no OIDC grant: the reset stamps
the account (and replaces the password) before it revokes the sessions, so no session
begun with the old password outlives it, and a code issued in one is worthless."""
from tests.oidc.conftest import assert_oauth_error, pkce_pair
from tests.plugins.users import fresh_address, users_url


def test_a_sign_in_racing_a_reset_keeps_no_oidc_grant(client, ctx, application, rp_client, user_token, authorize,
                                                       exchange, outbox, monkeypatch):
    user_id, email = user_token.user["id"], user_token.user["email"]
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"email_verified": True}})
    sessions, stolen = ctx.users.passwords.sessions, []
    revoke_user = sessions.revoke_user

    def thief_signs_in_after(*args, **kwargs):
        revoked = revoke_user(*args, **kwargs)
        # Just after the reset revoked the sessions: a thief with the old password signs
        # in and asks for a code in that session.
        if not stolen:
            login = client.simulate_post(users_url(application, "/login"), remote_addr=fresh_address(),
                                         json={"email": email, "password": user_token.password})
            stolen.append(login.status_code)
            if login.status_code == 200:
                verifier, challenge = pkce_pair()
                token = type("Token", (), {"access_token": login.json["data"]["access_token"]})
                code = authorize(token, rp_client, challenge=challenge)
                stolen.append((code.json["code"], verifier))
        return revoked

    monkeypatch.setattr(sessions, "revoke_user", thief_signs_in_after)
    outbox.clear()
    client.simulate_post(users_url(application, "/password/forgot"), json={"email": email},
                         remote_addr=fresh_address())
    reset = client.simulate_post(users_url(application, "/password/reset"), remote_addr=fresh_address(),
                                 json={"token": outbox[-1].token, "email": email, "password": "Fresh-Secret-42"})
    assert reset.status_code == 200, reset.text
    monkeypatch.undo()
    assert stolen, "the reset revoked no sessions"
    if stolen[0] == 200:  # signed in all the same: the code must be worthless
        assert_oauth_error(exchange(rp_client, *stolen[1]), "invalid_grant")
    else:
        assert stolen == [401]  # the password was already the new one
