"""V1/users/{userId}/attributes: GET, PUT {key}, DELETE {key}; limits, events, revisions."""
from __future__ import annotations

import pytest

from shared.ids import new_id
from tests.conftest import assert_error, bearer, events_of, in_parallel


@pytest.fixture
def user(application, stored_user):
    return stored_user(application)


def test_put_get_delete(abac, ctx, user):
    url = f"/users/{user['_id']}/attributes"
    assert abac.request("GET", url).json == {"data": {}}
    response = abac.request("PUT", f"{url}/department", json={"value": "sales"})
    assert response.status_code == 200
    assert response.json == {"data": {"key": "department", "value": "sales"}}
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()
    abac.set(user["_id"], "level", 3)
    abac.set(user["_id"], "groups", ["a", "b", 1, True, None])
    abac.set(user["_id"], "manager", None)
    assert abac.request("GET", url).json["data"] == {"department": "sales", "level": 3,
                                                     "groups": ["a", "b", 1, True, None], "manager": None}
    abac.set(user["_id"], "level", 4.5)
    assert abac.request("GET", url).json["data"]["level"] == 4.5

    response = abac.request("DELETE", f"{url}/level")
    assert response.status_code == 204 and not response.content
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()
    assert "level" not in abac.request("GET", url).json["data"]
    error = assert_error(abac.request("DELETE", f"{url}/level"), 404, "ATTRIBUTE_NOT_FOUND")
    assert error["details"] == {"user_id": user["_id"], "key": "level"}


def test_attributes_are_what_checks_read(abac, ctx, user):
    abac.set(user["_id"], "team", "red")
    grants = ctx.roles.grants(abac.app["_id"], user["_id"])
    assert dict(grants.attributes) == {"team": "red"}


def test_dotted_keys_are_levels_that_conditions_read(abac, ctx, user):
    abac.set(user["_id"], "org.unit", "emea")
    abac.set(user["_id"], "org.cost_center", 7)
    url = f"/users/{user['_id']}/attributes"
    assert abac.request("GET", url).json["data"] == {"org.unit": "emea", "org.cost_center": 7}
    assert dict(ctx.roles.grants(abac.app["_id"], user["_id"]).attributes) == {"org": {"unit": "emea",
                                                                                       "cost_center": 7}}
    error = assert_error(abac.request("PUT", f"{url}/org", json={"value": 1}), 409, "ATTRIBUTE_KEY_CONFLICT")
    assert error["details"]["conflicts_with"] in ("org.unit", "org.cost_center")
    assert_error(abac.request("PUT", f"{url}/org.unit.x", json={"value": 1}), 409, "ATTRIBUTE_KEY_CONFLICT")
    assert abac.request("DELETE", f"{url}/org").status_code == 404  # not a key: the level of two
    assert abac.request("DELETE", f"{url}/org.unit").status_code == 204
    assert abac.request("DELETE", f"{url}/org.cost_center").status_code == 204
    assert ctx.store["users"].find_one({"_id": user["_id"]})["attributes"] == {}  # emptied levels go
    abac.set(user["_id"], "org", "now a plain key")
    assert abac.request("GET", url).json["data"] == {"org": "now a plain key"}


@pytest.mark.parametrize("key", ["a" * 65, "bad key", "b@d", "a..b", ".a", "a.", "ü"])
def test_bad_keys_are_400(abac, user, key):
    error = assert_error(abac.request("PUT", f"/users/{user['_id']}/attributes/{key}", json={"value": 1}), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert "key" in error["details"]["fields"]


def test_the_longest_key_and_every_allowed_character(abac, user):
    for key in ("k" * 64, "A-z_0.9"):
        abac.set(user["_id"], key, 1)


@pytest.mark.parametrize("body, reason", [
    ({}, "is required"),
    ({"value": {"nested": 1}}, "JSON scalar"),
    ({"value": [[1]]}, "item 0"),
    ({"value": [{"a": 1}]}, "item 0"),
    ({"value": "x" * 1023}, "at most 1024"),
    ({"value": ["x" * 600, "y" * 600]}, "at most 1024"),
    ({"value": 2 ** 70}, "64 bits"),
])
def test_bad_values_are_400(abac, ctx, user, body, reason):
    error = assert_error(abac.request("PUT", f"/users/{user['_id']}/attributes/k", json=body), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert reason in error["details"]["fields"]["value"]
    assert "attributes" not in ctx.store["users"].find_one({"_id": user["_id"]})


def test_a_value_of_exactly_1_kib_is_fine(abac, user):
    abac.set(user["_id"], "k", "x" * 1022)  # 1024 bytes with its quotes


def test_non_finite_numbers_are_refused(abac, user):
    response = abac.request("PUT", f"/users/{user['_id']}/attributes/k", body='{"value": NaN}',
                            headers={**abac.headers, "Content-Type": "application/json"})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


def test_at_most_50_keys(abac, ctx, user):
    for i in range(50):
        abac.set(user["_id"], f"k{i}", i)
    error = assert_error(abac.request("PUT", f"/users/{user['_id']}/attributes/one-more", json={"value": 1}),
                         409, "ATTRIBUTE_LIMIT_EXCEEDED")
    assert error["details"] == {"user_id": user["_id"], "limit": 50}
    abac.set(user["_id"], "k7", "replacing an existing key is fine")
    assert abac.request("DELETE", f"/users/{user['_id']}/attributes/k0").status_code == 204
    abac.set(user["_id"], "one-more", 1)
    assert len(abac.request("GET", f"/users/{user['_id']}/attributes").json["data"]) == 50


def test_the_limit_holds_under_parallel_writes(abac, ctx, user):
    for i in range(45):
        abac.set(user["_id"], f"k{i}", i)
    statuses = in_parallel(12, lambda i: abac.request("PUT", f"/users/{user['_id']}/attributes/new{i}",
                                                      json={"value": i}).status_code)
    assert sorted(statuses) == [200] * 5 + [409] * 7
    assert len(abac.request("GET", f"/users/{user['_id']}/attributes").json["data"]) == 50


def test_unknown_and_deleted_users_are_404(abac, application, stored_user, make_application):
    deleted = stored_user(application, status="deleted")
    suspended = stored_user(application, status="suspended")
    foreign = stored_user(make_application())
    for user_id in (new_id(), "not-a-uuid", deleted["_id"], foreign["_id"]):
        url = f"/users/{user_id}/attributes"
        for response in (abac.request("GET", url), abac.request("PUT", f"{url}/k", json={"value": 1}),
                         abac.request("DELETE", f"{url}/k")):
            error = assert_error(response, 404, "USER_NOT_FOUND")
            assert error["details"] == {"user_id": user_id}
    abac.set(suspended["_id"], "k", 1)  # takes effect when the user is active again


def test_a_user_deleted_after_registration_loses_access(abac, ctx, application, make_user):
    user = make_user(application)
    abac.set(user["id"], "k", 1)
    ctx.store["users"].update_one({"_id": user["id"]}, {"$set": {"status": "deleted"}})
    assert_error(abac.request("GET", f"/users/{user['id']}/attributes"), 404, "USER_NOT_FOUND")


def test_events_name_the_user(abac, ctx, user):
    abac.set(user["_id"], "team", "red")
    event = events_of(ctx, "attribute.set", user["_id"])[-1]
    assert event["subject"] == {"user_id": user["_id"]} and event["user_ids"] == [user["_id"]]
    assert event["data"] == {"user_id": user["_id"], "key": "team", "value": "red"}
    abac.request("DELETE", f"/users/{user['_id']}/attributes/team")
    event = events_of(ctx, "attribute.deleted", user["_id"])[-1]
    assert event["subject"] == {"user_id": user["_id"]} and event["user_ids"] == [user["_id"]]
    assert event["data"] == {"user_id": user["_id"], "key": "team"}


def test_setting_the_same_value_again_emits_nothing_but_answers_a_revision(abac, ctx, user):
    abac.set(user["_id"], "n", 1)
    before = len(events_of(ctx, "attribute.set"))
    response = abac.set(user["_id"], "n", 1)
    assert len(events_of(ctx, "attribute.set")) == before
    assert int(response.headers["X-Iamgate-Revision"]) == ctx.events.head()
    abac.set(user["_id"], "n", True)  # true is not 1
    assert len(events_of(ctx, "attribute.set")) == before + 1


def test_reads_need_policies_read_and_writes_policies_manage(abac, application, make_api_key, user):
    reader = bearer(make_api_key(application, permissions=["policies:read"]))
    url = f"/users/{user['_id']}/attributes"
    assert abac.request("GET", url, headers=reader).status_code == 200
    for response in (abac.request("PUT", f"{url}/k", json={"value": 1}, headers=reader),
                     abac.request("DELETE", f"{url}/k", headers=reader)):
        assert assert_error(response, 403, "FORBIDDEN")["details"] == {"required_permission": "policies:manage"}
    roles_only = bearer(make_api_key(application, permissions=["roles:*"]))
    assert assert_error(abac.request("GET", url, headers=roles_only), 403)["details"] == {
        "required_permission": "policies:read"}


def test_an_end_user_cannot_set_its_own_attributes_without_the_permission(abac, application, token_for, user):
    response = abac.request("PUT", f"/users/{user['_id']}/attributes/role", json={"value": "admin"},
                            headers=bearer(token_for(application, user)))
    assert_error(response, 403, "FORBIDDEN")
