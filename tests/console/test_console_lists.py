"""The console's lists that the API answered whole page on the server, as their API
routes now do (``?page=``, ``?per_page=``): an account's organizations, an organization's
members and applications, an application's API keys, OIDC clients and webhooks.  Each
test makes more than a page and walks it through the pager's links, which htmx boosts
to swap only the list (the plain links work without script)."""
from __future__ import annotations

import re
from html import unescape
from urllib.parse import urljoin

import pytest
from markupsafe import escape

NEXT = re.compile(r'<a href="([^"]+)" rel="next">Next page</a>')


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True}


@pytest.fixture
def owner(console, dashboard_account):
    visitor = console()
    visitor.sign_in(dashboard_account)
    return visitor


def walk(visitor, url: str, names: list[str], region: str) -> list[str]:
    """Follow the Next links from ``url``; each name must be on exactly one page, in
    order; the pages, in order, as seen."""
    seen, pages = [], []
    while url:
        page = visitor.get(url)
        assert page.status_code == 200, page.text
        assert f'id="{region}"' in page.text
        assert f'hx-target="#{region}"' in page.text and 'hx-boost="true"' in page.text
        here = [name for name in names if f">{escape(name)}<" in page.text]
        assert 0 < len(here) <= 2, (url, here)
        seen += here
        pages.append(re.search(r"Page (\d+) of (\d+)", page.text).groups())
        found = NEXT.search(page.text)
        url = urljoin(url, unescape(found.group(1))) if found else None
    assert sorted(seen) == sorted(names) and len(seen) == len(names)
    assert pages == [(str(n), str(len(pages))) for n in range(1, len(pages) + 1)]
    return seen


def test_organizations_and_their_members_and_applications_page(owner, dashboard_account, make_dashboard_account,
                                                               ctx):
    for name in ("Org B", "Org C"):
        ctx.dashboard.organizations.create_organization(dashboard_account.id, name)
    orgs = [org["name"] for org, _role in ctx.dashboard.organizations.organizations(dashboard_account.id)]
    assert len(set(orgs)) == 3
    walk(owner, "/console/organizations?per_page=2", orgs, "organization-list")

    org_id = dashboard_account.organization_id
    emails = [dashboard_account.email]
    for _ in range(2):
        other = make_dashboard_account()
        ctx.dashboard.organizations.add_member(dashboard_account.id, org_id, other.email, "viewer", ip="10.9.9.9")
        emails.append(other.email)
    walk(owner, f"/console/organizations/{org_id}?per_page=2", emails, "members")

    for name in ("One", "Two", "Three"):
        owner.post("/console/applications", {"name": name, "organization_id": org_id, "environment": "development"})
    assert walk(owner, f"/console/applications?organization_id={org_id}&per_page=2", ["One", "Two", "Three"],
                "application-list") == ["One", "Two", "Three"]  # the switcher's organization kept in the links


def test_api_keys_oidc_clients_and_webhooks_page(owner, dashboard_account, make_dashboard_app, ctx):
    app_id = make_dashboard_app(dashboard_account, name="Shop")["id"]
    base = f"/console/applications/{app_id}"
    app = ctx.applications.get(app_id)
    for n in range(3):
        ctx.api_keys.create(app, {"name": f"key {n}"})
        ctx.oidc.clients.create(app_id, {"name": f"client {n}", "redirect_uris": [f"https://c{n}.example/cb"]})
        ctx.webhooks.management.create(app_id, {"url": f"http://127.0.0.1:9/hook{n}", "events": ["user.created"]})
    walk(owner, f"{base}/api-keys?per_page=2", ["key 0", "key 1", "key 2"], "api-keys")
    walk(owner, f"{base}/oidc-clients?per_page=2", ["client 0", "client 1", "client 2"], "client-list")
    walk(owner, f"{base}/webhooks?per_page=2", [f"http://127.0.0.1:9/hook{n}" for n in range(3)], "webhook-list")


def test_a_bad_page_shows_the_first_page_with_the_apis_error(owner):
    page = owner.get("/console/organizations?page=0")
    assert page.status_code == 400
    assert "VALIDATION_INVALID_FORMAT" in page.text and "Your organizations" in page.text


def test_one_page_shows_no_pager(owner):
    assert 'class="pager"' not in owner.get("/console/organizations").text


def test_every_page_has_the_loading_state_without_inline_script_or_style(owner):
    page = owner.get("/console/organizations").text
    assert '<div id="busy" class="busy" aria-hidden="true" hidden>' in page
    assert '<p id="busy-status" class="visually-hidden" role="status"></p>' in page
    assert "style=" not in page and "<script>" not in page and "hx-on" not in page
