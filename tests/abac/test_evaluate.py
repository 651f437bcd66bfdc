"""POST V1/abac/evaluate: the dry run, with its trace."""
from __future__ import annotations

from tests.conftest import assert_error, bearer


def evaluate(abac, **body):
    response = abac.request("POST", "/abac/evaluate", json=body)
    assert response.status_code == 200, response.text
    return response.json["data"]


def test_a_denied_check_explains_itself(abac, ctx, application, stored_user, make_role, assign_role):
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["posts:*"]))
    abac.set(user["_id"], "department", "sales")
    office = abac.create(name="office hours", effect="deny", permissions=["posts:delete"],
                         condition={"any": [{"op": "lt", "left": {"attr": "context.hour"}, "right": {"value": 9}},
                                            {"op": "gte", "left": {"attr": "context.hour"}, "right": {"value": 18}}]})
    abac.create(name="unrelated", permissions=["billing:read"])
    events = ctx.events.head()

    out = evaluate(abac, user_id=user["_id"], permission="posts:delete", context={"hour": 20})
    assert ctx.events.head() == events  # a dry run writes nothing
    assert {k: out[k] for k in ("allowed", "permission", "user_id", "user_status", "scope", "rbac_allowed",
                                "abac_evaluated", "policies_checked", "decided_by")} == {
        "allowed": False, "permission": "posts:delete", "user_id": user["_id"], "user_status": "active",
        "scope": None, "rbac_allowed": True, "abac_evaluated": True, "policies_checked": 1,
        "decided_by": "deny_policy"}
    [report] = out["policies"]
    assert report["id"] == office["id"] and report["name"] == "office hours" and report["matched"] is True
    assert report["inline"] is False and report["effect"] == "deny"
    trace = report["trace"]
    assert trace["path"] == "condition" and trace["value"] is True
    assert [c["value"] for c in trace["children"]] == [False, True]
    assert trace["children"][1]["left"] == {"attr": "context.hour", "value": 20}

    out = evaluate(abac, user_id=user["_id"], permission="posts:delete", context={"hour": 10})
    assert out["allowed"] is True and out["decided_by"] == "rbac"


def test_the_answer_is_the_post_checks(abac, application, stored_user):
    user = stored_user(application)
    abac.create(effect="allow", permissions=["docs:read"],
                condition={"op": "eq", "left": {"attr": "resource.owner"}, "right": {"attr": "user.id"}})
    for resource in ({"owner": user["_id"]}, {"owner": "x"}, {}):
        body = {"user_id": user["_id"], "permission": "docs:read", "resource": resource}
        check = abac.check(**body)
        out = evaluate(abac, **body)
        assert (out["allowed"], out["abac_evaluated"], out["policies_checked"]) == (
            check["allowed"], check["abac_evaluated"], check["policies_checked"])
    assert evaluate(abac, user_id=user["_id"], permission="docs:read", resource={"owner": user["_id"]})[
        "decided_by"] == "allow_policy"
    missing = evaluate(abac, user_id=user["_id"], permission="docs:read")
    assert missing["decided_by"] == "no_match"
    assert missing["policies"][0]["trace"]["left"] == {"attr": "resource.owner", "missing": True}


def test_an_inline_policy_is_tried_beside_the_stored_ones(abac, ctx, application, stored_user):
    user = stored_user(application)
    abac.set(user["_id"], "level", 5)
    inline = {"effect": "allow", "permissions": ["reports:*"],
              "condition": {"op": "gte", "left": {"attr": "user.attributes.level"}, "right": {"value": 4}}}
    out = evaluate(abac, user_id=user["_id"], permission="reports:read", policy=inline)
    assert out["allowed"] is True and out["decided_by"] == "allow_policy" and out["policies_checked"] == 1
    assert out["policies"][0] | {"trace": None} == {"id": None, "name": "inline policy", "effect": "allow",
                                                     "inline": True, "matched": True,
                                                     "condition": inline["condition"], "trace": None}
    assert ctx.store["abac_policies"].count_documents({}) == 0
    assert abac.check(user["_id"], "reports:read")["allowed"] is False  # nothing was stored
    inactive = evaluate(abac, user_id=user["_id"], permission="reports:read", policy={**inline, "is_active": False})
    assert inactive["allowed"] is False and inactive["policies"] == []


def test_an_inline_policy_is_validated_like_a_stored_one(abac, application, stored_user):
    user = stored_user(application)
    response = abac.request("POST", "/abac/evaluate", json={
        "user_id": user["_id"], "permission": "a:b",
        "policy": {"effect": "allow", "permissions": ["a:b"], "condition": {"all": [{"op": "between"}]}}})
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert error["details"]["path"] == "policy.condition.all[0].op"
    response = abac.request("POST", "/abac/evaluate", json={"user_id": user["_id"], "permission": "a:b",
                                                            "policy": {"permissions": ["a:b"]}})
    assert "policy.effect" in assert_error(response, 400)["details"]["fields"]


def test_check_body_errors_are_the_checks(abac):
    error = assert_error(abac.request("POST", "/abac/evaluate", json={"permission": "nope"}), 400,
                         "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"user_id", "permission"}


def test_users_who_are_not_active_are_explained(abac, application, stored_user):
    abac.create(effect="allow", permissions=["a:b"])
    suspended = stored_user(application, status="suspended")
    out = evaluate(abac, user_id=suspended["_id"], permission="a:b")
    assert (out["allowed"], out["user_status"], out["decided_by"]) == (False, "suspended", "user_not_active")
    assert evaluate(abac, user_id="nobody", permission="a:b")["user_status"] == "unknown"


def test_the_dry_run_needs_policies_read(abac, application, make_api_key, stored_user):
    user = stored_user(application)
    checker = bearer(make_api_key(application, permissions=["authz:check"]))
    response = abac.request("POST", "/abac/evaluate", json={"user_id": user["_id"], "permission": "a:b"},
                            headers=checker)
    assert assert_error(response, 403)["details"] == {"required_permission": "policies:read"}
