"""What the hosted login's pages take in: the application's custom CSS, however it was
stored, cannot end the page's <style> element."""
from __future__ import annotations

import pytest

from tests.oidc.test_hosted import Browser, assert_page, authorize_url

PHISHING_CSS = "a{background:url(x</style><a/href=https://evil.example/>Session_expired:_continue_here</a><!--)}"


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, name="Portal")


@pytest.fixture
def browser(client):
    return Browser(client)


def login_page(browser, rp):
    page = browser.get(authorize_url(rp))
    assert_page(page, "Sign in")
    return page


# ---------------------------------------------------------------- the custom CSS


def test_the_branding_api_keeps_no_custom_css_that_ends_the_style_element(dashboard_account, dashboard_app):
    response = dashboard_account.put(f"/api/dashboard/applications/{dashboard_app['id']}/branding",
                                     json={"branding_options": {"custom_css": PHISHING_CSS + " b{color:red}"}})
    assert response.status_code == 200, response.text
    assert response.json["data"]["branding_options"]["custom_css"] == "a{}\nb{color:red}"  # the declaration went


def test_custom_css_stored_around_the_api_cannot_end_the_style_element(ctx, hosted_app, browser, rp):
    ctx.applications.update(hosted_app["_id"], {"branding_options": {"custom_css": PHISHING_CSS}})
    page = login_page(browser, rp)
    assert page.text.count("</style>") == 1
    assert "evil.example" not in page.text and "Session_expired" not in page.text
