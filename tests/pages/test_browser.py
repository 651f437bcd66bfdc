"""The hosted pages in a real browser (headless Chromium): the policy, the nonce'd style
and script, and the fetch to the API as Chromium applies them.  Skipped, with the
reason, where Chromium is not installed."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests import browser as browser_module
from tests.browser import console_errors, missing_browser


def test_a_machine_without_chromium_is_told_what_to_install(monkeypatch):
    monkeypatch.setattr(browser_module, "CHROMIUM", "/nonexistent/chromium")
    assert missing_browser() == ("/nonexistent/chromium is missing: install Debian's chromium package "
                                 "(apt-get install chromium)")
    monkeypatch.setattr(browser_module, "CHROMIUM", "/bin/sh")
    monkeypatch.setattr(browser_module, "CHROMEDRIVER", "/nonexistent/chromedriver")
    assert "chromium-driver" in missing_browser()


def test_a_test_run_writes_its_screenshots_outside_the_work_tree(screenshots_dir):
    if os.environ.get(browser_module.SCREENSHOTS_DIR):
        pytest.skip("make screenshots: the committed screenshots are being refreshed on purpose")
    repo = Path(__file__).resolve().parents[2]
    assert repo not in screenshots_dir.resolve().parents


def test_verify_email_page_confirms_the_address_in_a_real_browser(live_server, browser, check_page, ctx, application,
                                                                 make_user, outbox):
    ctx.applications.update_branding(application["_id"], {
        "brand_name": "Acme Photos", "brand_color": "#0b7a53", "brand_background": "#eef4f1"})
    user = make_user(application, email="ada@example.com")
    token = outbox[-1].token

    browser.get(f"{live_server}/pages/{application['_id']}/verify-email?token={token}")

    assert browser.title == "Confirm your email address - Acme Photos"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Confirm your email address"
    assert "Confirm the email address of your Acme Photos account." in browser.find_element(By.TAG_NAME, "main").text
    # The script ran (it removes the token from the address bar) and the styles applied.
    assert "token" not in browser.current_url
    button = browser.find_element(By.ID, "go")
    assert button.is_enabled()
    assert button.value_of_css_property("background-color") == "rgba(11, 122, 83, 1)"
    assert console_errors(browser) == []
    check_page("verify-email")

    button.click()
    WebDriverWait(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "result"), "verified"))
    assert browser.find_element(By.ID, "result").text == "Your email address has been verified."
    assert not browser.find_element(By.ID, "go").is_displayed()
    assert console_errors(browser) == []
    assert ctx.store["users"].find_one({"_id": user["id"]})["email_verified"] is True


def test_the_accessibility_scan_runs_under_the_pages_policy_and_finds_what_is_wrong(live_server, browser,
                                                                                  accessibility, application):
    # The scan is injected through WebDriver, which the page's script-src 'nonce-...'
    # does not apply to: it runs, and no CSP violation is reported.
    browser.get(f"{live_server}/pages/{application['_id']}/reset-password?token=t")
    assert accessibility(browser) == []
    assert console_errors(browser) == []
    # A scan that cannot fail proves nothing: unlabelled inputs are a critical violation.
    browser.execute_script("document.querySelectorAll('label').forEach(label => label.remove())")
    assert "label" in {violation["id"] for violation in accessibility(browser)}


def test_reset_password_page_in_a_real_browser(live_server, browser, check_page, ctx, application):
    ctx.applications.update_branding(application["_id"], {
        "brand_name": "Acme Photos", "brand_color": "#0b7a53", "brand_background": "#eef4f1"})
    browser.get(f"{live_server}/pages/{application['_id']}/reset-password?token=t")
    assert browser.find_element(By.TAG_NAME, "h1").text
    assert "token" not in browser.current_url
    check_page("reset-password")
    assert console_errors(browser) == []


def test_a_light_brand_colour_keeps_the_button_readable_in_chromium(live_server, browser, accessibility, ctx,
                                                                    application, make_user, outbox):
    # White text on this yellow would be ~1.5:1, a serious color-contrast violation.
    ctx.applications.update_branding(application["_id"], {"brand_color": "#ffd400"})
    make_user(application, email="ada@example.com")
    browser.get(f"{live_server}/pages/{application['_id']}/verify-email?token={outbox[-1].token}")
    button = browser.find_element(By.ID, "go")
    assert button.value_of_css_property("color") == "rgba(0, 0, 0, 1)"
    assert accessibility(browser) == []
