"""The console's users screens over falcon.testing: search and pages in the URL, the bulk
actions' count before they act, one user's page and its actions through the API's
services (same events and audit records), and the role gate."""
from __future__ import annotations

import re
import uuid
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import events_of
from tests.mfa.conftest import enable_mfa  # noqa: F401  (fixture)
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.passkeys.conftest import register  # noqa: F401  (fixture)


@pytest.fixture
def config_overrides(request):
    """Settings per test (``indirect`` parametrization): passkeys for those that register one."""
    return getattr(request, "param", {})


@pytest.fixture
def owner(console, dashboard_account, make_dashboard_app, ctx):
    """A signed-in owner visitor and an application of theirs (as the users fixtures want it)."""
    app = make_dashboard_app(dashboard_account, name="Shop")
    visitor = console()
    visitor.sign_in(dashboard_account)
    return visitor, ctx.applications.get(app["id"])


def user_links(page: str, app_id: str) -> list[str]:
    return re.findall(rf'href="/console/applications/{app_id}/users/([0-9a-f-]+)"', page)


def test_search_by_email_name_or_id_pages_on_the_server_and_keeps_filters_in_the_url(owner, make_user):
    visitor, app = owner
    made = [make_user(app, email=f"buyer-{n:02d}@shop.example", name=f"Buyer {n}") for n in range(27)]
    ada = make_user(app, email="ada@lovelace.example", name="Ada Lovelace")
    base = f"/console/applications/{app['_id']}/users"

    first = visitor.get(base)
    assert first.status_code == 200 and "28 users · page 1 of 2" in first.text
    assert len(user_links(first.text, app["_id"])) == 25
    second_link = re.search(r'href="([^"]+)" rel="next"', first.text).group(1).replace("&amp;", "&")
    second = visitor.get(urlsplit(second_link).path, query_string=urlsplit(second_link).query)
    assert len(user_links(second.text, app["_id"])) == 3 and 'rel="prev"' in second.text

    by_email = visitor.get(base, params={"q": "buyer-1"})
    assert "10 users · page 1 of 1" in by_email.text  # buyer-10..19
    by_name = visitor.get(base, params={"q": "lovelace"})
    assert user_links(by_name.text, app["_id"]) == [ada["id"]]
    by_id = visitor.get(base, params={"q": made[3]["id"].upper()})
    assert user_links(by_id.text, app["_id"]) == [made[3]["id"]]
    assert 'value="buyer-1"' in by_email.text  # the filter shows in the form, and in the page links:
    paged = visitor.get(base, params={"q": "buyer", "page": "2"})
    prev = re.search(r'href="([^"]+)" rel="prev"', paged.text).group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(prev).query) == {"q": ["buyer"]}

    bad = visitor.get(base, params={"status": "gone"})
    assert bad.status_code == 400 and "VALIDATION_INVALID_FORMAT" in bad.text and "<code>status</code>" in bad.text
    assert 'aria-describedby="e-status"' in bad.text


def test_bulk_suspend_shows_the_count_first_then_suspends_each_matching_user(owner, make_user, login, ctx, client):
    visitor, app = owner
    targets = [make_user(app, email=f"spam-{n}@bots.example") for n in range(3)]
    keeper = make_user(app, email="real@people.example")
    pair = login(app, targets[0]["email"], targets[0]["password"])
    base = f"/console/applications/{app['_id']}/users"

    asked = visitor.post(f"{base}/bulk", {"q": "bots.example", "status": "", "action": "suspend"})
    assert asked.status_code == 200 and '<strong id="bulk-count">3</strong>' in asked.text
    assert all(ctx.users.directory.status(app["_id"], t["id"]) == "active" for t in targets)  # nothing yet

    stale = visitor.post(f"{base}/bulk", {"q": "bots.example", "action": "suspend", "confirm": "yes", "count": "2"})
    assert "changed since you confirmed" in stale.text and '<strong id="bulk-count">3</strong>' in stale.text
    assert all(ctx.users.directory.status(app["_id"], t["id"]) == "active" for t in targets)  # not the count shown

    done = visitor.post(f"{base}/bulk", {"q": "bots.example", "status": "", "action": "suspend", "confirm": "yes",
                                         "count": "3"})
    assert done.status_code == 200 and "Suspend 3 users: done." in done.text
    assert [ctx.users.directory.status(app["_id"], t["id"]) for t in targets] == ["suspended"] * 3
    assert ctx.users.directory.status(app["_id"], keeper["id"]) == "active"
    assert sorted(e["data"]["user_id"] for e in events_of(ctx, "user.suspended")) == sorted(t["id"] for t in targets)
    refreshed = client.simulate_post(f"/api/v1/applications/{app['_id']}/users/token/refresh",
                                     json={"refresh_token": pair["refresh_token"]})
    assert refreshed.status_code == 401  # the suspension revoked the session, as the API's does


def test_bulk_revoke_sessions_acts_through_the_self_service_operation(owner, make_user, login, ctx):
    visitor, app = owner
    user = make_user(app, email="many@devices.example")
    for _ in range(2):
        login(app, user["email"], user["password"])
    base = f"/console/applications/{app['_id']}/users"
    asked = visitor.post(f"{base}/bulk", {"q": "devices", "action": "revoke-sessions"})
    assert '<strong id="bulk-count">1</strong>' in asked.text
    visitor.post(f"{base}/bulk", {"q": "devices", "action": "revoke-sessions", "confirm": "yes", "count": "1"})
    assert ctx.users.sessions.active(app["_id"], user["id"]) == []
    assert ctx.users.directory.status(app["_id"], user["id"]) == "active"

    unknown = visitor.post(f"{base}/bulk", {"q": "devices", "action": "delete-everyone"})
    assert unknown.status_code == 400 and "<code>action</code>" in unknown.text


def test_the_user_page_suspends_reactivates_revokes_sessions_and_shows_the_audit_trail(owner, make_user, login, ctx):
    visitor, app = owner
    user = make_user(app, email="grace@navy.example", name="Grace Hopper")
    login(app, user["email"], user["password"])
    login(app, user["email"], user["password"])
    page_url = f"/console/applications/{app['_id']}/users/{user['id']}"

    page = visitor.get(page_url)
    assert page.status_code == 200 and "Grace Hopper" in page.text and "2 active sessions" in page.text
    assert "<code>user.login</code>" in page.text  # the audit trail: records done by the user
    session_id = ctx.users.sessions.active(app["_id"], user["id"])[0]["_id"]
    one = visitor.post(page_url, {"action": "revoke-session", "session_id": session_id})
    assert one.status_code == 303 and "notice=session-revoked" in one.headers["location"]
    assert len(ctx.users.sessions.active(app["_id"], user["id"])) == 1
    again = visitor.post(page_url, {"action": "revoke-session", "session_id": session_id})
    assert again.status_code == 404 and "SESSION_NOT_FOUND" in again.text

    visitor.post(page_url, {"action": "suspend"})
    assert ctx.users.directory.status(app["_id"], user["id"]) == "suspended"
    assert ctx.users.sessions.active(app["_id"], user["id"]) == []
    suspended = visitor.get(page_url)
    assert '<dd id="user-status">suspended</dd>' in suspended.text and "Reactivate" in suspended.text
    visitor.post(page_url, {"action": "reactivate"})
    assert ctx.users.directory.status(app["_id"], user["id"]) == "active"
    assert [e["type"] for e in events_of(ctx, "user.unsuspended")] == ["user.unsuspended"]


def test_deleting_a_user_needs_the_email_typed(owner, make_user, ctx):
    visitor, app = owner
    user = make_user(app, email="leaving@example.com")
    page_url = f"/console/applications/{app['_id']}/users/{user['id']}"
    wrong = visitor.post(page_url, {"action": "delete", "confirm_email": "someone@example.com"})
    assert wrong.status_code == 400 and 'id="e-confirm_email"' in wrong.text
    assert ctx.users.directory.status(app["_id"], user["id"]) == "active"
    deleted = visitor.post(page_url, {"action": "delete", "confirm_email": "Leaving@example.com"})
    assert deleted.status_code == 303 and "notice=deleted" in deleted.headers["location"]
    assert ctx.users.directory.status(app["_id"], user["id"]) == "deleted"
    assert [e["data"]["user_id"] for e in events_of(ctx, "user.deleted")] == [user["id"]]
    assert visitor.get(page_url).status_code == 404


def test_a_viewer_sees_no_write_buttons_and_its_writes_are_refused(console, dashboard_account, make_dashboard_account,
                                                                   make_dashboard_app, make_user, login, ctx):
    app = ctx.applications.get(make_dashboard_app(dashboard_account, name="Shared")["id"])
    user = make_user(app, email="watched@example.com")
    login(app, user["email"], user["password"])
    viewer_account = make_dashboard_account()
    ctx.dashboard.organizations.add_member(dashboard_account.id, dashboard_account.organization_id,
                                           viewer_account.email, "viewer", ip="10.0.0.1")
    visitor = console()
    visitor.sign_in(viewer_account)
    base = f"/console/applications/{app['_id']}/users"

    listed = visitor.get(base)
    assert listed.status_code == 200 and "(read only)" in listed.text and "all matching" not in listed.text
    page = visitor.get(f"{base}/{user['id']}")
    assert page.status_code == 200 and "1 active session" in page.text
    assert not re.search(r"<button[^>]*>(Suspend|Revoke|Delete user|Reset|Assign|Save|Remove|Delete)", page.text)
    explained = visitor.get(f"{base}/{user['id']}", params={"permission": "posts:read"})
    assert explained.status_code == 200 and "<strong>Denied</strong>" in explained.text  # a read: viewers may ask

    for path, form in ((f"{base}/{user['id']}", {"action": "suspend"}),
                       (f"{base}/{user['id']}", {"action": "revoke-sessions"}),
                       (f"{base}/{user['id']}", {"action": "delete", "confirm_email": "watched@example.com"}),
                       (f"{base}/{user['id']}", {"action": "reset-mfa"}),
                       (f"{base}/{user['id']}", {"action": "set-attribute", "key": "level", "value": "9"}),
                       (f"{base}/{user['id']}", {"action": "assign-role", "role_id": str(uuid.uuid4())}),
                       (f"{base}/bulk", {"q": "", "action": "suspend", "confirm": "yes", "count": "1"})):
        refused = visitor.post(path, form)
        assert refused.status_code == 403 and "FORBIDDEN" in refused.text, (path, form)
    assert ctx.users.directory.status(app["_id"], user["id"]) == "active"
    assert len(ctx.users.sessions.active(app["_id"], user["id"])) == 1
    assert ctx.abac.attributes(app["_id"], user["id"]) == {}


def test_another_organizations_application_and_a_forged_post_are_refused(owner, console, make_dashboard_account,
                                                                        make_user, ctx):
    visitor, app = owner
    user = make_user(app)
    stranger = console()
    stranger.sign_in(make_dashboard_account())
    assert stranger.get(f"/console/applications/{app['_id']}/users").status_code == 404
    assert stranger.post(f"/console/applications/{app['_id']}/users/{user['id']}",
                         {"action": "suspend"}).status_code == 404
    forged = visitor.post(f"/console/applications/{app['_id']}/users/{user['id']}", {"action": "suspend"},
                          origin="https://evil.example")
    assert forged.status_code == 403 and "CSRF_TOKEN_INVALID" in forged.text
    assert ctx.users.directory.status(app["_id"], user["id"]) == "active"
    assert console().get(f"/console/applications/{app['_id']}/users").status_code == 303


def test_roles_are_assigned_with_scope_and_expiry_and_removed(owner, make_user, make_role, ctx, clock):
    visitor, app = owner
    user = make_user(app, email="editor@example.com")
    role = make_role(app, name="editor", permissions=("posts:write",), display_name="Editor")
    page_url = f"/console/applications/{app['_id']}/users/{user['id']}"
    assert "Assign role" in visitor.get(page_url).text

    past = (clock() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    refused = visitor.post(page_url, {"action": "assign-role", "role_id": role["_id"], "scope": "team:1",
                                      "expires_at": past})
    assert refused.status_code == 400
    assert 'id="e-expires_at"><code>expires_at</code>: must be in the future' in refused.text
    until = (clock() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    assigned = visitor.post(page_url, {"action": "assign-role", "role_id": role["_id"], "scope": "team:1",
                                       "expires_at": until})
    assert assigned.status_code == 303 and "notice=role-assigned" in assigned.headers["location"]
    [item] = ctx.roles.user_roles(app["_id"], user["id"])
    assert (item["name"], item["scope"], item["expires_at"][:16]) == ("editor", "team:1", until)
    assert [e["data"]["scope"] for e in events_of(ctx, "role.assigned")] == ["team:1"]
    again = visitor.post(page_url, {"action": "assign-role", "role_id": role["_id"], "scope": "team:1"})
    assert again.status_code == 409 and "AUTHZ_ROLE_ALREADY_ASSIGNED" in again.text

    removed = visitor.post(page_url, {"action": "remove-role", "role_id": role["_id"], "scope": "team:1"})
    assert removed.status_code == 303 and ctx.roles.user_roles(app["_id"], user["id"]) == []
    assert [e["data"]["role_id"] for e in events_of(ctx, "role.removed")] == [role["_id"]]


def test_attributes_are_set_as_json_or_text_and_deleted_with_the_apis_rules(owner, make_user, ctx):
    visitor, app = owner
    user = make_user(app, email="attrs@example.com")
    page_url = f"/console/applications/{app['_id']}/users/{user['id']}"
    visitor.post(page_url, {"action": "set-attribute", "key": "level", "value": "4"})
    visitor.post(page_url, {"action": "set-attribute", "key": "plan.tier", "value": "gold"})
    assert ctx.abac.attributes(app["_id"], user["id"]) == {"level": 4, "plan.tier": "gold"}
    shown = visitor.get(page_url).text
    assert "<td><code>plan.tier</code></td>" in shown and "<td><code>\"gold\"</code></td>" in shown
    bad = visitor.post(page_url, {"action": "set-attribute", "key": "bad key", "value": "1"})
    assert bad.status_code == 400 and "<code>key</code>" in bad.text and 'id="e-key"' in bad.text
    nested = visitor.post(page_url, {"action": "set-attribute", "key": "plan", "value": "1"})
    assert nested.status_code == 409  # a dotted prefix of plan.tier: the API's refusal
    deep = visitor.post(page_url, {"action": "set-attribute", "key": "deep", "value": "[" * 5000})
    assert deep.status_code == 400  # too deep to read as JSON: text, which the API's length rule refuses
    visitor.post(page_url, {"action": "delete-attribute", "key": "level"})
    assert ctx.abac.attributes(app["_id"], user["id"]) == {"plan.tier": "gold"}
    assert [e["data"]["key"] for e in events_of(ctx, "attribute.deleted")] == ["level"]


def test_mfa_is_shown_and_reset(owner, make_user_token, enable_mfa, ctx):  # noqa: F811  (the fixture)
    visitor, app = owner
    token = make_user_token(app)
    enable_mfa(app, token)
    page_url = f"/console/applications/{app['_id']}/users/{token.user['id']}"
    page = visitor.get(page_url)
    assert "Reset two-step verification" in page.text and "backup codes left" in page.text
    reset = visitor.post(page_url, {"action": "reset-mfa"})
    assert reset.status_code == 303 and "notice=mfa-reset" in reset.headers["location"]
    assert ctx.mfa.status(app["_id"], token.user["id"])["mfa_enabled"] is False
    assert [e["data"]["user_id"] for e in events_of(ctx, "mfa.disabled")] == [token.user["id"]]
    again = visitor.post(page_url, {"action": "reset-mfa"})
    assert again.status_code == 400 and "MFA_NOT_ENABLED" in again.text


@pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}],
                         indirect=True)
def test_a_user_whose_only_second_factor_is_a_passkey_can_be_reset(owner, make_user_token, register, ctx,  # noqa: F811
                                                                   outbox):
    """The page showed "Off" and no reset for a user whose second factor was a passkey
    (it read the TOTP status only), and its reset knew TOTP only: the user who lost the
    passkey stayed locked out.  The page shows the passkeys and resets them, as the
    dashboard's DELETE .../users/{id}/mfa does."""
    visitor, app = owner
    app = ctx.applications.update(app["_id"], {"passkeys": "second_factor"})
    token = make_user_token(app)
    assert register(app, token, SoftAuthenticator()).status_code == 201
    page_url = f"/console/applications/{app['_id']}/users/{token.user['id']}"
    page = visitor.get(page_url)
    assert "1 passkey: asked for at sign-in" in page.text and "Reset two-step verification" in page.text
    reset = visitor.post(page_url, {"action": "reset-mfa"})
    assert reset.status_code == 303 and "notice=mfa-reset" in reset.headers["location"]
    assert ctx.store["passkeys"].count_documents({"user_id": token.user["id"]}) == 0
    assert [e["data"] for e in events_of(ctx, "mfa.disabled")] == [{"user_id": token.user["id"], "method": "webauthn"}]
    assert "Off." in visitor.get(page_url).text


def test_explain_access_shows_the_decision_and_each_policys_trace(owner, make_user, make_role, ctx, client,
                                                                  make_api_key):
    visitor, app = owner
    user = make_user(app, email="reader@example.com")
    role = make_role(app, name="reader", permissions=("posts:read",))
    ctx.roles.assign(app["_id"], user["id"], {"role_id": role["_id"], "scope": None, "expires_at": None})
    key = make_api_key(app)
    created = client.simulate_post(f"/api/v1/applications/{app['_id']}/abac/policies", json={
        "name": "seniors edit", "effect": "allow", "permissions": ["posts:edit"],
        "condition": {"op": "gte", "left": {"attr": "user.attributes.level"}, "right": {"value": 4}}},
        headers={"Authorization": f"Bearer {key}"})
    assert created.status_code == 201, created.text
    page_url = f"/console/applications/{app['_id']}/users/{user['id']}"

    read = visitor.get(page_url, params={"permission": "posts:read"})
    assert "<strong>Allowed</strong>" in read.text and "<code>rbac</code>" in read.text
    edit = visitor.get(page_url, params={"permission": "posts:edit"})
    assert "<strong>Denied</strong>" in edit.text and "<code>no_match</code>" in edit.text
    assert "seniors edit" in edit.text
    assert "user.attributes.level" in edit.text  # the condition's trace
    ctx.abac.set_attribute(app["_id"], user["id"], "level", 5)
    assert "<code>allow_policy</code>" in visitor.get(page_url, params={"permission": "posts:edit"}).text
    bad = visitor.get(page_url, params={"permission": "not a permission"})
    assert bad.status_code == 400 and 'id="e-permission"' in bad.text
