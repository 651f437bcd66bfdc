"""A password reset or change ends the MFA challenges the old password opened: the
challenge keeps the account's stamp and password change time as its login read them, and
a session is started only under them (docs/authentication.md, "Tokens and sessions")."""
from tests.conftest import assert_error
from tests.mfa.conftest import STEP, rfc6238
from tests.plugins.users import fresh_address, users_url

NEW_PASSWORD = "Fresh-Secret-42"


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


def _change_password(client, application, mfa_user):
    response = client.simulate_post(
        users_url(application, f"/{mfa_user.id}/change-password"), headers=mfa_user.headers,
        json={"current_password": mfa_user.password, "new_password": NEW_PASSWORD,
              "new_password_confirmation": NEW_PASSWORD})
    assert response.status_code == 200, response.text


def _change_password_in_place(ctx, application, mfa_user):
    """The owner's change, from the owner's own session, as a call into the service."""
    owner_session = ctx.tokens.verify(mfa_user.token.access_token, audience=application["_id"])["sid"]
    ctx.users.passwords.change(application["_id"], mfa_user.id, current_password=mfa_user.password,
                               new_password=NEW_PASSWORD, current_session_id=owner_session)
    return owner_session


def _live_sessions(ctx, mfa_user) -> list[str]:
    return [s["_id"] for s in ctx.store["sessions"].find({"user_id": mfa_user.id, "revoked_at": None}, {"_id": 1})]


def test_a_challenge_opened_with_the_old_password_gets_no_session_after_a_change(
        client, application, mfa_user, start_login, verify, ctx, clock):
    """Real-time phishing: the thief has the password and the code; the owner changes the
    password while the challenge is open."""
    challenge = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    _change_password(client, application, mfa_user)
    before = _live_sessions(ctx, mfa_user)
    clock.advance(STEP)
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 401, "AUTH_INVALID_CREDENTIALS")
    assert_error(verify(application, challenge, mfa_user.backup_codes[0]), 410, "AUTH_MFA_CHALLENGE_EXPIRED")
    assert _live_sessions(ctx, mfa_user) == before  # the owner's own session, and no other
    # The owner signs in with the new password and TOTP as usual.
    fresh = start_login(application, mfa_user.email, NEW_PASSWORD)["challenge_token"]
    assert verify(application, fresh, mfa_user.backup_codes[1]).status_code == 200


def _change_before(ctx, application, mfa_user, monkeypatch, step: str) -> list:
    """Change the user's password just before the MFA factor's ``step`` runs (once per
    call); the list of what each change left (``_change_password_in_place``)."""
    factor, changed = ctx.mfa.factor, []
    original = getattr(factor, step)

    def change_then_step(*args, **kwargs):
        changed.append(_change_password_in_place(ctx, application, mfa_user))
        return original(*args, **kwargs)

    monkeypatch.setattr(factor, step, change_then_step)
    return changed


def test_a_change_while_the_challenge_is_answered_leaves_no_session(application, mfa_user, start_login, verify, ctx,
                                                                     clock, monkeypatch):
    """The change lands after the answer was checked and the challenge consumed, before
    the session is stored: the session is refused once stored."""
    challenge = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    changed = _change_before(ctx, application, mfa_user, monkeypatch, "consume_challenge")
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 401, "AUTH_INVALID_CREDENTIALS")
    assert _live_sessions(ctx, mfa_user) == changed


def test_a_challenge_a_login_opens_after_the_change_gets_no_session(application, mfa_user, start_login, verify, ctx,
                                                                   clock, monkeypatch):
    """The login checked the old password, then the change landed, then the login opened its
    challenge: ending the challenges open at the change would have missed this one."""
    changed = _change_before(ctx, application, mfa_user, monkeypatch, "open_challenge")
    challenge = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    monkeypatch.undo()
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 401, "AUTH_INVALID_CREDENTIALS")
    assert _live_sessions(ctx, mfa_user) == changed
