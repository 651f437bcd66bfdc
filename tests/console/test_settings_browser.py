"""The settings screens in headless Chromium: branding with its live framed preview and
contrast warning (htmx, as the form changes), an API key created (its secret once, the
copy button) and revoked after the confirmation, another asking for the password once
the session is older than the sudo window, and two-step verification set up on
the Security page.  Every screen is scanned by axe-core (no serious or critical
violation) and saved desktop and mobile (390 px); the browser console stays free of
errors (a CSP violation, a refused frame, would be one).  Skipped where Chromium is
missing."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402
from tests.console.test_console_browser import fill, heading, sign_in, submit, wait_text  # noqa: E402
from tests.mfa.conftest import rfc6238  # noqa: E402


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url}  # the console's writes must come from the browser's origin



def test_branding_api_keys_and_two_step_verification(live_server, browser, check_page, ctx, clock,
                                                     dashboard_account, make_dashboard_app):
    def screen(name: str) -> None:
        assert console_errors(browser) == [], name
        check_page(f"console-{name}")

    app = make_dashboard_app(dashboard_account, name="Photos")
    sign_in(browser, live_server, dashboard_account)

    browser.get(f"{live_server}/console/applications/{app['id']}")
    browser.find_element(By.LINK_TEXT, "Branding").click()
    heading(browser, "Branding of Photos")
    fill(browser, {"brand_color": "#ffff00"})  # htmx asks for a new preview as the form changes
    wait_text(browser, "preview", "Contrast too low")
    frame = browser.find_element(By.CSS_SELECTOR, "#preview iframe")
    assert "brand_color=%23ffff00" in frame.get_attribute("src")
    browser.switch_to.frame(frame)
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.NAME, "password")))
    button = browser.find_element(By.XPATH, "//button[normalize-space()='Sign in']")
    assert button.value_of_css_property("background-color") == "rgba(255, 255, 0, 1)"  # the unsaved colour
    browser.switch_to.default_content()
    screen("branding")
    fill(browser, {"brand_color": "#1a4d2e"})
    wait_text(browser, "preview", "Preview of the sign-in page")
    waiting(browser, 10).until_not(
        lambda b: "Contrast too low" in b.find_element(By.ID, "preview").text)
    submit(browser, "Save branding")
    wait_text(browser, "main", "Branding saved.")
    assert ctx.applications.get(app["id"])["brand_color"] == "#1a4d2e"

    browser.get(f"{live_server}/console/applications/{app['id']}/api-keys")
    heading(browser, "API keys of Photos")
    fill(browser, {"name": "CI"})
    submit(browser, "Create key")
    heading(browser, "API keys of Photos")
    secret = browser.find_element(By.ID, "new-secret").get_attribute("value")
    assert ctx.api_keys.authenticate(secret) is not None
    browser.find_element(By.XPATH, "//button[normalize-space()='Copy key']").click()
    waiting(browser, 10).until(  # headless Chromium may refuse the clipboard: then it says so
        lambda b: b.find_element(By.CSS_SELECTOR, "[data-copied-for=new-secret]").text != "")
    errors = console_errors(browser)
    assert [("/api-keys" in e and "status of 201" in e) for e in errors] in ([], [True]), errors
    check_page("console-api-key-created")
    browser.get(f"{live_server}/console/applications/{app['id']}/api-keys")
    assert secret not in browser.page_source
    submit(browser, "Revoke")
    waiting(browser, 10).until(expected_conditions.alert_is_present()).accept()  # hx-confirm
    wait_text(browser, "api-keys", "Key revoked")
    assert ctx.api_keys.list(app["id"]) == []
    screen("api-keys")

    # Sudo mode: past the window, creating a key asks for the password on the page.
    clock.advance(ctx.config.dashboard_sudo_seconds)
    fill(browser, {"name": "CD"})
    submit(browser, "Create key")
    wait_text(browser, "form-error", "DASHBOARD_REAUTH_REQUIRED")
    assert ctx.api_keys.list(app["id"]) == []
    errors = console_errors(browser)  # the refusal's document is a 403
    assert [("/api-keys" in e and "status of 403" in e) for e in errors] in ([], [True]), errors
    check_page("console-api-key-reauth-required")
    fill(browser, {"password": dashboard_account.password})
    submit(browser, "Confirm password")
    wait_text(browser, "reauthenticated", "Repeat the action")
    screen("api-keys-reauthenticated")
    fill(browser, {"name": "CD"})
    submit(browser, "Create key")
    heading(browser, "API keys of Photos")
    assert [key["name"] for key in ctx.api_keys.list(app["id"])] == ["CD"]

    browser.get(f"{live_server}/console/account")
    browser.find_element(By.LINK_TEXT, "Security: two-step verification").click()
    heading(browser, "Security")
    screen("security")
    submit(browser, "Set up an authenticator app")
    heading(browser, "Security")
    code_secret = browser.find_element(By.ID, "totp-secret").text
    screen("security-setup")
    fill(browser, {"code": rfc6238(code_secret, clock()), "password": dashboard_account.password})
    submit(browser, "Turn on")
    wait_text(browser, "codes-title", "Your backup codes")
    assert len(re.findall(r"<li><code>", browser.page_source)) == 10
    errors = console_errors(browser)
    assert [("/security" in e and "status of 201" in e) for e in errors] in ([], [True]), errors
    check_page("console-security-backup-codes")
    assert ctx.dashboard.mfa.has_second_factor(dashboard_account.id)
