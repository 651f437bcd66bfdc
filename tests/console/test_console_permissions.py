"""The console's principal carries V1 permissions (issue 28, "one shape with the API"): a
dashboard account acting on an application of its organization holds every permission of
it as an owner or admin, the ``:read`` ones as a member or viewer, and each screen
standing for a V1 operation is gated by that operation's own permission, so a refusal is
the API's: 403 FORBIDDEN naming the permission, as for an API key without it."""
from __future__ import annotations

import pytest

from controlplane.apikeys.service import V1_PERMISSIONS
from controlplane.console.permissions import console_principal, permissions_of


@pytest.fixture
def owner_app(dashboard_account, make_dashboard_app, ctx):
    app = make_dashboard_app(dashboard_account, name="Shop")
    return ctx.applications.get(app["id"])


def test_owner_and_admin_hold_every_v1_permission_member_and_viewer_the_read_ones():
    assert permissions_of("owner") == permissions_of("admin") == frozenset(V1_PERMISSIONS)
    reads = {"roles:read", "policies:read", "users:read", "audit:read"}
    assert permissions_of("member") == permissions_of("viewer") == reads
    principal = console_principal("a", "b", "viewer")
    assert principal.kind == "account" and principal.app_id == "b" and principal.permissions == reads


@pytest.mark.parametrize(("path", "form", "permission", "api"), [
    ("/roles", {"name": "editor", "display_name": "Editor", "permissions": "posts:write"}, "roles:manage",
     ("POST", "/roles", {"name": "editor", "display_name": "Editor", "permissions": ["posts:write"]})),
    ("/policies", {"name": "p", "effect": "allow", "permissions": "posts:read",
                   "condition": '{"attribute": "user.plan", "op": "eq", "value": "pro"}'}, "policies:manage",
     ("POST", "/abac/policies", {"name": "p", "effect": "allow", "permissions": ["posts:read"],
                                 "condition": {"attribute": "user.plan", "op": "eq", "value": "pro"}})),
])
def test_a_viewer_is_refused_a_write_by_its_v1_permission_with_the_apis_error(
        reader, owner_app, make_api_key, client, ctx, path, form, permission, api):
    app_id = owner_app["_id"]
    viewer = reader("viewer")
    refused = viewer.post(f"/console/applications/{app_id}{path}", form)
    assert refused.status_code == 403
    assert "FORBIDDEN" in refused.text and f"The permission {permission} is required." in refused.text

    # The API's answer to a credential holding the same (read) permissions.
    key = make_api_key(owner_app, permissions=sorted(permissions_of("viewer")))
    method, api_path, body = api
    answer = client.simulate_request(method, f"/api/v1/applications/{app_id}{api_path}", json=body,
                                     headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 403
    assert answer.json["error"]["code"] == "FORBIDDEN"
    assert answer.json["error"]["message"] == f"The permission {permission} is required."
    assert ctx.store["roles"].count_documents({"app_id": app_id, "name": "editor"}) == 0


def test_a_viewer_is_refused_a_screen_whose_v1_read_needs_a_manage_permission(reader, owner_app, make_api_key,
                                                                              client):
    app_id = owner_app["_id"]
    page = reader("member").get(f"/console/applications/{app_id}/webhooks")
    assert page.status_code == 403 and "The permission webhooks:manage is required." in page.text
    key = make_api_key(owner_app, permissions=sorted(permissions_of("member")))
    answer = client.simulate_get(f"/api/v1/applications/{app_id}/webhooks", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 403 and answer.json["error"]["code"] == "FORBIDDEN"


def test_an_admin_acts_with_every_permission(console, dashboard_account, make_dashboard_account, owner_app, ctx):
    admin = make_dashboard_account()
    ctx.dashboard.organizations.add_member(dashboard_account.id, dashboard_account.organization_id, admin.email,
                                           "admin", ip="10.0.0.1")
    visitor = console()
    visitor.sign_in(admin)
    created = visitor.post(f"/console/applications/{owner_app['_id']}/roles",
                           {"name": "editor", "display_name": "Editor", "permissions": "posts:write"})
    assert created.status_code == 303
    assert visitor.get(f"/console/applications/{owner_app['_id']}/webhooks").status_code == 200
