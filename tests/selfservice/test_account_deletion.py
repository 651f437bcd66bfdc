"""DELETE V1/users/{userId}: the soft delete.  The record and its email stay, every way
back in is closed (login, refresh, existing access tokens, OIDC grants), the tier slot
is given back exactly once, and an interrupted deletion is finished by the next attempt."""
import pytest

from shared.errors import NotFound
from shared.ids import digest, new_id
from tests.conftest import assert_error, events_of
from tests.plugins.users import PASSWORD, fresh_address, users_url


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


@pytest.fixture
def me(user_token):
    return user_token


def user_doc(ctx, user):
    return ctx.store["users"].find_one({"_id": user.user["id"]})


def login_response(client, app, email, password=PASSWORD):
    return client.simulate_post(users_url(app, "/login"), json={"email": email, "password": password},
                                remote_addr=fresh_address())


def test_delete_marks_the_user_deleted_and_keeps_the_record(call, application, me, ctx, clock):
    before = user_doc(ctx, me)
    clock.advance(60)
    response = call("DELETE", application, me)
    assert response.status_code == 204 and response.text == ""
    doc = user_doc(ctx, me)
    assert doc["status"] == "deleted"
    assert doc["deleted_at"] is not None and doc["updated_at"] == doc["deleted_at"]
    assert doc["deleted_at"] > before["created_at"]
    for field in ("email", "name", "password_hash", "created_at", "metadata"):
        assert doc[field] == before[field]


def test_delete_emits_user_deleted_for_webhooks_and_decision_caches(call, application, me, ctx):
    response = call("DELETE", application, me)
    events = events_of(ctx, "user.deleted")
    assert len(events) == 1
    event = events[0]
    assert event["app_id"] == application["_id"]
    assert event["data"] == {"user_id": me.user["id"]}
    assert event["subject"] == {"user_id": me.user["id"]} and event["user_ids"] == [me.user["id"]]
    assert response.headers["X-Iamgate-Revision"] == str(event["seq"])


def test_deleted_user_cannot_log_in_as_if_unknown(call, client, application, me):
    call("DELETE", application, me)
    error = assert_error(login_response(client, application, me.user["email"]), 401, "AUTH_INVALID_CREDENTIALS")
    unknown = assert_error(login_response(client, application, "nobody@example.com"), 401,
                           "AUTH_INVALID_CREDENTIALS")
    assert error["message"] == unknown["message"] and error["details"] == unknown["details"]


def test_deleted_users_refresh_tokens_are_revoked(call, application, me, login_from_device, ctx, refresh):
    second = login_from_device(application, me)
    call("DELETE", application, me)
    sessions = list(ctx.store["sessions"].find({"user_id": me.user["id"]}))
    assert len(sessions) == 2
    assert all(s["revoked_at"] is not None and s["revoked_reason"] == "user_deleted" for s in sessions)
    for token in (me.refresh_token, second["refresh_token"]):
        assert_error(refresh(application, token), 401, "UNAUTHORIZED")


def test_existing_access_tokens_stop_at_once(call, application, me, login_from_device):
    second = login_from_device(application, me)
    call("DELETE", application, me)
    for token in (me.access_token, second["access_token"]):
        for method, path in (("GET", "/profile"), ("GET", "/sessions"), ("DELETE", "")):
            assert_error(call(method, application, me, path, token=token), 401, "UNAUTHORIZED")


def test_the_email_stays_reserved(call, client, application, me):
    call("DELETE", application, me)
    response = client.simulate_post(users_url(application, "/register"), json={
        "email": me.user["email"], "password": "Another-Horse-7", "name": "Impostor"}, remote_addr=fresh_address())
    assert_error(response, 409, "AUTH_EMAIL_ALREADY_REGISTERED")


def test_password_reset_cannot_revive_a_deleted_account(call, client, application, me, outbox, ctx):
    call("DELETE", application, me)
    response = client.simulate_post(users_url(application, "/password/forgot"), json={"email": me.user["email"]},
                                    remote_addr=fresh_address())
    assert response.status_code == 200
    assert [m for m in outbox if "reset" in m.subject.lower()] == []
    assert user_doc(ctx, me)["status"] == "deleted"


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 2}], indirect=True)
def test_deletion_frees_a_tier_slot(call, client, application, make_user_token, ctx):
    first = make_user_token(application)
    make_user_token(application)

    def register(email):
        return client.simulate_post(users_url(application, "/register"), json={
            "email": email, "password": PASSWORD, "name": "Newcomer"}, remote_addr=fresh_address())

    assert_error(register("third@example.com"), 403, "tier_limit_exceeded")
    assert call("DELETE", application, first).status_code == 204
    assert register("third@example.com").status_code == 201
    assert_error(register("fourth@example.com"), 403, "tier_limit_exceeded")


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 2}], indirect=True)
def test_a_second_deletion_never_releases_a_second_slot(call, client, application, make_user_token, ctx):
    first = make_user_token(application)
    make_user_token(application)
    assert call("DELETE", application, first).status_code == 204
    with pytest.raises(NotFound):
        ctx.selfservice.delete_account(application["_id"], first.user["id"])
    assert ctx.store["user_counters"].find_one({"_id": application["_id"]})["users"] == 1
    assert len(events_of(ctx, "user.deleted")) == 1


def test_deletion_withdraws_oidc_consents_and_revokes_their_tokens(call, application, me, ctx, oidc_consent,
                                                                    oidc_refresh_token, make_user_token):
    consent = oidc_consent(application, me.user["id"])
    token = oidc_refresh_token(application, me.user["id"], consent["client_id"])
    bystander = make_user_token(application)
    other_consent = oidc_consent(application, bystander.user["id"], consent["client_id"])
    other_token = oidc_refresh_token(application, bystander.user["id"], consent["client_id"])
    call("DELETE", application, me)
    assert ctx.store["oidc_consents"].find_one({"_id": consent["_id"]})["withdrawn_at"] is not None
    assert ctx.store["oidc_refresh_tokens"].find_one({"_id": token["_id"]})["revoked_at"] is not None
    assert ctx.store["oidc_consents"].find_one({"_id": other_consent["_id"]})["withdrawn_at"] is None
    assert ctx.store["oidc_refresh_tokens"].find_one({"_id": other_token["_id"]})["revoked_at"] is None


def test_other_users_are_untouched(call, application, me, make_user_token, refresh, ctx):
    other = make_user_token(application)
    call("DELETE", application, me)
    assert ctx.store["users"].find_one({"_id": other.user["id"]})["status"] == "active"
    assert call("GET", application, other, "/profile").status_code == 200
    assert refresh(application, other.refresh_token).status_code == 200


def test_role_assignments_stop_granting_and_no_longer_hold_the_role(call, client, application, me, ctx, make_role,
                                                                      assign_role, stored_user, token_for):
    role = make_role(application, "editor", ["posts:write"])
    assign_role(application, {"_id": me.user["id"]}, role)
    assert ctx.roles.grants(application["_id"], me.user["id"]).status == "active"
    call("DELETE", application, me)
    assert ctx.roles.grants(application["_id"], me.user["id"]).status == "deleted"
    assert ctx.store["role_assignments"].count_documents({"user_id": me.user["id"]}) == 1  # record retained
    admin = stored_user(application)
    assign_role(application, admin, make_role(application, "admin", ["roles:*"]))
    response = client.simulate_delete(f"/api/v1/applications/{application['_id']}/roles/{role['_id']}",
                                      headers={"Authorization": f"Bearer {token_for(application, admin)}"})
    assert response.status_code == 204, response.text  # a deleted user does not keep a role in use


# ---------------------------------------------------------------- crash half-way


def test_a_crash_after_the_status_write_leaves_nothing_usable(call, application, me, ctx, refresh, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("process died")

    monkeypatch.setattr(ctx.users.sessions, "revoke_user", crash)
    response = call("DELETE", application, me)
    assert response.status_code == 500
    # The status was written first: the token, the refresh token and the password are refused.
    assert user_doc(ctx, me)["status"] == "deleted"
    session = ctx.store["sessions"].find_one({"refresh_digest": digest(me.refresh_token)})
    assert session["revoked_at"] is None
    assert_error(call("GET", application, me, "/profile"), 401, "UNAUTHORIZED")
    assert_error(refresh(application, me.refresh_token), 401, "UNAUTHORIZED")
    # The refused refresh repaired the session it found.
    assert ctx.store["sessions"].find_one({"_id": session["_id"]})["revoked_at"] is not None


def test_the_next_attempt_finishes_an_interrupted_deletion(call, application, me, ctx, monkeypatch,
                                                            oidc_consent, oidc_refresh_token):
    consent = oidc_consent(application, me.user["id"])
    token = oidc_refresh_token(application, me.user["id"], consent["client_id"])
    real = ctx.users.sessions.revoke_user
    monkeypatch.setattr(ctx.users.sessions, "revoke_user", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("died")))
    assert call("DELETE", application, me).status_code == 500
    monkeypatch.setattr(ctx.users.sessions, "revoke_user", real)

    with pytest.raises(NotFound) as caught:
        ctx.selfservice.delete_account(application["_id"], me.user["id"])
    assert caught.value.code == "USER_NOT_FOUND"
    assert ctx.store["sessions"].find_one({"refresh_digest": digest(me.refresh_token)})["revoked_at"] is not None
    assert ctx.store["oidc_consents"].find_one({"_id": consent["_id"]})["withdrawn_at"] is not None
    assert ctx.store["oidc_refresh_tokens"].find_one({"_id": token["_id"]})["revoked_at"] is not None
    assert len(events_of(ctx, "user.deleted")) == 1


def test_unknown_user_is_404(ctx, application):
    for user_id in (new_id(), "not-a-uuid"):
        with pytest.raises(NotFound) as caught:
            ctx.selfservice.delete_account(application["_id"], user_id)
        assert caught.value.code == "USER_NOT_FOUND"


def test_a_user_of_another_application_is_404_there(ctx, application, make_application, make_user_token):
    foreign = make_user_token(make_application())
    with pytest.raises(NotFound):
        ctx.selfservice.delete_account(application["_id"], foreign.user["id"])
    assert ctx.store["users"].find_one({"_id": foreign.user["id"]})["status"] == "active"
