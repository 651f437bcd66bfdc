"""Tenant boundaries, probed from outside: ids of another application in paths and bodies,
another application's credentials, scoped keys and plain users at admin routes, the
console's organization boundary, CSRF and reflected markup, the internal API's keys, and
organization roles. Each test asserts the refusal and that nothing was written."""
from __future__ import annotations

from urllib.parse import quote

from tests.conftest import bearer
from tests.console.conftest import Visitor

V1 = "/api/v1/applications/{}"


def v1(app, path=""):
    return V1.format(app["_id"]) + path


# ---------------------------------------------------------------- V1: ids of another tenant


def test_role_of_another_app_cannot_be_assigned(client, application, make_application, make_api_key, stored_user,
                                                make_role, ctx):
    other = make_application()
    foreign_role = make_role(other, "admin", ["*:*"])
    user = stored_user(application)
    key = make_api_key(application)
    response = client.simulate_post(v1(application, f"/users/{user['_id']}/roles"), headers=bearer(key),
                                    json={"role_id": foreign_role["_id"]})
    assert response.status_code == 404, response.text
    assert ctx.store["role_assignments"].count_documents({"role_id": foreign_role["_id"]}) == 0


def test_user_of_another_app_is_not_found_through_own_path(client, application, make_application, make_api_key,
                                                           stored_user, make_role, assign_role):
    other = make_application()
    foreign_user = stored_user(other)
    assign_role(other, foreign_user, make_role(other, "r", ["posts:read"]))
    key = make_api_key(application)
    for path in (f"/users/{foreign_user['_id']}/roles", f"/users/{foreign_user['_id']}/permissions",
                 f"/users/{foreign_user['_id']}/attributes"):
        response = client.simulate_get(v1(application, path), headers=bearer(key))
        assert response.status_code == 404, (path, response.text)
    check = client.simulate_get(v1(application, "/authz/check"), headers=bearer(key),
                                params={"user_id": foreign_user["_id"], "permission": "posts:read"})
    assert check.status_code == 200 and check.json["allowed"] is False


def test_scoped_key_cannot_write(client, application, make_api_key):
    key = make_api_key(application, ["roles:read"])
    response = client.simulate_post(v1(application, "/roles"), headers=bearer(key),
                                    json={"name": "x", "display_name": "X", "permissions": ["*:*"]})
    assert response.status_code == 403, response.text


def test_user_token_of_a_cannot_reach_b(client, application, make_application, user_token):
    other = make_application()
    response = client.simulate_get(v1(other, "/roles"), headers=user_token.headers)
    assert response.status_code == 401, response.text


def test_plain_user_cannot_reach_admin_routes(client, application, user_token):
    for method, path in (("GET", "/roles"), ("GET", "/audit-events"), ("GET", "/webhooks"),
                         ("GET", "/oidc/clients"), ("GET", "/connections"), ("GET", "/abac/policies")):
        response = client.simulate_request(method, v1(application, path), headers=user_token.headers)
        assert response.status_code == 403, (path, response.text)


def test_a_user_cannot_revoke_another_users_session(client, application, make_user_token):
    alice, bob = make_user_token(application), make_user_token(application)
    bob_sessions = client.simulate_get(v1(application, f"/users/{bob.user['id']}/sessions"), headers=bob.headers)
    assert bob_sessions.status_code == 200, bob_sessions.text
    session_id = bob_sessions.json["data"][0]["id"]
    response = client.simulate_delete(v1(application, f"/users/{alice.user['id']}/sessions/{session_id}"),
                                      headers=alice.headers)
    assert response.status_code == 404, response.text
    refresh = client.simulate_post(v1(application, "/users/token/refresh"), json={"refresh_token": bob.refresh_token})
    assert refresh.status_code == 200, refresh.text


def test_refresh_token_of_a_does_not_work_on_b(client, application, make_application, user_token):
    other = make_application()
    refresh = client.simulate_post(v1(other, "/users/token/refresh"), json={"refresh_token": user_token.refresh_token})
    assert refresh.status_code in (400, 401), refresh.text


# ---------------------------------------------------------------- dashboard organizations


def _member(owner, make_dashboard_account, role):
    account = make_dashboard_account()
    response = owner.post(f"/api/dashboard/organizations/{owner.organization_id}/members",
                          json={"email": account.email, "role": role})
    assert response.status_code == 201, response.text
    return account


def test_a_member_cannot_suspend_and_a_removed_member_loses_access(client, dashboard_account, dashboard_app,
                                                                   make_dashboard_account, make_user):
    member = _member(dashboard_account, make_dashboard_account, "member")
    user = make_user({"_id": dashboard_app["id"]})
    app_id = dashboard_app["id"]
    response = member.post(f"/api/dashboard/applications/{app_id}/users/{user['id']}/suspend", json={})
    assert response.status_code == 403, response.text
    removed = dashboard_account.delete(f"/api/dashboard/organizations/{dashboard_account.organization_id}"
                                       f"/members/{member.id}")
    assert removed.status_code == 204, removed.text
    assert member.get(f"/api/dashboard/applications/{app_id}").status_code == 404
    assert member.get(f"/api/dashboard/applications/{app_id}/api-keys").status_code == 404


def test_admin_cannot_demote_owner(dashboard_account, make_dashboard_account):
    admin = _member(dashboard_account, make_dashboard_account, "admin")
    response = admin.put(f"/api/dashboard/organizations/{dashboard_account.organization_id}"
                         f"/members/{dashboard_account.id}", json={"role": "viewer"})
    assert response.status_code == 403, response.text


# ---------------------------------------------------------------- console


def _visitor(client, account, addr="10.201.0.9") -> Visitor:
    visitor = Visitor(client, addr)
    visitor.sign_in(account)
    return visitor


def test_console_other_orgs_application_is_not_found(client, dashboard_app, make_dashboard_account, ctx):
    stranger = make_dashboard_account()
    visitor = _visitor(client, stranger)
    app_id = dashboard_app["id"]
    for path in ("", "/users", "/roles", "/api-keys", "/audit", "/webhooks", "/oidc-clients", "/policies",
                 "/branding", "/connections", "/audit/export"):
        response = visitor.get(f"/console/applications/{app_id}{path}")
        assert response.status_code == 404, (path, response.status_code)
    response = visitor.post(f"/console/applications/{app_id}/roles",
                            {"name": "pwn", "display_name": "Pwn", "permissions": "*:*"})
    assert response.status_code == 404, response.text
    assert ctx.store["roles"].count_documents({"app_id": app_id, "name": "pwn"}) == 0


def test_console_viewer_cannot_write(client, dashboard_account, dashboard_app, make_dashboard_account, ctx):
    viewer = _member(dashboard_account, make_dashboard_account, "viewer")
    visitor = _visitor(client, viewer)
    app_id = dashboard_app["id"]
    response = visitor.post(f"/console/applications/{app_id}/roles",
                            {"name": "pwn", "display_name": "Pwn", "permissions": "*:*"})
    assert response.status_code == 403, response.text
    response = visitor.post(f"/console/applications/{app_id}/api-keys", {"name": "k", "permission:roles:manage": "on"})
    assert response.status_code == 403, response.text
    assert ctx.store["roles"].count_documents({"app_id": app_id, "name": "pwn"}) == 0


def test_console_post_needs_csrf_and_origin(client, dashboard_account, dashboard_app, ctx):
    visitor = _visitor(client, dashboard_account)
    app_id = dashboard_app["id"]
    body = {"name": "csrf", "display_name": "C", "permissions": "a:b"}
    assert visitor.post(f"/console/applications/{app_id}/roles", body, token=False).status_code == 403
    assert visitor.post(f"/console/applications/{app_id}/roles", body, origin="https://evil.example").status_code == 403
    assert visitor.post(f"/console/applications/{app_id}/roles", body, origin=None).status_code == 403
    assert ctx.store["roles"].count_documents({"app_id": app_id, "name": "csrf"}) == 0


def test_console_reflects_no_markup(client, dashboard_account, dashboard_app):
    visitor = _visitor(client, dashboard_account)
    app_id = dashboard_app["id"]
    payload = '"><script>alert(1)</script>'
    for path in (f"/users?q={quote(payload)}", f"/users?status={quote(payload)}",
                 f"/roles?search={quote(payload)}", f"/audit?action={quote(payload)}",
                 f"/check?user_id={quote(payload)}", f"/branding?brand_name={quote(payload)}",
                 f"/users?notice={quote(payload)}"):
        response = visitor.get(f"/console/applications/{app_id}{path}")
        assert "<script>alert(1)" not in response.text, path


def test_console_cross_app_ids_in_urls(client, dashboard_account, dashboard_app, make_dashboard_app,
                                       make_dashboard_account, ctx):
    """A key, a user and a role of the attacker's app B named under victim app A's URL,
    and the victim's under B's."""
    attacker = make_dashboard_account()
    app_b = make_dashboard_app(attacker, name="B")
    key_a, _secret = ctx.api_keys.create(ctx.applications.get(dashboard_app["id"]), {"name": "victim"})
    visitor = _visitor(client, attacker)
    response = visitor.post(f"/console/applications/{app_b['id']}/api-keys/{key_a['_id']}/revoke",
                            {"confirmed": "yes"})
    assert ctx.store["api_keys"].find_one({"_id": key_a["_id"]})["revoked_at"] is None, response.text


# ---------------------------------------------------------------- internal API, audit


def test_internal_api_needs_decision_sync_and_own_app(client, application, make_application, make_api_key,
                                                      stored_user):
    other = make_application()
    user = stored_user(application)
    plain = make_api_key(application, ["authz:check"])
    sync_b = make_api_key(other, ["decision:sync"])
    base = f"/internal/v1/applications/{application['_id']}"
    for path in (f"/users/{user['_id']}/grants", "/policies", "/api-keys"):
        assert client.simulate_get(base + path, headers=bearer(plain)).status_code == 403, path
        assert client.simulate_get(base + path, headers=bearer(sync_b)).status_code == 401, path
    assert client.simulate_get("/internal/v1/changes", headers=bearer(sync_b)).status_code == 401


def test_org_audit_needs_admin(dashboard_account, make_dashboard_account):
    member = _member(dashboard_account, make_dashboard_account, "member")
    response = member.get(f"/api/dashboard/organizations/{dashboard_account.organization_id}/audit-events")
    assert response.status_code == 403, response.text
    stranger = make_dashboard_account()
    response = stranger.get(f"/api/dashboard/organizations/{dashboard_account.organization_id}/audit-events/export")
    assert response.status_code == 404, response.text


def test_a_removed_admins_keys_belong_to_the_application_until_revoked(client, dashboard_account, dashboard_app,
                                                                       make_dashboard_account):
    """Keys are the application's (docs/dashboard.md): removing the admin who minted one
    ends the admin's access, not the key's, until an owner revokes it."""
    admin = _member(dashboard_account, make_dashboard_account, "admin")
    app_id = dashboard_app["id"]
    minted = admin.post(f"/api/dashboard/applications/{app_id}/api-keys", json={"name": "mine"})
    assert minted.status_code == 201, minted.text
    secret, key_id = minted.json["data"]["key"], minted.json["data"]["id"]
    removed = dashboard_account.delete(f"/api/dashboard/organizations/{dashboard_account.organization_id}"
                                       f"/members/{admin.id}")
    assert removed.status_code == 204, removed.text
    assert admin.get(f"/api/dashboard/applications/{app_id}").status_code == 404
    assert client.simulate_get(f"/api/v1/applications/{app_id}/roles", headers=bearer(secret)).status_code == 200
    revoked = dashboard_account.delete(f"/api/dashboard/applications/{app_id}/api-keys/{key_id}")
    assert revoked.status_code == 204, revoked.text
    assert client.simulate_get(f"/api/v1/applications/{app_id}/roles", headers=bearer(secret)).status_code == 401
