"""A password reset ends the MFA challenges the old password opened: the challenge keeps
the account's stamp of when it was opened, and a session is started only under it
(docs/authentication.md, "Tokens and sessions")."""
from tests.conftest import assert_error
from tests.plugins.users import fresh_address, users_url


def test_a_challenge_opened_with_the_old_password_gets_no_session_after_a_reset(
        client, application, mfa_user, start_login, verify, outbox, ctx, clock):
    # A verified account: a reset stamps it but is no hand-over (TOTP stays).
    ctx.store["users"].update_one({"_id": mfa_user.id}, {"$set": {"email_verified": True}})
    # The thief knows the old password (and a second factor: a code, or a backup code).
    challenge = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    # The owner resets the password.
    outbox.clear()
    client.simulate_post(users_url(application, "/password/forgot"), json={"email": mfa_user.email},
                         remote_addr=fresh_address())
    reset = client.simulate_post(users_url(application, "/password/reset"), remote_addr=fresh_address(),
                                 json={"token": outbox[-1].token, "email": mfa_user.email,
                                       "password": "Fresh-Secret-42"})
    assert reset.status_code == 200, reset.text
    # The thief answers the challenge the old password opened.
    answered = verify(application, challenge, mfa_user.backup_codes[0])
    assert_error(answered, 401, "AUTH_INVALID_CREDENTIALS")
    assert ctx.store["sessions"].count_documents({"user_id": mfa_user.id, "revoked_at": None}) == 0
    # The owner signs in with the new password (and TOTP, which a reset of a verified
    # account keeps) as usual.
    assert start_login(application, mfa_user.email, "Fresh-Secret-42")["mfa_required"] is True
