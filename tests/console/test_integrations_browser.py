"""The integrations screens in headless Chromium: register an OIDC client (its secret
shown once) and rotate its secret (the new one shown once), create a webhook and see its
delivery log, then watch the audit log's live tail add a record without a reload.  Every
screen is scanned by axe-core and saved desktop and mobile (390 px); the browser console
stays free of errors (a CSP violation would be one).  Skipped, with the reason, where
Chromium is missing."""
from __future__ import annotations

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402
from tests.console.test_console_browser import fill, heading, sign_in, submit  # noqa: E402


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url, "webhook_allow_private_targets": True}


def test_clients_webhooks_and_the_live_audit_log(live_server, browser, check_page, ctx, dashboard_account,
                                                 make_dashboard_app, make_user):
    app_id = make_dashboard_app(dashboard_account, name="Shop")["id"]

    def screen(name: str) -> None:
        assert console_errors(browser) == [], name
        check_page(f"console-{name}")

    sign_in(browser, live_server, dashboard_account)
    browser.get(f"{live_server}/console/applications/{app_id}")
    browser.find_element(By.LINK_TEXT, "OIDC clients").click()
    heading(browser, "OIDC clients")
    fill(browser, {"name": "Web shop", "redirect_uris": "https://shop.example/callback",
                   "allowed_origins": "https://shop.example"})
    submit(browser, "Register client")
    # The page before has the same heading: wait for what only the answer shows.
    secret = waiting(browser, 10).until(lambda driver: driver.find_element(By.ID, "secret-value")).text
    assert ctx.oidc.clients.authenticate(ctx.oidc.clients.list(app_id)[0]["client_id"], secret)
    screen("oidc-clients-created")
    # console.js's Copy button: the clipboard answers (headless Chromium may refuse it),
    # either way the button says what happened and no promise rejection goes unhandled.
    copy = browser.find_element(By.CSS_SELECTOR, "button[data-copy]")
    copy.click()
    waiting(browser, 5).until(lambda driver: copy.text != "Copy")
    assert console_errors(browser) == []
    browser.find_element(By.LINK_TEXT, "Web shop").click()
    heading(browser, "Web shop")
    assert secret not in browser.page_source
    screen("oidc-client")
    Select(browser.find_element(By.ID, "f-previous_secret_valid_for")).select_by_visible_text("after 1 hour")
    submit(browser, "Rotate secret")
    rotated = waiting(browser, 10).until(lambda driver: driver.find_element(By.ID, "secret-value")).text
    client_id = ctx.oidc.clients.list(app_id)[0]["client_id"]
    assert rotated != secret and ctx.oidc.clients.authenticate(client_id, rotated)
    assert ctx.oidc.clients.authenticate(client_id, secret)  # for the hour it was given
    screen("oidc-client-rotated")

    browser.find_element(By.LINK_TEXT, "Webhooks").click()
    heading(browser, "Webhooks")
    fill(browser, {"url": "http://127.0.0.1:9/hooks"})
    browser.find_element(By.ID, "f-event_user.created").click()
    submit(browser, "Create webhook")
    created = waiting(browser, 10).until(lambda driver: driver.find_element(By.ID, "secret-value"))
    assert created.text.startswith("whsec_")
    screen("webhooks-created")
    make_user(ctx.applications.get(app_id), email="ada@example.com")
    ctx.webhooks.dispatcher.catch_up()
    browser.find_element(By.PARTIAL_LINK_TEXT, "127.0.0.1:9").click()
    submit(browser, "Redeliver")
    waiting(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "main"), "Queued again as delivery"))
    assert "redelivery of" in browser.find_element(By.TAG_NAME, "table").text
    screen("webhook-deliveries")

    browser.find_element(By.LINK_TEXT, "Audit log").click()
    heading(browser, "Audit log")
    rows = len(browser.find_elements(By.CSS_SELECTOR, "#audit-rows tr:not(.tail)"))
    make_user(ctx.applications.get(app_id), email="grace@example.com")
    waiting(browser, 12).until(
        lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "#audit-rows tr:not(.tail)")) > rows,
        message="the live tail did not add the new record")
    assert "grace@example.com" in browser.find_element(By.ID, "audit-rows").text
    screen("audit-log")
