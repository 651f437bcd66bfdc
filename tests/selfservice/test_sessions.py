"""GET V1/users/{userId}/sessions, DELETE .../sessions/{sessionId}, DELETE .../sessions:
only live sessions are listed (newest first), revocation stops the refresh token at once
while access tokens live on until they expire, and nobody revokes another user's session."""
from datetime import timedelta

import pytest

from shared.errors import NotFound
from shared.ids import digest
from shared.timeutil import parse_iso
from tests.conftest import assert_error

SESSION_FIELDS = {"id", "device_info", "is_remember_me", "last_used_at", "expires_at", "created_at"}


@pytest.fixture
def me(user_token):
    return user_token


@pytest.fixture
def login_from(login_from_device):
    """``login_from(app, user, user_agent, remember_me=False)`` -> (refresh token, token pair)."""

    def do(app, user, user_agent, remember_me=False):
        pair = login_from_device(app, user, user_agent, remember_me)
        return pair["refresh_token"], pair

    return do


def session_id_of(ctx, refresh_token):
    return ctx.store["sessions"].find_one({"refresh_digest": digest(refresh_token)})["_id"]


def test_list_shows_live_sessions_newest_first(call, application, me, login_from, ctx, clock):
    clock.advance(10)
    phone_token, _ = login_from(application, me, "Phone/1.0", remember_me=True)
    clock.advance(10)
    laptop_token, _ = login_from(application, me, "Laptop/2.0")
    response = call("GET", application, me, "/sessions")
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    sessions = response.json["data"]
    assert [s["id"] for s in sessions] == [session_id_of(ctx, t)
                                           for t in (laptop_token, phone_token, me.refresh_token)]
    for item in sessions:
        assert set(item) == SESSION_FIELDS
        assert set(item["device_info"]) == {"ip", "user_agent"}
    laptop, phone = sessions[0], sessions[1]
    assert laptop["device_info"]["user_agent"] == "Laptop/2.0" and laptop["is_remember_me"] is False
    assert phone["device_info"]["user_agent"] == "Phone/1.0" and phone["is_remember_me"] is True
    assert phone["device_info"]["ip"].startswith("10.")
    assert phone["created_at"] < laptop["created_at"]
    # 30 days with remember_me, 7 days without.
    assert parse_iso(phone["expires_at"]) - parse_iso(phone["created_at"]) == timedelta(days=30)
    assert parse_iso(laptop["expires_at"]) - parse_iso(laptop["created_at"]) == timedelta(days=7)
    assert "refresh_digest" not in str(response.json) and me.refresh_token not in response.text


def test_list_leaves_out_revoked_and_expired_sessions(call, application, me, login_from, ctx, clock):
    revoked_token, _ = login_from(application, me, "Revoked/1")
    assert call("DELETE", application, me, f"/sessions/{session_id_of(ctx, revoked_token)}").status_code == 204
    login_from(application, me, "Long/1", remember_me=True)
    clock.advance(7 * 86400 + 1)  # the 7-day sessions expire, the 30-day one lives on
    _, fresh = login_from(application, me, "Fresh/1")
    sessions = call("GET", application, me, "/sessions", token=fresh["access_token"]).json["data"]
    assert [s["device_info"]["user_agent"] for s in sessions] == ["Fresh/1", "Long/1"]


def test_list_of_a_user_without_sessions_is_empty(call, application, me, ctx):
    ctx.store["sessions"].update_many({}, {"$set": {"revoked_at": ctx.clock()}})
    response = call("GET", application, me, "/sessions")
    assert response.status_code == 200 and response.json["data"] == []


def test_list_never_shows_another_users_sessions(call, application, me, make_user_token, make_application):
    other = make_user_token(application)
    elsewhere_app = make_application()
    elsewhere = make_user_token(elsewhere_app)
    mine = call("GET", application, me, "/sessions").json["data"]
    theirs = call("GET", application, other, "/sessions").json["data"]
    foreign = call("GET", elsewhere_app, elsewhere, "/sessions").json["data"]
    assert len(mine) == len(theirs) == len(foreign) == 1
    assert len({mine[0]["id"], theirs[0]["id"], foreign[0]["id"]}) == 3


# ---------------------------------------------------------------- revoke one


def test_revoke_one_stops_its_refresh_token_only(call, application, me, login_from, ctx, refresh):
    other_token, other_pair = login_from(application, me, "Other/1")
    session_id = session_id_of(ctx, other_token)
    response = call("DELETE", application, me, f"/sessions/{session_id}")
    assert response.status_code == 204 and response.text == ""
    doc = ctx.store["sessions"].find_one({"_id": session_id})
    assert doc["revoked_at"] is not None
    assert_error(refresh(application, other_token), 401, "UNAUTHORIZED")
    # The access token of the revoked session stays valid until it expires (spec).
    assert call("GET", application, me, "/profile", token=other_pair["access_token"]).status_code == 200
    # The other session is untouched.
    assert [s["id"] for s in call("GET", application, me, "/sessions").json["data"]] == \
        [session_id_of(ctx, me.refresh_token)]
    assert refresh(application, me.refresh_token).status_code == 200


def test_revoking_the_current_session_is_allowed(call, application, me, ctx, refresh):
    session_id = session_id_of(ctx, me.refresh_token)
    assert call("DELETE", application, me, f"/sessions/{session_id}").status_code == 204
    assert_error(refresh(application, me.refresh_token), 401)
    assert call("GET", application, me, "/sessions").json["data"] == []


def test_revoking_twice_is_404_session_not_found(call, application, me, ctx):
    session_id = session_id_of(ctx, me.refresh_token)
    assert call("DELETE", application, me, f"/sessions/{session_id}").status_code == 204
    error = assert_error(call("DELETE", application, me, f"/sessions/{session_id}"), 404, "SESSION_NOT_FOUND")
    assert error["details"] == {"session_id": session_id}


@pytest.mark.parametrize("session_id", ["a9d2e6b4-1c8f-4a3e-b7d0-6f2c4e8a0b15", "not-a-uuid", "0" * 36])
def test_unknown_session_is_404(call, application, me, session_id):
    assert_error(call("DELETE", application, me, f"/sessions/{session_id}"), 404, "SESSION_NOT_FOUND")


def test_another_users_session_is_404_and_stays_live(call, application, me, make_user_token, ctx, refresh):
    victim = make_user_token(application)
    victim_session = session_id_of(ctx, victim.refresh_token)
    assert_error(call("DELETE", application, me, f"/sessions/{victim_session}"), 404, "SESSION_NOT_FOUND")
    assert ctx.store["sessions"].find_one({"_id": victim_session})["revoked_at"] is None
    assert refresh(application, victim.refresh_token).status_code == 200


def test_a_session_of_another_application_is_404(call, application, me, make_application, make_user_token, ctx):
    foreign = make_user_token(make_application())
    foreign_session = session_id_of(ctx, foreign.refresh_token)
    assert_error(call("DELETE", application, me, f"/sessions/{foreign_session}"), 404, "SESSION_NOT_FOUND")
    assert ctx.store["sessions"].find_one({"_id": foreign_session})["revoked_at"] is None


def test_an_expired_session_is_404(call, application, me, ctx, clock, login_from):
    session_id = session_id_of(ctx, me.refresh_token)
    clock.advance(7 * 86400 + 1)
    _, fresh = login_from(application, me, "Fresh/1")
    assert_error(call("DELETE", application, me, f"/sessions/{session_id}", token=fresh["access_token"]), 404,
                 "SESSION_NOT_FOUND")
    assert ctx.store["sessions"].find_one({"_id": session_id})["revoked_at"] is None


def test_session_id_in_upper_case_is_the_same_session(call, application, me, ctx):
    session_id = session_id_of(ctx, me.refresh_token)
    assert call("DELETE", application, me, f"/sessions/{session_id.upper()}").status_code == 204
    assert ctx.store["sessions"].find_one({"_id": session_id})["revoked_at"] is not None


# ---------------------------------------------------------------- revoke all


def test_revoke_all_revokes_every_live_session(call, application, me, login_from, ctx, refresh, make_user_token):
    tokens = [me.refresh_token] + [login_from(application, me, f"Device/{i}")[0] for i in range(3)]
    already = login_from(application, me, "Gone/1")[0]
    assert call("DELETE", application, me, f"/sessions/{session_id_of(ctx, already)}").status_code == 204
    bystander = make_user_token(application)

    response = call("DELETE", application, me, "/sessions")
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert set(data) == {"revoked_count", "message"}
    assert data["revoked_count"] == 4 and isinstance(data["message"], str) and data["message"]
    for token in tokens:
        assert_error(refresh(application, token), 401)
    assert call("GET", application, me, "/sessions").json["data"] == []
    # Access tokens stay valid until they expire; other users are untouched.
    assert call("GET", application, me, "/profile").status_code == 200
    assert refresh(application, bystander.refresh_token).status_code == 200


def test_revoke_all_without_sessions_counts_zero(call, application, me):
    assert call("DELETE", application, me, "/sessions").json["data"]["revoked_count"] == 1
    second = call("DELETE", application, me, "/sessions")
    assert second.status_code == 200
    assert second.json["data"]["revoked_count"] == 0 and second.json["data"]["message"]


def test_session_routes_of_a_deleted_user_are_404(ctx, application, me):
    ctx.store["users"].update_one({"_id": me.user["id"]}, {"$set": {"status": "deleted"}})
    for action in (ctx.selfservice.sessions, ctx.selfservice.revoke_all_sessions):
        with pytest.raises(NotFound) as caught:
            action(application["_id"], me.user["id"])
        assert caught.value.code == "USER_NOT_FOUND"
