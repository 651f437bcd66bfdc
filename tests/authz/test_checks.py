"""V1/authz/check (GET and POST) and V1/authz/check-bulk: shapes, rules and errors."""
from __future__ import annotations

from datetime import timedelta

import pytest

from shared.ids import new_id
from tests.conftest import assert_error, bearer

V1 = "/api/v1/applications/{}"


@pytest.fixture
def checker(application, make_api_key):
    return application, bearer(make_api_key(application, permissions=["authz:check"]))


@pytest.fixture
def subject(application, stored_user, make_role, assign_role):
    user = stored_user(application)
    assign_role(application, user, make_role(application, "editor", ["posts:read", "posts:write"]))
    return user


def get_check(client, app, headers, **params):
    return client.simulate_get(V1.format(app["_id"]) + "/authz/check", params=params, headers=headers)


def post_check(client, app, headers, **body):
    return client.simulate_post(V1.format(app["_id"]) + "/authz/check", json=body, headers=headers)


def bulk(client, app, headers, **body):
    return client.simulate_post(V1.format(app["_id"]) + "/authz/check-bulk", json=body, headers=headers)


def add_policy(ctx, app, effect, permissions, condition=None, is_active=True):
    ctx.store["abac_policies"].insert_one({
        "_id": new_id(), "app_id": app["_id"], "name": f"{effect}-{len(permissions)}", "description": None,
        "effect": effect, "permissions": list(permissions), "condition": condition, "is_active": is_active,
        "created_at": ctx.clock(),
    })
    ctx.events.emit(app["_id"], "policy.created", {})


# --- shapes ------------------------------------------------------------------------------------


def test_get_check_answers_without_data_wrapper(client, checker, subject):
    app, headers = checker
    response = get_check(client, app, headers, user_id=subject["_id"], permission="posts:read")
    assert response.status_code == 200
    assert response.json == {"allowed": True, "permission": "posts:read", "cached": False}
    denied = get_check(client, app, headers, user_id=subject["_id"], permission="posts:delete").json
    assert denied == {"allowed": False, "permission": "posts:delete", "cached": True}


def test_post_check_always_carries_the_abac_fields(client, checker, subject):
    app, headers = checker
    response = post_check(client, app, headers, user_id=subject["_id"], permission="posts:write")
    assert response.json == {"allowed": True, "permission": "posts:write", "cached": False,
                             "abac_evaluated": False, "policies_checked": 0}


def test_bulk_answers_user_id_and_results(client, checker, subject):
    app, headers = checker
    response = bulk(client, app, headers, user_id=subject["_id"],
                    permissions=["posts:read", "posts:delete", "posts:write", "posts:read"])
    assert response.status_code == 200
    assert response.json == {"user_id": subject["_id"],
                             "results": {"posts:read": True, "posts:delete": False, "posts:write": True}}


def test_bulk_of_fifty_is_accepted(client, checker, subject):
    app, headers = checker
    permissions = [f"res{i}:read" for i in range(49)] + ["posts:read"]
    results = bulk(client, app, headers, user_id=subject["_id"], permissions=permissions).json["results"]
    assert len(results) == 50 and results["posts:read"] is True and sum(results.values()) == 1


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize("params, field", [
    ({"permission": "posts:read"}, "user_id"),
    ({"user_id": "u"}, "permission"),
    ({"user_id": "u", "permission": "posts"}, "permission"),
    ({"user_id": "u", "permission": "posts:read:x"}, "permission"),
    ({"user_id": "u", "permission": "posts:re ad"}, "permission"),
    ({"user_id": "u", "permission": "a:b", "min_revision": "soon"}, "min_revision"),
    ({"user_id": "u", "permission": "a:b", "min_revision": "-1"}, "min_revision"),
])
def test_get_check_rejects_bad_parameters(client, checker, params, field):
    app, headers = checker
    error = assert_error(get_check(client, app, headers, **params), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]


@pytest.mark.parametrize("body, field", [
    ({"permission": "posts:read"}, "user_id"),
    ({"user_id": "u", "permission": "nocolon"}, "permission"),
    ({"user_id": "u", "permission": 5}, "permission"),
    ({"user_id": "u", "permission": "a:b", "resource": "doc-1"}, "resource"),
    ({"user_id": "u", "permission": "a:b", "context": []}, "context"),
    ({"user_id": "u", "permission": "a:b", "scope": 3}, "scope"),
    ({"user_id": "u", "permission": "a:b", "min_revision": "1"}, "min_revision"),
    ({"user_id": "u", "permission": "a:b", "resource": {"blob": "x" * 70000}}, "resource"),
])
def test_post_check_rejects_bad_bodies(client, checker, body, field):
    app, headers = checker
    error = assert_error(post_check(client, app, headers, **body), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]


@pytest.mark.parametrize("permissions", [[], [f"p{i}:read" for i in range(51)], ["posts:read", "bad"], "posts:read",
                                         None])
def test_bulk_needs_one_to_fifty_wellformed_permissions(client, checker, permissions):
    app, headers = checker
    body = {"user_id": "u"}
    if permissions is not None:
        body["permissions"] = permissions
    error = assert_error(bulk(client, app, headers, **body), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == ["permissions"]


def test_malformed_json_is_400(client, checker):
    app, headers = checker
    response = client.simulate_post(V1.format(app["_id"]) + "/authz/check", body="{nope",
                                    headers={**headers, "Content-Type": "application/json"})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


# --- rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize("granted, checked, allowed", [
    ("posts:*", "posts:delete", True),
    ("*:read", "comments:read", True),
    ("*:read", "comments:write", False),
    ("*:*", "anything:at-all", True),
    ("posts:read", "posts:*", False),
    ("posts:*", "posts:*", True),
    ("posts:read", "Posts:read", False),
])
def test_wildcards(client, checker, stored_user, make_role, assign_role, granted, checked, allowed):
    app, headers = checker
    user = stored_user(app)
    assign_role(app, user, make_role(app, "wild", [granted]))
    assert get_check(client, app, headers, user_id=user["_id"], permission=checked).json["allowed"] is allowed
    assert post_check(client, app, headers, user_id=user["_id"], permission=checked).json["allowed"] is allowed
    assert bulk(client, app, headers, user_id=user["_id"], permissions=[checked]).json["results"][checked] is allowed


def test_scope_from_query_body_or_context(client, checker, stored_user, make_role, assign_role):
    app, headers = checker
    user = stored_user(app)
    assign_role(app, user, make_role(app, "org-editor", ["docs:write"]), scope="org:1")
    uid = user["_id"]
    assert get_check(client, app, headers, user_id=uid, permission="docs:write").json["allowed"] is False
    assert get_check(client, app, headers, user_id=uid, permission="docs:write", scope="org:2").json["allowed"] is False
    assert get_check(client, app, headers, user_id=uid, permission="docs:write", scope="org:1").json["allowed"] is True
    assert post_check(client, app, headers, user_id=uid, permission="docs:write", scope="org:1").json["allowed"]
    assert post_check(client, app, headers, user_id=uid, permission="docs:write",
                      context={"scope": "org:1"}).json["allowed"] is True
    # An explicit scope wins over context.scope.
    assert post_check(client, app, headers, user_id=uid, permission="docs:write", scope="org:2",
                      context={"scope": "org:1"}).json["allowed"] is False
    results = bulk(client, app, headers, user_id=uid, permissions=["docs:write"], context={"scope": "org:1"}).json
    assert results["results"] == {"docs:write": True}


def test_unscoped_assignments_apply_at_every_scope(client, checker, subject):
    app, headers = checker
    assert get_check(client, app, headers, user_id=subject["_id"], permission="posts:read",
                     scope="org:7").json["allowed"] is True


def test_an_assignment_stops_allowing_when_it_expires_even_from_cache(client, clock, checker, stored_user, make_role,
                                                                       assign_role):
    app, headers = checker
    user = stored_user(app)
    assign_role(app, user, make_role(app, "temp", ["reports:read"]), expires_at=clock() + timedelta(seconds=30))
    first = get_check(client, app, headers, user_id=user["_id"], permission="reports:read").json
    assert first["allowed"] is True
    clock.advance(29)
    assert get_check(client, app, headers, user_id=user["_id"], permission="reports:read").json == {
        "allowed": True, "permission": "reports:read", "cached": True}
    clock.advance(1)
    assert get_check(client, app, headers, user_id=user["_id"], permission="reports:read").json == {
        "allowed": False, "permission": "reports:read", "cached": True}


@pytest.mark.parametrize("user_id", ["0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61", "not-a-uuid"])
def test_an_unknown_user_is_simply_not_allowed(client, checker, user_id):
    app, headers = checker
    assert get_check(client, app, headers, user_id=user_id, permission="posts:read").json["allowed"] is False
    assert post_check(client, app, headers, user_id=user_id, permission="posts:read").json["allowed"] is False
    assert bulk(client, app, headers, user_id=user_id, permissions=["posts:read"]).json == {
        "user_id": user_id, "results": {"posts:read": False}}


@pytest.mark.parametrize("status", ["suspended", "deleted"])
def test_suspended_and_deleted_users_are_not_allowed(client, ctx, checker, subject, status):
    app, headers = checker
    ctx.store["users"].update_one({"_id": subject["_id"]}, {"$set": {"status": status}})
    ctx.events.emit(app["_id"], f"user.{status}", {}, subject={"user_id": subject["_id"]}, user_ids=[subject["_id"]])
    assert get_check(client, app, headers, user_id=subject["_id"], permission="posts:read").json["allowed"] is False
    assert post_check(client, app, headers, user_id=subject["_id"], permission="posts:read").json["allowed"] is False


def test_a_user_of_another_application_is_unknown_here(client, checker, make_application, stored_user, make_role,
                                                       assign_role):
    app, headers = checker
    other = make_application()
    foreign = stored_user(other)
    assign_role(other, foreign, make_role(other, "admin", ["*:*"]))
    assert get_check(client, app, headers, user_id=foreign["_id"], permission="posts:read").json["allowed"] is False


# --- ABAC --------------------------------------------------------------------------------------


def test_a_matching_deny_policy_overrides_rbac(client, ctx, checker, subject):
    app, headers = checker
    add_policy(ctx, app, "deny", ["posts:write"],
               {"op": "eq", "left": {"attr": "resource.locked"}, "right": {"value": True}})
    uid = subject["_id"]
    locked = post_check(client, app, headers, user_id=uid, permission="posts:write", resource={"locked": True}).json
    assert locked == {"allowed": False, "permission": "posts:write", "cached": False, "abac_evaluated": True,
                      "policies_checked": 1}
    unlocked = post_check(client, app, headers, user_id=uid, permission="posts:write", resource={"locked": False}).json
    assert unlocked["allowed"] is True and unlocked["abac_evaluated"] is True
    # GET checks are plain RBAC.
    assert get_check(client, app, headers, user_id=uid, permission="posts:write").json["allowed"] is True
    assert bulk(client, app, headers, user_id=uid, permissions=["posts:write", "posts:read"],
                resource={"locked": True}).json["results"] == {"posts:write": False, "posts:read": True}


def test_an_allow_policy_grants_without_a_role(client, ctx, checker, stored_user):
    app, headers = checker
    user = stored_user(app, attributes={"department": "finance"})
    add_policy(ctx, app, "allow", ["reports:*"],
               {"op": "eq", "left": {"attr": "user.attributes.department"}, "right": {"value": "finance"}})
    add_policy(ctx, app, "allow", ["reports:read"], {"op": "ip_in_cidr", "left": {"attr": "context.ip"},
                                                     "right": {"value": "10.0.0.0/8"}})
    add_policy(ctx, app, "deny", ["reports:read"], is_active=False)
    answer = post_check(client, app, headers, user_id=user["_id"], permission="reports:read",
                        context={"ip": "192.168.1.1"}).json
    assert answer["allowed"] is True and answer["policies_checked"] == 2 and answer["abac_evaluated"] is True
    assert get_check(client, app, headers, user_id=user["_id"], permission="reports:read").json["allowed"] is False


def test_policies_of_another_application_do_not_apply(client, ctx, checker, subject, make_application):
    app, headers = checker
    add_policy(ctx, make_application(), "deny", ["*:*"])
    answer = post_check(client, app, headers, user_id=subject["_id"], permission="posts:read").json
    assert answer["allowed"] is True and answer["policies_checked"] == 0


def test_a_new_policy_applies_at_once(client, ctx, checker, subject):
    app, headers = checker
    assert post_check(client, app, headers, user_id=subject["_id"], permission="posts:read").json["allowed"] is True
    assert post_check(client, app, headers, user_id=subject["_id"], permission="posts:read").json["cached"] is True
    add_policy(ctx, app, "deny", ["posts:read"])
    answer = post_check(client, app, headers, user_id=subject["_id"], permission="posts:read").json
    assert answer["allowed"] is False and answer["cached"] is False
