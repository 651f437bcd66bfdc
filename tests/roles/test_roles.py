"""V1/roles: create, list, get, update, delete, with every rule of the spec's Role resource."""
from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import assert_error, bearer, events_of

V1 = "/api/v1/applications/{}"
ROLE_KEYS = {"id", "name", "display_name", "description", "is_system_role", "permissions", "permissions_count",
             "created_at", "updated_at"}
LIST_KEYS = {"id", "name", "display_name", "description", "is_system_role", "permissions_count", "created_at"}


@pytest.fixture
def admin(role_admin):
    app, _, token = role_admin
    return app, bearer(token)



def events_after(ctx, type_, seq):
    """Events of ``type_`` appended after ``seq`` (creating a role grants its permissions too)."""
    return [e for e in events_of(ctx, type_) if e["seq"] > seq]

def roles_url(app, suffix=""):
    return V1.format(app["_id"]) + "/roles" + suffix


def create(client, app, headers, **body):
    payload = {"name": "editor", "display_name": "Editor", "permissions": ["posts:read", "posts:write"]}
    payload.update(body)
    return client.simulate_post(roles_url(app), json=payload, headers=headers)


# --- create ------------------------------------------------------------------------------------


def test_create_returns_the_role_with_permission_names(client, ctx, admin):
    app, headers = admin
    response = create(client, app, headers, description="Edits posts")
    assert response.status_code == 201, response.text
    role = response.json["data"]
    assert set(role) == ROLE_KEYS
    assert role["name"] == "editor" and role["display_name"] == "Editor" and role["description"] == "Edits posts"
    assert role["permissions"] == ["posts:read", "posts:write"]
    assert role["permissions_count"] == 2
    assert role["is_system_role"] is False
    assert role["created_at"] == role["updated_at"]
    stored = ctx.store["roles"].find_one({"_id": role["id"]})
    assert stored["app_id"] == app["_id"]
    event = events_of(ctx, "role.created")[-1]
    assert event["data"]["role_id"] == role["id"] and event["user_ids"] == []
    granted = [e for e in events_of(ctx, "permission.granted") if e["data"]["role_id"] == role["id"]]
    assert [e["data"]["permission"] for e in granted] == ["posts:read", "posts:write"]
    assert response.headers["X-Iamgate-Revision"] == str(granted[-1]["seq"]) and granted[0]["seq"] > event["seq"]


def test_permissions_are_created_on_first_use_once_per_application(client, ctx, admin, make_application, make_role):
    app, headers = admin
    create(client, app, headers, name="a", permissions=["posts:read", "posts:*"])
    create(client, app, headers, name="b", permissions=["posts:read", "*:*"])
    other = make_application()
    make_role(other, "a", ["posts:read"])
    names = sorted(p["name"] for p in ctx.store["permissions"].find({"app_id": app["_id"]}))
    assert names == ["*:*", "authz:check", "posts:*", "posts:read", "roles:*"]  # with the admin's role
    assert ctx.store["permissions"].count_documents({"app_id": other["_id"]}) == 1


def test_duplicate_permissions_in_a_request_are_kept_once(client, admin):
    app, headers = admin
    role = create(client, app, headers, permissions=["posts:read", "posts:read"]).json["data"]
    assert role["permissions"] == ["posts:read"] and role["permissions_count"] == 1


def test_system_role_can_be_created(client, admin):
    app, headers = admin
    role = create(client, app, headers, is_system_role=True).json["data"]
    assert role["is_system_role"] is True


def test_same_name_twice_is_409_resource_already_exists(client, ctx, admin):
    app, headers = admin
    create(client, app, headers)
    before = ctx.store["roles"].count_documents({})
    assert_error(create(client, app, headers, display_name="Other"), 409, "RESOURCE_ALREADY_EXISTS")
    assert ctx.store["roles"].count_documents({}) == before


def test_same_name_in_another_application_is_fine(client, admin, make_application, make_api_key):
    app, headers = admin
    create(client, app, headers)
    other = make_application()
    response = create(client, other, bearer(make_api_key(other)))
    assert response.status_code == 201


@pytest.mark.parametrize("body, field", [
    ({"name": None}, "name"),
    ({"name": ""}, "name"),
    ({"name": "x" * 101}, "name"),
    ({"name": "has space"}, "name"),
    ({"name": "-leading"}, "name"),
    ({"name": "0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61"}, "name"),
    ({"display_name": ""}, "display_name"),
    ({"display_name": "x" * 256}, "display_name"),
    ({"permissions": []}, "permissions"),
    ({"permissions": "posts:read"}, "permissions"),
    ({"permissions": ["posts"]}, "permissions"),
    ({"permissions": ["posts:read:extra"]}, "permissions"),
    ({"permissions": ["po sts:read"]}, "permissions"),
    ({"permissions": [":read"]}, "permissions"),
    ({"permissions": [42]}, "permissions"),
    ({"is_system_role": "yes"}, "is_system_role"),
    ({"description": "x" * 1001}, "description"),
])
def test_one_invalid_field_is_400_validation_invalid_format(client, ctx, admin, body, field):
    app, headers = admin
    error = assert_error(create(client, app, headers, **body), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]
    assert ctx.store["roles"].count_documents({"name": "editor"}) == 0


def test_a_malformed_permission_is_named_in_the_error(client, admin):
    app, headers = admin
    error = assert_error(create(client, app, headers, permissions=["posts:read", "bad-perm"]), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert "bad-perm" in error["details"]["fields"]["permissions"]
    assert "bad-perm" in error["message"]


def test_several_invalid_fields_are_400_validation_multiple_errors(client, ctx, admin):
    app, headers = admin
    response = client.simulate_post(roles_url(app), json={"permissions": ["nope"]}, headers=headers)
    error = assert_error(response, 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"name", "display_name", "permissions"}
    assert ctx.store["permissions"].count_documents({"name": "nope"}) == 0


def test_create_needs_json(client, admin):
    app, headers = admin
    response = client.simulate_post(roles_url(app), body="name=x", headers={
        **headers, "Content-Type": "application/x-www-form-urlencoded"})
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")


# --- list --------------------------------------------------------------------------------------


def test_list_is_the_paginated_envelope_sorted_by_name(client, admin, make_role):
    app, headers = admin
    for name in ("writer", "auditor", "editor"):
        make_role(app, name, ["posts:read"])
    body = client.simulate_get(roles_url(app), headers=headers).json
    assert set(body) == {"data", "current_page", "last_page", "per_page", "total"}
    assert [r["name"] for r in body["data"]] == ["administrator", "auditor", "editor", "writer"]
    assert (body["current_page"], body["last_page"], body["per_page"], body["total"]) == (1, 1, 15, 4)
    assert all(set(item) == LIST_KEYS for item in body["data"])


def test_list_pages(client, admin, make_role):
    app, headers = admin
    for i in range(6):
        make_role(app, f"r{i}")
    body = client.simulate_get(roles_url(app), params={"per_page": 3, "page": 2}, headers=headers).json
    assert [r["name"] for r in body["data"]] == ["r2", "r3", "r4"]  # page 1: administrator, r0, r1
    assert (body["current_page"], body["last_page"], body["per_page"], body["total"]) == (2, 3, 3, 7)
    beyond = client.simulate_get(roles_url(app), params={"page": 9}, headers=headers).json
    assert beyond["data"] == [] and beyond["total"] == 7


@pytest.mark.parametrize("params", [{"per_page": 0}, {"per_page": 101}, {"page": 0}, {"page": "x"},
                                    {"include_permissions": "maybe"}, {"search": "x" * 101}])
def test_list_rejects_bad_query_parameters(client, admin, params):
    app, headers = admin
    assert_error(client.simulate_get(roles_url(app), params=params, headers=headers), 400,
                 "VALIDATION_INVALID_FORMAT")


def test_list_searches_name_and_display_name_case_insensitively(client, admin, make_role):
    app, headers = admin
    make_role(app, "editor", display_name="Content Editor")
    make_role(app, "viewer", display_name="Reader")
    make_role(app, "reporter", display_name="Stats")

    def names(search):
        body = client.simulate_get(roles_url(app), params={"search": search}, headers=headers).json
        return [r["name"] for r in body["data"]]

    assert names("EDIT") == ["editor"]
    assert names("reader") == ["viewer"]
    assert names("R") == ["administrator", "editor", "reporter", "viewer"]
    assert names("a.b") == []  # regex characters are literal


def test_list_include_permissions_adds_names(client, admin, make_role):
    app, headers = admin
    make_role(app, "editor", ["posts:read", "posts:write"])
    body = client.simulate_get(roles_url(app), params={"include_permissions": "true", "search": "editor"},
                               headers=headers).json
    assert body["data"][0]["permissions"] == ["posts:read", "posts:write"]
    assert set(body["data"][0]) == LIST_KEYS | {"permissions"}


def test_list_shows_only_this_applications_roles(client, admin, make_application, make_role):
    app, headers = admin
    make_role(make_application(), "foreign")
    names = [r["name"] for r in client.simulate_get(roles_url(app), headers=headers).json["data"]]
    assert "foreign" not in names


# --- get ---------------------------------------------------------------------------------------


def test_get_has_permission_objects_and_users_count(client, ctx, clock, admin, make_role, stored_user, assign_role):
    app, headers = admin
    role = make_role(app, "editor", ["posts:read", "posts:*"])
    holder, scoped_holder, expired, deleted = (stored_user(app) for _ in range(4))
    assign_role(app, holder, role)
    assign_role(app, scoped_holder, role, scope="org:1")
    assign_role(app, scoped_holder, role, scope="org:2")
    assign_role(app, expired, role, expires_at=clock() + timedelta(seconds=10))
    assign_role(app, deleted, role)
    ctx.store["users"].update_one({"_id": deleted["_id"]}, {"$set": {"status": "deleted"}})
    clock.advance(11)
    response = client.simulate_get(roles_url(app, "/" + role["_id"]), headers=headers)
    assert response.status_code == 200
    data = response.json["data"]
    assert set(data) == ROLE_KEYS | {"users_count"}
    ids = {p["name"]: p["_id"] for p in ctx.store["permissions"].find({"app_id": app["_id"]})}
    assert data["permissions"] == [{"id": ids["posts:read"], "name": "posts:read"},
                                   {"id": ids["posts:*"], "name": "posts:*"}]
    assert data["permissions_count"] == 2
    assert data["users_count"] == 2


def test_get_by_name_and_by_upper_case_id(client, admin, make_role):
    app, headers = admin
    role = make_role(app, "editor")
    by_name = client.simulate_get(roles_url(app, "/editor"), headers=headers).json["data"]
    by_id = client.simulate_get(roles_url(app, "/" + role["_id"].upper()), headers=headers).json["data"]
    assert by_name["id"] == by_id["id"] == role["_id"]


@pytest.mark.parametrize("ref", ["0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61", "missing"])
def test_get_unknown_role_is_404_resource_not_found(client, admin, ref):
    app, headers = admin
    assert_error(client.simulate_get(roles_url(app, "/" + ref), headers=headers), 404, "RESOURCE_NOT_FOUND")


def test_another_applications_role_is_not_found(client, admin, make_application, make_role):
    app, headers = admin
    foreign = make_role(make_application(), "foreign")
    for ref in (foreign["_id"], "foreign"):
        assert_error(client.simulate_get(roles_url(app, "/" + ref), headers=headers), 404, "RESOURCE_NOT_FOUND")
        assert_error(client.simulate_delete(roles_url(app, "/" + ref), headers=headers), 404, "RESOURCE_NOT_FOUND")


# --- update ------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_update_changes_fields_and_keeps_the_name(client, ctx, clock, admin, make_role, method):
    app, headers = admin
    role = make_role(app, "editor", ["posts:read"])
    clock.advance(5)
    mark = ctx.events.head()
    response = client.simulate_request(method, roles_url(app, "/" + role["_id"]), headers=headers,
                                       json={"display_name": "Chief Editor", "description": "Edits"})
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert set(data) == ROLE_KEYS
    assert data["name"] == "editor" and data["display_name"] == "Chief Editor" and data["description"] == "Edits"
    assert data["permissions"] == ["posts:read"] and data["permissions_count"] == 1
    assert data["updated_at"] > data["created_at"]
    event = events_of(ctx, "role.updated")[-1]
    assert event["data"]["changes"] == ["description", "display_name"]
    assert event["data"]["before"] == {"description": role.get("description"), "display_name": role["display_name"]}
    assert event["data"]["after"] == {"description": "Edits", "display_name": "Chief Editor"}
    assert event["user_ids"] == []  # a display change changes no answer
    assert events_after(ctx, "permission.granted", mark) == [] and events_after(ctx, "permission.revoked", mark) == []


def test_replacing_permissions_emits_the_set_difference_to_holders(client, ctx, admin, make_role, stored_user,
                                                                   assign_role):
    app, headers = admin
    role = make_role(app, "editor", ["posts:read", "posts:write", "posts:delete"])
    alice, bob = stored_user(app), stored_user(app)
    assign_role(app, alice, role)
    assign_role(app, bob, role, scope="org:1")
    mark = ctx.events.head()
    response = client.simulate_patch(roles_url(app, "/editor"), headers=headers,
                                     json={"permissions": ["posts:read", "comments:read", "comments:write"]})
    assert response.status_code == 200
    assert response.json["data"]["permissions"] == ["posts:read", "comments:read", "comments:write"]
    assert response.json["data"]["permissions_count"] == 3
    holders = sorted([alice["_id"], bob["_id"]])
    granted = events_after(ctx, "permission.granted", mark)
    revoked = events_after(ctx, "permission.revoked", mark)
    assert [e["data"]["permission"] for e in granted] == ["comments:read", "comments:write"]
    assert [e["data"]["permission"] for e in revoked] == ["posts:write", "posts:delete"]
    assert all(sorted(e["user_ids"]) == holders for e in granted + revoked)
    updated = events_of(ctx, "role.updated")[-1]
    assert sorted(updated["user_ids"]) == holders
    assert response.headers["X-Iamgate-Revision"] == str(updated["seq"])
    names = {p["name"] for p in ctx.store["permissions"].find({"app_id": app["_id"]})}
    assert {"comments:read", "comments:write"} <= names


def test_update_accepts_the_unchanged_name_but_not_a_new_one(client, ctx, admin, make_role):
    app, headers = admin
    role = make_role(app, "editor", display_name="Editor")
    url = roles_url(app, "/" + role["_id"])
    ok = client.simulate_put(url, headers=headers,
                             json={"name": "editor", "display_name": "E", "is_system_role": False})
    assert ok.status_code == 200
    error = assert_error(client.simulate_put(url, headers=headers, json={"name": "renamed", "display_name": "X"}),
                         400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == ["name"]
    assert_error(client.simulate_put(url, headers=headers, json={"is_system_role": True}), 400,
                 "VALIDATION_INVALID_FORMAT")
    stored = ctx.store["roles"].find_one({"_id": role["_id"]})
    assert (stored["name"], stored["display_name"], stored["is_system_role"]) == ("editor", "E", False)


def test_an_invalid_update_changes_nothing(client, ctx, admin, make_role):
    app, headers = admin
    role = make_role(app, "editor", ["posts:read"])
    response = client.simulate_put(roles_url(app, "/editor"), headers=headers,
                                   json={"display_name": "New", "permissions": ["posts:read", "oops"]})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert_error(client.simulate_put(roles_url(app, "/editor"), headers=headers, json={"permissions": []}), 400,
                 "VALIDATION_INVALID_FORMAT")
    stored = ctx.store["roles"].find_one({"_id": role["_id"]})
    assert stored["display_name"] == "A role" and stored["permissions"] == ["posts:read"]
    assert "X-Iamgate-Revision" not in response.headers


def test_an_empty_update_returns_the_role_unchanged(client, ctx, admin, make_role):
    app, headers = admin
    make_role(app, "editor")
    before = ctx.events.head()
    response = client.simulate_patch(roles_url(app, "/editor"), headers=headers, json={})
    assert response.status_code == 200 and response.json["data"]["name"] == "editor"
    assert ctx.events.head() == before and "X-Iamgate-Revision" not in response.headers


def test_a_system_role_cannot_be_updated_or_deleted(client, ctx, admin, make_role):
    app, headers = admin
    role = make_role(app, "owner", ["*:*"], is_system_role=True)
    url = roles_url(app, "/" + role["_id"])
    for method in ("PUT", "PATCH"):
        assert_error(client.simulate_request(method, url, headers=headers, json={"display_name": "x"}), 403,
                     "ROLE_IS_SYSTEM")
    assert_error(client.simulate_delete(url, headers=headers), 403, "ROLE_IS_SYSTEM")
    stored = ctx.store["roles"].find_one({"_id": role["_id"]})
    assert stored is not None and stored["display_name"] == "A role"


def test_update_unknown_role_is_404(client, admin):
    app, headers = admin
    assert_error(client.simulate_put(roles_url(app, "/ghost"), headers=headers, json={"display_name": "x"}), 404,
                 "RESOURCE_NOT_FOUND")


def test_concurrent_updates_do_not_lose_permission_events(ctx, application, make_role, monkeypatch):
    """A compare-and-set on the role's version: the loser re-reads and reports its own diff."""
    role = make_role(application, "editor", ["a:read"])
    store = ctx.roles.store
    original = store.update_role
    raced = []

    def racing_update(app_id, role_id, version, changes):
        if not raced:
            raced.append(True)
            original(app_id, role_id, version, {"permissions": ["a:read", "b:read"], "updated_at": ctx.clock()})
        return original(app_id, role_id, version, changes)

    monkeypatch.setattr(store, "update_role", racing_update)
    mark = ctx.events.head()
    updated = ctx.roles.update(application["_id"], "editor", {"permissions": ["a:read", "c:read"]})
    assert updated["permissions"] == ["a:read", "c:read"] and updated["version"] == 3
    assert [e["data"]["permission"] for e in events_after(ctx, "permission.revoked", mark)] == ["b:read"]
    assert [e["data"]["permission"] for e in events_after(ctx, "permission.granted", mark)] == ["c:read"]
    assert role["_id"] == updated["_id"]


# --- delete ------------------------------------------------------------------------------------


def test_delete_removes_the_role(client, ctx, admin, make_role):
    app, headers = admin
    role = make_role(app, "editor")
    response = client.simulate_delete(roles_url(app, "/editor"), headers=headers)
    assert response.status_code == 204 and response.text == ""
    assert ctx.store["roles"].find_one({"_id": role["_id"]}) is None
    event = events_of(ctx, "role.deleted")[-1]
    assert event["data"] == {"role_id": role["_id"], "name": "editor"}
    assert response.headers["X-Iamgate-Revision"] == str(event["seq"])
    assert_error(client.simulate_delete(roles_url(app, "/editor"), headers=headers), 404, "RESOURCE_NOT_FOUND")


def test_an_assigned_role_cannot_be_deleted(client, ctx, admin, make_role, stored_user, assign_role):
    app, headers = admin
    role = make_role(app, "editor")
    assign_role(app, stored_user(app), role, scope="org:1")
    error = assert_error(client.simulate_delete(roles_url(app, "/editor"), headers=headers), 409, "ROLE_IN_USE")
    assert error["details"]["role_id"] == role["_id"]
    assert ctx.store["roles"].find_one({"_id": role["_id"]}) is not None


def test_expired_assignments_and_deleted_users_do_not_keep_a_role_in_use(client, ctx, clock, admin, make_role,
                                                                        stored_user, assign_role):
    app, headers = admin
    role = make_role(app, "editor")
    assign_role(app, stored_user(app), role, expires_at=clock() + timedelta(seconds=30))
    gone = stored_user(app)
    assign_role(app, gone, role)
    ctx.store["users"].update_one({"_id": gone["_id"]}, {"$set": {"status": "deleted"}})
    assert_error(client.simulate_delete(roles_url(app, "/editor"), headers=headers), 409, "ROLE_IN_USE")
    clock.advance(30)
    assert client.simulate_delete(roles_url(app, "/editor"), headers=headers).status_code == 204
    assert ctx.store["role_assignments"].count_documents({"role_id": role["_id"]}) == 0


def test_a_suspended_holder_keeps_a_role_in_use(client, ctx, admin, make_role, stored_user, assign_role):
    app, headers = admin
    role = make_role(app, "editor")
    assign_role(app, stored_user(app, status="suspended"), role)
    assert_error(client.simulate_delete(roles_url(app, "/editor"), headers=headers), 409, "ROLE_IN_USE")
