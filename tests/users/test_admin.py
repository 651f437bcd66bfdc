"""Dashboard administration of end users: list/search, suspend, unsuspend."""
import pytest

from shared.ids import new_id
from tests.conftest import assert_error, events_of
from tests.mfa.conftest import STEP, enable_mfa, rfc6238  # noqa: F401  (enable_mfa is a fixture)
from tests.plugins.users import PASSWORD, fresh_address, users_url
from tests.users.test_tokens import probe


@pytest.fixture
def org_app(ctx):
    """An application of an organization (dashboard access goes through membership)."""
    org_id = new_id()
    ctx.store["organizations"].insert_one({"_id": org_id, "name": "Org", "applications_count": 0})
    app = ctx.applications.create({"name": "Org App"}, organization_id=org_id, owner_account_id=None)
    return app


@pytest.fixture
def member(ctx, org_app):
    """``member(role)`` -> cookies of a dashboard account with that role in org_app's organization."""

    def make(role="admin", organization_id=None):
        account_id = new_id()
        ctx.store["organization_members"].insert_one(
            {"organization_id": organization_id or org_app["organization_id"], "account_id": account_id,
             "role": role})
        return {"iamgate_session": ctx.dashboard.sessions.create({"_id": account_id})}

    return make


def admin_url(app, path=""):
    return f"/api/dashboard/applications/{app['_id']}/users{path}"


def suspend(client, app, user_id, cookies, action="suspend"):
    return client.simulate_post(admin_url(app, f"/{user_id}/{action}"), json={}, cookies=cookies)


# ---------------------------------------------------------------- list and search


def test_list_is_paginated_newest_first(client, org_app, member, make_user, clock):
    users = []
    for i in range(4):
        users.append(make_user(org_app, email=f"user{i}@example.com", name=f"User {i}"))
        clock.advance(1)
    response = client.simulate_get(admin_url(org_app), params={"per_page": 3}, cookies=member("viewer"))
    assert response.status_code == 200, response.text
    body = response.json
    assert set(body) == {"data", "current_page", "last_page", "per_page", "total"}
    assert (body["current_page"], body["last_page"], body["per_page"], body["total"]) == (1, 2, 3, 4)
    assert [u["email"] for u in body["data"]] == ["user3@example.com", "user2@example.com", "user1@example.com"]
    item = body["data"][0]
    assert set(item) == {"id", "email", "name", "email_verified", "created_at", "metadata", "avatar_url", "status",
                         "updated_at", "suspended_at", "deleted_at", "last_login_at"}
    assert item["status"] == "active" and "password_hash" not in item
    page2 = client.simulate_get(admin_url(org_app), params={"per_page": 3, "page": 2}, cookies=member()).json
    assert [u["email"] for u in page2["data"]] == ["user0@example.com"]


def test_search_matches_email_or_name_case_insensitively(client, org_app, member, make_user):
    make_user(org_app, email="ada@example.com", name="Ada Lovelace")
    make_user(org_app, email="alan@example.com", name="Alan Turing")
    make_user(org_app, email="grace@navy.example", name="Grace Hopper")
    cookies = member()

    def search(text):
        return sorted(u["email"] for u in
                      client.simulate_get(admin_url(org_app), params={"search": text}, cookies=cookies).json["data"])

    assert search("LOVE") == ["ada@example.com"]
    assert search("navy") == ["grace@navy.example"]
    assert search("a") == ["ada@example.com", "alan@example.com", "grace@navy.example"]
    assert search(".*") == []  # not a regular expression


def test_list_filters_by_status_and_hides_deleted_users_by_default(client, org_app, member, make_user, ctx):
    active, suspended, deleted = (make_user(org_app) for _ in range(3))
    ctx.users.admin.suspend(org_app["_id"], suspended["id"])
    ctx.store["users"].update_one({"_id": deleted["id"]}, {"$set": {"status": "deleted"}})
    cookies = member()

    def listed(**params):
        return {u["id"] for u in client.simulate_get(admin_url(org_app), params=params, cookies=cookies).json["data"]}

    assert listed() == {active["id"], suspended["id"]}
    assert listed(status="suspended") == {suspended["id"]}
    assert listed(status="deleted") == {deleted["id"]}
    assert_error(client.simulate_get(admin_url(org_app), params={"status": "gone"}, cookies=cookies), 400,
                 "VALIDATION_INVALID_FORMAT")
    assert_error(client.simulate_get(admin_url(org_app), params={"per_page": 101}, cookies=cookies), 400,
                 "VALIDATION_INVALID_FORMAT")


def test_list_shows_only_this_applications_users(client, org_app, member, make_user, application):
    make_user(application)
    mine = make_user(org_app)
    assert [u["id"] for u in client.simulate_get(admin_url(org_app), cookies=member()).json["data"]] == [mine["id"]]


def test_list_needs_a_dashboard_session_with_access(client, org_app, member, ctx):
    assert_error(client.simulate_get(admin_url(org_app)), 401, "UNAUTHORIZED")
    assert_error(client.simulate_get(admin_url(org_app), cookies={"iamgate_session": "forged"}), 401)
    outsider = member("owner", organization_id=new_id())
    assert_error(client.simulate_get(admin_url(org_app), cookies=outsider), 404, "NOT_FOUND")


# ---------------------------------------------------------------- suspend and unsuspend


def test_suspend(client, post, org_app, member, make_user_token, ctx):
    token = make_user_token(org_app)
    response = suspend(client, org_app, token.user["id"], member("owner"))
    assert response.status_code == 200, response.text
    user = response.json["data"]
    assert user["id"] == token.user["id"] and user["status"] == "suspended" and user["suspended_at"]
    assert response.headers["X-Iamgate-Revision"]

    # Tokens stop at once, refresh tokens are revoked, login is refused.
    probe = client.simulate_post(f"/api/v1/applications/{org_app['_id']}/users/logout",
                                 json={"refresh_token": "x"}, headers=token.headers)
    assert_error(probe, 401, "UNAUTHORIZED")
    assert_error(post(org_app, "/token/refresh", {"refresh_token": token.refresh_token}), 401)
    session = ctx.store["sessions"].find_one({"user_id": token.user["id"]})
    assert session["revoked_reason"] == "suspended"
    assert_error(post(org_app, "/login", {"email": token.user["email"], "password": PASSWORD}), 403,
                 "AUTH_ACCOUNT_SUSPENDED")

    [event] = events_of(ctx, "user.suspended")
    assert event["subject"] == {"user_id": token.user["id"]} and event["user_ids"] == [token.user["id"]]


def test_suspend_is_idempotent(client, org_app, member, make_user, ctx):
    user = make_user(org_app)
    cookies = member()
    first = suspend(client, org_app, user["id"], cookies).json["data"]
    second = suspend(client, org_app, user["id"], cookies)
    assert second.status_code == 200 and second.json["data"]["suspended_at"] == first["suspended_at"]
    assert len(events_of(ctx, "user.suspended")) == 1


def test_unsuspend(client, post, org_app, member, make_user, ctx):
    user = make_user(org_app)
    cookies = member()
    suspend(client, org_app, user["id"], cookies)
    response = suspend(client, org_app, user["id"], cookies, "unsuspend")
    assert response.status_code == 200
    assert response.json["data"]["status"] == "active" and response.json["data"]["suspended_at"] is None
    assert post(org_app, "/login", {"email": user["email"], "password": PASSWORD}).status_code == 200
    [event] = events_of(ctx, "user.unsuspended")
    assert event["user_ids"] == [user["id"]]
    # Unsuspending an active user changes nothing.
    assert suspend(client, org_app, user["id"], cookies, "unsuspend").status_code == 200
    assert len(events_of(ctx, "user.unsuspended")) == 1


# A suspension ends what was proven before it, whatever comes after: the write that
# suspends also stamps the account (tokens_not_before), and a sign-in re-reads the
# account's status after storing its session.


def refresh(client, app, refresh_token):
    return client.simulate_post(users_url(app, "/token/refresh"), json={"refresh_token": refresh_token},
                                remote_addr=fresh_address())


def test_a_login_racing_a_suspension_gets_no_session(client, ctx, org_app, make_user, monkeypatch):
    """The suspension lands while the login checks the password (bcrypt): it revoked
    the sessions stored by then, so the login's own, stored after, must not live on
    and come back when the user is unsuspended."""
    user = make_user(org_app)
    guard = ctx.users.login.password_guard
    check = guard.check

    def check_then_suspend(*args, **kwargs):
        right = check(*args, **kwargs)
        ctx.users.admin.suspend(org_app["_id"], user["id"])
        return right

    monkeypatch.setattr(guard, "check", check_then_suspend)
    login = client.simulate_post(users_url(org_app, "/login"), remote_addr=fresh_address(),
                                 json={"email": user["email"], "password": PASSWORD})
    monkeypatch.undo()
    assert_error(login, 403, "AUTH_ACCOUNT_SUSPENDED")
    assert ctx.store["sessions"].count_documents({"user_id": user["id"], "revoked_at": None}) == 0
    assert events_of(ctx, "user.login") == []


def test_what_was_proven_before_a_suspension_proves_nothing_after_the_unsuspension(
        client, ctx, org_app, make_user_token, enable_mfa, clock):  # noqa: F811
    token = make_user_token(org_app)
    mfa_user = enable_mfa(org_app, make_user_token(org_app))
    opened = client.simulate_post(users_url(org_app, "/login"), remote_addr=fresh_address(),
                                  json={"email": mfa_user.email, "password": mfa_user.password})
    challenge = opened.json["data"]["challenge_token"]
    for user_id in (token.user["id"], mfa_user.id):
        ctx.users.admin.suspend(org_app["_id"], user_id)
        ctx.users.admin.unsuspend(org_app["_id"], user_id)
    clock.advance(STEP)

    assert_error(probe(client, org_app, token.access_token), 401)  # the access token issued before the suspension
    assert_error(refresh(client, org_app, token.refresh_token), 401)  # its session was revoked
    answer = client.simulate_post(users_url(org_app, "/mfa/verify"), remote_addr=fresh_address(),
                                  json={"challenge_token": challenge, "code": rfc6238(mfa_user.secret, clock())})
    assert_error(answer, 401)  # the challenge a login opened before the suspension
    assert client.simulate_post(users_url(org_app, "/login"), remote_addr=fresh_address(), json={
        "email": token.user["email"], "password": token.password}).status_code == 200  # a sign-in anew works


@pytest.mark.parametrize("action", ["suspend", "unsuspend"])
def test_unknown_or_deleted_user_is_404(client, org_app, member, make_user, application, ctx, action):
    cookies = member()
    assert_error(suspend(client, org_app, new_id(), cookies, action), 404, "USER_NOT_FOUND")
    deleted = make_user(org_app)
    ctx.store["users"].update_one({"_id": deleted["id"]}, {"$set": {"status": "deleted"}})
    assert_error(suspend(client, org_app, deleted["id"], cookies, action), 404, "USER_NOT_FOUND")
    foreign = make_user(application)
    assert_error(suspend(client, org_app, foreign["id"], cookies, action), 404, "USER_NOT_FOUND")
    assert ctx.store["users"].find_one({"_id": foreign["id"]})["status"] == "active"


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_cannot_suspend(client, org_app, member, make_user, ctx, role):
    user = make_user(org_app)
    assert_error(suspend(client, org_app, user["id"], member(role)), 403, "FORBIDDEN")
    assert ctx.store["users"].find_one({"_id": user["id"]})["status"] == "active"


def test_suspend_needs_json_and_a_session(client, org_app, member, make_user):
    user = make_user(org_app)
    assert_error(client.simulate_post(admin_url(org_app, f"/{user['id']}/suspend"), json={}), 401, "UNAUTHORIZED")
    response = client.simulate_post(admin_url(org_app, f"/{user['id']}/suspend"), cookies=member(),
                                    headers={"Content-Type": "text/plain"}, body="")
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
