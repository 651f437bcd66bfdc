"""The connections screens in headless Chromium: add a GitHub connection from its preset,
add a custom OpenID Connect issuer (a local provider), see a refused edit's error at its
field, and run "Test connection".  Every screen is scanned by axe-core and saved desktop
and mobile (390 px); the client secret never appears in a page.  Skipped, with the
reason, where Chromium is missing."""
from __future__ import annotations

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402
from tests.console.test_console_browser import fill, heading, sign_in, submit, wait_text  # noqa: E402

SECRET = "upstream-s3cret-never-shown"


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url, "webhook_allow_private_targets": True, "connection_http_timeout": 10}


def test_add_edit_and_test_connections(live_server, browser, check_page, ctx, dashboard_account, make_dashboard_app,
                                       provider):
    app_id = make_dashboard_app(dashboard_account, name="Shop")["id"]

    def screen(name: str, *expected_errors: str) -> None:
        errors = console_errors(browser)  # a refused form comes back with the API's status, logged
        assert len(errors) == len(expected_errors), errors
        assert all(e in error for e, error in zip(expected_errors, errors, strict=True)), errors
        assert SECRET not in browser.page_source, name
        check_page(f"console-{name}")

    sign_in(browser, live_server, dashboard_account)
    browser.get(f"{live_server}/console/applications/{app_id}")
    browser.find_element(By.LINK_TEXT, "Connections").click()
    heading(browser, "Connections")
    Select(browser.find_element(By.ID, "f-preset")).select_by_value("github")
    fill(browser, {"client_id": "gh-client", "client_secret": SECRET})
    submit(browser, "Add connection")
    heading(browser, "github")
    assert "Connection created." in browser.page_source
    screen("connection-created")

    browser.find_element(By.LINK_TEXT, "Connections").click()
    heading(browser, "Connections")
    fill(browser, {"name": "acme", "display_name": "Acme SSO", "issuer": provider.issuer, "client_id": "acme-client",
                   "client_secret": SECRET, "email_domains": "acme.example"})
    browser.find_element(By.ID, "f-linking-verify").click()
    submit(browser, "Add connection")
    heading(browser, "acme")
    browser.find_element(By.LINK_TEXT, "Connections").click()
    heading(browser, "Connections")
    assert "Acme SSO" in browser.find_element(By.TAG_NAME, "table").text
    screen("connections")

    browser.find_element(By.LINK_TEXT, "acme").click()
    heading(browser, "acme")
    fill(browser, {"email_domains": "not a domain"})
    submit(browser, "Save connection")
    # The answer is the same screen: wait for its error, not for the heading it shares.
    wait_text(browser, "e-email_domains", "email_domains: item 0 must be a domain")
    screen("connection-error", "status of 400")

    provider.discovery["issuer"] = "https://elsewhere.example"
    submit(browser, "Test connection")
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "ul.checks")),
                               message=browser.page_source[:3000])
    assert "Test: something is wrong" in browser.page_source
    assert "differs from the configured" in browser.find_element(By.CSS_SELECTOR, "ul.checks").text
    screen("connection-test")
