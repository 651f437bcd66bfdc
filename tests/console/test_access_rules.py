"""The console's access-rule screens over falcon.testing: roles and permissions, ABAC
policies with the editor's errors at the API's JSON paths, and the check playground's
dry-run trace; through the same services as the V1 API, with the same events."""
from __future__ import annotations

import json
import re

import pytest

from controlplane.console.access_rules import json_path_lines, line_of, permission_problems
from tests.console.test_parity import change_log_after, shape


@pytest.fixture
def owner(console, dashboard_account):
    visitor = console()
    visitor.sign_in(dashboard_account)
    return visitor


def base(app: dict) -> str:
    return f"/console/applications/{app['id']}"


def events_of(ctx, app_id: str, kind: str) -> list[dict]:
    return list(ctx.store["events"].find({"app_id": app_id, "type": kind}))


def create_role(visitor, app, name="editor", permissions="posts:read\nposts:write"):
    return visitor.post(f"{base(app)}/roles", {"name": name, "display_name": name.title(), "permissions": permissions})


# ---------------------------------------------------------------- pure helpers


def test_each_permission_line_the_api_refuses_is_named_with_its_line():
    problems = permission_problems("posts:read\n\nposts\n*:*\nbad space:x")
    assert [p["line"] for p in problems] == [3, 5]
    assert "resource:action" in problems[0]["reason"]


def test_json_paths_map_to_the_line_where_their_node_starts():
    text = '{\n  "all": [\n    {"op": "eq",\n     "left": {"attr": "user.id"}},\n    {"not": {}}\n  ]\n}'
    lines = json_path_lines(text, "condition")
    assert lines["condition"] == 1
    assert lines["condition.all[0]"] == 3 and lines["condition.all[0].op"] == 3
    assert lines["condition.all[0].left.attr"] == 4
    assert lines["condition.all[1].not"] == 5
    assert line_of("condition.all[0].right", lines) == 3  # a missing key: the line of its object
    assert json_path_lines("{not json", "condition") == {}


# ---------------------------------------------------------------- roles


def test_create_list_edit_and_delete_a_role_with_the_apis_events(owner, dashboard_app, ctx):
    created = create_role(owner, dashboard_app)
    assert created.status_code == 303
    role_id = created.headers["location"].rsplit("/", 1)[1]
    role = ctx.roles.resolve(dashboard_app["id"], role_id)
    assert role["permissions"] == ["posts:read", "posts:write"]
    assert len(events_of(ctx, dashboard_app["id"], "role.created")) == 1

    listed = owner.get(f"{base(dashboard_app)}/roles")
    assert listed.status_code == 200 and f'/roles/{role_id}"' in listed.text and "posts:write" in listed.text

    saved = owner.post(f"{base(dashboard_app)}/roles/{role_id}",
                       {"display_name": "Editors", "description": "", "permissions": "posts:read\ncomments:*"})
    assert saved.status_code == 200 and "Role saved." in saved.text
    assert ctx.roles.resolve(dashboard_app["id"], role_id)["permissions"] == ["posts:read", "comments:*"]
    updated = events_of(ctx, dashboard_app["id"], "role.updated")
    assert len(updated) == 1 and updated[0]["data"]["revoked"] == ["posts:write"]

    page = owner.get(f"{base(dashboard_app)}/roles/{role_id}")
    assert re.search(r'id="role-holders"><span class="number">0</span> users', page.text)
    wrong = owner.post(f"{base(dashboard_app)}/roles/{role_id}/delete", {"confirm_name": "nope"})
    assert wrong.status_code == 400 and 'id="e-confirm_name"' in wrong.text
    deleted = owner.post(f"{base(dashboard_app)}/roles/{role_id}/delete", {"confirm_name": "editor"})
    assert deleted.status_code == 303
    assert len(events_of(ctx, dashboard_app["id"], "role.deleted")) == 1


def test_a_bad_permission_is_refused_at_its_field_and_checked_as_typed(owner, dashboard_app, ctx):
    refused = create_role(owner, dashboard_app, permissions="posts:read\nposts")
    assert refused.status_code == 400
    assert 'id="e-permissions"' in refused.text and "resource:action" in refused.text
    assert ctx.roles.list(dashboard_app["id"], search=None, page=1, per_page=15)[1] == 0

    check = owner.get(f"{base(dashboard_app)}/permission-check", params={"permissions": "posts:read\nposts"},
                      headers={"HX-Request": "true"})
    assert check.status_code == 200 and "<html" not in check.text
    assert "Line 2:" in check.text and "resource:action" in check.text
    fine = owner.get(f"{base(dashboard_app)}/permission-check", params={"permissions": "posts:read\n*:*"},
                     headers={"HX-Request": "true"})
    assert "Line" not in fine.text and "2 permissions" in fine.text
    page = owner.get(f"{base(dashboard_app)}/roles")
    assert f'hx-get="{base(dashboard_app)}/permission-check"' in page.text


def test_the_role_page_shows_its_holders_and_a_held_role_is_not_deleted(owner, dashboard_app, make_user, ctx):
    role_id = create_role(owner, dashboard_app).headers["location"].rsplit("/", 1)[1]
    user = make_user({"_id": dashboard_app["id"]})
    ctx.roles.assign(dashboard_app["id"], user["id"], {"role_id": role_id})
    page = owner.get(f"{base(dashboard_app)}/roles/{role_id}")
    assert re.search(r'id="role-holders"><span class="number">1</span> user<', page.text)
    assert "1 user holds this role" in page.text
    refused = owner.post(f"{base(dashboard_app)}/roles/{role_id}/delete", {"confirm_name": "editor"})
    assert refused.status_code == 409 and "ROLE_IN_USE" in refused.text
    assert ctx.roles.resolve(dashboard_app["id"], role_id) is not None


def test_the_roles_list_paginates_on_the_server(owner, dashboard_app, ctx):
    for n in range(3):
        ctx.roles.create(dashboard_app["id"], {"name": f"role-{n}", "display_name": f"Role {n}",
                                               "permissions": ["a:b"]})
    first = owner.get(f"{base(dashboard_app)}/roles", params={"per_page": "2"})
    assert "role-0" in first.text and "role-1" in first.text and "role-2" not in first.text
    assert "Page 1 of 2" in first.text and 'rel="next"' in first.text
    second = owner.get(f"{base(dashboard_app)}/roles", params={"per_page": "2", "page": "2"})
    assert "role-2" in second.text and "role-0" not in second.text and 'rel="prev"' in second.text
    bad = owner.get(f"{base(dashboard_app)}/roles", params={"page": "zero"})
    assert bad.status_code == 400 and "must be an integer" in bad.text


# ---------------------------------------------------------------- policies


POLICY = {"name": "sales only", "effect": "allow", "permissions": "reports:read", "is_active": "on",
          "condition": json.dumps({"op": "eq", "left": {"attr": "user.attributes.department"},
                                   "right": {"value": "sales"}}, indent=2)}


def test_create_edit_deactivate_and_activate_a_policy(owner, dashboard_app, ctx):
    created = owner.post(f"{base(dashboard_app)}/policies", POLICY)
    assert created.status_code == 303, created.text
    policy_id = created.headers["location"].rsplit("/", 1)[1]
    assert ctx.abac.get_policy(dashboard_app["id"], policy_id)["condition"]["op"] == "eq"
    assert len(events_of(ctx, dashboard_app["id"], "policy.created")) == 1
    assert "sales only" in owner.get(f"{base(dashboard_app)}/policies").text

    saved = owner.post(f"{base(dashboard_app)}/policies/{policy_id}", {**POLICY, "effect": "deny"})
    assert saved.status_code == 200 and "Policy saved." in saved.text
    assert ctx.abac.get_policy(dashboard_app["id"], policy_id)["effect"] == "deny"

    off = owner.post(f"{base(dashboard_app)}/policies/{policy_id}/active", {"is_active": "false"})
    assert off.status_code == 200 and "Policy deactivated." in off.text and "Activate policy" in off.text
    assert ctx.abac.get_policy(dashboard_app["id"], policy_id)["is_active"] is False
    inactive = owner.get(f"{base(dashboard_app)}/policies", params={"is_active": "false"})
    assert "sales only" in inactive.text
    assert "sales only" not in owner.get(f"{base(dashboard_app)}/policies", params={"is_active": "true"}).text
    on = owner.post(f"{base(dashboard_app)}/policies/{policy_id}/active", {"is_active": "true"})
    assert "Policy activated." in on.text and ctx.abac.get_policy(dashboard_app["id"], policy_id)["is_active"]
    changes = [e["data"]["changes"] for e in events_of(ctx, dashboard_app["id"], "policy.updated")]
    assert changes == [["effect"], ["is_active"], ["is_active"]]


def test_condition_errors_are_shown_at_the_apis_json_paths_with_their_lines(owner, dashboard_app, ctx):
    condition = '{\n  "all": [\n    {"op": "equals", "left": {"attr": "user.id"}, "right": {"value": 1}},\n' \
                '    {"not": {"op": "eq", "left": {"attr": "planet.x"}, "right": {"value": 2}}}\n  ]\n}'
    refused = owner.post(f"{base(dashboard_app)}/policies", {**POLICY, "condition": condition})
    assert refused.status_code == 400 and "VALIDATION_INVALID_FORMAT" in refused.text
    page = refused.text
    for path in ("condition.all[0].op", "condition.all[1].not.left.attr"):
        assert f"<code>{path}</code>" in page
    assert re.search(r"Line 3, <code>condition\.all\[0\]\.op</code>", page)
    assert re.search(r"Line 4, <code>condition\.all\[1\]\.not\.left\.attr</code>", page)
    marked = re.findall(r'<li class="bad-line"><code>([^<]*)</code>', page)
    assert len(marked) == 2 and "equals" in marked[0] and "planet.x" in marked[1]
    assert 'aria-describedby="h-condition e-condition"' in page
    assert ctx.abac.list_policies(dashboard_app["id"], is_active=None, permission=None, page=1, per_page=5)[1] == 0


def test_a_condition_that_is_not_json_is_refused_at_its_line(owner, dashboard_app):
    refused = owner.post(f"{base(dashboard_app)}/policies", {**POLICY, "condition": '{\n  "all": [\n  oops\n]}'})
    assert refused.status_code == 400
    assert re.search(r"Line 3, <code>condition</code>: is not JSON", refused.text)
    assert re.findall(r'<li class="bad-line"><code>([^<]*)</code>', refused.text) == ["  oops"]


@pytest.mark.parametrize("condition, words", [("[" * 5000, "it nests too deep"),
                                               ('{"op": "eq", "left": {"attr": "context.n"}, "right": {"value": NaN}}',
                                                "NaN is not a JSON number")])
def test_a_condition_json_cannot_read_is_refused_on_the_page(owner, dashboard_app, ctx, condition, words):
    """Nesting past what json reads (RecursionError) and NaN (no JSON) are the form
    again with its error (400), never a 500."""
    refused = owner.post(f"{base(dashboard_app)}/policies", {**POLICY, "condition": condition})
    assert refused.status_code == 400 and words in refused.text, refused.text[:300]
    assert ctx.abac.list_policies(dashboard_app["id"], is_active=None, permission=None, page=1, per_page=5)[1] == 0


# ---------------------------------------------------------------- the playground


def test_the_playground_explains_a_denial_by_a_deny_policy_with_the_trace(owner, dashboard_app, make_user, ctx):
    app_id = dashboard_app["id"]
    role = ctx.roles.create(app_id, {"name": "reader", "display_name": "Reader", "permissions": ["reports:read"]})
    user = make_user({"_id": dashboard_app["id"]})
    ctx.roles.assign(app_id, user["id"], {"role_id": role["_id"]})
    ctx.abac.create_policy(app_id, {"name": "office network", "description": None, "effect": "deny",
                                    "permissions": ["reports:*"], "is_active": True, "condition": {
                                        "not": {"op": "ip_in_cidr", "left": {"attr": "context.ip"},
                                                "right": {"value": "10.0.0.0/8"}}}})
    outside = owner.post(f"{base(dashboard_app)}/check", {"user_id": user["id"], "permission": "reports:read",
                                                         "context": '{"ip": "192.0.2.1"}', "resource": ""})
    assert outside.status_code == 200, outside.text
    page = outside.text
    assert "Denied:" in page and "Denied by a deny policy whose condition held" in page
    assert "yes: a role of the user covers it" in page
    assert "office network" in page and "matched" in page
    assert re.search(r'class="held">\s*<span class="verdict">true</span>\s*<code class="path">condition</code>', page)
    assert re.search(r'class="failed">\s*<span class="verdict">false</span>\s*<code class="path">condition.not</code>',
                     page)
    assert '<code>context.ip</code> = <code>"192.0.2.1"</code>' in page

    inside = owner.post(f"{base(dashboard_app)}/check", {"user_id": user["id"], "permission": "reports:read",
                                                        "context": '{"ip": "10.1.2.3"}'})
    assert "Allowed by the user's roles (RBAC)" in inside.text and "did not match" in inside.text


def test_the_playground_shows_the_apis_errors_at_their_fields(owner, dashboard_app):
    bad = owner.post(f"{base(dashboard_app)}/check", {"user_id": "u", "permission": "nope", "context": "{"})
    assert bad.status_code == 400 and 'id="e-context"' in bad.text and "is not JSON" in bad.text
    bad = owner.post(f"{base(dashboard_app)}/check", {"user_id": "u", "permission": "nope"})
    assert bad.status_code == 400 and 'id="e-permission"' in bad.text


# ---------------------------------------------------------------- role gates


def test_a_viewer_reads_and_uses_the_playground_but_sees_no_write_buttons_and_is_refused(
        console, dashboard_account, make_dashboard_account, dashboard_app, ctx):
    app_id = dashboard_app["id"]
    role = ctx.roles.create(app_id, {"name": "reader", "display_name": "Reader", "permissions": ["reports:read"]})
    policy = ctx.abac.create_policy(app_id, {"name": "p", "description": None, "effect": "allow",
                                             "permissions": ["reports:read"], "is_active": True, "condition": None})
    viewer_account = make_dashboard_account()
    ctx.dashboard.organizations.add_member(dashboard_account.id, dashboard_account.organization_id,
                                           viewer_account.email, "viewer", ip="10.0.0.1")
    visitor = console()
    visitor.sign_in(viewer_account)

    roles = visitor.get(f"{base(dashboard_app)}/roles")
    assert roles.status_code == 200 and "reader" in roles.text and "Create role" not in roles.text
    role_page = visitor.get(f"{base(dashboard_app)}/roles/{role['_id']}")
    assert "<fieldset disabled>" in role_page.text and "Delete role" not in role_page.text
    policies = visitor.get(f"{base(dashboard_app)}/policies")
    assert "Create policy" not in policies.text
    policy_page = visitor.get(f"{base(dashboard_app)}/policies/{policy['_id']}")
    assert "Deactivate policy" not in policy_page.text and "Save policy" not in policy_page.text
    check = visitor.post(f"{base(dashboard_app)}/check", {"user_id": "someone", "permission": "reports:read"})
    assert check.status_code == 200 and "Denied because the user is unknown" in check.text

    for path, form in ((f"{base(dashboard_app)}/roles", {"name": "x", "display_name": "X", "permissions": "a:b"}),
                       (f"{base(dashboard_app)}/roles/{role['_id']}", {"display_name": "Hijacked",
                                                                       "permissions": "a:b"}),
                       (f"{base(dashboard_app)}/roles/{role['_id']}/delete", {"confirm_name": "reader"}),
                       (f"{base(dashboard_app)}/policies", POLICY),
                       (f"{base(dashboard_app)}/policies/{policy['_id']}", {**POLICY, "name": "Hijacked"}),
                       (f"{base(dashboard_app)}/policies/{policy['_id']}/active", {"is_active": "false"})):
        refused = visitor.post(path, form)
        assert refused.status_code == 403 and "FORBIDDEN" in refused.text, path
    assert ctx.roles.resolve(app_id, role["_id"])["display_name"] == "Reader"
    stored = ctx.abac.get_policy(app_id, policy["_id"])
    assert stored["name"] == "p" and stored["is_active"] is True


def test_another_organizations_application_is_not_found(console, make_dashboard_account, dashboard_app):
    stranger = console()
    stranger.sign_in(make_dashboard_account())
    for screen in ("roles", "policies", "check", "permission-check"):
        page = stranger.get(f"{base(dashboard_app)}/{screen}")
        assert page.status_code == 404 and "belongs to an organization you are not a member of" in page.text
    assert stranger.post(f"{base(dashboard_app)}/check", {"user_id": "u", "permission": "a:b"}).status_code == 404


def test_the_applications_page_links_its_access_rule_screens(owner, dashboard_app):
    page = owner.get(base(dashboard_app)).text
    for screen in ("roles", "policies", "check"):
        assert f'href="{base(dashboard_app)}/{screen}"' in page


# ---------------------------------------------------------------- the same events as the API


def test_console_writes_leave_the_change_log_events_the_api_writes_do(owner, dashboard_account, make_dashboard_app,
                                                                      make_api_key, client, ctx):
    by_api, by_console = (make_dashboard_app(dashboard_account, name=name) for name in ("One", "Two"))
    seeded = {}
    for app in (by_api, by_console):
        role = ctx.roles.create(app["id"], {"name": "temp", "display_name": "Temp", "permissions": ["a:b"]})
        policy = ctx.abac.create_policy(app["id"], {"name": "p", "description": None, "effect": "allow",
                                                    "permissions": ["a:b"], "is_active": True, "condition": None})
        seeded[app["id"]] = (role["_id"], policy["_id"])
    key = make_api_key(ctx.applications.get(by_api["id"]))
    api_role, api_policy = seeded[by_api["id"]]
    v1 = f"/api/v1/applications/{by_api['id']}"
    headers = {"Authorization": f"Bearer {key}"}
    api_events = change_log_after(ctx, lambda: (
        client.simulate_put(f"{v1}/abac/policies/{api_policy}", json={"is_active": False}, headers=headers),
        client.simulate_delete(f"{v1}/roles/{api_role}", headers=headers)))
    console_role, console_policy = seeded[by_console["id"]]
    console_events = change_log_after(ctx, lambda: (
        owner.post(f"{base(by_console)}/policies/{console_policy}/active", {"is_active": "false"}),
        owner.post(f"{base(by_console)}/roles/{console_role}/delete", {"confirm_name": "temp"})))

    def shaped(events, app_id, role_id, policy_id):  # the actor differs: an account, an API key
        bodies = [shape({k: v for k, v in e.items() if k != "actor"}, app_id)["body"] for e in events]
        return [body.replace(role_id, "<role>").replace(policy_id, "<policy>") for body in bodies]

    assert [e["type"] for e in console_events] == ["policy.updated", "role.deleted"]
    assert shaped(console_events, by_console["id"], console_role, console_policy) == \
        shaped(api_events, by_api["id"], api_role, api_policy)
