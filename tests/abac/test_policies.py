"""V1/abac/policies: CRUD, validation, permissions, events and revisions."""
from __future__ import annotations

import pytest

from shared.ids import new_id
from tests.conftest import assert_error, bearer, events_of


def test_create_answers_201_with_the_policy(abac, ctx):
    condition = {"op": "eq", "left": {"attr": "resource.owner_id"}, "right": {"attr": "user.id"}}
    response = abac.request("POST", "/abac/policies", json={
        "name": "owners edit", "description": "owners may edit their posts", "effect": "allow",
        "permissions": ["posts:update", "posts:update"], "condition": condition})
    assert response.status_code == 201, response.text
    policy = response.json["data"]
    assert set(policy) == {"id", "name", "description", "effect", "permissions", "condition", "is_active",
                           "created_at", "updated_at"}
    assert policy["name"] == "owners edit" and policy["effect"] == "allow"
    assert policy["permissions"] == ["posts:update"] and policy["condition"] == condition
    assert policy["is_active"] is True
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()
    stored = ctx.store["abac_policies"].find_one({"_id": policy["id"]})
    assert stored["app_id"] == abac.app["_id"]


def test_defaults_condition_none_active_true(abac):
    policy = abac.create(condition=None)
    assert policy["condition"] is None and policy["is_active"] is True and policy["description"] is None


def test_a_duplicate_name_is_409(abac):
    abac.create(name="same")
    response = abac.request("POST", "/abac/policies", json={"name": "same", "effect": "deny",
                                                            "permissions": ["a:b"]})
    error = assert_error(response, 409, "RESOURCE_ALREADY_EXISTS")
    assert error["details"] == {"name": "same"}


def test_the_same_name_in_another_application_is_fine(abac, client, make_application, make_api_key):
    from tests.abac.conftest import Abac

    abac.create(name="same")
    other = make_application()
    Abac(client, other, make_api_key(other)).create(name="same")


@pytest.mark.parametrize("body, field", [
    ({"effect": "allow", "permissions": ["a:b"]}, "name"),
    ({"name": "x", "permissions": ["a:b"]}, "effect"),
    ({"name": "x", "effect": "maybe", "permissions": ["a:b"]}, "effect"),
    ({"name": "x", "effect": "allow"}, "permissions"),
    ({"name": "x", "effect": "allow", "permissions": []}, "permissions"),
    ({"name": "x", "effect": "allow", "permissions": ["posts"]}, "permissions"),
    ({"name": "x", "effect": "allow", "permissions": ["a:b"], "is_active": "yes"}, "is_active"),
    ({"name": "x" * 101, "effect": "allow", "permissions": ["a:b"]}, "name"),
    ({"name": "x", "effect": "allow", "permissions": ["a:b"], "description": "d" * 1001}, "description"),
])
def test_bad_fields_are_400_naming_the_field(abac, body, field):
    error = assert_error(abac.request("POST", "/abac/policies", json=body), 400, "VALIDATION_INVALID_FORMAT")
    assert field in error["details"]["fields"]


def test_a_bad_condition_is_400_with_the_json_path(abac, ctx):
    condition = {"all": [{"op": "eq", "left": {"attr": "context.a"}, "right": {"value": 1}},
                         {"op": "eq", "left": {"attr": "context.b"}, "right": {"value": 1}},
                         {"op": "equals", "left": {"attr": "context.c"}, "right": {"value": 1}}]}
    response = abac.request("POST", "/abac/policies", json={"name": "x", "effect": "allow",
                                                            "permissions": ["a:b"], "condition": condition})
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert error["details"]["path"] == "condition.all[2].op"
    assert "unknown operator 'equals'" in error["details"]["fields"]["condition.all[2].op"]
    assert error["message"].startswith("condition.all[2].op: unknown operator 'equals'; use one of eq")
    assert ctx.store["abac_policies"].count_documents({}) == 0


def test_several_condition_problems_are_still_one_format_error(abac):
    condition = {"any": [{"op": "in", "left": {"attr": "context.a"}, "right": {"value": "x"}},
                         {"op": "eq", "left": {"attr": "session.a"}, "right": {"value": 1}}]}
    error = assert_error(abac.request("POST", "/abac/policies", json={
        "name": "x", "effect": "allow", "permissions": ["a:b"], "condition": condition}), 400,
        "VALIDATION_INVALID_FORMAT")
    assert set(error["details"]["fields"]) == {"condition.any[0].right.value", "condition.any[1].left.attr"}


def test_a_bad_condition_beside_a_bad_field_lists_both(abac):
    error = assert_error(abac.request("POST", "/abac/policies", json={
        "name": "x", "effect": "nope", "permissions": ["a:b"], "condition": {"op": "x"}}), 400,
        "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"effect", "condition.op"}


def test_get_and_404(abac):
    policy = abac.create()
    response = abac.request("GET", f"/abac/policies/{policy['id']}")
    assert response.status_code == 200 and response.json["data"] == policy
    for unknown in (new_id(), "not-a-uuid"):
        error = assert_error(abac.request("GET", f"/abac/policies/{unknown}"), 404, "POLICY_NOT_FOUND")
        assert error["details"] == {"policy_id": unknown}


def test_a_policy_of_another_application_is_404(abac, client, make_application, make_api_key):
    from tests.abac.conftest import Abac

    other = make_application()
    foreign = Abac(client, other, make_api_key(other)).create()
    assert_error(abac.request("GET", f"/abac/policies/{foreign['id']}"), 404, "POLICY_NOT_FOUND")
    assert_error(abac.request("PUT", f"/abac/policies/{foreign['id']}", json={"is_active": False}), 404)
    assert_error(abac.request("DELETE", f"/abac/policies/{foreign['id']}"), 404)


def test_put_changes_any_subset(abac, ctx, clock):
    policy = abac.create(name="p", effect="allow", permissions=["posts:read"])
    clock.advance(5)
    condition = {"op": "exists", "left": {"attr": "user.attributes.team"}}
    response = abac.request("PUT", f"/abac/policies/{policy['id']}", json={"condition": condition,
                                                                         "is_active": False})
    assert response.status_code == 200, response.text
    updated = response.json["data"]
    assert updated["condition"] == condition and updated["is_active"] is False
    assert updated["name"] == "p" and updated["permissions"] == ["posts:read"]
    assert updated["updated_at"] > policy["updated_at"] and updated["created_at"] == policy["created_at"]
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()
    event = events_of(ctx, "policy.updated")[-1]
    assert event["data"]["changes"] == ["condition", "is_active"]
    # The audit record says what the policy was and became (docs/audit.md, "Fields").
    assert event["data"]["before"] == {"condition": policy["condition"], "is_active": True}
    assert event["data"]["after"] == {"condition": condition, "is_active": False}
    assert event["subject"] == {"policy_id": policy["id"]}
    for body in ({"name": "renamed"}, {"effect": "deny"}, {"permissions": ["a:b", "c:*"]}, {"condition": None},
                 {"description": "why"}):
        response = abac.request("PUT", f"/abac/policies/{policy['id']}", json=body)
        assert response.status_code == 200, response.text
        key, value = next(iter(body.items()))
        assert response.json["data"][key] == value


def test_put_that_changes_nothing_emits_nothing_but_answers_a_revision(abac, ctx):
    policy = abac.create(name="p")
    before = len(events_of(ctx, "policy.updated"))
    response = abac.request("PUT", f"/abac/policies/{policy['id']}", json={"name": "p", "is_active": True})
    assert response.status_code == 200
    assert len(events_of(ctx, "policy.updated")) == before
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()


@pytest.mark.parametrize("before, after", [(0, False), (1, True), (False, 0), (1, 1.0)])
def test_a_condition_literal_changed_to_one_python_calls_equal_is_stored(abac, ctx, application, stored_user,
                                                                         make_role, assign_role, before, after):
    """``0`` and ``false`` (``1`` and ``true``, ``1`` and ``1.0``) are different values
    as JSON and to the evaluator (``eq`` says true is not 1), though Python's ``==``
    calls them equal: a PUT replacing one with the other is a change, stored and
    emitted, so an administrator fixing a deny's literal gets the deny."""
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["posts:delete"]))
    condition = {"op": "eq", "left": {"attr": "context.mfa"}, "right": {"value": before}}
    policy = abac.create(name="deny", effect="deny", permissions=["posts:delete"], condition=condition)
    updates = len(events_of(ctx, "policy.updated"))

    response = abac.request("PUT", f"/abac/policies/{policy['id']}",
                            json={"condition": {**condition, "right": {"value": after}}})

    assert response.status_code == 200, response.text
    stored = abac.request("GET", f"/abac/policies/{policy['id']}").json["data"]["condition"]["right"]["value"]
    assert stored == after and type(stored) is type(after)
    assert len(events_of(ctx, "policy.updated")) == updates + 1
    assert abac.check(user["_id"], "posts:delete", context={"mfa": after})["allowed"] is False


def test_put_to_a_taken_name_is_409_and_changes_nothing(abac):
    abac.create(name="a")
    second = abac.create(name="b")
    assert_error(abac.request("PUT", f"/abac/policies/{second['id']}", json={"name": "a", "effect": "deny"}), 409,
                 "RESOURCE_ALREADY_EXISTS")
    assert abac.request("GET", f"/abac/policies/{second['id']}").json["data"]["effect"] == "allow"


def test_put_validates_the_condition_too(abac):
    policy = abac.create()
    error = assert_error(abac.request("PUT", f"/abac/policies/{policy['id']}", json={
        "condition": {"not": {"op": "ip_in_cidr", "left": {"attr": "context.ip"}, "right": {"value": "x/99"}}}}),
        400, "VALIDATION_INVALID_FORMAT")
    assert error["details"]["path"] == "condition.not.right.value"


def test_delete(abac, ctx):
    policy = abac.create()
    response = abac.request("DELETE", f"/abac/policies/{policy['id']}")
    assert response.status_code == 204
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()
    assert_error(abac.request("GET", f"/abac/policies/{policy['id']}"), 404, "POLICY_NOT_FOUND")
    assert_error(abac.request("DELETE", f"/abac/policies/{policy['id']}"), 404, "POLICY_NOT_FOUND")
    event = events_of(ctx, "policy.deleted")[-1]
    assert event["data"] == {"policy_id": policy["id"], "name": policy["name"]}


def test_events_of_policies(abac, ctx):
    policy = abac.create(name="p", effect="deny", permissions=["posts:delete"])
    created = events_of(ctx, "policy.created")[-1]
    assert created["app_id"] == abac.app["_id"]
    assert created["subject"] == {"policy_id": policy["id"]}
    assert created["data"] == {"policy_id": policy["id"], "name": "p", "effect": "deny",
                               "permissions": ["posts:delete"], "is_active": True}
    assert created["user_ids"] == []  # a policy applies to every user: the app's policies are dropped


def test_list_is_paginated_and_filtered(abac):
    first = abac.create(name="a", permissions=["posts:read"])
    abac.create(name="b", permissions=["posts:*"], is_active=False)
    abac.create(name="c", permissions=["*:delete"])
    abac.create(name="d", permissions=["comments:read", "*:*"])
    abac.create(name="e", permissions=["comments:read"])

    def names(**params):
        response = abac.request("GET", "/abac/policies", params=params)
        assert response.status_code == 200, response.text
        return [p["name"] for p in response.json["data"]], response.json

    listed, page = names()
    assert listed == ["a", "b", "c", "d", "e"]
    assert {k: page[k] for k in ("current_page", "last_page", "per_page", "total")} == {
        "current_page": 1, "last_page": 1, "per_page": 15, "total": 5}
    assert page["data"][0] == first
    assert names(is_active="false")[0] == ["b"]
    assert names(is_active="true")[0] == ["a", "c", "d", "e"]
    assert names(permission="posts:read")[0] == ["a", "b", "d"]
    assert names(permission="posts:delete")[0] == ["b", "c", "d"]
    assert names(permission="posts:read", is_active="true")[0] == ["a", "d"]
    listed, page = names(per_page=2, page=3)
    assert listed == ["e"] and page["last_page"] == 3 and page["total"] == 5


def test_the_list_of_a_wildcard_permission_has_the_denies_a_check_of_it_evaluates(abac):
    """A check of posts:* asks about every action on posts: a deny of one of them bears on
    it (an allow of one does not)."""
    for name, effect, permission in (("allow-read", "allow", "posts:read"),
                                     ("deny-delete", "deny", "posts:delete"),
                                     ("deny-any-delete", "deny", "*:delete"),
                                     ("deny-comments", "deny", "comments:read"),
                                     ("allow-posts", "allow", "posts:*")):
        abac.create(name=name, effect=effect, permissions=[permission])

    def names(permission):
        response = abac.request("GET", "/abac/policies", params={"permission": permission})
        assert response.status_code == 200, response.text
        return [policy["name"] for policy in response.json["data"]], response.json["total"]

    assert names("posts:*") == (["allow-posts", "deny-any-delete", "deny-delete"], 3)
    assert names("*:read") == (["deny-comments"], 1)  # an allow of posts:read does not cover it
    assert names("*:*") == (["deny-any-delete", "deny-comments", "deny-delete"], 3)
    assert names("posts:delete") == (["allow-posts", "deny-any-delete", "deny-delete"], 3)


@pytest.mark.parametrize("params, field", [({"is_active": "maybe"}, "is_active"),
                                           ({"permission": "posts"}, "permission"),
                                           ({"per_page": "101"}, "per_page"), ({"page": "0"}, "page")])
def test_bad_list_parameters_are_400(abac, params, field):
    error = assert_error(abac.request("GET", "/abac/policies", params=params), 400, "VALIDATION_INVALID_FORMAT")
    assert field in error["details"]["fields"]


def test_reads_need_policies_read_and_writes_policies_manage(abac, make_api_key, application):
    policy = abac.create()
    reader = bearer(make_api_key(application, permissions=["policies:read"]))
    other = bearer(make_api_key(application, permissions=["roles:manage", "authz:check"]))
    assert abac.request("GET", "/abac/policies", headers=reader).status_code == 200
    assert abac.request("GET", f"/abac/policies/{policy['id']}", headers=reader).status_code == 200
    body = {"name": "x", "effect": "allow", "permissions": ["a:b"]}
    for method, path, kwargs in [("POST", "/abac/policies", {"json": body}),
                                 ("PUT", f"/abac/policies/{policy['id']}", {"json": {"is_active": False}}),
                                 ("DELETE", f"/abac/policies/{policy['id']}", {})]:
        error = assert_error(abac.request(method, path, headers=reader, **kwargs), 403, "FORBIDDEN")
        assert error["details"] == {"required_permission": "policies:manage"}
    error = assert_error(abac.request("GET", "/abac/policies", headers=other), 403, "FORBIDDEN")
    assert error["details"] == {"required_permission": "policies:read"}
    assert_error(abac.request("GET", "/abac/policies", headers={}), 401, "UNAUTHORIZED")


def test_end_users_pass_through_their_roles(abac, application, stored_user, make_role, assign_role, token_for):
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["policies:*"]))
    headers = bearer(token_for(application, user))
    body = {"name": "by a user", "effect": "allow", "permissions": ["a:b"]}
    assert abac.request("POST", "/abac/policies", json=body, headers=headers).status_code == 201
    plain = bearer(token_for(application, stored_user(application)))
    assert_error(abac.request("GET", "/abac/policies", headers=plain), 403, "FORBIDDEN")


def test_the_api_key_permission_set_holds_both_permissions():
    from controlplane.apikeys.service import V1_PERMISSIONS

    assert {"policies:read", "policies:manage"} <= set(V1_PERMISSIONS)


def test_routes_are_in_the_openapi_document(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    v1 = "/api/v1/applications/{applicationId}"
    assert set(paths[f"{v1}/abac/policies"]) >= {"get", "post"}
    assert set(paths[f"{v1}/abac/policies/{{policyId}}"]) >= {"get", "put", "delete"}
    assert "post" in paths[f"{v1}/abac/evaluate"]
    assert "get" in paths[f"{v1}/users/{{userId}}/attributes"]
    assert set(paths[f"{v1}/users/{{userId}}/attributes/{{key}}"]) >= {"put", "delete"}
    responses = paths[f"{v1}/abac/policies/{{policyId}}"]["get"]["responses"]
    assert "404" in responses


def test_the_indexes_are_declared_by_the_abac_store_only(ctx):
    indexes = ctx.store["abac_policies"].index_information()
    unique = [i for i in indexes.values() if i.get("unique")]
    assert [list(i["key"]) for i in unique] == [[("app_id", 1), ("name", 1)]]
