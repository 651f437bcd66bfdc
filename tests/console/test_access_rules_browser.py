"""The access-rule screens in headless Chromium: create a role whose permissions htmx
checks as they are typed, open it, write a policy whose condition the API refuses (the
offending lines marked), fix it, and ask the check playground why a user is denied.
Every screen is scanned by axe-core (no serious or critical violation) and saved desktop
and mobile (390 px).  Skipped, with the reason, where Chromium is missing."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402

from tests.browser import console_errors  # noqa: E402
from tests.console.test_console_browser import fill, heading, sign_in, submit, wait_text  # noqa: E402


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url}  # the console's writes must come from the browser's origin



def test_roles_policies_and_the_check_playground(live_server, browser, check_page, ctx, dashboard_account,
                                                 make_dashboard_app, make_user):
    app = make_dashboard_app(dashboard_account, name="Reports")
    user = make_user({"_id": app["id"]})

    def screen(name: str, *expected_errors: str) -> None:
        errors = console_errors(browser)
        assert len(errors) == len(expected_errors), errors
        assert all(e in error for e, error in zip(expected_errors, errors, strict=True)), errors
        check_page(f"console-{name}")

    sign_in(browser, live_server, dashboard_account)
    browser.get(f"{live_server}/console/applications/{app['id']}")
    browser.find_element(By.LINK_TEXT, "Roles").click()
    heading(browser, "Roles of Reports")

    # The permissions field is checked as it is typed, with the API's rule (htmx GET).
    fill(browser, {"name": "analyst", "display_name": "Analyst"})
    browser.find_element(By.NAME, "permissions").send_keys("reports:read\nreports")
    wait_text(browser, "permissions-check", "Line 2:")
    screen("roles-typing")
    browser.find_element(By.NAME, "permissions").send_keys(":export")
    wait_text(browser, "permissions-check", "2 permissions")
    submit(browser, "Create role")
    heading(browser, "Role analyst")
    assert "0 users" in browser.find_element(By.ID, "role-holders").text
    screen("role")
    role = ctx.roles.resolve(app["id"], "analyst")
    ctx.roles.assign(app["id"], user["id"], {"role_id": role["_id"]})

    browser.find_element(By.LINK_TEXT, "Policies").click()
    heading(browser, "Policies of Reports")
    fill(browser, {"name": "office hours", "permissions": "reports:export"})
    browser.find_element(By.NAME, "effect").send_keys("deny")
    bad = {"not": {"op": "between", "left": {"attr": "context.hour"}, "right": {"value": [9, 17]}}}
    fill(browser, {"condition": json.dumps(bad, indent=2)})
    submit(browser, "Create policy")
    wait_text(browser, "e-condition", "condition.not.op")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".json-lines .bad-line")) == 1
    screen("policy-error", "status of 400")
    good = {"not": {"all": [{"op": "gte", "left": {"attr": "context.hour"}, "right": {"value": 9}},
                            {"op": "lt", "left": {"attr": "context.hour"}, "right": {"value": 17}}]}}
    fill(browser, {"condition": json.dumps(good, indent=2)})
    submit(browser, "Create policy")
    heading(browser, "Policy office hours")
    screen("policy")

    browser.find_element(By.LINK_TEXT, "Check playground").click()
    heading(browser, "Check playground")
    fill(browser, {"user_id": user["id"], "permission": "reports:export", "context": '{"hour": 22}'})
    submit(browser, "Check")
    wait_text(browser, "decision-title", "Denied")
    assert "Denied by a deny policy" in browser.find_element(By.ID, "decision").text
    screen("check-playground")
