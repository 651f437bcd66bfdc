"""Permission gates of the roles and authz routes, with both credential kinds.

End-user tokens pass through the user's current (unscoped, unexpired) roles, evaluated
live; API keys through the key's own permission list."""
from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import assert_error, bearer

V1 = "/api/v1/applications/{}"

# (method, path suffix, body, permission) of every gated route of the area.
ROUTES = [
    ("GET", "/roles", None, "roles:read"),
    ("POST", "/roles", {"name": "new", "display_name": "New", "permissions": ["a:b"]}, "roles:manage"),
    ("GET", "/roles/target", None, "roles:read"),
    ("PUT", "/roles/target", {"display_name": "x"}, "roles:manage"),
    ("PATCH", "/roles/target", {"display_name": "x"}, "roles:manage"),
    ("DELETE", "/roles/target", None, "roles:manage"),
    ("GET", "/users/{user}/roles", None, "roles:read"),
    ("POST", "/users/{user}/roles", {"role_id": "{role}"}, "roles:manage"),
    ("DELETE", "/users/{user}/roles/{role}", None, "roles:manage"),
    ("GET", "/users/{user}/permissions", None, "roles:read"),
    ("GET", "/authz/check?user_id={user}&permission=a:b", None, "authz:check"),
    ("POST", "/authz/check", {"user_id": "{user}", "permission": "a:b"}, "authz:check"),
    ("POST", "/authz/check-bulk", {"user_id": "{user}", "permissions": ["a:b"]}, "authz:check"),
]


@pytest.fixture
def target(application, stored_user, make_role):
    return stored_user(application), make_role(application, "target", ["a:b"])


def call(client, app, target, route, headers):
    method, suffix, body, _ = route
    user, role = target
    path = (V1.format(app["_id"]) + suffix).replace("{user}", user["_id"]).replace("{role}", role["_id"])
    query = None
    if "?" in path:
        path, query = path.split("?", 1)
    if body is not None:
        body = {k: (v.replace("{user}", user["_id"]).replace("{role}", role["_id"]) if isinstance(v, str) else v)
                for k, v in body.items()}
    return client.simulate_request(method, path, query_string=query, json=body, headers=headers)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_without_a_credential_is_401(client, application, target, route):
    assert_error(call(client, application, target, route, {}), 401, "UNAUTHORIZED")


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_api_key_without_the_permission_is_403_naming_it(client, application, target, make_api_key, route):
    key = make_api_key(application, permissions=["webhooks:manage", "oidc:manage"])
    error = assert_error(call(client, application, target, route, bearer(key)), 403, "FORBIDDEN")
    assert error["details"]["required_permission"] == route[3]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_api_key_with_exactly_the_permission_passes(client, application, target, make_api_key, route):
    key = make_api_key(application, permissions=[route[3]])
    response = call(client, application, target, route, bearer(key))
    assert response.status_code not in (401, 403), response.text


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_user_without_roles_is_403(client, application, target, stored_user, token_for, route):
    caller = stored_user(application)
    error = assert_error(call(client, application, target, route, bearer(token_for(application, caller))), 403,
                         "FORBIDDEN")
    assert error["details"]["required_permission"] == route[3]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_user_whose_role_grants_the_permission_passes(client, application, target, stored_user, token_for,
                                                      make_role, assign_role, route):
    caller = stored_user(application)
    assign_role(application, caller, make_role(application, "gate", [route[3]]))
    response = call(client, application, target, route, bearer(token_for(application, caller)))
    assert response.status_code not in (401, 403), response.text


def test_read_permission_does_not_open_writes(client, application, target, make_api_key, stored_user, token_for,
                                              make_role, assign_role):
    caller = stored_user(application)
    assign_role(application, caller, make_role(application, "reader", ["roles:read"]))
    for headers in (bearer(make_api_key(application, permissions=["roles:read"])),
                    bearer(token_for(application, caller))):
        assert call(client, application, target, ROUTES[0], headers).status_code == 200
        error = assert_error(call(client, application, target, ROUTES[1], headers), 403, "FORBIDDEN")
        assert error["details"]["required_permission"] == "roles:manage"


@pytest.mark.parametrize("pattern", ["roles:*", "*:read", "*:*"])
def test_wildcards_satisfy_a_gate(client, application, target, make_api_key, stored_user, token_for, make_role,
                                  assign_role, pattern):
    caller = stored_user(application)
    assign_role(application, caller, make_role(application, "wild", [pattern]))
    for headers in (bearer(make_api_key(application, permissions=[pattern])), bearer(token_for(application, caller))):
        assert call(client, application, target, ROUTES[0], headers).status_code == 200


def test_losing_the_role_closes_the_gate_at_once(client, ctx, application, target, stored_user, token_for,
                                                 make_role, assign_role):
    caller = stored_user(application)
    role = make_role(application, "reader", ["roles:read"])
    assign_role(application, caller, role)
    headers = bearer(token_for(application, caller))
    assert call(client, application, target, ROUTES[0], headers).status_code == 200
    ctx.roles.unassign(application["_id"], caller["_id"], role["_id"], None)
    assert_error(call(client, application, target, ROUTES[0], headers), 403, "FORBIDDEN")


def test_a_role_losing_the_permission_closes_the_gate_at_once(client, ctx, application, target, stored_user,
                                                              token_for, make_role, assign_role):
    caller = stored_user(application)
    assign_role(application, caller, make_role(application, "reader", ["roles:read"]))
    headers = bearer(token_for(application, caller))
    assert call(client, application, target, ROUTES[0], headers).status_code == 200
    ctx.roles.update(application["_id"], "reader", {"permissions": ["posts:read"]})
    assert_error(call(client, application, target, ROUTES[0], headers), 403, "FORBIDDEN")


def test_expired_and_scoped_assignments_do_not_open_gates(client, clock, application, target, stored_user,
                                                          token_for, make_role, assign_role):
    caller = stored_user(application)
    role = make_role(application, "reader", ["roles:read"])
    assign_role(application, caller, role, scope="org:1")
    headers = bearer(token_for(application, caller))
    assert_error(call(client, application, target, ROUTES[0], headers), 403, "FORBIDDEN")
    assign_role(application, caller, role, expires_at=clock() + timedelta(seconds=60))
    assert call(client, application, target, ROUTES[0], headers).status_code == 200
    clock.advance(60)
    assert_error(call(client, application, target, ROUTES[0], headers), 403, "FORBIDDEN")


def test_suspended_user_token_is_refused(client, ctx, application, target, stored_user, token_for, make_role,
                                         assign_role):
    caller = stored_user(application)
    assign_role(application, caller, make_role(application, "reader", ["roles:read"]))
    headers = bearer(token_for(application, caller))
    ctx.store["users"].update_one({"_id": caller["_id"]}, {"$set": {"status": "suspended"}})
    assert_error(call(client, application, target, ROUTES[0], headers), 401, "UNAUTHORIZED")


def test_credentials_of_another_application_are_refused(client, application, target, make_application,
                                                        make_api_key, stored_user, token_for, make_role, assign_role):
    other = make_application()
    foreign_user = stored_user(other)
    assign_role(other, foreign_user, make_role(other, "admin", ["*:*"]))
    for headers in (bearer(make_api_key(other)), bearer(token_for(other, foreign_user))):
        assert_error(call(client, application, target, ROUTES[0], headers), 401, "UNAUTHORIZED")


def test_a_token_of_a_user_of_another_application_with_this_audience_is_refused(client, ctx, application, target,
                                                                                 make_application, stored_user,
                                                                                 make_role, assign_role):
    """A forged pairing (user of app B, audience app A) finds no such user in A."""
    other = make_application()
    foreign_user = stored_user(other)
    assign_role(other, foreign_user, make_role(other, "admin", ["*:*"]))
    token, _ = ctx.tokens.issue_access_token(application["_id"], foreign_user["_id"], None)
    assert_error(call(client, application, target, ROUTES[0], bearer(token)), 401, "UNAUTHORIZED")
