"""A sign-in with the old password racing a reset cannot add a passkey after it (what the
hosted login's passkey offer does for that sign-in): the reset stamps the account and
replaces the password before it revokes the sessions."""
import jwt
import pytest

from controlplane.users.errors import SessionEnded
from tests.conftest import assert_error
from tests.passkeys.authenticator import SoftAuthenticator
from tests.plugins.users import reset_while_a_thief_signs_in


def test_a_sign_in_racing_a_reset_cannot_add_a_passkey_after_it(client, ctx, app_pw, make_user_token, outbox,
                                                                monkeypatch):
    owner = make_user_token(app_pw)
    user_id = owner.user["id"]
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"email_verified": True}})
    login = reset_while_a_thief_signs_in(client, ctx, app_pw, owner.user["email"], owner.password, outbox,
                                         monkeypatch)
    if login.status_code != 200:  # the password was already the new one
        assert_error(login, 401, "AUTH_INVALID_CREDENTIALS")
        return
    session_id = jwt.decode(login.json["data"]["access_token"], options={"verify_signature": False})["sid"]
    options = ctx.passkeys.registration_options(app_pw, user_id)
    credential = SoftAuthenticator().create(options["options"])
    with pytest.raises(SessionEnded):
        ctx.passkeys.register(app_pw, user_id, session_id=session_id, challenge_id=options["challenge_id"],
                              credential=credential, name=None)
    assert ctx.store["passkeys"].count_documents({"user_id": user_id}) == 0
