"""Sudo mode in the console: a sensitive write of a session older than
IAMGATE_DASHBOARD_SUDO_SECONDS is refused on its page with a password form; the form
re-authenticates (CSRF token and Origin, as every console write) and sends the browser
back to that page, a console path only, with a notice to repeat the action
(docs/dashboard.md, "Sensitive actions")."""
from __future__ import annotations

import re
from html import unescape

import pytest

from controlplane.auth import SESSION_COOKIE
from tests.console.conftest import FORM, ORIGIN
from tests.plugins.users import PASSWORD, fresh_address

WINDOW = 900
REAUTHENTICATE = "/console/account/reauthenticate"
GITHUB = {"preset": "github", "client_id": "gh-client", "client_secret": "gh-secret-value-1", "linking": "none",
          "jit": "on", "is_active": "on"}


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True}


@pytest.fixture
def outsider(make_dashboard_account):
    return make_dashboard_account()


@pytest.fixture
def things(ctx, dashboard_account, owner, make_dashboard_account):
    """An OIDC client, a webhook, a connection and a viewer of the organization, made
    through the services (no session involved)."""
    _visitor, app_id = owner
    client, _secret = ctx.oidc.clients.create(app_id, {
        "name": "Web", "redirect_uris": ["https://shop.example/cb"], "token_endpoint_auth_method":
        "client_secret_basic"})
    webhook, _secret = ctx.webhooks.management.create(app_id, {"url": "http://127.0.0.1:9/hooks",
                                                               "events": ["user.created"]})
    viewer = make_dashboard_account()
    ctx.dashboard.organizations.add_member(dashboard_account.id, dashboard_account.organization_id, viewer.email,
                                           "viewer", ip="10.0.0.1")
    return {"client": client["_id"], "webhook": webhook["_id"], "viewer": viewer}


def app_base(app_id):
    return f"/console/applications/{app_id}"


# Each sensitive console write: (the page it is made on, the path it posts to, its form).
def sensitive_writes(app_id, org_id, things, outsider):
    base = app_base(app_id)
    client, webhook = f"{base}/oidc-clients/{things['client']}", f"{base}/webhooks/{things['webhook']}"
    return {
        "create an API key": (f"{base}/api-keys", f"{base}/api-keys",
                              {"name": "backend", "permission:roles:read": "on"}),
        "add a member": (f"/console/organizations/{org_id}", f"/console/organizations/{org_id}",
                         {"email": outsider.email, "role": "admin"}),
        "change a member's role": (f"/console/organizations/{org_id}",
                                   f"/console/organizations/{org_id}/members/{things['viewer'].id}",
                                   {"action": "role", "role": "admin"}),
        "register an OIDC client": (f"{base}/oidc-clients", f"{base}/oidc-clients", {
            "name": "Thief", "token_endpoint_auth_method": "client_secret_basic",
            "redirect_uris": "https://thief.example/cb", "scope_openid": "on", "grant_authorization_code": "on"}),
        "change an OIDC client": (client, client, {"name": "Web", "redirect_uris": "https://thief.example/cb",
                                                   "scope_openid": "on", "grant_authorization_code": "on",
                                                   "is_active": "on"}),
        "rotate a client secret": (client, f"{client}/rotate-secret", {"previous_secret_valid_for": "0"}),
        "create a webhook": (f"{base}/webhooks", f"{base}/webhooks",
                             {"url": "http://127.0.0.1:9/thief", "event_user.created": "on"}),
        "change a webhook": (webhook, webhook, {"url": "http://127.0.0.1:9/thief", "event_user.created": "on",
                                                "is_active": "on"}),
        "rotate a webhook secret": (webhook, f"{webhook}/rotate-secret", {}),
        "create a connection": (f"{base}/connections", f"{base}/connections", GITHUB),
        "delete the application": (base, f"{base}/delete", {"confirm_name": "Shop"}),
    }


WRITES = ["create an API key", "add a member", "change a member's role", "register an OIDC client",
          "change an OIDC client", "rotate a client secret", "create a webhook", "change a webhook",
          "rotate a webhook secret", "create a connection", "delete the application"]


def snapshot(ctx, app_id, org_id):
    """What the sensitive writes change, read through the services and the store."""
    if ctx.applications.live(app_id) is None:
        return "deleted"
    return (
        [(k["name"], k["_id"]) for k in ctx.api_keys.list(app_id)],
        sorted((m["account_id"], m["role"])
               for m in ctx.store["organization_members"].find({"organization_id": org_id})),
        [(c["name"], c["redirect_uris"], c["secret_digest"]) for c in ctx.oidc.clients.list(app_id)],
        [(w["url"], w["secret"]) for w in ctx.store["webhooks"].find({"app_id": app_id})],
        [c.name for c in ctx.connections.list(app_id)],
    )


def password_form(page_text: str) -> dict:
    """The hidden fields of the refusal's password form."""
    form = re.search(r'<form method="post" action="/console/account/reauthenticate".*?</form>', page_text, re.S)
    assert form, "no password form on the page"
    return {name: unescape(value) for name, value in re.findall(r'name="(next)" value="([^"]*)"', form.group(0))}


@pytest.mark.parametrize("write", WRITES)
def test_an_old_session_is_refused_on_the_page_and_the_password_form_brings_it_back(
        write, owner, things, outsider, dashboard_account, ctx, clock):
    visitor, app_id = owner
    page, path, form = sensitive_writes(app_id, dashboard_account.organization_id, things, outsider)[write]
    visitor.get(page)
    clock.advance(WINDOW)
    before = snapshot(ctx, app_id, dashboard_account.organization_id)

    refused = visitor.post(path, form)

    assert refused.status_code == 403, refused.text
    assert "Error code: <code>DASHBOARD_REAUTH_REQUIRED</code>" in refused.text
    assert snapshot(ctx, app_id, dashboard_account.organization_id) == before
    assert password_form(refused.text) == {"next": page}

    back = visitor.post(REAUTHENTICATE, {"next": page, "password": dashboard_account.password})
    assert back.status_code == 303 and back.headers["location"] == f"{page}?notice=reauthenticated"
    shown = visitor.get(back.headers["location"])
    assert shown.status_code == 200 and 'id="reauthenticated"' in shown.text and "Repeat the action" in shown.text

    done = visitor.post(path, form)
    assert done.status_code in (200, 201, 303), done.text
    assert snapshot(ctx, app_id, dashboard_account.organization_id) != before


def test_the_member_table_fragment_shows_the_password_form_too(owner, things, dashboard_account, clock):
    visitor, _app_id = owner
    org = dashboard_account.organization_id
    visitor.get(f"/console/organizations/{org}")
    clock.advance(WINDOW)
    refused = visitor.post(f"/console/organizations/{org}/members/{things['viewer'].id}",
                           {"action": "role", "role": "admin"}, headers={"HX-Request": "true"})
    assert refused.status_code == 403 and "<html" not in refused.text.lower()
    assert password_form(refused.text) == {"next": f"/console/organizations/{org}"}


def test_a_fresh_sign_in_needs_no_reauthentication(owner, dashboard_account, clock, ctx):
    visitor, app_id = owner
    clock.advance(WINDOW * 2)
    visitor.sign_in(dashboard_account)
    visitor.get(f"{app_base(app_id)}/api-keys")
    assert visitor.post(f"{app_base(app_id)}/api-keys", {"name": "k", "permission:roles:read": "on"}).status_code == 201


def test_reads_and_ordinary_edits_never_ask(owner, things, dashboard_account, ctx, clock):
    visitor, app_id = owner
    base, org = app_base(app_id), dashboard_account.organization_id
    clock.advance(WINDOW * 10)
    for page in (base, f"{base}/api-keys", f"{base}/oidc-clients", f"{base}/webhooks", f"{base}/connections",
                 f"/console/organizations/{org}", "/console/account"):
        assert visitor.get(page).status_code == 200, page
    saved = visitor.post(base, {"name": "Shop 2", "description": "", "environment": "development"})
    assert saved.status_code == 200 and "DASHBOARD_REAUTH_REQUIRED" not in saved.text
    assert ctx.applications.get(app_id)["name"] == "Shop 2"
    removed = visitor.post(f"/console/organizations/{org}/members/{things['viewer'].id}", {"action": "remove"})
    assert removed.status_code == 303
    deleted = visitor.post(f"{base}/webhooks/{things['webhook']}/delete", {"confirm_name": "http://127.0.0.1:9/hooks"})
    assert "DASHBOARD_REAUTH_REQUIRED" not in deleted.text


def test_a_wrong_password_shows_the_form_again_and_counts_toward_the_lock(
        client, owner, dashboard_account, clock):
    visitor, app_id = owner
    page = f"{app_base(app_id)}/api-keys"
    visitor.get(page)
    clock.advance(WINDOW)
    for _ in range(5):
        wrong = visitor.post(REAUTHENTICATE, {"next": page, "password": "Wrong-Password-1"})
        assert wrong.status_code == 422 and "Error code: <code>INVALID_PASSWORD</code>" in wrong.text
        assert password_form(wrong.text) == {"next": page}
    locked = visitor.post(REAUTHENTICATE, {"next": page, "password": dashboard_account.password})
    assert locked.status_code == 429 and "AUTH_ACCOUNT_LOCKED" in locked.text
    signed_in = client.simulate_post("/api/dashboard/login", remote_addr="192.0.2.78",
                                     json={"email": dashboard_account.email, "password": dashboard_account.password})
    assert signed_in.status_code == 429  # the login lock the API's sign-in uses


@pytest.mark.parametrize("next_path", [
    "https://evil.example/console/applications", "//evil.example/console/", "/\\evil.example", "/console/\\\\x",
    "/console//evil.example", "javascript:alert(1)", "/api/dashboard/me", "/console/applications?x=1", "",
    "/console/app\u00e9", "/console/a\nLocation: https://evil.example"])
def test_it_returns_to_console_paths_only(next_path, owner, dashboard_account):
    visitor, _app_id = owner
    visitor.get("/console/account")
    back = visitor.post(REAUTHENTICATE, {"next": next_path, "password": dashboard_account.password})
    assert back.status_code == 303
    assert back.headers["location"] == "/console/applications?notice=reauthenticated"


def test_the_form_is_a_console_write(owner, dashboard_account, client, ctx, clock):
    visitor, app_id = owner
    page = f"{app_base(app_id)}/api-keys"
    visitor.get(page)
    clock.advance(WINDOW)
    no_token = visitor.post(REAUTHENTICATE, {"next": page, "password": dashboard_account.password}, token=False)
    cross_site = visitor.post(REAUTHENTICATE, {"next": page, "password": dashboard_account.password},
                              origin="https://evil.example")
    for refused in (no_token, cross_site):
        assert refused.status_code == 403 and "CSRF_TOKEN_INVALID" in refused.text
    # Still refused: neither moved the session's proof.
    assert visitor.post(page, {"name": "k", "permission:roles:read": "on"}).status_code == 403
    signed_out = client.simulate_post(REAUTHENTICATE, body="password=x&next=/console/account",
                                      headers={"Content-Type": FORM, "Origin": ORIGIN})
    assert signed_out.status_code == 303 and signed_out.headers["location"] == "/console/sign-in"
    assert SESSION_COOKIE in visitor.cookies


def test_a_stale_session_cannot_make_an_end_user_that_registers_oidc_clients(owner, make_user, client, ctx, clock):
    """An end user's roles open the V1 routes as an API key's permissions do: creating a
    role that covers a V1 permission, and assigning one, ask as minting a key does, or a
    stale session would make an end user of the thief's own (the public registration)
    that registers the client the console refused it."""
    visitor, app_id = owner
    base = f"/console/applications/{app_id}"
    visitor.get(f"{base}/roles")
    clock.advance(WINDOW)

    # The gate holds where it is declared: the console refuses the stale session's client.
    direct = visitor.post(f"{base}/oidc-clients", {
        "name": "Thief", "token_endpoint_auth_method": "client_secret_basic", "redirect_uris": "https://thief.example/cb",
        "scope_openid": "on", "grant_authorization_code": "on"})
    assert direct.status_code == 403 and "DASHBOARD_REAUTH_REQUIRED" in direct.text

    # The thief's own end user (the public registration), then a role holding oidc:manage for it.
    thief = make_user({"_id": app_id}, email="thief@thief.example")
    role = visitor.post(f"{base}/roles", {"name": "ops", "display_name": "Ops",
                                          "permissions": "oidc:manage\nwebhooks:manage\nconnections:manage"})
    if role.status_code == 303:
        role_id = role.headers["location"].rsplit("/", 1)[1]
        visitor.get(f"{base}/users/{thief['id']}")
        visitor.post(f"{base}/users/{thief['id']}", {"action": "assign-role", "role_id": role_id})

    signed_in = client.simulate_post(f"/api/v1/applications/{app_id}/users/login", remote_addr=fresh_address(),
                                     json={"email": thief["email"], "password": PASSWORD})
    token = signed_in.json["data"]["access_token"]
    created = client.simulate_post(f"/api/v1/applications/{app_id}/oidc/clients",
                                   headers={"Authorization": f"Bearer {token}"},
                                   json={"name": "Thief", "redirect_uris": ["https://thief.example/cb"]})

    # No password was given since the window closed: nothing may send codes to the thief.
    assert created.status_code != 201, created.text
    assert not [c for c in ctx.oidc.clients.list(app_id) if "https://thief.example/cb" in c["redirect_uris"]]


def test_roles_of_the_applications_own_permissions_never_ask(owner, make_user, ctx, clock):
    """Roles of the application's own permissions (posts:edit) open no V1 route: creating,
    changing and assigning them stay ordinary edits."""
    visitor, app_id = owner
    base = f"/console/applications/{app_id}"
    visitor.get(f"{base}/roles")
    clock.advance(WINDOW)
    user = make_user({"_id": app_id}, email="editor@example.com")
    created = visitor.post(f"{base}/roles", {"name": "editor", "display_name": "Editor", "permissions": "posts:edit"})
    assert created.status_code == 303, created.text
    role_id = created.headers["location"].rsplit("/", 1)[1]
    visitor.get(f"{base}/users/{user['id']}")
    assigned = visitor.post(f"{base}/users/{user['id']}", {"action": "assign-role", "role_id": role_id})
    assert assigned.status_code == 303, assigned.text
    widened = visitor.post(f"{base}/roles/{role_id}", {"display_name": "Editor", "permissions": "posts:edit\nusers:*"})
    assert widened.status_code == 403 and "DASHBOARD_REAUTH_REQUIRED" in widened.text
    assert ctx.roles.resolve(app_id, role_id)["permissions"] == ["posts:edit"]
