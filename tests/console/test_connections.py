"""The console's connections screens (upstream identity providers): list, create from a
preset or a custom OIDC issuer, edit, "Test connection", delete.  Each write goes through
the service of V1/connections and leaves the same audit record; the client secret is
never rendered; members and viewers are refused 403 as the API refuses them."""
from __future__ import annotations

import pytest

from controlplane.audit.service import APPLICATION

SECRET = "upstream-s3cret-never-shown"


@pytest.fixture
def config_overrides():
    # The local provider is http on 127.0.0.1.
    return {"webhook_allow_private_targets": True, "connection_http_timeout": 10}


GITHUB = {"preset": "github", "client_id": "gh-client", "client_secret": SECRET, "linking": "none",
          "jit": "on", "is_active": "on"}


def audit_records(ctx, app_id, actor_id=None):
    """The application's upstream_connection.* records, oldest first, without what
    differs between two writers (ids, times, the request, the actor)."""
    filters = {"action": "upstream_connection.", **({"actor_id": actor_id} if actor_id else {})}
    records = ctx.audit.page(APPLICATION, app_id, filters, None, 100)[0]
    differs = {"id", "at", "request_id", "ip", "user_agent", "actor", "target", "hash", "prev_hash", "seq"}
    return [{key: value for key, value in record.items() if key not in differs} for record in reversed(records)]


def created_from_the_list(visitor, app_id, form):
    created = visitor.post(f"/console/applications/{app_id}/connections", form)
    assert created.status_code == 303, created.text
    return created.headers["location"]


def test_create_from_a_preset_lists_it_and_never_shows_the_secret(owner, ctx, dashboard_account):
    visitor, app_id = owner
    base = f"/console/applications/{app_id}/connections"
    empty = visitor.get(base)
    assert empty.status_code == 200 and "Shop has no connection yet." in empty.text
    assert 'type="password"' in empty.text and 'autocomplete="new-password"' in empty.text
    location = created_from_the_list(visitor, app_id, GITHUB)
    [connection] = ctx.connections.list(app_id)
    assert location == f"{base}/{connection.id}?notice=created"
    assert (connection.name, connection.preset, connection.type, connection.client_id) == (
        "github", "github", "oauth2", "gh-client")
    assert connection.client_secret_enc is not None and SECRET not in connection.client_secret_enc
    assert [r["action"] for r in audit_records(ctx, app_id, dashboard_account.id)] == ["upstream_connection.created"]

    listed = visitor.get(base)
    assert listed.status_code == 200 and f'href="{base}/{connection.id}"' in listed.text
    assert "GitHub" in listed.text and "oauth2 (github)" in listed.text and "<code>none</code>" in listed.text
    detail = visitor.get(location)
    assert detail.status_code == 200 and "Connection created." in detail.text and "client secret set" in detail.text
    assert "Leave blank to keep the stored secret" in detail.text
    for page in (listed, detail):
        assert SECRET not in page.text and page.headers["cache-control"] == "no-store"
    # Each linking mode with its risk, in words, beside its radio button.
    for mode in ("none", "verify", "trusted_email"):
        assert f'id="f-linking-{mode}"' in detail.text and f'id="h-linking-{mode}"' in detail.text
    assert "Risk: an account takeover" in detail.text
    # GitHub sends no iss: the connection's own redirect URI (the mix-up defence), beside the application's
    # callback (GitHub accepts any redirect URI below the registered one), to register exactly.
    assert f"/oidc/connections/{app_id}/{connection.id}/callback</code> at the provider" in detail.text
    assert "Register exactly this one" in detail.text
    assert "does not send <code>iss</code>" in detail.text


def test_a_custom_oidc_issuer_is_discovered_and_its_endpoints_shown(owner, ctx, provider):
    visitor, app_id = owner
    location = created_from_the_list(visitor, app_id, {
        "preset": "", "name": "acme", "display_name": "Acme SSO", "issuer": provider.issuer, "client_id": "c1",
        "client_secret": SECRET, "scopes": "openid email", "email_domains": "acme.example\r\nAcme.test",
        "claim_email": "mail", "claim_attributes": "department=dept", "linking": "verify", "jit": "on",
        "is_active": "on"})
    [connection] = ctx.connections.list(app_id)
    assert (connection.issuer, connection.type, connection.scopes) == (provider.issuer, "oidc", ("openid", "email"))
    assert connection.email_domains == ("acme.example", "acme.test") and connection.linking == "verify"
    assert connection.claim_mapping.email == "mail" and dict(connection.claim_mapping.attributes) == {
        "department": "dept"}
    detail = visitor.get(location).text
    assert f"{provider.issuer}/token" in detail and "department=dept" in detail and SECRET not in detail
    # The provider sends iss: the application's callback.
    assert connection.endpoints.iss_parameter_supported
    assert f"/oidc/connections/{app_id}/callback</code> at the provider" in detail
    assert "does not send <code>iss</code>" not in detail


def test_errors_are_shown_at_the_api_field_paths_and_nothing_is_created(owner, ctx, provider):
    visitor, app_id = owner
    refused = visitor.post(f"/console/applications/{app_id}/connections", {
        "name": "Bad Name", "issuer": provider.issuer, "client_id": "c1", "client_secret": SECRET,
        "scopes": "openid", "email_domains": "not a domain", "claim_email": "x" * 101, "linking": "none"})
    assert refused.status_code == 400 and "Several fields are invalid." in refused.text
    for path in ("name", "email_domains", "claim_mapping.email"):
        assert f"<code>{path}</code>:" in refused.text, path
    assert 'id="e-claim_email"' in refused.text and 'aria-invalid="true"' in refused.text
    assert SECRET not in refused.text  # not even the form sent back
    assert 'value="Bad Name"' in refused.text  # the rest of the form is kept

    trusted_email = visitor.post(f"/console/applications/{app_id}/connections", {**GITHUB,
                                                                                 "linking": "trusted_email"})
    assert trusted_email.status_code == 400 and "<code>linking</code>: trusted_email links accounts" in \
        trusted_email.text
    no_provider = visitor.post(f"/console/applications/{app_id}/connections", {
        "name": "gone", "issuer": "http://127.0.0.1:9", "client_id": "c1", "linking": "none"})
    assert no_provider.status_code == 502 and "CONNECTION_PROVIDER_ERROR" in no_provider.text
    assert ctx.connections.list(app_id) == []


def test_edit_keeps_a_blank_secret_and_test_connection_shows_each_check(owner, ctx, provider, dashboard_account):
    visitor, app_id = owner
    location = created_from_the_list(visitor, app_id, {
        "name": "acme", "issuer": provider.issuer, "client_id": "c1", "client_secret": SECRET, "linking": "none",
        "jit": "on", "is_active": "on"})
    [connection] = ctx.connections.list(app_id)
    page = location.split("?")[0]
    saved = visitor.post(page, {"name": "acme", "display_name": "Acme", "issuer": provider.issuer,
                                "client_id": "c2", "client_secret": "", "scopes": "openid profile",
                                "linking": "trusted_email", "trusted": "on", "store_tokens": "on",
                                "email_domains": "acme.example"})
    assert saved.status_code == 200 and "Connection saved." in saved.text, saved.text
    after = ctx.connections.get(app_id, connection.id)
    assert after.client_secret_enc == connection.client_secret_enc  # blank: kept
    assert (after.client_id, after.linking, after.trusted, after.store_tokens, after.jit, after.is_active) == (
        "c2", "trusted_email", True, True, False, False)
    assert after.endpoints.fetched_at == connection.endpoints.fetched_at  # same issuer: no new discovery
    changed = visitor.post(page, {"name": "acme", "display_name": "Acme", "issuer": provider.issuer,
                                  "client_id": "c2", "client_secret": "another-secret", "linking": "none",
                                  "is_active": "on"})
    assert changed.status_code == 200 and "another-secret" not in changed.text
    assert ctx.connections.get(app_id, connection.id).client_secret_enc != connection.client_secret_enc
    assert [r["action"] for r in audit_records(ctx, app_id, dashboard_account.id)] == [
        "upstream_connection.created", "upstream_connection.updated", "upstream_connection.updated"]

    provider.discovery["issuer"] = "https://a.example.com"
    report = visitor.post(f"{page}/test")
    assert report.status_code == 200 and "Test: something is wrong" in report.text
    assert "<strong>OK</strong> <code>discovery</code>: fetched" in report.text
    assert "<strong>Failed</strong> <code>issuer</code>: discovery issuer https://a.example.com differs" in report.text
    provider.discovery["issuer"] = provider.issuer
    assert "Test: every check passed" in visitor.post(f"{page}/test").text


def test_a_blank_required_setting_is_refused_at_its_field(owner, ctx):
    visitor, app_id = owner
    page = created_from_the_list(visitor, app_id, GITHUB).split("?")[0]
    refused = visitor.post(page, {**GITHUB, "client_id": " ", "client_secret": ""})
    assert refused.status_code == 400 and "<code>client_id</code>:" in refused.text
    assert ctx.connections.list(app_id)[0].client_id == "gh-client"


def test_the_list_pages_on_the_server(owner, ctx, clock):
    visitor, app_id = owner
    for n in range(3):
        ctx.connections.create(app_id, {"preset": "github", "name": f"gh-{n}", "client_id": "c"})
        clock.advance(1)
    base = f"/console/applications/{app_id}/connections"
    first, second = visitor.get(f"{base}?per_page=2"), visitor.get(f"{base}?per_page=2&page=2")
    # The API's order (creation), two a page.
    assert "Page 1 of 2" in first.text and "gh-0" in first.text and "gh-1" in first.text and "gh-2" not in first.text
    assert 'href="?per_page=2&amp;page=2"' in first.text and 'hx-target="#connection-list"' in first.text
    assert "gh-2" in second.text and "gh-1" not in second.text


@pytest.mark.parametrize("screen", ["connections", "oidc-clients", "webhooks"])
def test_a_bad_page_parameter_is_the_apis_400_at_the_first_page(owner, screen):
    """A list screen's bad ?page= (was a 500: the listing's status collided with the page's)."""
    visitor, app_id = owner
    refused = visitor.get(f"/console/applications/{app_id}/{screen}?page=0")
    assert refused.status_code == 400 and "VALIDATION_" in refused.text and "<h1>" in refused.text


def test_delete_needs_the_name_typed(owner, ctx, dashboard_account):
    visitor, app_id = owner
    page = created_from_the_list(visitor, app_id, GITHUB).split("?")[0]
    wrong = visitor.post(f"{page}/delete", {"confirm_name": "gitlab"})
    assert wrong.status_code == 400 and "<code>confirm_name</code>:" in wrong.text
    assert len(ctx.connections.list(app_id)) == 1
    deleted = visitor.post(f"{page}/delete", {"confirm_name": "github"})
    assert deleted.status_code == 303 and deleted.headers["location"] == f"/console/applications/{app_id}/connections"
    assert ctx.connections.list(app_id) == []
    assert audit_records(ctx, app_id, dashboard_account.id)[-1]["action"] == "upstream_connection.deleted"
    assert visitor.get(page).status_code == 404


def test_members_and_viewers_are_refused_as_the_api_refuses(owner, reader, ctx):
    visitor, app_id = owner
    page = created_from_the_list(visitor, app_id, GITHUB).split("?")[0]
    [connection] = ctx.connections.list(app_id)
    base = f"/console/applications/{app_id}"
    for role in ("viewer", "member"):
        other = reader(role)
        for path in (f"{base}/connections", page):
            shown = other.get(path)
            assert shown.status_code == 403 and "The permission connections:manage is required." in shown.text
            assert "gh-client" not in shown.text
        assert f"{base}/connections" not in other.get(base).text  # not linked
        for path, form in ((f"{base}/connections", GITHUB), (page, {**GITHUB, "client_id": "hijacked"}),
                           (f"{page}/test", {}), (f"{page}/delete", {"confirm_name": "github"})):
            refused = other.post(path, form)
            assert refused.status_code == 403 and "FORBIDDEN" in refused.text, path
    assert ctx.connections.list(app_id) == [connection]
    assert f"{base}/connections" in visitor.get(base).text


def test_writes_need_the_csrf_token(owner, ctx):
    visitor, app_id = owner
    refused = visitor.post(f"/console/applications/{app_id}/connections", GITHUB, token=False)
    assert refused.status_code == 403 and "CSRF_TOKEN_INVALID" in refused.text
    assert ctx.connections.list(app_id) == []


def test_a_console_write_leaves_the_audit_record_the_api_write_does(owner, ctx, make_api_key, make_dashboard_app,
                                                                     dashboard_account):
    visitor, app_id = owner
    api_app = make_dashboard_app(dashboard_account, name="Other")
    key = make_api_key(ctx.applications.get(api_app["id"]), permissions=["connections:manage"])
    headers = {"Authorization": f"Bearer {key}"}
    created = visitor.client.simulate_post(f"/api/v1/applications/{api_app['id']}/connections", headers=headers,
                                           json={"preset": "github", "client_id": "gh-client",
                                                 "client_secret": SECRET})
    assert created.status_code == 201
    created_from_the_list(visitor, app_id, GITHUB)
    by_api, by_console = audit_records(ctx, api_app["id"]), audit_records(ctx, app_id)
    assert [r["action"] for r in by_console] == ["upstream_connection.created"]
    assert [{k: v for k, v in r.items() if k != "application_id"} for r in by_console] == [
        {k: v for k, v in r.items() if k != "application_id"} for r in by_api]
