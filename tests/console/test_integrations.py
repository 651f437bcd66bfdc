"""The console's integrations screens (issue 28 items 10-12): OIDC clients, webhooks with
their delivery log, the audit log with its live tail and export.  Each write goes
through the same service as its V1 route and leaves the same audit record; a member or
viewer reads, sees no write control, and is refused 403."""
from __future__ import annotations

import json
import re
from html import unescape

import pytest

from controlplane.audit.service import APPLICATION
from controlplane.auth import SESSION_COOKIE
from tests.console.conftest import kept_out_of_htmx_history

HOOK_URL = "http://127.0.0.1:9/hooks"  # allowed by webhook_allow_private_targets below


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True}


def actions(ctx, app_id, prefix, actor_id=None):
    """The application's audit actions starting with ``prefix``, newest first; with
    ``actor_id``, only those the dashboard account did (as an API caller's would be)."""
    filters = {"action": prefix, **({"actor_id": actor_id} if actor_id else {})}
    return [r["action"] for r in ctx.audit.page(APPLICATION, app_id, filters, None, 100)[0]]


# ---------------------------------------------------------------- OIDC clients


def test_register_a_confidential_client_shows_its_secret_once(owner, ctx, dashboard_account):
    visitor, app_id = owner
    assert "has no OIDC client yet" in visitor.get(f"/console/applications/{app_id}/oidc-clients").text
    created = visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "Web", "token_endpoint_auth_method": "client_secret_basic",
        "redirect_uris": "https://shop.example/cb\r\nhttps://shop.example/cb2",
        "post_logout_redirect_uris": "https://shop.example/bye", "allowed_origins": "https://shop.example",
        "backchannel_logout_uri": "", "scope_openid": "on", "scope_email": "on",
        "grant_authorization_code": "on", "require_pkce": "on"})
    assert created.status_code == 201 and created.headers["cache-control"] == "no-store"
    secret = re.search(r'id="secret-value">([^<]+)<', created.text).group(1)
    assert 'data-copy="secret-value"' in created.text
    assert kept_out_of_htmx_history(created.text, 'id="secret-value"')
    [client] = ctx.oidc.clients.list(app_id)
    assert client["redirect_uris"] == ["https://shop.example/cb", "https://shop.example/cb2"]
    assert client["allowed_scopes"] == ["openid", "email"] and client["grant_types"] == ["authorization_code"]
    assert client["post_logout_redirect_uris"] == ["https://shop.example/bye"]
    assert ctx.oidc.clients.authenticate(client["client_id"], secret) is not None
    assert actions(ctx, app_id, "oidc_client.", dashboard_account.id) == ["oidc_client.created"]

    for page in (f"/console/applications/{app_id}/oidc-clients",
                 f"/console/applications/{app_id}/oidc-clients/{client['_id']}"):
        shown = visitor.get(page)
        assert shown.status_code == 200 and client["client_id"] in shown.text and secret not in shown.text


def test_a_public_client_gets_no_secret_and_keeps_pkce(owner, ctx):
    visitor, app_id = owner
    created = visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "SPA", "token_endpoint_auth_method": "none", "redirect_uris": "https://spa.example/cb",
        "scope_openid": "on", "grant_authorization_code": "on"})
    assert created.status_code == 201 and "secret-value" not in created.text
    assert "has no secret" in created.text
    [client] = ctx.oidc.clients.list(app_id)
    assert client["secret_digest"] is None and client["require_pkce"] is True


def test_client_errors_are_shown_at_the_api_field_paths_and_nothing_is_created(owner, ctx):
    visitor, app_id = owner
    bad = visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "Web", "token_endpoint_auth_method": "client_secret_basic",
        "redirect_uris": "ftp://nope", "allowed_origins": "https://shop.example/path", "scope_openid": "on",
        "grant_authorization_code": "on"})
    assert bad.status_code == 400 and "VALIDATION_MULTIPLE_ERRORS" in bad.text
    assert 'id="e-redirect_uris"' in bad.text and 'id="e-allowed_origins"' in bad.text
    assert 'aria-describedby="e-redirect_uris"' in bad.text
    assert "ftp://nope" in bad.text  # the form keeps what was typed and ticked
    assert 'name="scope_openid" checked' in bad.text and 'name="scope_profile">' in bad.text
    public_creds = visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "SPA", "token_endpoint_auth_method": "none", "redirect_uris": "https://spa.example/cb",
        "scope_openid": "on", "grant_client_credentials": "on"})
    assert public_creds.status_code == 400 and 'id="e-grant_types"' in public_creds.text
    assert ctx.oidc.clients.list(app_id) == []


def test_update_deactivate_and_delete_a_client(owner, ctx):
    visitor, app_id = owner
    visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "Web", "token_endpoint_auth_method": "client_secret_post", "redirect_uris": "https://a.example/cb",
        "scope_openid": "on", "grant_authorization_code": "on", "require_pkce": "on"})
    [client] = ctx.oidc.clients.list(app_id)
    page = f"/console/applications/{app_id}/oidc-clients/{client['_id']}"
    saved = visitor.post(page, {"name": "Web 2", "redirect_uris": "https://a.example/cb",
                                "backchannel_logout_uri": "https://a.example/logout",
                                "scope_openid": "on", "scope_profile": "on", "grant_authorization_code": "on",
                                "grant_client_credentials": "on"})  # require_pkce and is_active unchecked
    assert saved.status_code == 200 and "Client saved." in saved.text
    stored = ctx.oidc.clients.get(app_id, client["_id"])
    assert (stored["name"], stored["require_pkce"], stored["is_active"]) == ("Web 2", False, False)
    assert stored["backchannel_logout_uri"] == "https://a.example/logout"
    assert stored["grant_types"] == ["authorization_code", "client_credentials"]
    assert ctx.oidc.clients.active(client["client_id"]) is None  # deactivated

    wrong = visitor.post(f"{page}/delete", {"confirm_name": "Web"})
    assert wrong.status_code == 400 and 'id="e-confirm_name"' in wrong.text
    deleted = visitor.post(f"{page}/delete", {"confirm_name": "Web 2"})
    assert deleted.status_code == 303 and deleted.headers["location"].endswith("/oidc-clients")
    assert ctx.oidc.clients.list(app_id) == []
    assert actions(ctx, app_id, "oidc_client.") == ["oidc_client.deleted", "oidc_client.updated",
                                                    "oidc_client.created"]


def test_rotate_a_clients_secret_shows_the_new_one_once_and_the_old_ones_grace(owner, ctx, dashboard_account):
    visitor, app_id = owner
    created = visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "Web", "token_endpoint_auth_method": "client_secret_basic", "redirect_uris": "https://a.example/cb",
        "scope_openid": "on", "grant_authorization_code": "on", "require_pkce": "on"})
    first = re.search(r'id="secret-value">([^<]+)<', created.text).group(1)
    [client] = ctx.oidc.clients.list(app_id)
    page = f"/console/applications/{app_id}/oidc-clients/{client['_id']}"
    shown = visitor.get(page).text
    assert f'action="{page}/rotate-secret"' in shown and '<option value="3600">after 1 hour</option>' in shown

    rotated = visitor.post(f"{page}/rotate-secret", {"previous_secret_valid_for": "3600"})
    assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
    second = re.search(r'id="secret-value">([^<]+)<', rotated.text).group(1)
    assert second != first and "accepted until <time" in rotated.text
    authenticate = ctx.oidc.clients.authenticate
    assert authenticate(client["client_id"], first) and authenticate(client["client_id"], second)
    assert second not in visitor.get(page).text

    third = re.search(r'id="secret-value">([^<]+)<', visitor.post(f"{page}/rotate-secret", {
        "previous_secret_valid_for": "0"}).text).group(1)
    assert [bool(authenticate(client["client_id"], s)) for s in (first, second, third)] == [False, False, True]
    bad = visitor.post(f"{page}/rotate-secret", {"previous_secret_valid_for": "-5"})
    assert bad.status_code == 400 and 'id="e-previous_secret_valid_for"' in bad.text
    assert 'aria-describedby="h-previous_secret_valid_for e-previous_secret_valid_for"' in bad.text
    assert "secret-value" not in bad.text and authenticate(client["client_id"], third)
    assert actions(ctx, app_id, "oidc_client.", dashboard_account.id) == [
        "oidc_client.secret_rotated", "oidc_client.secret_rotated", "oidc_client.created"]


def test_a_public_client_has_no_secret_to_rotate(owner, ctx):
    visitor, app_id = owner
    visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "SPA", "token_endpoint_auth_method": "none", "redirect_uris": "https://spa.example/cb",
        "scope_openid": "on", "grant_authorization_code": "on"})
    [client] = ctx.oidc.clients.list(app_id)
    page = f"/console/applications/{app_id}/oidc-clients/{client['_id']}"
    assert "rotate-secret" not in visitor.get(page).text
    refused = visitor.post(f"{page}/rotate-secret", {"previous_secret_valid_for": "0"})
    assert refused.status_code == 409 and "OIDC_CLIENT_PUBLIC" in refused.text and "secret-value" not in refused.text


def test_another_organizations_client_pages_are_not_found(owner, console, make_dashboard_account):
    visitor, app_id = owner
    stranger = console()
    stranger.sign_in(make_dashboard_account())
    for page in ("oidc-clients", "webhooks", "audit", "audit/tail", "audit/export"):
        assert visitor.get(f"/console/applications/{app_id}/{page}").status_code == 200, page
        assert stranger.get(f"/console/applications/{app_id}/{page}").status_code == 404, page
    refused = stranger.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "X", "token_endpoint_auth_method": "none", "redirect_uris": "https://x.example/cb"})
    assert refused.status_code == 404


# ---------------------------------------------------------------- webhooks


def test_create_a_webhook_with_events_from_the_catalogue_and_rotate_its_secret(owner, ctx):
    visitor, app_id = owner
    page = visitor.get(f"/console/applications/{app_id}/webhooks")
    assert 'name="event_user.created"' in page.text and 'name="event_attribute.deleted"' in page.text
    assert "event_user.password_changed" not in page.text  # internal kinds are not offered
    created = visitor.post(f"/console/applications/{app_id}/webhooks", {
        "url": HOOK_URL, "event_user.created": "on", "event_role.assigned": "on"})
    assert created.status_code == 201, created.text
    first = re.search(r'id="secret-value">([^<]+)<', created.text).group(1)
    [hook] = ctx.webhooks.management.list(app_id)
    assert hook["events"] == ["user.created", "role.assigned"]
    detail = f"/console/applications/{app_id}/webhooks/{hook['_id']}"
    assert first not in visitor.get(detail).text
    rotated = visitor.post(f"{detail}/rotate-secret")
    second = re.search(r'id="secret-value">([^<]+)<', rotated.text).group(1)
    assert rotated.status_code == 200 and second != first and second.startswith("whsec_")
    assert second not in visitor.get(detail).text
    assert actions(ctx, app_id, "webhook.")[:2] == ["webhook.secret_rotated", "webhook.created"]


def test_webhook_errors_show_the_api_message(owner, ctx):
    visitor, app_id = owner
    no_events = visitor.post(f"/console/applications/{app_id}/webhooks", {"url": HOOK_URL})
    assert no_events.status_code == 400 and 'id="e-events"' in no_events.text
    bad_url = visitor.post(f"/console/applications/{app_id}/webhooks", {"url": "ftp://x", "event_user.created": "on"})
    assert bad_url.status_code == 400 and "ftp://x" in bad_url.text
    assert ctx.webhooks.management.list(app_id) == []


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True,
                                               "max_webhooks_per_application": 1}])
def test_the_webhook_cap_is_shown_on_the_create_form(owner, ctx):
    visitor, app_id = owner
    form = {"url": HOOK_URL, "event_user.created": "on"}
    assert visitor.post(f"/console/applications/{app_id}/webhooks", form).status_code == 201
    refused = visitor.post(f"/console/applications/{app_id}/webhooks", form)
    assert refused.status_code == 409 and 'id="form-error"' in refused.text
    assert "WEBHOOK_LIMIT_EXCEEDED" in refused.text
    assert "An application may hold at most 1 webhooks; delete one first." in unescape(refused.text)
    assert len(ctx.webhooks.management.list(app_id)) == 1


def test_the_delivery_log_shows_status_attempts_and_redeliver_queues_a_copy(owner, ctx, make_user):
    visitor, app_id = owner
    visitor.post(f"/console/applications/{app_id}/webhooks", {"url": HOOK_URL, "event_user.created": "on"})
    [hook] = ctx.webhooks.management.list(app_id)
    make_user(ctx.applications.get(app_id), email="ada@example.com")
    ctx.webhooks.dispatcher.catch_up()
    [delivery] = ctx.webhooks.management.deliveries(app_id, hook["_id"])
    detail = f"/console/applications/{app_id}/webhooks/{hook['_id']}"
    log = visitor.get(detail)
    assert delivery["_id"] in log.text and "<code>user.created</code>" in log.text and "pending" in log.text
    redelivered = visitor.post(f"{detail}/deliveries/{delivery['_id']}/redeliver")
    assert redelivered.status_code == 202 and "Queued again as delivery" in redelivered.text
    copy = ctx.store["webhook_deliveries"].find_one({"redelivery_of": delivery["_id"]})
    assert copy is not None and f"redelivery of <code>{delivery['_id']}</code>" in redelivered.text
    missing = visitor.post(f"{detail}/deliveries/00000000-0000-4000-8000-000000000000/redeliver")
    assert missing.status_code == 404 and "WEBHOOK_DELIVERY_NOT_FOUND" in missing.text


# ---------------------------------------------------------------- role gates


def test_a_viewer_holds_the_read_permissions_only_and_is_refused_as_the_api_refuses(owner, reader, ctx,
                                                                                     make_user):
    """The console's principal of a member or viewer holds the V1 ``:read`` permissions:
    the audit log (audit:read) is theirs, the OIDC client and webhook screens are not (their
    V1 routes need oidc:manage and webhooks:manage, even to read), and a write is refused
    403 FORBIDDEN naming the permission, as the API names it for a key without it."""
    visitor, app_id = owner
    visitor.post(f"/console/applications/{app_id}/oidc-clients", {
        "name": "Web", "token_endpoint_auth_method": "client_secret_basic", "redirect_uris": "https://a.example/cb",
        "scope_openid": "on", "grant_authorization_code": "on", "require_pkce": "on"})
    visitor.post(f"/console/applications/{app_id}/webhooks", {"url": HOOK_URL, "event_user.created": "on"})
    [client], [hook] = ctx.oidc.clients.list(app_id), ctx.webhooks.management.list(app_id)
    make_user(ctx.applications.get(app_id))
    ctx.webhooks.dispatcher.catch_up()
    [delivery] = ctx.webhooks.management.deliveries(app_id, hook["_id"])
    base = f"/console/applications/{app_id}"
    for role in ("viewer", "member"):
        other = reader(role)
        for path, permission in ((f"{base}/oidc-clients", "oidc:manage"),
                                 (f"{base}/oidc-clients/{client['_id']}", "oidc:manage"),
                                 (f"{base}/webhooks", "webhooks:manage"),
                                 (f"{base}/webhooks/{hook['_id']}", "webhooks:manage")):
            page = other.get(path)
            assert page.status_code == 403 and "FORBIDDEN" in page.text, path
            assert f"The permission {permission} is required." in page.text and "Web" not in page.text
            assert delivery["_id"] not in page.text
        assert other.get(f"{base}/audit").status_code == 200
        application = other.get(base).text
        assert 'href="/console/applications/' + app_id + '/audit"' in application
        assert "/oidc-clients" not in application and "/webhooks" not in application

        for path, form in ((f"{base}/oidc-clients", {"name": "X", "token_endpoint_auth_method": "none",
                                                     "redirect_uris": "https://x.example/cb"}),
                           (f"{base}/oidc-clients/{client['_id']}", {"name": "Hijacked"}),
                           (f"{base}/oidc-clients/{client['_id']}/delete", {"confirm_name": "Web"}),
                           (f"{base}/oidc-clients/{client['_id']}/rotate-secret", {}),
                           (f"{base}/webhooks", {"url": HOOK_URL, "event_user.created": "on"}),
                           (f"{base}/webhooks/{hook['_id']}", {"url": HOOK_URL}),
                           (f"{base}/webhooks/{hook['_id']}/rotate-secret", {}),
                           (f"{base}/webhooks/{hook['_id']}/deliveries/{delivery['_id']}/redeliver", {})):
            refused = other.post(path, form)
            assert refused.status_code == 403 and "FORBIDDEN" in refused.text, path
            assert "secret-value" not in refused.text
    assert [c["name"] for c in ctx.oidc.clients.list(app_id)] == ["Web"]
    assert ctx.oidc.clients.get(app_id, client["_id"])["secret_digest"] == client["secret_digest"]
    assert ctx.webhooks.management.get(app_id, hook["_id"])["secret"] == hook["secret"]
    assert ctx.store["webhook_deliveries"].count_documents({}) == 1


def test_writes_need_the_csrf_token(owner, ctx):
    visitor, app_id = owner
    refused = visitor.post(f"/console/applications/{app_id}/webhooks", {"url": HOOK_URL, "event_user.created": "on"},
                           token=False)
    assert refused.status_code == 403 and "CSRF_TOKEN_INVALID" in refused.text
    assert ctx.webhooks.management.list(app_id) == []


# ---------------------------------------------------------------- audit log


ROW = '<td data-label="When"><time'  # the first cell of an audit record's row


def test_the_audit_log_filters_in_the_url_and_pages_with_a_cursor(owner, ctx, make_user):
    visitor, app_id = owner
    app = ctx.applications.get(app_id)
    for n in range(55):
        make_user(app, email=f"u{n}@example.com")
    base = f"/console/applications/{app_id}/audit"
    first = visitor.get(f"{base}?action=user.&result=success")
    assert first.status_code == 200
    assert 'value="user."' in first.text and '<option value="success" selected>' in first.text
    assert first.text.count(ROW) == 50
    next_link = unescape(re.search(r'href="([^"]+)" rel="next"', first.text).group(1))
    assert "action=user." in next_link and "result=success" in next_link and "cursor=" in next_link
    second = visitor.get(next_link)
    assert second.text.count(ROW) == 5
    assert 'rel="next"' not in second.text and 'class="tail"' not in second.text  # the tail is on page one

    bad = visitor.get(f"{base}?since=yesterday")
    assert bad.status_code == 400 and 'id="e-since"' in bad.text


def test_the_live_tail_returns_only_records_newer_than_the_newest_shown(owner, ctx, make_user):
    visitor, app_id = owner
    app = ctx.applications.get(app_id)
    make_user(app, email="first@example.com")
    page = visitor.get(f"/console/applications/{app_id}/audit?action=user.")
    poll = unescape(re.search(r'hx-get="([^"]+)" hx-trigger="every 5s"', page.text).group(1))
    assert "action=user." in poll and "newest_id=" in poll
    nothing = visitor.get(poll, headers={"HX-Request": "true"})
    assert nothing.status_code == 200 and ROW not in nothing.text and 'class="tail"' in nothing.text
    make_user(app, email="second@example.com")
    fresh = visitor.get(poll, headers={"HX-Request": "true"})
    assert fresh.text.count(ROW) == 1 and "second@example.com" in fresh.text
    assert "first@example.com" not in fresh.text
    again = unescape(re.search(r'hx-get="([^"]+)"', fresh.text).group(1))
    assert visitor.get(again, headers={"HX-Request": "true"}).text.count(ROW) == 0


def test_the_export_link_downloads_the_filtered_records_as_ndjson(owner, ctx, make_user):
    visitor, app_id = owner
    app = ctx.applications.get(app_id)
    make_user(app, email="a@example.com")
    page = visitor.get(f"/console/applications/{app_id}/audit?action=user.")
    link = unescape(re.search(r'href="([^"]+/audit/export[^"]*)"', page.text).group(1))
    assert link.endswith("?action=user.")
    exported = visitor.get(link)
    assert exported.status_code == 200 and exported.headers["content-type"] == "application/x-ndjson"
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert records and all(r["action"].startswith("user.") for r in records)


def test_signed_out_visitors_of_the_screens_are_sent_to_sign_in(owner, console):
    visitor, app_id = owner
    stranger = console()
    for page in ("oidc-clients", "webhooks", "audit", "audit/tail", "audit/export"):
        response = stranger.get(f"/console/applications/{app_id}/{page}")
        assert response.status_code == 303 and SESSION_COOKIE not in stranger.cookies


# ---------------------------------------------------------------- parity with the API


def _event(ctx, write) -> list[dict]:
    """The change-log events of ``write``, without what differs between two writers: the
    ids, times, the request and its actor (a dashboard account here, an API key there)."""
    before = ctx.store["events"].count_documents({})
    write()
    differs = {"_id", "seq", "at", "created_at", "ts", "request_id", "ip", "user_agent", "sealed", "prev_hash",
               "hash", "actor", "target", "subject"}
    return [{key: value for key, value in event.items() if key not in differs}
            for event in list(ctx.store["events"].find().sort("seq", 1))[before:]]


def test_a_console_webhook_write_leaves_the_events_the_api_write_does(owner, ctx, make_api_key):
    visitor, app_id = owner
    app = ctx.applications.get(app_id)
    headers = {"Authorization": f"Bearer {make_api_key(app, permissions=['webhooks:manage'])}"}
    by_api = _event(ctx, lambda: visitor.client.simulate_post(
        f"/api/v1/applications/{app_id}/webhooks", json={"url": HOOK_URL, "events": ["user.created"]},
        headers=headers))
    by_console = _event(ctx, lambda: visitor.post(f"/console/applications/{app_id}/webhooks",
                                                  {"url": HOOK_URL, "event_user.created": "on"}))
    assert [e["action"] for e in by_console] == ["webhook.created"]
    assert by_console == by_api
