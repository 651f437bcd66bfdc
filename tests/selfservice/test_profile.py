"""GET and PUT V1/users/{userId}/profile: the User profile resource, partial updates,
validation of every field, and the user.updated event."""
import pytest

from shared.errors import NotFound
from shared.ids import new_id
from tests.conftest import assert_error, events_of

PROFILE_FIELDS = {"id", "email", "name", "avatar_url", "email_verified", "metadata", "created_at", "updated_at"}


@pytest.fixture
def me(application, make_user_token):
    return make_user_token(application, name="Ada Lovelace", metadata={"plan": "free", "tags": ["a"]})


def stored(ctx, user):
    return ctx.store["users"].find_one({"_id": user.user["id"]})


def test_get_returns_the_profile(call, application, me):
    response = call("GET", application, me, "/profile")
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    profile = response.json["data"]
    assert set(profile) == PROFILE_FIELDS
    assert profile == {
        "id": me.user["id"], "email": me.user["email"], "name": "Ada Lovelace", "avatar_url": None,
        "email_verified": False, "metadata": {"plan": "free", "tags": ["a"]},
        "created_at": me.user["created_at"], "updated_at": me.user["created_at"],
    }


def test_put_changes_only_the_name(call, application, me, ctx, clock):
    clock.advance(60)
    response = call("PUT", application, me, "/profile", json={"name": "  Countess of Lovelace "})
    assert response.status_code == 200, response.text
    profile = response.json["data"]
    assert set(profile) == PROFILE_FIELDS
    assert profile["name"] == "Countess of Lovelace"
    assert profile["metadata"] == {"plan": "free", "tags": ["a"]} and profile["avatar_url"] is None
    assert profile["updated_at"] > profile["created_at"]
    doc = stored(ctx, me)
    assert doc["name"] == "Countess of Lovelace" and doc["metadata"] == {"plan": "free", "tags": ["a"]}
    assert call("GET", application, me, "/profile").json["data"] == profile


def test_put_changes_only_the_avatar_url(call, application, me, ctx):
    url = "https://cdn.example.com/avatars/ada.png?size=128"
    profile = call("PUT", application, me, "/profile", json={"avatar_url": url}).json["data"]
    assert profile["avatar_url"] == url
    assert profile["name"] == "Ada Lovelace" and profile["metadata"] == {"plan": "free", "tags": ["a"]}
    assert stored(ctx, me)["avatar_url"] == url


def test_put_replaces_metadata_whole(call, application, me, ctx):
    profile = call("PUT", application, me, "/profile", json={"metadata": {"theme": "dark"}}).json["data"]
    assert profile["metadata"] == {"theme": "dark"}  # not merged with plan/tags
    assert profile["name"] == "Ada Lovelace" and profile["avatar_url"] is None
    assert stored(ctx, me)["metadata"] == {"theme": "dark"}


def test_null_clears_metadata_and_avatar_url(call, application, me, ctx):
    call("PUT", application, me, "/profile", json={"avatar_url": "http://example.com/a.png"})
    response = call("PUT", application, me, "/profile", json={"metadata": None, "avatar_url": None})
    assert response.status_code == 200, response.text
    assert response.json["data"]["metadata"] is None and response.json["data"]["avatar_url"] is None
    doc = stored(ctx, me)
    assert doc["metadata"] is None and doc["avatar_url"] is None and doc["name"] == "Ada Lovelace"


def test_unknown_and_read_only_fields_are_ignored(call, application, me, ctx):
    response = call("PUT", application, me, "/profile", json={
        "name": "Ada", "email": "attacker@example.com", "email_verified": True, "id": new_id(),
        "status": "active", "password_hash": "x", "created_at": "2000-01-01T00:00:00Z", "role": "admin"})
    assert response.status_code == 200, response.text
    profile = response.json["data"]
    assert profile["name"] == "Ada" and profile["email"] == me.user["email"] and profile["id"] == me.user["id"]
    assert profile["email_verified"] is False and profile["created_at"] == me.user["created_at"]
    doc = stored(ctx, me)
    assert doc["email"] == me.user["email"] and doc["email_verified"] is False
    assert doc["password_hash"] != "x" and "role" not in doc


def test_empty_body_changes_nothing(call, application, me, ctx, clock):
    before = stored(ctx, me)
    clock.advance(60)
    for body in ({}, None):
        response = call("PUT", application, me, "/profile", json=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 200, response.text
        assert response.json["data"]["updated_at"] == me.user["created_at"]
    assert stored(ctx, me) == before
    assert events_of(ctx, "user.updated") == []


# ---------------------------------------------------------------- the user.updated event


def test_update_emits_user_updated_with_the_changed_field_names(call, application, me, ctx):
    call("PUT", application, me, "/profile", json={"name": "Ada L.", "metadata": {"plan": "pro"},
                                                    "avatar_url": None})
    events = events_of(ctx, "user.updated")
    assert len(events) == 1
    event = events[0]
    assert event["data"] == {"user_id": me.user["id"], "changed": ["metadata", "name"]}  # avatar_url was null already
    assert event["subject"] == {"user_id": me.user["id"]} and event["app_id"] == application["_id"]


def test_sending_the_current_values_emits_nothing_and_writes_nothing(call, application, me, ctx, clock):
    clock.advance(60)
    response = call("PUT", application, me, "/profile", json={
        "name": "Ada Lovelace", "metadata": {"tags": ["a"], "plan": "free"}, "avatar_url": None})
    assert response.status_code == 200
    assert response.json["data"]["updated_at"] == me.user["created_at"]
    assert events_of(ctx, "user.updated") == []
    assert "X-Iamgate-Revision" not in response.headers


def test_a_change_of_json_type_is_a_change(call, application, make_user_token, ctx):
    # In Python True == 1; in JSON they differ, and so does the stored metadata.
    user = make_user_token(application, metadata={"flag": 1})
    call("PUT", application, user, "/profile", json={"metadata": {"flag": True}})
    assert ctx.store["users"].find_one({"_id": user.user["id"]})["metadata"] == {"flag": True}
    assert [e["data"]["changed"] for e in events_of(ctx, "user.updated")] == [["metadata"]]


def test_each_update_emits_its_own_event(call, application, me, ctx):
    call("PUT", application, me, "/profile", json={"name": "One"})
    call("PUT", application, me, "/profile", json={"avatar_url": "https://example.com/a.png"})
    assert [e["data"]["changed"] for e in events_of(ctx, "user.updated")] == [["name"], ["avatar_url"]]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("field, value", [
    ("name", ""),
    ("name", "   "),
    ("name", None),
    ("name", "x" * 256),
    ("name", 42),
    ("name", ["Ada"]),
    ("avatar_url", "not a url"),
    ("avatar_url", "ftp://example.com/a.png"),
    ("avatar_url", "javascript:alert(1)"),
    ("avatar_url", "https://"),
    ("avatar_url", "https://example.com/a b.png"),
    ("avatar_url", "https://example.com/" + "a" * 2048),
    ("avatar_url", 7),
    ("metadata", ["a", "list"]),
    ("metadata", "a string"),
    ("metadata", 3),
    ("metadata", True),
    ("metadata", {"$where": "1"}),
    ("metadata", {"a.b": 1}),
    ("metadata", {"outer": [{"$inner": 1}]}),
    ("metadata", {"nul\u0000key": 1}),
])
def test_each_invalid_field_is_400_invalid_format_and_changes_nothing(call, application, me, ctx, field, value):
    before = stored(ctx, me)
    error = assert_error(call("PUT", application, me, "/profile", json={field: value}), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]
    assert stored(ctx, me) == before
    assert events_of(ctx, "user.updated") == []


def test_name_of_255_characters_is_accepted(call, application, me):
    response = call("PUT", application, me, "/profile", json={"name": "é" * 255})
    assert response.status_code == 200 and response.json["data"]["name"] == "é" * 255


def test_metadata_up_to_16_kib_is_accepted_and_beyond_is_400(call, application, me, ctx):
    # {"k":"xxx..."} serialises to exactly 16384 bytes.
    fits = {"k": "x" * (16 * 1024 - 8)}
    assert call("PUT", application, me, "/profile", json={"metadata": fits}).status_code == 200
    too_big = {"k": "x" * (16 * 1024 - 7)}
    error = assert_error(call("PUT", application, me, "/profile", json={"metadata": too_big}), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert "16384 bytes" in error["details"]["fields"]["metadata"]
    assert stored(ctx, me)["metadata"] == fits


def test_metadata_nested_too_deep_is_400(call, application, me):
    ok, deep = {"v": 1}, {"v": 1}
    for _ in range(15):
        ok = {"n": ok}
    for _ in range(16):
        deep = {"n": deep}
    assert call("PUT", application, me, "/profile", json={"metadata": ok}).status_code == 200
    error = assert_error(call("PUT", application, me, "/profile", json={"metadata": deep}), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert "nested" in error["details"]["fields"]["metadata"]


def test_json_nested_beyond_the_parser_is_400_not_500(client, application, me):
    body = '{"metadata":' + "[" * 5000 + "]" * 5000 + "}"
    response = client.simulate_put(f"/api/v1/applications/{application['_id']}/users/{me.user['id']}/profile",
                                   body=body, headers={**me.headers, "Content-Type": "application/json"})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


def test_several_invalid_fields_are_400_multiple_errors(call, application, me, ctx):
    before = stored(ctx, me)
    error = assert_error(call("PUT", application, me, "/profile",
                              json={"name": "", "avatar_url": "nope", "metadata": [1]}), 400,
                         "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"name", "avatar_url", "metadata"}
    assert stored(ctx, me) == before


def test_one_invalid_field_rejects_the_valid_ones_too(call, application, me, ctx):
    before = stored(ctx, me)
    assert_error(call("PUT", application, me, "/profile", json={"name": "Valid", "avatar_url": "nope"}), 400,
                 "VALIDATION_INVALID_FORMAT")
    assert stored(ctx, me) == before


def test_body_must_be_a_json_object(client, application, me):
    url = f"/api/v1/applications/{application['_id']}/users/{me.user['id']}/profile"
    headers = {**me.headers, "Content-Type": "application/json"}
    assert_error(client.simulate_put(url, body="{not json", headers=headers), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(client.simulate_put(url, body='["a"]', headers=headers), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(client.simulate_put(url, body='{"name": "x"}', headers={**me.headers, "Content-Type": "text/plain"}),
                 415, "UNSUPPORTED_MEDIA_TYPE")


# ---------------------------------------------------------------- the user record is gone


def test_profile_of_a_vanished_or_deleted_user_is_404(ctx, application, me):
    app_id, user_id = application["_id"], me.user["id"]
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"status": "deleted"}})
    for action in (lambda: ctx.selfservice.profile(app_id, user_id),
                   lambda: ctx.selfservice.update_profile(app_id, user_id, {"name": "x"})):
        with pytest.raises(NotFound) as caught:
            action()
        assert caught.value.code == "USER_NOT_FOUND"
    assert ctx.store["users"].find_one({"_id": user_id})["name"] == "Ada Lovelace"
    ctx.store["users"].delete_one({"_id": user_id})
    with pytest.raises(NotFound) as caught:
        ctx.selfservice.profile(app_id, user_id)
    assert caught.value.code == "USER_NOT_FOUND"


def test_a_user_deleted_between_read_and_write_is_404_and_emits_nothing(ctx, application, me, monkeypatch):
    store = ctx.selfservice.users
    real_user = store.profile

    def user_then_deleted(app_id, user_id):
        doc = real_user(app_id, user_id)
        ctx.store["users"].update_one({"_id": user_id}, {"$set": {"status": "deleted"}})
        return doc

    monkeypatch.setattr(store, "profile", user_then_deleted)
    with pytest.raises(NotFound) as caught:
        ctx.selfservice.update_profile(application["_id"], me.user["id"], {"name": "Late"})
    assert caught.value.code == "USER_NOT_FOUND"
    assert ctx.store["users"].find_one({"_id": me.user["id"]})["name"] == "Ada Lovelace"
    assert events_of(ctx, "user.updated") == []


def test_a_racing_identical_update_is_not_reported_twice(ctx, application, me, monkeypatch):
    # Another request set the same name between this request's read and its write.
    store = ctx.selfservice.users
    stale = store.profile(application["_id"], me.user["id"])
    ctx.store["users"].update_one({"_id": me.user["id"]}, {"$set": {"name": "Ada King"}})
    monkeypatch.setattr(store, "profile", lambda app_id, user_id: stale)
    profile = ctx.selfservice.update_profile(application["_id"], me.user["id"], {"name": "Ada King"})
    assert profile["name"] == "Ada King"
    assert events_of(ctx, "user.updated") == []
