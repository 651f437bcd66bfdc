"""change-password, password/forgot and password/reset."""
import pytest

from shared.config import Rate
from shared.http import status_of
from shared.ids import digest
from tests.conftest import assert_error, events_of
from tests.plugins.users import PASSWORD, users_url
from tests.users.conftest import assert_rate_limit_headers

NEW = "Fresh-Secret-42"


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


def login_status(post, app, email, password):
    return post(app, "/login", {"email": email, "password": password}).status_code


# ---------------------------------------------------------------- change-password


def change(client, app, token, **body):
    values = {"current_password": PASSWORD, "new_password": NEW, "new_password_confirmation": NEW}
    values.update(body)
    values = {k: v for k, v in values.items() if v is not None}
    return client.simulate_post(users_url(app, f"/{token.user['id']}/change-password"), json=values,
                                headers=token.headers)


def test_change_password(client, post, application, user_token, login, ctx):
    other_device = login(application, user_token.user["email"])
    response = change(client, application, user_token)
    assert response.status_code == 200, response.text
    assert response.json == {"data": {"message": response.json["data"]["message"]}}
    assert login_status(post, application, user_token.user["email"], PASSWORD) == 401
    assert login_status(post, application, user_token.user["email"], NEW) == 200
    # Other sessions are signed out; the one that changed the password stays.
    assert_error(post(application, "/token/refresh", {"refresh_token": other_device["refresh_token"]}), 401)
    assert post(application, "/token/refresh", {"refresh_token": user_token.refresh_token}).status_code == 200
    [event] = events_of(ctx, "user.password_changed")
    assert event["subject"] == {"user_id": user_token.user["id"]}


def test_confirmation_mismatch_is_multiple_errors(client, application, user_token):
    error = assert_error(change(client, application, user_token, new_password_confirmation="Other-Secret-42"), 400,
                         "VALIDATION_MULTIPLE_ERRORS")
    assert error["details"]["fields"] == {"new_password_confirmation": "must equal new_password"}


def test_mismatch_with_other_field_errors(client, application, user_token):
    error = assert_error(change(client, application, user_token, current_password="", new_password_confirmation="x"),
                         400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"current_password", "new_password_confirmation"}


def test_confirmation_is_required(client, application, user_token):
    response = client.simulate_post(users_url(application, f"/{user_token.user['id']}/change-password"),
                                    json={"current_password": PASSWORD, "new_password": NEW},
                                    headers=user_token.headers)
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert set(error["details"]["fields"]) == {"new_password_confirmation"}


def test_wrong_current_password_is_422_invalid_password(client, post, application, user_token):
    error = assert_error(change(client, application, user_token, current_password="Not-It-123"), 422,
                         "INVALID_PASSWORD")
    assert error["details"]["field"] == "current_password"
    assert login_status(post, application, user_token.user["email"], PASSWORD) == 200


def test_weak_new_password_is_422(client, post, application, user_token):
    error = assert_error(change(client, application, user_token, new_password="password",
                                new_password_confirmation="password"), 422, "VALIDATION_PASSWORD_TOO_WEAK")
    assert error["details"]["field"] == "new_password"
    assert login_status(post, application, user_token.user["email"], PASSWORD) == 200


def test_change_password_of_a_vanished_user_is_404(application, user_token, ctx):
    from shared.errors import NotFound

    ctx.store["users"].delete_one({"_id": user_token.user["id"]})
    with pytest.raises(NotFound) as caught:
        ctx.users.passwords.change(application["_id"], user_token.user["id"], current_password=PASSWORD,
                             new_password=NEW, current_session_id=None)
    assert caught.value.code == "USER_NOT_FOUND" and status_of(type(caught.value)) == 404


def test_a_change_spends_the_reset_links_mailed_before(client, post, application, user_token, outbox):
    """A reset link that leaked (a forwarded mail, a mailbox someone held a while) would
    undo the change: the owner changing the password takes the account back from it."""
    email = user_token.user["email"]
    outbox.clear()
    post(application, "/password/forgot", {"email": email})
    leaked = outbox[-1].token
    assert change(client, application, user_token).status_code == 200
    assert_error(post(application, "/password/reset", {"token": leaked, "email": email, "password": "Thief-Pass-77"}),
                 400, "AUTH_INVALID_RESET_TOKEN")
    assert login_status(post, application, email, NEW) == 200
    # A link asked for after the change works.
    post(application, "/password/forgot", {"email": email})
    assert post(application, "/password/reset", {"token": outbox[-1].token, "email": email,
                                                 "password": "Later-Secret-8"}).status_code == 200


def test_a_login_that_checked_the_old_password_gets_no_session_once_it_changed(post, application, user_token,
                                                                               ctx, monkeypatch):
    """The change lands between the login's password check and its session: the login
    read the account before the change, and its session is refused once stored."""
    app_id, user_id = application["_id"], user_token.user["id"]
    owner_session = ctx.tokens.verify(user_token.access_token, audience=app_id)["sid"]
    login_service = ctx.users.login
    second_factor = login_service.second_factor

    class ChangedMeanwhile:
        def login_challenge(self, *args, **kwargs):
            ctx.users.passwords.change(app_id, user_id, current_password=PASSWORD, new_password=NEW,
                                       current_session_id=owner_session)
            return second_factor.login_challenge(*args, **kwargs)

    monkeypatch.setattr(login_service, "second_factor", ChangedMeanwhile())
    thief = post(application, "/login", {"email": user_token.user["email"], "password": PASSWORD})
    assert_error(thief, 401, "AUTH_INVALID_CREDENTIALS")
    live = ctx.store["sessions"].find({"user_id": user_id, "revoked_at": None}, {"_id": 1})
    assert [session["_id"] for session in live] == [owner_session]


# ---------------------------------------------------------------- forgot


def test_forgot_answers_the_same_for_known_and_unknown_emails(post, application, make_user, outbox):
    user = make_user(application)
    outbox.clear()
    known = post(application, "/password/forgot", {"email": user["email"]})
    unknown = post(application, "/password/forgot", {"email": "nobody@example.com"})
    assert known.status_code == unknown.status_code == 200
    assert known.json == unknown.json
    assert set(known.json["data"]) == {"message"}
    [email] = outbox
    assert email.to == user["email"]
    assert "Test App" in email.subject
    assert f"/pages/{application['_id']}/reset-password?token=" in email.body
    assert "1 hour" in email.body


def test_forgot_sends_nothing_to_suspended_or_deleted_users(post, application, make_user, outbox, ctx):
    suspended, deleted = make_user(application), make_user(application)
    ctx.users.admin.suspend(application["_id"], suspended["id"])
    ctx.store["users"].update_one({"_id": deleted["id"]}, {"$set": {"status": "deleted"}})
    outbox.clear()
    for user in (suspended, deleted):
        assert post(application, "/password/forgot", {"email": user["email"]}).status_code == 200
    assert outbox == []


def test_forgot_is_limited_to_3_per_15_minutes_per_email(post, application, make_user, outbox, clock):
    user = make_user(application)
    for _ in range(3):
        assert post(application, "/password/forgot", {"email": user["email"]}).status_code == 200
    response = post(application, "/password/forgot", {"email": user["email"].upper()})
    assert_error(response, 429, "AUTH_PASSWORD_RESET_RATE_LIMITED")
    assert_rate_limit_headers(response, 3)
    assert int(response.headers["Retry-After"]) <= 900
    assert post(application, "/password/forgot", {"email": "other@example.com"}).status_code == 200
    clock.advance(900)
    assert post(application, "/password/forgot", {"email": user["email"]}).status_code == 200


def test_forgot_limit_counts_unknown_emails_too(post, application):
    """Otherwise the 429 would reveal which emails exist."""
    for _ in range(3):
        post(application, "/password/forgot", {"email": "ghost@example.com"})
    assert_error(post(application, "/password/forgot", {"email": "ghost@example.com"}), 429,
                 "AUTH_PASSWORD_RESET_RATE_LIMITED")


def test_forgot_validation(post, application):
    assert_error(post(application, "/password/forgot", {}), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(post(application, "/password/forgot", {"email": "nope"}), 400, "VALIDATION_INVALID_FORMAT")


# ---------------------------------------------------------------- reset


@pytest.fixture
def reset_token(post, application, user_token, outbox):
    outbox.clear()
    post(application, "/password/forgot", {"email": user_token.user["email"]})
    return outbox[-1].token


def reset(post, app, token, email, password=NEW):
    return post(app, "/password/reset", {"token": token, "email": email, "password": password})


def test_reset_password(client, post, application, user_token, reset_token, ctx, login):
    email = user_token.user["email"]
    other = login(application, email)
    response = reset(post, application, reset_token, email)
    assert response.status_code == 200, response.text
    assert set(response.json["data"]) == {"message"}
    assert login_status(post, application, email, PASSWORD) == 401
    assert login_status(post, application, email, NEW) == 200
    # Every session is revoked, and every access token of before: the account is stamped.
    for token in (user_token.refresh_token, other["refresh_token"]):
        assert_error(post(application, "/token/refresh", {"refresh_token": token}), 401)
    profile = users_url(application, f"/{user_token.user['id']}/profile")
    for token in (user_token.access_token, other["access_token"]):
        assert_error(client.simulate_get(profile, headers={"Authorization": f"Bearer {token}"}), 401,
                     "UNAUTHORIZED")
    fresh = post(application, "/login", {"email": email, "password": NEW}).json["data"]["access_token"]
    assert client.simulate_get(profile, headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    # The mailbox is proven, the token is spent.
    assert ctx.store["users"].find_one({"_id": user_token.user["id"]})["email_verified"] is True
    assert ctx.store["user_tokens"].find_one({"_id": digest(reset_token)})["used_at"] is not None
    assert len(events_of(ctx, "user.password_reset")) == 1


def test_a_reset_of_a_verified_account_ends_its_access_tokens(client, post, application, user_token, reset_token,
                                                              ctx):
    """A verified account is not handed over, but its reset stamps it all the same: a
    thief's access token stops with the password it came from."""
    ctx.store["users"].update_one({"_id": user_token.user["id"]}, {"$set": {"email_verified": True}})
    assert reset(post, application, reset_token, user_token.user["email"]).status_code == 200
    profile = users_url(application, f"/{user_token.user['id']}/profile")
    assert_error(client.simulate_get(profile, headers=user_token.headers), 401, "UNAUTHORIZED")
    assert events_of(ctx, "user.claimed") == []


def test_a_reset_token_is_single_use(post, application, user_token, reset_token):
    assert reset(post, application, reset_token, user_token.user["email"]).status_code == 200
    assert_error(reset(post, application, reset_token, user_token.user["email"], "Another-Secret-9"), 400,
                 "AUTH_INVALID_RESET_TOKEN")


def test_using_one_reset_token_spends_the_others(post, application, user_token, reset_token, outbox):
    post(application, "/password/forgot", {"email": user_token.user["email"]})
    second = outbox[-1].token
    assert reset(post, application, second, user_token.user["email"]).status_code == 200
    assert_error(reset(post, application, reset_token, user_token.user["email"], "Another-Secret-9"), 400,
                 "AUTH_INVALID_RESET_TOKEN")


def test_reset_with_another_email_is_400(post, application, user_token, reset_token, make_user):
    other = make_user(application)
    assert_error(reset(post, application, reset_token, other["email"]), 400, "AUTH_INVALID_RESET_TOKEN")
    assert login_status(post, application, other["email"], PASSWORD) == 200
    # The token was not burnt by the mismatch.
    assert reset(post, application, reset_token, user_token.user["email"]).status_code == 200


def test_unknown_reset_token_is_400(post, application, user_token):
    assert_error(reset(post, application, "made-up", user_token.user["email"]), 400, "AUTH_INVALID_RESET_TOKEN")


def test_a_verification_token_is_not_a_reset_token(post, application, make_user, outbox):
    user = make_user(application)
    assert_error(reset(post, application, outbox[-1].token, user["email"]), 400, "AUTH_INVALID_RESET_TOKEN")


def test_expired_reset_token_is_410(post, application, user_token, reset_token, clock):
    clock.advance(3600)
    assert_error(reset(post, application, reset_token, user_token.user["email"]), 410, "AUTH_RESET_TOKEN_EXPIRED")
    assert login_status(post, application, user_token.user["email"], PASSWORD) == 200


def test_reset_token_is_valid_just_under_an_hour(post, application, user_token, reset_token, clock):
    clock.advance(3599)
    assert reset(post, application, reset_token, user_token.user["email"]).status_code == 200


def test_weak_reset_password_is_422_and_keeps_the_token(post, application, user_token, reset_token):
    error = assert_error(reset(post, application, reset_token, user_token.user["email"], "12345678"), 422,
                         "VALIDATION_PASSWORD_TOO_WEAK")
    assert error["details"]["rules"]
    assert reset(post, application, reset_token, user_token.user["email"]).status_code == 200


def test_reset_lifts_a_login_lock(post, application, user_token, reset_token):
    email = user_token.user["email"]
    for _ in range(5):
        post(application, "/login", {"email": email, "password": "Wrong-Pass-1"})
    assert_error(post(application, "/login", {"email": email, "password": PASSWORD}), 429, "AUTH_ACCOUNT_LOCKED")
    assert reset(post, application, reset_token, email).status_code == 200
    assert login_status(post, application, email, NEW) == 200


def test_reset_token_of_another_application_is_400(post, make_application, user_token, reset_token):
    assert_error(reset(post, make_application(), reset_token, user_token.user["email"]), 400,
                 "AUTH_INVALID_RESET_TOKEN")


def test_reset_validation(post, application):
    error = assert_error(post(application, "/password/reset", {}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"token", "email", "password"}


@pytest.mark.parametrize("config_overrides", [{"reset_token_ttl": 600}], indirect=True)
def test_reset_lifetime_is_configurable(post, application, user_token, reset_token, clock, outbox):
    assert "10 minutes" in outbox[-1].body
    clock.advance(600)
    assert_error(reset(post, application, reset_token, user_token.user["email"]), 410, "AUTH_RESET_TOKEN_EXPIRED")


@pytest.mark.parametrize("config_overrides", [{"rate_limit_forgot": Rate(1, 60)}], indirect=True)
def test_forgot_limit_is_configurable(post, application):
    post(application, "/password/forgot", {"email": "a@example.com"})
    response = post(application, "/password/forgot", {"email": "a@example.com"})
    assert_error(response, 429, "AUTH_PASSWORD_RESET_RATE_LIMITED")
    assert response.headers["X-RateLimit-Limit"] == "1"
