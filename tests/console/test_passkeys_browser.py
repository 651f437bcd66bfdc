"""Passkeys in the console, in headless Chromium with its virtual authenticator
(WebDriver's Virtual Authenticators, WebAuthn Level 3 section 11) standing in for the
device, against a live server on ``localhost`` (an IP address cannot be an RP ID).

A member of an organization that requires a second factor, who has none, signs in
with the password and is sent to the Security page to enrol; "Add a passkey" creates a
discoverable passkey there, and the console is then reachable.  After signing out, the
member signs in with the passkey alone.  Every new screen is scanned by axe-core and
saved; the browser console stays free of errors (a CSP violation would be one).
Skipped, with the reason, where Chromium is not installed."""
from __future__ import annotations

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402
from tests.console.test_console_browser import fill, heading, submit  # noqa: E402
from tests.dashboard.test_mfa import APPS, ORGS, enrol  # noqa: E402
from tests.passkeys.test_hosted_passkeys_browser import platform  # noqa: E402


def add_a_passkey(browser, password: str, name: str = "Laptop") -> None:
    """On the Security page: "Add a passkey", confirmed by the password; the browser
    creates it (the virtual authenticator) and the page posts it."""
    fill(browser, {"name": name})
    browser.find_element(By.ID, "a-password").send_keys(password)
    waiting(browser).until(expected_conditions.visibility_of_element_located(
        (By.CSS_SELECTOR, "button[data-passkey-button]"))).click()
    waiting(browser).until(lambda b: "Passkey added." in b.find_element(By.TAG_NAME, "main").text,
                           message="no passkey added")


@pytest.fixture
def live_url(live_port) -> str:
    return f"http://localhost:{live_port}"


@pytest.fixture
def config_overrides(live_url):
    # The console's writes and the passkeys' one origin are the browser's.
    return {"public_url": live_url, "webauthn_rp_id": "localhost", "webauthn_origins": (live_url,)}


def test_a_member_sent_to_enrol_adds_a_passkey_and_signs_in_with_it(live_server, browser, check_page, ctx, clock,
                                                                      make_dashboard_account):
    def screen(name: str) -> None:
        assert console_errors(browser) == [], name
        check_page(f"console-{name}")

    owner = make_dashboard_account(name="Olivia Owner")
    enrol(owner, clock)
    org_id = owner.post(ORGS, json={"name": "Acme"}).json["data"]["id"]
    owner.post(APPS, json={"name": "Shop", "organization_id": org_id})
    member = make_dashboard_account(name="Mia Member")
    assert owner.post(f"{ORGS}/{org_id}/members", json={"email": member.email, "role": "member"}).status_code == 201
    assert owner.request("PATCH", f"{ORGS}/{org_id}", json={"require_mfa": True}).status_code == 200
    browser.add_virtual_authenticator(platform())

    # 1. The password alone: sent to the Security page to enrol, before anything else.
    browser.get(f"{live_server}/console/sign-in")
    fill(browser, {"email": member.email, "password": member.password})
    submit(browser, "Sign in")
    heading(browser, "Security")
    assert "requires a second factor" in browser.find_element(By.ID, "enrol-notice").text
    screen("security-enrol")

    # 2. "Add a passkey", confirmed by the password: the browser creates it (the virtual
    #    authenticator), the page posts it.
    add_a_passkey(browser, member.password)
    [passkey] = ctx.dashboard.passkeys.list(member.id)
    assert passkey["name"] == "Laptop" and passkey["discoverable"] is True and passkey["user_verified"] is True
    assert "Laptop" in browser.find_element(By.ID, "passkeys").text
    screen("security-passkeys")

    # 3. The organization is reachable now.
    browser.get(f"{live_server}/console/applications?organization_id={org_id}")
    heading(browser, "Applications")
    assert "Shop" in browser.find_element(By.TAG_NAME, "main").text

    # 4. Signed out, then in again with the passkey alone.  The sign-in page's autofill
    #    (conditional mediation on the email field) would be answered at once by the
    #    virtual authenticator, so the page is loaded while it is detached, then it comes
    #    back with its credential for "Sign in with a passkey" (or the pending autofill
    #    request answers first: the outcome is the same).
    held = browser.get_credentials()
    browser.remove_virtual_authenticator()
    submit(browser, "Sign out")
    heading(browser, "Sign in")
    assert browser.find_element(By.ID, "f-email").get_attribute("autocomplete") == "username webauthn"
    screen("sign-in-passkey")
    browser.add_virtual_authenticator(platform())
    for credential in held:
        browser.add_credential(credential)
    try:
        waiting(browser, 5).until(expected_conditions.visibility_of_element_located(
            (By.CSS_SELECTOR, "button[data-passkey-button]"))).click()
    except (StaleElementReferenceException, TimeoutException):
        pass  # the autofill answered first
    heading(browser, "Applications")
    assert member.email in browser.find_element(By.ID, "session-expiry").text
    assert console_errors(browser) == []


def test_a_passkey_confirms_it_is_you_for_a_sensitive_action(live_server, browser, check_page, ctx, clock,
                                                               make_dashboard_account):
    """Past the sudo window, creating an API key asks for a recent proof; "Use a passkey
    instead" beside the password form answers it with the account's passkey, and the
    page comes back to repeat the action."""
    owner = make_dashboard_account(name="Olivia Owner")
    app_id = owner.post(APPS, json={"name": "Shop"}).json["data"]["id"]
    browser.add_virtual_authenticator(platform())
    browser.get(f"{live_server}/console/sign-in")
    fill(browser, {"email": owner.email, "password": owner.password})
    submit(browser, "Sign in")
    heading(browser, "Applications")
    browser.get(f"{live_server}/console/account/security")
    add_a_passkey(browser, owner.password)

    clock.advance(ctx.config.dashboard_sudo_seconds)
    browser.get(f"{live_server}/console/applications/{app_id}/api-keys")
    fill(browser, {"name": "CD"})
    submit(browser, "Create key")
    waiting(browser).until(lambda b: "DASHBOARD_REAUTH_REQUIRED" in b.find_element(By.TAG_NAME, "main").text)
    assert ctx.api_keys.list(app_id) == []
    check_page("console-api-key-reauth-passkey")
    waiting(browser).until(expected_conditions.visibility_of_element_located(
        (By.CSS_SELECTOR, "button[data-passkey-button]"))).click()
    waiting(browser).until(lambda b: "Repeat the action" in b.find_element(By.TAG_NAME, "main").text,
                           message="the passkey did not re-authenticate")
    fill(browser, {"name": "CD"})
    submit(browser, "Create key")
    waiting(browser).until(lambda b: 'Key "CD" created' in b.find_element(By.TAG_NAME, "main").text,
                           message="the key was not created")
    assert [key["name"] for key in ctx.api_keys.list(app_id)] == ["CD"]
    record = ctx.store["events"].find_one({"action": "dashboard_account.reauthenticated"})
    assert record["data"]["method"] == "webauthn" and record["result"] == {"status": "success"}
    errors = console_errors(browser)  # the refusal's document is a 403
    assert all("/api-keys" in error and "status of 403" in error for error in errors), errors
