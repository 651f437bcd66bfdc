"""A sign-in with the old password racing a reset cannot add a passkey after it (what the
hosted login's passkey offer does for that sign-in): the reset stamps the account and
replaces the password before it revokes the sessions."""
import jwt
import pytest

from controlplane.users.errors import SessionEnded
from tests.passkeys.authenticator import SoftAuthenticator
from tests.plugins.users import fresh_address, users_url


def test_a_sign_in_racing_a_reset_cannot_add_a_passkey_after_it(client, ctx, app_pw, make_user_token, outbox,
                                                                monkeypatch):
    owner = make_user_token(app_pw)
    user_id, email = owner.user["id"], owner.user["email"]
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"email_verified": True}})
    sessions, stolen = ctx.users.passwords.sessions, []
    revoke_user = sessions.revoke_user

    def thief_signs_in_after(*args, **kwargs):
        revoked = revoke_user(*args, **kwargs)
        if not stolen:
            login = client.simulate_post(users_url(app_pw, "/login"), remote_addr=fresh_address(),
                                         json={"email": email, "password": owner.password})
            stolen.append(login.status_code)
            if login.status_code == 200:
                stolen.append(jwt.decode(login.json["data"]["access_token"],
                                         options={"verify_signature": False})["sid"])
        return revoked

    monkeypatch.setattr(sessions, "revoke_user", thief_signs_in_after)
    outbox.clear()
    client.simulate_post(users_url(app_pw, "/password/forgot"), json={"email": email}, remote_addr=fresh_address())
    reset = client.simulate_post(users_url(app_pw, "/password/reset"), remote_addr=fresh_address(),
                                 json={"token": outbox[-1].token, "email": email, "password": "Fresh-Secret-42"})
    assert reset.status_code == 200, reset.text
    monkeypatch.undo()
    assert stolen, "the reset revoked no sessions"
    if stolen[0] != 200:
        assert stolen == [401]  # the password was already the new one
        return
    options = ctx.passkeys.registration_options(app_pw, user_id)
    credential = SoftAuthenticator().create(options["options"])
    with pytest.raises(SessionEnded):
        ctx.passkeys.register(app_pw, user_id, session_id=stolen[1], challenge_id=options["challenge_id"],
                              credential=credential, name=None)
    assert ctx.store["passkeys"].count_documents({"user_id": user_id}) == 0
