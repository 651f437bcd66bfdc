"""The console's settings screens over falcon.testing: branding with its framed preview of
the hosted sign-in page, API keys, the account's two-step verification and the
organization's require_mfa switch, through the same services as the dashboard API."""
from __future__ import annotations

import html
import re

import pytest

from tests.console.conftest import kept_out_of_htmx_history
from tests.console.test_parity import change_log_after, shape
from tests.dashboard.test_mfa import enrol
from tests.mfa.conftest import rfc6238

STEP = 30


def policy_of(response) -> dict:
    return dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))


@pytest.fixture
def signed_in(console, dashboard_account):
    visitor = console()
    visitor.sign_in(dashboard_account)
    return visitor


@pytest.fixture
def photos(dashboard_account, make_dashboard_app):
    return make_dashboard_app(dashboard_account, name="Photos")


def viewer_of(ctx, console, owner, make_dashboard_account, role="viewer"):
    account = make_dashboard_account()
    ctx.dashboard.organizations.add_member(owner.id, owner.organization_id, account.email, role, ip="10.0.0.1")
    visitor = console()
    visitor.sign_in(account)
    return visitor


# ---------------------------------------------------------------- branding


def test_branding_is_saved_through_the_api_service_with_the_same_change_log_event(signed_in, photos, ctx,
                                                                                  dashboard_account,
                                                                                  make_dashboard_app):
    page = signed_in.get(f"/console/applications/{photos['id']}/branding")
    assert page.status_code == 200 and "Save branding" in page.text
    assert f'href="/console/applications/{photos["id"]}/branding"' in signed_in.get(
        f"/console/applications/{photos['id']}").text  # the application's sub-navigation

    by_api = make_dashboard_app(dashboard_account, name="Photos")
    api_events = change_log_after(ctx, lambda: dashboard_account.put(
        f"/api/dashboard/applications/{by_api['id']}/branding",
        json={"brand_color": "#445566", "branding_options": {"font_family": "Lato"}}))
    console_events = change_log_after(ctx, lambda: signed_in.post(f"/console/applications/{photos['id']}/branding", {
        "brand_name": "", "brand_logo_url": "", "brand_color": "#445566", "brand_background": "",
        "secondary_color": "", "font_family": "Lato", "button_border_radius": "", "custom_css": "",
        "dark_background": "", "dark_color": ""}))
    stored = ctx.applications.get(photos['id'])
    assert stored["brand_color"] == "#445566" and stored["branding_options"]["font_family"] == "Lato"
    assert stored["branding_options"]["dark_mode"] == {"enabled": False, "background": None, "color": None}
    dark = signed_in.post(f"/console/applications/{photos['id']}/branding", {
        "dark_mode_enabled": "on", "dark_background": "#101010", "dark_color": "#fafafa"})
    assert dark.status_code == 200 and 'id="f-dark_mode_enabled" name="dark_mode_enabled" checked' in dark.text
    assert ctx.applications.get(photos['id'])["branding_options"]["dark_mode"] == {
        "enabled": True, "background": "#101010", "color": "#fafafa"}
    assert console_events and [shape(e, photos["id"]) for e in console_events] == [
        shape(e, by_api["id"]) for e in api_events]


def test_refused_branding_shows_the_api_messages_at_their_paths_and_saves_nothing(signed_in, photos, ctx):
    refused = signed_in.post(f"/console/applications/{photos['id']}/branding",
                             {"brand_color": "red", "secondary_color": "blue", "favicon_url": "http://x.example/i.png"})
    assert refused.status_code == 400
    assert 'id="e-brand_color"' in refused.text and "<code>branding_options.favicon_url</code>" in refused.text
    assert "<code>branding_options.secondary_color</code>" in refused.text  # the API's JSON path
    assert ctx.applications.get(photos['id']).get("brand_color") is None


def test_the_preview_is_the_hosted_sign_in_page_with_unsaved_values_framed_only_by_the_console(signed_in, photos,
                                                                                                 ctx):
    page = signed_in.get(f"/console/applications/{photos['id']}/branding?brand_color=%23aa0000")
    assert policy_of(page)["frame-src"] == "'self'" and policy_of(page)["frame-ancestors"] == "'none'"
    src = html.unescape(re.search(r'<iframe src="([^"]+)"', page.text).group(1))
    assert src == f"/console/applications/{photos['id']}/branding/preview?brand_color=%23aa0000"

    preview = signed_in.get(src)
    assert preview.status_code == 200
    assert policy_of(preview)["frame-ancestors"] == "'self'"
    assert policy_of(preview)["form-action"] == "'none'"  # a click in the preview posts nothing
    assert preview.headers["x-frame-options"] == "SAMEORIGIN"
    assert 'name="password"' in preview.text and "#aa0000" in preview.text  # the hosted page, unsaved colour
    assert ctx.applications.get(photos['id']).get("brand_color") is None  # nothing saved

    hosted_error = signed_in.get(f"/pages/{photos['id']}/verify-email")  # every other page refuses framing
    assert policy_of(hosted_error)["frame-ancestors"] == "'none'"
    assert hosted_error.headers["x-frame-options"] == "DENY"


def test_the_preview_validates_as_the_api_and_needs_a_member(signed_in, console, photos, make_dashboard_account):
    refused = signed_in.get(f"/console/applications/{photos['id']}/branding/preview?brand_logo_url=javascript:x")
    assert refused.status_code == 400 and "valid https URL" in refused.text
    assert policy_of(refused)["frame-ancestors"] == "'self'"  # the refusal shows in the frame too
    repeated = signed_in.get(f"/console/applications/{photos['id']}/branding/preview?brand_color=%23000000"
                             "&brand_color=%23ffffff")
    assert repeated.status_code == 400 and "VALIDATION" in repeated.text
    css = signed_in.get(f"/console/applications/{photos['id']}/branding/preview",
                        params={"custom_css": "body{background:url(https://evil.example/x.png)}</style>"})
    assert css.status_code == 200 and "evil.example" not in css.text  # sanitized as the API sanitizes it
    assert css.text.count("</style>") == css.text.count("<style")

    stranger = console()
    stranger.sign_in(make_dashboard_account())
    assert stranger.get(f"/console/applications/{photos['id']}/branding/preview").status_code == 404
    signed_out = console().get(f"/console/applications/{photos['id']}/branding/preview")
    assert signed_out.status_code == 303 and signed_out.headers["location"] == "/console/sign-in"


def test_the_contrast_warning_follows_the_hosted_pages_rule(signed_in, photos):
    base = f"/console/applications/{photos['id']}/branding?fragment=preview"
    pale = signed_in.get(base + "&brand_color=%23ffff00", headers={"HX-Request": "true"})
    assert pale.status_code == 200 and "Contrast too low" in pale.text and "<html" not in pale.text
    assert "1.07:1" in pale.text
    dark = signed_in.get(base + "&brand_color=%23000080", headers={"HX-Request": "true"})
    assert "Contrast too low" not in dark.text
    secondary = signed_in.get(base + "&brand_color=%23000080&secondary_color=%23eeeeee", headers={"HX-Request": "true"})
    assert "Contrast too low" in secondary.text  # links use the secondary colour when set
    wrong = signed_in.get(base + "&brand_color=nope", headers={"HX-Request": "true"})
    assert wrong.status_code == 400 and "<code>brand_color</code>" in wrong.text


def test_a_viewer_sees_branding_read_only_and_cannot_save(ctx, console, dashboard_account, photos,
                                                         make_dashboard_account):
    visitor = viewer_of(ctx, console, dashboard_account, make_dashboard_account)
    page = visitor.get(f"/console/applications/{photos['id']}/branding")
    assert page.status_code == 200 and "<fieldset disabled>" in page.text and "Save branding" not in page.text
    assert visitor.get(f"/console/applications/{photos['id']}/branding/preview").status_code == 200
    refused = visitor.post(f"/console/applications/{photos['id']}/branding", {"brand_color": "#000000"})
    assert refused.status_code == 403
    assert ctx.applications.get(photos['id']).get("brand_color") is None


# ---------------------------------------------------------------- API keys


def test_create_an_api_key_shows_its_secret_once_then_lists_it_without(signed_in, photos, ctx):
    created = signed_in.post(f"/console/applications/{photos['id']}/api-keys",
                             {"name": "CI", "permission:users:read": "on", "permission:authz:check": "on"})
    assert created.status_code == 201
    secret = re.search(r'id="new-secret" type="text" readonly value="([^"]+)"', created.text).group(1)
    assert 'data-copy="new-secret"' in created.text and "onclick" not in created.text
    assert kept_out_of_htmx_history(created.text, 'id="new-secret"')
    [key] = ctx.api_keys.list(photos['id'])
    assert key["name"] == "CI" and key["permissions"] == ["authz:check", "users:read"]

    listed = signed_in.get(f"/console/applications/{photos['id']}/api-keys")
    assert secret not in listed.text and key["key_prefix"] in listed.text and "never" in listed.text
    assert f'datetime="{key["created_at"].isoformat()}"' in listed.text
    assert ctx.api_keys.authenticate(secret)["_id"] == key["_id"]


def test_a_key_needs_a_name_and_a_permission(signed_in, photos, ctx):
    refused = signed_in.post(f"/console/applications/{photos['id']}/api-keys", {"name": "CI"})
    assert refused.status_code == 400 and 'id="e-permissions"' in refused.text
    nameless = signed_in.post(f"/console/applications/{photos['id']}/api-keys",
                              {"name": "", "permission:users:read": "on"})
    assert nameless.status_code == 400 and 'id="e-name"' in nameless.text
    assert ctx.api_keys.list(photos['id']) == []


def test_revoke_confirms_first_and_leaves_the_api_s_change_log_event(signed_in, photos, ctx, dashboard_account):
    by_api, _secret = ctx.api_keys.create(ctx.applications.get(photos['id']), {"name": "A"})
    by_console, _secret = ctx.api_keys.create(ctx.applications.get(photos['id']), {"name": "B"})
    listed = signed_in.get(f"/console/applications/{photos['id']}/api-keys")
    assert 'hx-confirm="Revoke the key B' in listed.text
    api_events = change_log_after(ctx, lambda: dashboard_account.delete(
        f"/api/dashboard/applications/{photos['id']}/api-keys/{by_api['_id']}"))
    revoke = f"/console/applications/{photos['id']}/api-keys/{by_console['_id']}/revoke"
    asked = signed_in.post(revoke)  # a plain form, without script: a page asks first
    assert asked.status_code == 200 and 'name="confirmed" value="yes"' in asked.text
    assert [key["_id"] for key in ctx.api_keys.list(photos['id'])] == [by_console["_id"]]  # still live
    console_events = change_log_after(ctx, lambda: signed_in.post(revoke, {"confirmed": "yes"},
                                                                  headers={"HX-Request": "true"}))
    assert [shape(e, by_console["_id"]) for e in console_events] == [shape(e, by_api["_id"]) for e in api_events]
    assert ctx.api_keys.list(photos['id']) == []
    again = signed_in.post(revoke, {"confirmed": "yes"})
    assert again.status_code == 404 and "API key not found." in again.text


def test_a_viewer_sees_keys_without_secrets_or_write_controls_and_cannot_create(ctx, console, dashboard_account,
                                                                                photos, make_dashboard_account):
    key, _secret = ctx.api_keys.create(ctx.applications.get(photos['id']), {"name": "A"})
    visitor = viewer_of(ctx, console, dashboard_account, make_dashboard_account)
    page = visitor.get(f"/console/applications/{photos['id']}/api-keys")
    assert "Create key" not in page.text and "Revoke" not in page.text and key["key_prefix"] in page.text
    assert visitor.post(f"/console/applications/{photos['id']}/api-keys",
                        {"name": "x", "permission:users:read": "on"}).status_code == 403
    assert visitor.post(f"/console/applications/{photos['id']}/api-keys/{key['_id']}/revoke",
                        {"confirmed": "yes"}).status_code == 403
    assert len(ctx.api_keys.list(photos['id'])) == 1


def test_creating_a_key_without_the_csrf_token_is_refused(signed_in, photos, ctx):
    refused = signed_in.post(f"/console/applications/{photos['id']}/api-keys", {"name": "CI",
                                                                            "permission:users:read": "on"}, token=False)
    assert refused.status_code == 403 and "CSRF_TOKEN_INVALID" in refused.text
    assert ctx.api_keys.list(photos['id']) == []


# ---------------------------------------------------------------- two-step verification


def test_set_up_confirm_regenerate_and_turn_off_two_step_verification(signed_in, dashboard_account, ctx, clock):
    page = signed_in.get("/console/account/security")
    assert page.status_code == 200 and "Set up an authenticator app" in page.text
    setup = signed_in.post("/console/account/security", {"step": "setup"})
    secret = re.search(r'id="totp-secret">([A-Z2-7]+)<', setup.text).group(1)
    assert "otpauth://totp/" in setup.text
    method_id = re.search(r'name="method_id" value="([^"]+)"', setup.text).group(1)

    wrong = signed_in.post("/console/account/security", {"step": "confirm", "method_id": method_id, "code": "000000",
                                                         "secret": secret, "provisioning_uri": "otpauth://x",
                                                         "password": dashboard_account.password})
    assert wrong.status_code == 422 and "MFA_INVALID_CODE" in wrong.text and secret in wrong.text  # try again
    # The password confirms it: without the right one nothing turns on, and the form says so at its field.
    unconfirmed = signed_in.post("/console/account/security", {"step": "confirm", "method_id": method_id,
                                                               "code": rfc6238(secret, clock()), "secret": secret,
                                                               "password": "not the password"})
    assert unconfirmed.status_code == 422 and 'id="e-password"' in unconfirmed.text and secret in unconfirmed.text
    assert not ctx.dashboard.mfa.has_second_factor(dashboard_account.id)
    confirmed = signed_in.post("/console/account/security", {"step": "confirm", "method_id": method_id,
                                                             "code": rfc6238(secret, clock()),
                                                             "password": dashboard_account.password})
    assert confirmed.status_code == 201
    codes = re.findall(r"<li><code>([^<]+)</code></li>", confirmed.text)
    assert len(codes) == 10 and 'data-copy="backup-codes"' in confirmed.text
    assert kept_out_of_htmx_history(confirmed.text, 'id="backup-codes"')
    assert ctx.dashboard.mfa.has_second_factor(dashboard_account.id)
    assert signed_in.get("/console/account").status_code == 200  # this session stays signed in
    shown = signed_in.get("/console/account/security")
    assert codes[0] not in shown.text and "Backup codes left: <strong>10</strong>" in shown.text

    bad = signed_in.post("/console/account/security", {"step": "backup-codes", "password": "wrong password"})
    assert bad.status_code == 422 and 'id="e-password"' in bad.text
    fresh = signed_in.post("/console/account/security",
                           {"step": "backup-codes", "password": dashboard_account.password})
    assert fresh.status_code == 200 and len(re.findall(r"<li><code>", fresh.text)) == 10

    neither = signed_in.post("/console/account/security", {"step": "disable", "password": "", "code": ""})
    assert neither.status_code == 400 and 'id="e-disable"' in neither.text
    clock.advance(2 * STEP)
    off = signed_in.post("/console/account/security",
                         {"step": "disable", "password": "", "code": rfc6238(secret, clock())})
    assert off.status_code == 303 and off.headers["location"] == "/console/account/security?notice=disabled"
    assert not ctx.dashboard.mfa.has_second_factor(dashboard_account.id)


def test_require_mfa_is_explained_when_the_owner_has_none_and_members_without_one_are_sent_to_enrol(
        signed_in, console, dashboard_account, make_dashboard_account, photos, ctx, clock):
    org = f"/console/organizations/{dashboard_account.organization_id}"
    assert 'name="require_mfa"' in signed_in.get(org).text
    refused = signed_in.post(f"{org}/security", {"require_mfa": "on"})
    assert refused.status_code == 409 and "ORGANIZATION_OWNER_MFA_REQUIRED" in refused.text
    assert 'href="/console/account/security"' in refused.text
    member = viewer_of(ctx, console, dashboard_account, make_dashboard_account, role="member")

    secret, _codes = enrol(dashboard_account, clock)  # this ends the console session, opened by password alone
    owner = console()
    owner.get("/console/sign-in")
    step = owner.post("/console/sign-in", {"email": dashboard_account.email, "password": dashboard_account.password})
    challenge = re.search(r'name="challenge_token" value="([^"]+)"', step.text).group(1)
    assert owner.post("/console/sign-in/code", {"challenge_token": challenge,
                                                "code": rfc6238(secret, clock())}).status_code == 303
    assert owner.post(f"{org}/security", {"require_mfa": "on"}).status_code == 303
    assert ctx.dashboard.organizations.store.organization(dashboard_account.organization_id)["require_mfa"] is True
    assert 'name="require_mfa" aria-describedby="h-require-mfa" checked' in owner.get(org).text

    app_pages = ("", "/api-keys", "/branding", "/users", "/roles", "/policies", "/check", "/oidc-clients",
                 "/webhooks", "/audit")
    for path in (*(f"/console/applications/{photos['id']}{page}" for page in app_pages),
                 f"/console/applications?organization_id={dashboard_account.organization_id}", org):
        shut = member.get(path)
        assert shut.status_code == 403, path
        assert "DASHBOARD_MFA_REQUIRED" in shut.text and 'href="/console/account/security"' in shut.text
    assert member.get("/console/account/security").status_code == 200  # where they enrol
