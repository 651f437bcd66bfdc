"""Sudo mode: a dashboard session takes sensitive actions only within
IAMGATE_DASHBOARD_SUDO_SECONDS of its holder's last proof (the sign-in, or POST
/api/dashboard/me/reauthenticate with the password); reads, ordinary edits and API keys
are unaffected (docs/dashboard.md, "Sensitive actions")."""
from __future__ import annotations

from datetime import timedelta

import pytest

from controlplane.auth import SESSION_COOKIE
from shared.ids import digest
from tests.conftest import assert_error, bearer
from tests.plugins.dashboard import DASHBOARD_PASSWORD

REAUTHENTICATE = "/api/dashboard/me/reauthenticate"
WINDOW = 900  # IAMGATE_DASHBOARD_SUDO_SECONDS's default
WRONG = "Wrong-Password-1"


def reauthenticate(account, password=DASHBOARD_PASSWORD):
    return account.post(REAUTHENTICATE, json={"password": password})


@pytest.fixture
def colleague(make_dashboard_account):
    return make_dashboard_account()


@pytest.fixture
def member(dashboard_account, colleague):
    """The colleague as a viewer of the dashboard account's organization."""
    response = dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                                      json={"email": colleague.email, "role": "viewer"})
    assert response.status_code == 201, response.text
    return colleague


@pytest.fixture
def outsider(make_dashboard_account):
    """An account in none of the dashboard account's organizations."""
    return make_dashboard_account()


def api_keys(ctx, app):
    return ctx.store["api_keys"].count_documents({"app_id": app["id"]})


# Each sensitive action of ``account``: on ``app``, on ``member`` (a viewer of its
# organization) or adding ``outsider`` to that organization.
def create_api_key(account, app, _member, _outsider=None):
    return account.post(f"/api/dashboard/applications/{app['id']}/api-keys", json={"name": "backend"})


def add_member(account, _app, _member, outsider):
    return account.post(f"/api/dashboard/organizations/{account.organization_id}/members",
                        json={"email": outsider.email, "role": "admin"})


def raise_role(account, _app, member, _outsider):
    return account.put(f"/api/dashboard/organizations/{account.organization_id}/members/{member.id}",
                       json={"role": "admin"})


def delete_application(account, app, _member, _outsider):
    return account.delete(f"/api/dashboard/applications/{app['id']}")


def written(ctx, account, app, *people) -> tuple:
    """What the sensitive actions change, read from the store."""
    members = ctx.store["organization_members"]
    roles = [(members.find_one({"organization_id": account.organization_id, "account_id": person.id}) or {}).get("role")
             for person in people]
    return api_keys(ctx, app), roles, ctx.store["applications"].count_documents({"_id": app["id"]})


SENSITIVE = [create_api_key, add_member, raise_role, delete_application]


@pytest.mark.parametrize("action", SENSITIVE, ids=lambda action: action.__name__)
def test_an_old_session_is_asked_to_reauthenticate_and_nothing_is_written(
        action, dashboard_account, dashboard_app, member, outsider, ctx, clock):
    clock.advance(WINDOW)
    before = written(ctx, dashboard_account, dashboard_app, member, outsider)

    refused = action(dashboard_account, dashboard_app, member, outsider)

    error = assert_error(refused, 403, "DASHBOARD_REAUTH_REQUIRED")
    assert error["details"] == {"reauthenticate": REAUTHENTICATE,
                                "reauthenticate_passkey": f"{REAUTHENTICATE}/passkey/options"}
    assert written(ctx, dashboard_account, dashboard_app, member, outsider) == before
    assert reauthenticate(dashboard_account).status_code == 204
    assert action(dashboard_account, dashboard_app, member, outsider).status_code in (200, 201, 204)
    assert written(ctx, dashboard_account, dashboard_app, member, outsider) != before


@pytest.mark.parametrize("action", SENSITIVE, ids=lambda action: action.__name__)
def test_a_fresh_sign_in_needs_no_reauthentication(action, dashboard_account, dashboard_app, member, outsider,
                                                    clock):
    clock.advance(WINDOW - 1)
    assert action(dashboard_account, dashboard_app, member, outsider).status_code in (200, 201, 204)


def test_signing_in_again_is_a_fresh_proof(dashboard_account, dashboard_app, member, clock):
    clock.advance(WINDOW * 3)
    dashboard_account.login()
    assert create_api_key(dashboard_account, dashboard_app, member).status_code == 201


def test_the_proof_lasts_the_window_from_the_reauthentication(dashboard_account, dashboard_app, clock):
    clock.advance(WINDOW * 2)
    assert reauthenticate(dashboard_account).status_code == 204
    clock.advance(WINDOW - 1)
    assert create_api_key(dashboard_account, dashboard_app, None).status_code == 201
    clock.advance(1)
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")


@pytest.mark.parametrize("config_overrides", [{"dashboard_sudo_seconds": 60}])
def test_the_window_is_configured(dashboard_account, dashboard_app, clock):
    clock.advance(59)
    assert create_api_key(dashboard_account, dashboard_app, None).status_code == 201
    clock.advance(1)
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")


def test_reads_and_ordinary_edits_never_ask(dashboard_account, dashboard_app, member, clock):
    org, app_id = dashboard_account.organization_id, dashboard_app["id"]
    key = create_api_key(dashboard_account, dashboard_app, member).json["data"]
    clock.advance(WINDOW * 10)

    for path in ("/api/dashboard/me", "/api/dashboard/organizations", f"/api/dashboard/organizations/{org}/members",
                 "/api/dashboard/applications", f"/api/dashboard/applications/{app_id}",
                 f"/api/dashboard/applications/{app_id}/api-keys", f"/api/dashboard/applications/{app_id}/users"):
        assert dashboard_account.get(path).status_code == 200, path
    assert dashboard_account.put("/api/dashboard/me", json={"name": "Renamed"}).status_code == 200
    assert dashboard_account.request("PATCH", f"/api/dashboard/organizations/{org}",
                                     json={"name": "Renamed org"}).status_code == 200
    assert dashboard_account.post("/api/dashboard/applications", json={"name": "Another"}).status_code == 201
    assert dashboard_account.put(f"/api/dashboard/applications/{app_id}",
                                 json={"description": "edited"}).status_code == 200
    assert dashboard_account.put(f"/api/dashboard/applications/{app_id}/branding",
                                 json={"color": "#112233"}).status_code == 200
    assert dashboard_account.delete(f"/api/dashboard/applications/{app_id}/api-keys/{key['id']}").status_code == 204
    assert dashboard_account.delete(f"/api/dashboard/organizations/{org}/members/{member.id}").status_code == 204


def test_a_session_stored_before_the_change_is_asked_but_not_signed_out(dashboard_account, dashboard_app, ctx):
    ctx.store["dashboard_sessions"].update_one({"_id": digest(dashboard_account.session)},
                                               {"$unset": {"authenticated_at": ""}})

    assert dashboard_account.get("/api/dashboard/me").status_code == 200
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")
    assert reauthenticate(dashboard_account).status_code == 204
    assert create_api_key(dashboard_account, dashboard_app, None).status_code == 201


def test_reauthenticating_moves_only_the_calling_session(dashboard_account, dashboard_app, clock):
    first = dashboard_account.session
    dashboard_account.login()
    second = dashboard_account.session
    clock.advance(WINDOW)

    assert reauthenticate(dashboard_account).status_code == 204

    assert create_api_key(dashboard_account, dashboard_app, None).status_code == 201
    dashboard_account.session = first
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")
    assert second != first


def test_a_wrong_password_counts_toward_the_login_lock(client, dashboard_account, dashboard_app, clock):
    clock.advance(WINDOW)
    for _ in range(4):
        error = assert_error(reauthenticate(dashboard_account, WRONG), 422, "INVALID_PASSWORD")
        assert error["details"] == {"field": "password"}
    assert_error(reauthenticate(dashboard_account, WRONG), 422, "INVALID_PASSWORD")

    assert_error(reauthenticate(dashboard_account), 429, "AUTH_ACCOUNT_LOCKED")
    signed_in = client.simulate_post("/api/dashboard/login", remote_addr="192.0.2.77",
                                     json={"email": dashboard_account.email, "password": DASHBOARD_PASSWORD})
    assert_error(signed_in, 429, "AUTH_ACCOUNT_LOCKED")  # one lock: the cookie buys no guesses
    assert_error(create_api_key(dashboard_account, dashboard_app, None), 403, "DASHBOARD_REAUTH_REQUIRED")


def test_reauthenticating_needs_a_session(client):
    response = client.simulate_post(REAUTHENTICATE, json={"password": DASHBOARD_PASSWORD})
    assert_error(response, 401, "UNAUTHORIZED")


def test_reauthentication_is_audited(dashboard_account, ctx):
    reauthenticate(dashboard_account, WRONG)
    reauthenticate(dashboard_account)

    records = list(ctx.store["events"].find({"action": "dashboard_account.reauthenticated"}).sort("seq", 1))
    assert [record["result"] for record in records] == [{"status": "failure", "reason": "invalid_password"},
                                                        {"status": "success"}]
    assert {record["organization_id"] for record in records} == {dashboard_account.organization_id}
    assert all(record["actor"]["id"] == dashboard_account.id for record in records)


def test_api_keys_are_not_sessions(client, dashboard_account, dashboard_app, clock):
    key = dashboard_account.post(f"/api/dashboard/applications/{dashboard_app['id']}/api-keys",
                                 json={"name": "admin", "permissions": ["oidc:manage"]}).json["data"]["key"]
    clock.advance(WINDOW * 10)

    created = client.simulate_post(f"/api/v1/applications/{dashboard_app['id']}/oidc/clients", headers=bearer(key),
                                   json={"name": "Printer", "redirect_uris": ["https://printer.example/callback"]})
    assert created.status_code == 201, created.text
    # Not even with a stale session cookie beside it: the key is what authenticates.
    rotated = client.simulate_post(
        f"/api/v1/applications/{dashboard_app['id']}/oidc/clients/{created.json['data']['id']}/rotate-secret",
        headers=bearer(key), cookies={SESSION_COOKIE: dashboard_account.session}, json={})
    assert rotated.status_code == 200, rotated.text


def test_the_openapi_document_lists_the_route_and_the_refusal(client):
    paths = client.simulate_get("/openapi.json").json["paths"]

    reauth = paths[REAUTHENTICATE]["post"]
    assert set(reauth["responses"]) >= {"204", "401", "422", "429"}
    assert reauth["security"] == [{"dashboardSession": []}]

    def refuses(path, method):
        return "DASHBOARD_REAUTH_REQUIRED" in paths[path][method]["responses"].get("403", {}).get("description", "")

    apps, orgs = "/api/dashboard/applications/{applicationId}", "/api/dashboard/organizations/{organizationId}"
    for path, method in [(f"{apps}/api-keys", "post"), (f"{orgs}/members", "post"),
                         (f"{orgs}/members/{{accountId}}", "put"), (apps, "delete"),
                         (apps, "put")]:  # when it adds a sign-in redirect URI
        assert refuses(path, method), (path, method)
    for path, method in [(f"{apps}/api-keys", "get"), (f"{orgs}/members", "get"),
                         (f"{orgs}/members/{{accountId}}", "delete"), (REAUTHENTICATE, "post")]:
        assert not refuses(path, method), (path, method)


def test_a_stale_session_cannot_add_a_sign_in_redirect_uri(dashboard_account, dashboard_app, ctx, clock):
    """oauth_redirect_uris is where connection sign-ins send the provider's code: adding
    one asks, as an OIDC client's redirect URIs do; other edits of the application, and
    removing a URI, do not."""
    app_id = dashboard_app["id"]
    clock.advance(WINDOW)
    # The gate holds where declared: the same session may not mint a key.
    assert_error(dashboard_account.post(f"/api/dashboard/applications/{app_id}/api-keys", json={"name": "k"}),
                 403, "DASHBOARD_REAUTH_REQUIRED")

    changed = dashboard_account.put(f"/api/dashboard/applications/{app_id}",
                                    json={"oauth_redirect_uris": ["https://thief.example/callback"]})

    assert changed.status_code == 403, changed.text
    assert "https://thief.example/callback" not in (ctx.applications.get(app_id).get("oauth_redirect_uris") or [])
    assert dashboard_account.put(f"/api/dashboard/applications/{app_id}",
                                 json={"name": "Renamed", "oauth_redirect_uris": []}).status_code == 200


def test_a_proof_dated_ahead_of_the_clock_opens_no_longer_window(dashboard_account, dashboard_app, ctx, clock):
    """A proof written by a process whose clock runs ahead (more than a few seconds) is
    no proof: the window is the configured one."""
    app_id = dashboard_app["id"]
    ahead = clock() + timedelta(hours=1)  # written by a process whose clock runs an hour ahead
    ctx.store["dashboard_sessions"].update_one({"_id": digest(dashboard_account.session)},
                                               {"$set": {"authenticated_at": ahead}})
    clock.advance(WINDOW * 2)  # half an hour after the real sign-in: the configured window is long closed

    minted = dashboard_account.post(f"/api/dashboard/applications/{app_id}/api-keys", json={"name": "late"})

    assert_error(minted, 403, "DASHBOARD_REAUTH_REQUIRED")
