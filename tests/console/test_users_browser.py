"""The console's users screens in headless Chromium: an owner searches an application's
users, opens one, asks why a permission is denied, revokes a session, suspends them, and suspends every user a search
matches after seeing how many.  Each screen is scanned by axe-core (no serious or
critical violation) and saved desktop and mobile (390 px); the browser console stays
free of errors.  Skipped, with the reason, where Chromium is missing."""
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
    return {"public_url": live_url}


def test_search_open_a_user_revoke_a_session_and_suspend_all_matching(live_server, browser, check_page, ctx,
                                                                       dashboard_account, make_dashboard_app,
                                                                       make_user, login):
    app = ctx.applications.get(make_dashboard_app(dashboard_account, name="Shop")["id"])
    for n in range(30):
        make_user(app, email=f"buyer-{n:02d}@shop.example", name=f"Buyer {n}")
    ada = make_user(app, email="ada@lovelace.example", name="Ada Lovelace")
    for _ in range(2):
        login(app, ada["email"], ada["password"])

    def screen(name: str) -> None:
        assert console_errors(browser) == [], name
        check_page(f"console-{name}")

    sign_in(browser, live_server, dashboard_account)
    browser.get(f"{live_server}/console/applications/{app['_id']}")
    browser.find_element(By.LINK_TEXT, "Users").click()
    heading(browser, "Users of Shop")
    assert "31 users · page 1 of 2" in browser.find_element(By.TAG_NAME, "caption").text
    screen("users")

    fill(browser, {"q": "lovelace"})
    submit(browser, "Search")
    waiting(browser, 10).until(expected_conditions.url_contains("q=lovelace"))
    browser.find_element(By.LINK_TEXT, "ada@lovelace.example").click()
    heading(browser, "ada@lovelace.example")
    assert "2 active sessions" in browser.find_element(By.TAG_NAME, "main").text
    fill(browser, {"permission": "posts:read"})
    submit(browser, "Explain")
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.ID, "explained")))
    assert "Denied" in browser.find_element(By.ID, "explained").text
    screen("user")
    browser.find_elements(By.XPATH, "//button[normalize-space()='Revoke']")[0].click()
    waiting(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "main"), "The session was revoked."))
    assert "1 active session" in browser.find_element(By.TAG_NAME, "main").text
    submit(browser, "Suspend")
    waiting(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "user-status"), "suspended"))
    assert ctx.users.directory.status(app["_id"], ada["id"]) == "suspended"

    browser.get(f"{live_server}/console/applications/{app['_id']}/users?q=buyer-1")
    Select(browser.find_element(By.ID, "f-action")).select_by_value("suspend")
    submit(browser, "Continue…")
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.ID, "bulk-count")))
    assert browser.find_element(By.ID, "bulk-count").text == "10"
    screen("users-bulk-confirm")
    submit(browser, "Suspend 10 users")
    waiting(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "main"), "Suspend 10 users: done."))
    screen("users-bulk-done")
    suspended = [user for user in ctx.users.admin.search(app["_id"], search=None, status="suspended", page=1,
                                                          per_page=100)[0]]
    assert len(suspended) == 11
