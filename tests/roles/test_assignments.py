"""Role assignments: V1/users/{userId}/roles and V1/users/{userId}/permissions, with scope
and expiry."""
from __future__ import annotations

from datetime import timedelta

import pytest

from shared.timeutil import isoformat
from tests.conftest import assert_error, bearer, events_of

V1 = "/api/v1/applications/{}"
UNKNOWN = "0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61"
ITEM_KEYS = {"role_id", "name", "display_name", "scope", "expires_at", "assigned_at"}


@pytest.fixture
def setup(role_admin, stored_user, make_role):
    app, _, token = role_admin
    return app, bearer(token), stored_user(app), make_role(app, "editor", ["posts:read", "posts:write"],
                                                           display_name="Editor")


def user_url(app, user_id, suffix="/roles"):
    return V1.format(app["_id"]) + f"/users/{user_id}{suffix}"


# --- assign ------------------------------------------------------------------------------------


def test_assign_returns_the_role_assignment(client, ctx, clock, setup):
    app, headers, user, role = setup
    response = client.simulate_post(user_url(app, user["_id"]), headers=headers, json={"role_id": role["_id"]})
    assert response.status_code == 201, response.text
    assert response.json["data"] == {"user_id": user["_id"], "role_id": role["_id"], "scope": None,
                                     "expires_at": None, "assigned_at": isoformat(clock())}
    stored = ctx.store["role_assignments"].find_one({"user_id": user["_id"]})
    assert stored["app_id"] == app["_id"] and stored["role_id"] == role["_id"] and stored["scope"] is None
    event = events_of(ctx, "role.assigned")[-1]
    assert event["user_ids"] == [user["_id"]]
    assert event["subject"] == {"user_id": user["_id"], "role_id": role["_id"]}
    assert event["data"]["role_name"] == "editor"
    assert response.headers["X-Iamgate-Revision"] == str(event["seq"])


def test_assign_with_scope_and_expiry(client, clock, setup):
    app, headers, user, role = setup
    expires = clock() + timedelta(days=1)
    response = client.simulate_post(user_url(app, user["_id"]), headers=headers, json={
        "role_id": role["_id"], "scope": "org:42", "expires_at": expires.isoformat()})
    assert response.status_code == 201
    assert response.json["data"]["scope"] == "org:42"
    assert response.json["data"]["expires_at"] == isoformat(expires)


def test_timestamps_without_offset_are_utc(client, clock, setup):
    app, headers, user, role = setup
    expires = (clock() + timedelta(hours=1)).replace(tzinfo=None, microsecond=0)
    response = client.simulate_post(user_url(app, user["_id"]), headers=headers,
                                     json={"role_id": role["_id"], "expires_at": expires.isoformat()})
    assert response.json["data"]["expires_at"] == expires.isoformat() + ".000+00:00"


@pytest.mark.parametrize("body, field", [
    ({}, "role_id"),
    ({"role_id": "not-a-uuid"}, "role_id"),
    ({"role_id": 7}, "role_id"),
    ({"role_id": "{role}", "scope": ""}, "scope"),
    ({"role_id": "{role}", "scope": 5}, "scope"),
    ({"role_id": "{role}", "scope": "x" * 256}, "scope"),
    ({"role_id": "{role}", "scope": "a\nb"}, "scope"),
    ({"role_id": "{role}", "expires_at": "tomorrow"}, "expires_at"),
    ({"role_id": "{role}", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
])
def test_invalid_assignment_is_400(client, ctx, setup, body, field):
    app, headers, user, role = setup
    body = {k: (role["_id"] if v == "{role}" else v) for k, v in body.items()}
    error = assert_error(client.simulate_post(user_url(app, user["_id"]), headers=headers, json=body), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 0


def test_expires_at_equal_to_now_is_not_in_the_future(client, clock, setup):
    app, headers, user, role = setup
    response = client.simulate_post(user_url(app, user["_id"]), headers=headers,
                                     json={"role_id": role["_id"], "expires_at": clock().isoformat()})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


def test_several_invalid_fields_are_multiple_errors(client, setup):
    app, headers, user, _ = setup
    response = client.simulate_post(user_url(app, user["_id"]), headers=headers,
                                     json={"role_id": "x", "expires_at": "never"})
    assert_error(response, 400, "VALIDATION_MULTIPLE_ERRORS")


def test_unknown_role_is_404_resource_not_found(client, setup, make_application, make_role):
    app, headers, user, _ = setup
    foreign = make_role(make_application(), "foreign")
    for role_id in (UNKNOWN, foreign["_id"]):
        response = client.simulate_post(user_url(app, user["_id"]), headers=headers, json={"role_id": role_id})
        assert_error(response, 404, "RESOURCE_NOT_FOUND")


def test_unknown_deleted_or_foreign_user_is_404_user_not_found(client, ctx, setup, stored_user, make_application):
    app, headers, _, role = setup
    deleted = stored_user(app, status="deleted")
    foreign = stored_user(make_application())
    for user_id in (UNKNOWN, "nope", deleted["_id"], foreign["_id"]):
        for method, suffix, body in (("POST", "/roles", {"role_id": role["_id"]}), ("GET", "/roles", None),
                                     ("GET", "/permissions", None), ("DELETE", f"/roles/{role['_id']}", None)):
            response = client.simulate_request(method, user_url(app, user_id, suffix), headers=headers, json=body)
            assert_error(response, 404, "USER_NOT_FOUND")
    assert ctx.store["role_assignments"].count_documents({"role_id": role["_id"]}) == 0


def test_a_suspended_user_can_be_given_roles(client, setup, stored_user):
    app, headers, _, role = setup
    suspended = stored_user(app, status="suspended")
    response = client.simulate_post(user_url(app, suspended["_id"]), headers=headers, json={"role_id": role["_id"]})
    assert response.status_code == 201


def test_same_role_and_scope_twice_is_409(client, ctx, setup):
    app, headers, user, role = setup
    url = user_url(app, user["_id"])
    assert client.simulate_post(url, headers=headers, json={"role_id": role["_id"]}).status_code == 201
    assert client.simulate_post(url, headers=headers, json={"role_id": role["_id"], "scope": "a"}).status_code == 201
    assert client.simulate_post(url, headers=headers, json={"role_id": role["_id"], "scope": "b"}).status_code == 201
    for scope in (None, "a"):
        error = assert_error(client.simulate_post(url, headers=headers, json={"role_id": role["_id"], "scope": scope}),
                             409, "AUTHZ_ROLE_ALREADY_ASSIGNED")
        assert error["details"]["scope"] == scope
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 3


def test_an_expired_assignment_can_be_assigned_again(client, ctx, clock, setup):
    app, headers, user, role = setup
    url = user_url(app, user["_id"])
    expires = (clock() + timedelta(seconds=60)).isoformat()
    client.simulate_post(url, headers=headers, json={"role_id": role["_id"], "expires_at": expires})
    assert_error(client.simulate_post(url, headers=headers, json={"role_id": role["_id"]}), 409,
                 "AUTHZ_ROLE_ALREADY_ASSIGNED")
    clock.advance(60)
    response = client.simulate_post(url, headers=headers, json={"role_id": role["_id"]})
    assert response.status_code == 201
    assert response.json["data"]["expires_at"] is None
    assert response.json["data"]["assigned_at"] == isoformat(clock())
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 1


def test_an_assignment_racing_the_roles_deletion_undoes_itself(client, ctx, setup, monkeypatch):
    app, headers, user, role = setup
    store = ctx.roles.store
    original = store.insert_assignment

    def insert_then_lose_the_role(doc, now):
        saved = original(doc, now)
        ctx.store["roles"].delete_one({"_id": role["_id"]})  # a concurrent DELETE won
        return saved

    monkeypatch.setattr(store, "insert_assignment", insert_then_lose_the_role)
    response = client.simulate_post(user_url(app, user["_id"]), headers=headers, json={"role_id": role["_id"]})
    assert_error(response, 404, "RESOURCE_NOT_FOUND")
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 0
    assert events_of(ctx, "role.assigned")[-1]["user_ids"] != [user["_id"]]


# --- list ----------------------------------------------------------------------------------------


def test_list_returns_items_user_id_and_scope(client, clock, setup, make_role, assign_role):
    app, headers, user, role = setup
    viewer = make_role(app, "viewer", display_name="Viewer")
    assign_role(app, user, role)
    clock.advance(1)
    assign_role(app, user, viewer, scope="org:1", expires_at=clock() + timedelta(hours=1))
    body = client.simulate_get(user_url(app, user["_id"]), headers=headers).json
    assert set(body) == {"data", "user_id", "scope"}
    assert body["user_id"] == user["_id"] and body["scope"] is None
    assert [set(item) for item in body["data"]] == [ITEM_KEYS, ITEM_KEYS]
    first, second = body["data"]
    assert (first["role_id"], first["name"], first["display_name"], first["scope"], first["expires_at"]) == (
        role["_id"], "editor", "Editor", None, None)
    assert (second["name"], second["scope"]) == ("viewer", "org:1")
    assert second["expires_at"] == isoformat(clock() + timedelta(hours=1))
    assert second["assigned_at"] == isoformat(clock())


def test_list_with_scope_returns_exactly_that_scope(client, setup, make_role, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role)
    assign_role(app, user, role, scope="org:1")
    assign_role(app, user, make_role(app, "viewer"), scope="org:2")
    body = client.simulate_get(user_url(app, user["_id"]), params={"scope": "org:1"}, headers=headers).json
    assert body["scope"] == "org:1"
    assert [(i["name"], i["scope"]) for i in body["data"]] == [("editor", "org:1")]
    nothing = client.simulate_get(user_url(app, user["_id"]), params={"scope": "org:9"}, headers=headers).json
    assert nothing["data"] == []


def test_expired_assignments_disappear_from_the_list(client, clock, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role, expires_at=clock() + timedelta(seconds=10))
    assert len(client.simulate_get(user_url(app, user["_id"]), headers=headers).json["data"]) == 1
    clock.advance(10)
    assert client.simulate_get(user_url(app, user["_id"]), headers=headers).json["data"] == []


def test_list_of_a_user_without_roles_is_empty(client, setup):
    app, headers, user, _ = setup
    assert client.simulate_get(user_url(app, user["_id"]), headers=headers).json == {
        "data": [], "user_id": user["_id"], "scope": None}


# --- remove --------------------------------------------------------------------------------------


def test_remove_the_unscoped_assignment(client, ctx, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role)
    assign_role(app, user, role, scope="org:1")
    response = client.simulate_delete(user_url(app, user["_id"], f"/roles/{role['_id']}"), headers=headers)
    assert response.status_code == 204
    left = list(ctx.store["role_assignments"].find({"user_id": user["_id"]}))
    assert [a["scope"] for a in left] == ["org:1"]
    event = events_of(ctx, "role.removed")[-1]
    assert event["user_ids"] == [user["_id"]]
    assert event["data"] == {"user_id": user["_id"], "role_id": role["_id"], "role_name": "editor", "scope": None}
    assert response.headers["X-Iamgate-Revision"] == str(event["seq"])


def test_a_scoped_assignment_needs_its_scope(client, ctx, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role, scope="org:1")
    url = user_url(app, user["_id"], f"/roles/{role['_id']}")
    assert_error(client.simulate_delete(url, headers=headers), 404, "AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND")
    assert_error(client.simulate_delete(url, params={"scope": "org:2"}, headers=headers), 404,
                 "AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND")
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 1
    assert client.simulate_delete(url, params={"scope": "org:1"}, headers=headers).status_code == 204
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 0


def test_remove_by_role_name(client, ctx, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role)
    assert client.simulate_delete(user_url(app, user["_id"], "/roles/editor"), headers=headers).status_code == 204
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 0


@pytest.mark.parametrize("role_ref", [UNKNOWN, "ghost"])
def test_remove_without_such_assignment_is_404(client, setup, role_ref):
    app, headers, user, _ = setup
    assert_error(client.simulate_delete(user_url(app, user["_id"], f"/roles/{role_ref}"), headers=headers), 404,
                 "AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND")


def test_an_expired_assignment_is_already_gone(client, ctx, clock, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role, expires_at=clock() + timedelta(seconds=5))
    clock.advance(5)
    before = ctx.events.head()
    assert_error(client.simulate_delete(user_url(app, user["_id"], f"/roles/{role['_id']}"), headers=headers), 404,
                 "AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND")
    assert ctx.events.head() == before
    assert ctx.store["role_assignments"].count_documents({"user_id": user["_id"]}) == 0  # swept


# --- effective permissions -----------------------------------------------------------------------


def test_permissions_without_scope_come_from_unscoped_assignments(client, setup, make_role, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role)
    assign_role(app, user, make_role(app, "org-admin", ["org:*"]), scope="org:1")
    response = client.simulate_get(user_url(app, user["_id"], "/permissions"), headers=headers)
    assert response.status_code == 200
    assert response.json["data"] == {"user_id": user["_id"], "scope": None,
                                     "permissions": ["posts:read", "posts:write"],
                                     "roles": [{"id": role["_id"], "name": "editor"}]}


def test_permissions_at_a_scope_include_unscoped_assignments(client, setup, make_role, assign_role):
    app, headers, user, role = setup
    org_admin = make_role(app, "org-admin", ["org:*", "posts:read"])
    assign_role(app, user, role)
    assign_role(app, user, role, scope="org:1")
    assign_role(app, user, org_admin, scope="org:1")
    assign_role(app, user, make_role(app, "other", ["billing:read"]), scope="org:2")
    data = client.simulate_get(user_url(app, user["_id"], "/permissions"), params={"scope": "org:1"},
                               headers=headers).json["data"]
    assert data["scope"] == "org:1"
    assert data["permissions"] == ["org:*", "posts:read", "posts:write"]
    assert data["roles"] == [{"id": role["_id"], "name": "editor"}, {"id": org_admin["_id"], "name": "org-admin"}]


def test_expired_assignments_grant_no_permissions(client, clock, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role, expires_at=clock() + timedelta(minutes=5))
    url = user_url(app, user["_id"], "/permissions")
    assert client.simulate_get(url, headers=headers).json["data"]["permissions"] == ["posts:read", "posts:write"]
    clock.advance(300)
    assert client.simulate_get(url, headers=headers).json["data"] == {
        "user_id": user["_id"], "scope": None, "permissions": [], "roles": []}


def test_a_suspended_user_has_no_effective_permissions(client, ctx, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role)
    ctx.store["users"].update_one({"_id": user["_id"]}, {"$set": {"status": "suspended"}})
    data = client.simulate_get(user_url(app, user["_id"], "/permissions"), headers=headers).json["data"]
    assert data["permissions"] == [] and data["roles"] == []
    assert len(client.simulate_get(user_url(app, user["_id"]), headers=headers).json["data"]) == 1


def test_role_changes_show_in_permissions_at_once(client, ctx, setup, assign_role):
    app, headers, user, role = setup
    assign_role(app, user, role)
    ctx.roles.update(app["_id"], "editor", {"permissions": ["posts:*"]})
    data = client.simulate_get(user_url(app, user["_id"], "/permissions"), headers=headers).json["data"]
    assert data["permissions"] == ["posts:*"]


def test_deleting_a_role_with_only_expired_assignments_sweeps_them(ctx, clock, setup, assign_role):
    app, _, user, role = setup
    assign_role(app, user, role, expires_at=clock() + timedelta(seconds=1))
    clock.advance(1)
    ctx.roles.delete(app["_id"], "editor")
    assert ctx.store["role_assignments"].count_documents({"role_id": role["_id"]}) == 0
    assert ctx.roles.user_roles(app["_id"], user["_id"]) == []
