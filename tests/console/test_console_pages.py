"""The console's pages over falcon.testing: headers, assets, the accounts screens, and
organizations and applications through the same dashboard services as the JSON API."""
from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from controlplane.auth import SESSION_COOKIE
from controlplane.console.web import origin_of
from tests.console.conftest import ORIGIN
from tests.dashboard.test_mfa import enrol
from tests.mfa.conftest import rfc6238

CONSOLE = Path(__file__).resolve().parents[2] / "controlplane" / "console"


def asset_urls(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/console/assets/[^"]+)"', page)


def meta_config(page: str) -> dict:
    match = re.search(r"<meta name=\"htmx-config\" content='([^']+)'>", page)
    return json.loads(html.unescape(match.group(1)))


def find_org(ctx, account_id, name):
    return next(org for org, _role in ctx.dashboard.organizations.organizations(account_id) if org["name"] == name)


# ---------------------------------------------------------------- headers and assets


def test_every_page_is_no_store_under_a_strict_policy_with_no_inline_script_or_style(console):
    response = console().get("/console/sign-in")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    policy = dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert re.fullmatch(r"'self' 'nonce-[A-Za-z0-9_-]+'", policy["style-src"])
    assert policy["frame-ancestors"] == "'none'" and policy["form-action"] == "'self'"
    assert "unsafe" not in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "strict-origin"  # no path or query in a Referer; Origin sent
    page = response.text
    assert re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", page) == []  # every script has a src
    assert " style=" not in page and "hx-on" not in page


def test_htmx_is_configured_without_eval_or_injected_styles_and_sends_the_csrf_token(console):
    visitor = console()
    page = visitor.get("/console/sign-in").text
    config = meta_config(page)
    assert config["allowEval"] is False and config["includeIndicatorStyles"] is False
    assert config["allowScriptTags"] is False and config["selfRequestsOnly"] is True
    headers = json.loads(html.unescape(re.search(r"<body hx-headers='([^']+)'>", page).group(1)))
    assert headers == {"X-CSRF-Token": visitor.token}


def test_assets_have_content_hash_urls_cached_for_a_year_and_gzip_when_accepted(console, client):
    urls = asset_urls(console().get("/console/sign-in").text)
    assert len(urls) == 3
    htmx_url = next(url for url in urls if "/htmx.min." in url)
    source = (CONSOLE / "vendor" / "htmx.min.js").read_bytes()
    assert hashlib.sha256(source).hexdigest()[:16] in htmx_url

    plain = client.simulate_get(htmx_url)
    assert plain.status_code == 200 and plain.content == source
    assert plain.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert plain.headers["content-type"].startswith("text/javascript")
    assert "content-encoding" not in plain.headers and plain.headers["vary"] == "Accept-Encoding"

    zipped = client.simulate_get(htmx_url, headers={"Accept-Encoding": "br, gzip;q=0.8"})
    assert zipped.headers["content-encoding"] == "gzip" and gzip.decompress(zipped.content) == source
    refused = client.simulate_get(htmx_url, headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers

    stale = htmx_url.replace(".js", "").rsplit(".", 1)[0] + ".0000000000000000.js"
    assert client.simulate_get(stale).status_code == 404


def test_the_vendored_htmx_is_the_version_its_readme_names(console):
    readme = (CONSOLE / "vendor" / "README.md").read_text()
    source = (CONSOLE / "vendor" / "htmx.min.js").read_bytes()
    sri = "sha384-" + base64.b64encode(hashlib.sha384(source).digest()).decode()
    assert sri in readme
    version = re.search(r"\| (2\.0\.\d+) \|", readme).group(1)
    assert f'version:"{version}"' in source.decode() and "Zero-Clause BSD" in readme


def test_the_first_load_transfers_well_under_150_kb_compressed(console, client):
    page = console().get("/console/sign-in")
    total = len(gzip.compress(page.content))
    for url in asset_urls(page.text):
        total += len(client.simulate_get(url, headers={"Accept-Encoding": "gzip"}).content)
    assert total < 150_000, total


# ---------------------------------------------------------------- accounts


def test_sign_up_shows_the_check_your_email_notice_and_the_mailed_link_confirms(console, ctx, outbox):
    visitor = console()
    visitor.get("/console/sign-up")
    response = visitor.post("/console/sign-up", {"name": "Ada", "email": "ada@example.com",
                                                 "password": "Correct-Horse-42"})
    assert response.status_code == 201
    assert "Check your email" in response.text and "ada@example.com" in response.text
    account = ctx.dashboard.accounts.store.account_by_email("ada@example.com")
    assert account["email_verified"] is False

    link = re.search(r"http://\S+/dashboard/verify-email\?token=\S+", outbox[-1].body).group(0)
    opened = visitor.get(link.removeprefix(ORIGIN))
    assert opened.status_code == 303
    page = visitor.get(opened.headers["location"])
    assert "Confirm my address" in page.text
    assert ctx.dashboard.accounts.store.account_by_email("ada@example.com")["email_verified"] is False  # GET is inert

    done = visitor.post("/console/verify-email", {"token": outbox[-1].token})
    assert done.status_code == 200 and "Your email address is confirmed." in done.text
    assert ctx.dashboard.accounts.store.account_by_email("ada@example.com")["email_verified"] is True


def test_sign_up_errors_show_the_api_message_and_field_paths_next_to_the_fields(console, ctx):
    visitor = console()
    response = visitor.post("/console/sign-up", {"name": "Ada", "email": "not-an-email", "password": "x"})
    assert response.status_code == 400
    assert 'aria-invalid="true"' in response.text
    assert re.search(r'<p class="field-error" id="e-email"><code>email</code>: ', response.text)
    assert "VALIDATION_INVALID_FORMAT" in response.text
    assert 'value="Ada"' in response.text  # what was typed stays, the password does not
    assert ctx.dashboard.accounts.store.account_by_email("not-an-email") is None


def test_sign_in_sets_the_dashboard_session_and_shows_its_expiry(console, dashboard_account, ctx, clock):
    visitor = console()
    wrong = visitor.post("/console/sign-in", {"email": dashboard_account.email, "password": "Wrong-Horse-42"})
    assert wrong.status_code == 401 and "AUTH_INVALID_CREDENTIALS" in wrong.text
    assert SESSION_COOKIE not in visitor.cookies

    visitor.sign_in(dashboard_account)
    page = visitor.get("/console/applications")
    assert page.status_code == 200
    shown = datetime.fromisoformat(re.search(r'data-expires="([^"]+)"', page.text).group(1))
    ends = clock() + timedelta(seconds=ctx.config.dashboard_session_ttl)
    assert abs((shown - ends).total_seconds()) < 1  # the store keeps milliseconds
    assert f"Signed in as {dashboard_account.email}" in page.text


def test_with_two_step_verification_on_the_sign_in_asks_for_a_code_before_the_session(console, dashboard_account,
                                                                                      clock):
    secret, _ = enrol(dashboard_account, clock)
    visitor = console()
    visitor.get("/console/sign-in")
    asked = visitor.post("/console/sign-in", {"email": dashboard_account.email, "password": dashboard_account.password})
    assert asked.status_code == 200 and SESSION_COOKIE not in visitor.cookies
    challenge = re.search(r'name="challenge_token" value="([^"]+)"', asked.text).group(1)
    assert 'autocomplete="one-time-code"' in asked.text

    wrong = visitor.post("/console/sign-in/code", {"challenge_token": challenge, "code": "000000"})
    assert wrong.status_code == 401 and "AUTH_INVALID_MFA_CODE" in wrong.text and SESSION_COOKIE not in visitor.cookies
    right = visitor.post("/console/sign-in/code", {"challenge_token": challenge, "code": rfc6238(secret, clock())})
    assert right.status_code == 303 and right.headers["Location"].endswith("/console/applications")
    assert SESSION_COOKIE in visitor.cookies
    assert visitor.get("/console/applications").status_code == 200


def test_signed_out_visitors_are_sent_to_the_sign_in_page(console):
    for path in ("/console", "/console/", "/console/applications", "/console/organizations", "/console/account"):
        response = console().get(path)
        assert (response.status_code, response.headers["location"]) == (303, "/console/sign-in"), path


def test_a_signed_out_htmx_request_loads_the_sign_in_page_whole(console, dashboard_account):
    response = console().post(f"/console/organizations/{dashboard_account.organization_id}/members/x",
                              {"action": "remove"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and response.headers["hx-redirect"] == "/console/sign-in"
    assert response.text == "" and response.headers["content-type"].startswith("text/html")


def test_an_unconfirmed_account_can_ask_for_a_new_link(console, make_dashboard_account, outbox):
    account = make_dashboard_account(verified=False)
    visitor = console()
    visitor.sign_in(account)
    page = visitor.get("/console/account")
    assert "not confirmed yet" in page.text and "Send a new link" in page.text
    sent = len(outbox)
    response = visitor.post("/console/account/verification")
    assert response.status_code == 202 and "a new link was sent" in response.text
    assert len(outbox) == sent + 1 and outbox[-1].to == account.email


def test_rename_the_account_and_see_the_api_error_next_to_the_field(console, dashboard_account, ctx):
    visitor = console()
    visitor.sign_in(dashboard_account)
    assert visitor.post("/console/account/name", {"name": "Grace Hopper"}).status_code == 303
    assert ctx.dashboard.accounts.account(dashboard_account.id)["name"] == "Grace Hopper"
    refused = visitor.post("/console/account/name", {"name": "   "})
    assert refused.status_code == 400 and 'id="e-name"' in refused.text
    assert ctx.dashboard.accounts.account(dashboard_account.id)["name"] == "Grace Hopper"


def test_sign_out_ends_the_session(console, dashboard_account, ctx):
    visitor = console()
    visitor.sign_in(dashboard_account)
    raw = visitor.cookies[SESSION_COOKIE]
    response = visitor.post("/console/sign-out")
    assert response.status_code == 303 and SESSION_COOKIE not in visitor.cookies
    assert ctx.dashboard.sessions.live(raw) is None


def test_forgot_and_reset_password_then_sign_in_with_the_new_one(console, dashboard_account, outbox):
    visitor = console()
    sent = visitor.post("/console/forgot-password", {"email": dashboard_account.email})
    assert sent.status_code == 200 and "a reset link was sent" in sent.text
    opened = visitor.get(f"/dashboard/reset-password?token={outbox[-1].token}")
    page = visitor.get(opened.headers["location"])
    assert f'name="token" value="{outbox[-1].token}"' in page.text

    weak = visitor.post("/console/reset-password", {"token": outbox[-1].token, "password": "short"})
    assert weak.status_code == 422 and "VALIDATION_PASSWORD_TOO_WEAK" in weak.text
    assert "<code>password</code>: must be at least" in weak.text  # each failed rule, next to the field
    done = visitor.post("/console/reset-password", {"token": outbox[-1].token, "password": "Brand-New-Horse-7"})
    assert done.status_code == 303 and done.headers["location"] == "/console/sign-in?notice=password-reset"
    dashboard_account.password = "Brand-New-Horse-7"
    visitor.sign_in(dashboard_account)


def test_change_password_keeps_this_browser_signed_in_and_ends_other_sessions(console, dashboard_account, ctx):
    visitor, other = console(), console()
    visitor.sign_in(dashboard_account)
    other.sign_in(dashboard_account)
    response = visitor.post("/console/account", {"current_password": dashboard_account.password,
                                                 "new_password": "Another-Horse-8"})
    assert response.status_code == 303
    assert "Password changed." in visitor.get(response.headers["location"]).text
    assert ctx.dashboard.sessions.live(visitor.cookies[SESSION_COOKIE]) is not None
    assert ctx.dashboard.sessions.live(other.cookies[SESSION_COOKIE]) is None


# ---------------------------------------------------------------- writes: CSRF and Origin


@pytest.mark.parametrize("token, origin", [
    (True, "https://evil.example"),  # a cross-site form
    (True, None),  # no Origin at all
    (True, "http://127.0.0.1:8000.evil.example"),
    (False, ORIGIN),  # the console's origin without the token
])
def test_a_write_without_the_token_or_from_another_origin_is_refused_and_changes_nothing(
        console, dashboard_account, ctx, token, origin):
    visitor = console()
    visitor.sign_in(dashboard_account)
    response = visitor.post("/console/organizations", {"name": "Planted"}, token=token, origin=origin)
    assert response.status_code == 403
    assert "CSRF_TOKEN_INVALID" in response.text and "Nothing was changed." in response.text
    assert "Planted" not in [org["name"] for org, _ in ctx.dashboard.organizations.organizations(dashboard_account.id)]


@pytest.mark.parametrize("public_url, sent", [("https://Console.Example.com:443/iam", "https://console.example.com"),
                                              ("http://127.0.0.1:80", "http://127.0.0.1")])
def test_the_consoles_origin_is_what_a_browser_sends_whatever_the_public_urls_spelling(public_url, sent):
    """A browser's Origin has no default port, no path and a lower-case host: a public
    URL written with :443 (or a path, or capitals) must not make every console form
    look cross-site."""
    assert origin_of(public_url) == sent


def test_a_token_sent_as_htmx_header_is_accepted(console, dashboard_account, ctx):
    visitor = console()
    visitor.sign_in(dashboard_account)
    response = visitor.post("/console/organizations", {"name": "By Header"}, token=False,
                            headers={"X-CSRF-Token": visitor.token, "HX-Request": "true"})
    assert response.status_code == 303
    find_org(ctx, dashboard_account.id, "By Header")


def test_a_token_that_is_not_the_cookies_is_refused(console, dashboard_account, ctx):
    visitor, attacker = console(), console()
    visitor.sign_in(dashboard_account)
    attacker.get("/console/sign-in")
    visitor.token = attacker.token  # a valid token, of another browser
    assert visitor.post("/console/organizations", {"name": "Planted"}).status_code == 403


def test_v1_routes_never_accept_the_dashboard_cookie(console, dashboard_account, make_dashboard_app):
    app = make_dashboard_app(dashboard_account)
    visitor = console()
    visitor.sign_in(dashboard_account)
    response = visitor.get(f"/api/v1/applications/{app['id']}/roles")
    assert response.status_code == 401


# ---------------------------------------------------------------- organizations


def test_create_an_organization_and_manage_its_members(console, dashboard_account, make_dashboard_account, ctx):
    visitor = console()
    visitor.sign_in(dashboard_account)
    created = visitor.post("/console/organizations", {"name": "Acme"})
    assert created.status_code == 303
    org = find_org(ctx, dashboard_account.id, "Acme")
    assert created.headers["location"] == f"/console/organizations/{org['_id']}"
    page = visitor.get(created.headers["location"]).text
    assert dashboard_account.email in page and "Add member" in page

    unverified = make_dashboard_account(verified=False)
    refused = visitor.post(f"/console/organizations/{org['_id']}", {"email": unverified.email, "role": "admin"})
    assert refused.status_code == 409
    assert "ACCOUNT_EMAIL_UNVERIFIED" in refused.text and "has not confirmed its email address" in refused.text
    assert ctx.dashboard.access.role_in(org["_id"], unverified.id) is None

    colleague = make_dashboard_account()
    added = visitor.post(f"/console/organizations/{org['_id']}", {"email": colleague.email, "role": "viewer"})
    assert added.status_code == 303
    assert ctx.dashboard.access.role_in(org["_id"], colleague.id) == "viewer"

    changed = visitor.post(f"/console/organizations/{org['_id']}/members/{colleague.id}",
                           {"action": "role", "role": "admin"}, headers={"HX-Request": "true"})
    assert changed.status_code == 200 and changed.text.startswith('<section id="members"')
    assert ctx.dashboard.access.role_in(org["_id"], colleague.id) == "admin"

    last_owner = visitor.post(f"/console/organizations/{org['_id']}/members/{dashboard_account.id}",
                              {"action": "role", "role": "viewer"}, headers={"HX-Request": "true"})
    assert last_owner.status_code == 409
    assert "ORGANIZATION_LAST_OWNER" in last_owner.text and "Make another member owner first" in last_owner.text
    assert ctx.dashboard.access.role_in(org["_id"], dashboard_account.id) == "owner"

    removed = visitor.post(f"/console/organizations/{org['_id']}/members/{colleague.id}", {"action": "remove"})
    assert removed.status_code == 303
    assert ctx.dashboard.access.role_in(org["_id"], colleague.id) is None


def test_an_organization_of_someone_else_is_not_found(console, dashboard_account, make_dashboard_account):
    stranger = make_dashboard_account()
    visitor = console()
    visitor.sign_in(dashboard_account)
    assert visitor.get(f"/console/organizations/{stranger.organization_id}").status_code == 404


# ---------------------------------------------------------------- applications


def test_create_update_and_delete_an_application(console, dashboard_account, ctx):
    visitor = console()
    visitor.sign_in(dashboard_account)
    empty = visitor.get("/console/applications")
    assert "has no application yet" in empty.text
    created = visitor.post("/console/applications", {"organization_id": dashboard_account.organization_id,
                                                     "name": "Photos", "environment": "production"})
    assert created.status_code == 303
    app_id = created.headers["location"].rsplit("/", 1)[1]
    assert ctx.applications.get(app_id)["environment"] == "production"
    listed = visitor.get(f"/console/applications?organization_id={dashboard_account.organization_id}")
    assert f'href="/console/applications/{app_id}"' in listed.text

    bad = visitor.post(f"/console/applications/{app_id}", {"name": "Photos", "max_concurrent_sessions": "500"})
    assert bad.status_code == 400 and 'id="e-max_concurrent_sessions"' in bad.text
    saved = visitor.post(f"/console/applications/{app_id}", {
        "name": "Photos 2", "environment": "staging", "max_concurrent_sessions": "3",
        "registration_rate_limit": "20", "oauth_hosted_login_enabled": "on"})
    assert saved.status_code == 200 and "Settings saved." in saved.text
    app = ctx.applications.get(app_id)
    assert (app["name"], app["max_concurrent_sessions"], app["registration_rate_limit"]) == ("Photos 2", 3, 20)
    assert app["oauth_hosted_login_enabled"] is True and app["oauth_hosted_registration_enabled"] is False

    wrong = visitor.post(f"/console/applications/{app_id}/delete", {"confirm_name": "Photos"})
    assert wrong.status_code == 400 and 'id="e-confirm_name"' in wrong.text
    assert ctx.applications.get(app_id) is not None
    deleted = visitor.post(f"/console/applications/{app_id}/delete", {"confirm_name": "Photos 2"})
    assert deleted.status_code == 303
    assert ctx.applications.get(app_id) is None


def test_a_viewer_sees_no_write_buttons_and_its_writes_are_refused(console, dashboard_account,
                                                                   make_dashboard_account, make_dashboard_app, ctx):
    app = make_dashboard_app(dashboard_account, name="Shared")
    viewer_account = make_dashboard_account()
    ctx.dashboard.organizations.add_member(dashboard_account.id, dashboard_account.organization_id,
                                           viewer_account.email, "viewer", ip="10.0.0.1")
    visitor = console()
    visitor.sign_in(viewer_account)

    settings = visitor.get(f"/console/applications/{app['id']}")
    assert settings.status_code == 200 and "(read only)" in settings.text
    assert "<fieldset disabled>" in settings.text
    assert "Save settings" not in settings.text and "Delete application" not in settings.text
    members = visitor.get(f"/console/organizations/{dashboard_account.organization_id}")
    assert "Add member" not in members.text and "Remove" not in members.text
    listed = visitor.get(f"/console/applications?organization_id={dashboard_account.organization_id}")
    assert "Create application" not in listed.text and "Shared" in listed.text

    update = visitor.post(f"/console/applications/{app['id']}", {"name": "Hijacked"})
    assert update.status_code == 403 and "FORBIDDEN" in update.text
    delete = visitor.post(f"/console/applications/{app['id']}/delete", {"confirm_name": "Shared"})
    assert delete.status_code == 403
    assert ctx.applications.get(app["id"])["name"] == "Shared"
