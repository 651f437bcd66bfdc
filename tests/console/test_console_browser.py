"""The console's first journey in headless Chromium: sign up, open the mailed link,
confirm, sign in, create an organization (and be refused demoting its last owner,
through htmx) and an application, open its settings and the account page.  Every
screen is scanned by axe-core (no serious or critical violation) and saved desktop and
mobile (390 px); the browser console stays free of errors (a CSP violation would be one)
and htmx runs under the policy.  Skipped, with the reason, where Chromium is missing."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402

PASSWORD = "Correct-Horse-42"


@pytest.fixture
def config_overrides(live_url):
    # The console's writes must come from IAMGATE_PUBLIC_URL's origin: the browser's.
    return {"public_url": live_url}


def fill(browser, values: dict) -> None:
    for name, value in values.items():
        field = browser.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)


def submit(browser, label: str) -> None:
    browser.find_element(By.XPATH, f"//button[normalize-space()='{label}']").click()


def sign_in(browser, live_server: str, account) -> None:
    """Sign ``account`` in through the console's sign-in page, landing on Applications."""
    browser.get(f"{live_server}/console/sign-in")
    fill(browser, {"email": account.email, "password": account.password})
    submit(browser, "Sign in")
    heading(browser, "Applications")


def wait_text(browser, element_id: str, text: str) -> None:
    waiting(browser, 10).until(expected_conditions.text_to_be_present_in_element((By.ID, element_id), text),
                               message=browser.page_source[:3000])


def heading(browser, text: str) -> None:
    waiting(browser, 10).until(expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "h1"), text),
                                     message=browser.page_source[:3000])


def test_sign_up_verify_and_create_an_organization_and_an_application(live_server, browser, check_page, ctx,
                                                                       outbox):
    def screen(name: str) -> None:
        assert console_errors(browser) == [], name
        check_page(f"console-{name}")

    browser.get(f"{live_server}/console")
    heading(browser, "Sign in")
    # htmx loaded from its hashed URL and runs under script-src 'self' without eval.
    assert browser.execute_script("return window.htmx && htmx.config.allowEval") is False
    screen("sign-in")

    browser.find_element(By.LINK_TEXT, "Create an account").click()
    heading(browser, "Create an account")
    screen("sign-up")
    fill(browser, {"name": "Ada Lovelace", "email": "ada@example.com", "password": "short"})
    submit(browser, "Create account")
    heading(browser, "Create an account")
    assert browser.find_element(By.ID, "e-password").is_displayed()
    # The form comes back with the API's status; Chromium logs that load, and nothing else.
    assert [("/console/sign-up" in e and "status of 422" in e) for e in console_errors(browser)] == [True]
    screen("sign-up-error")
    fill(browser, {"password": PASSWORD})
    submit(browser, "Create account")
    heading(browser, "Check your email")
    screen("check-email")

    link = re.search(r"http://\S+/dashboard/verify-email\?token=\S+", outbox[-1].body).group(0)
    browser.get(link)
    heading(browser, "Confirm your email address")
    screen("verify-email")
    submit(browser, "Confirm my address")
    waiting(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "main"), "is confirmed"))

    browser.get(f"{live_server}/console/sign-in")
    fill(browser, {"email": "ada@example.com", "password": PASSWORD})
    submit(browser, "Sign in")
    heading(browser, "Applications")
    assert "Signed in as ada@example.com" in browser.find_element(By.ID, "session-expiry").text
    screen("applications-empty")

    browser.find_element(By.LINK_TEXT, "Organizations").click()
    heading(browser, "Organizations")
    fill(browser, {"name": "Acme"})
    submit(browser, "Create organization")
    heading(browser, "Acme")
    screen("organization")
    # htmx posts the role change (CSRF header, same origin) and swaps in the members
    # table with the API's refusal: the last owner cannot step down.
    Select(browser.find_element(By.CSS_SELECTOR, "#members select")).select_by_visible_text("viewer")
    submit(browser, "Change")
    waiting(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "members"), "ORGANIZATION_LAST_OWNER"))
    assert "Make another member owner first" in browser.find_element(By.ID, "members").text
    assert browser.find_element(By.TAG_NAME, "h1").text == "Acme"  # a swap, not a new page
    errors = console_errors(browser)
    assert [("/members/" in e and "status of 409" in e) for e in errors] == [True], errors
    screen("organization-last-owner")

    browser.find_element(By.LINK_TEXT, "Applications of Acme").click()
    heading(browser, "Applications")
    fill(browser, {"name": "Photos"})
    submit(browser, "Create application")
    heading(browser, "Photos")
    screen("application")
    # The delete button waits for the name to be typed (console.js).
    delete = browser.find_element(By.XPATH, "//button[normalize-space()='Delete application']")
    assert not delete.is_enabled()
    fill(browser, {"confirm_name": "Photos"})
    assert delete.is_enabled()

    browser.get(f"{live_server}/console/applications")
    browser.find_element(By.ID, "organization-switch").send_keys("Acme")
    submit(browser, "Switch")
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.LINK_TEXT, "Photos")))
    screen("applications")

    browser.find_element(By.LINK_TEXT, "Account").click()
    heading(browser, "Your account")
    screen("account")
    account = ctx.dashboard.accounts.store.account_by_email("ada@example.com")
    assert account["email_verified"] is True
