"""A tenant's whole first day in the console, in headless Chromium against the real
control plane over HTTP (issue 28's journey, its ten steps in order):

1. sign up and verify (the link from the mail sink), sign in;
2. create an organization and an application (hosted login on);
3. set the branding and see the preview change;
4. create an API key and copy it;
5. create a role and a user through the API with that key, then assign the role;
6. write a policy, see a validation error at its JSON path, fix it;
7. run the check playground and read the trace;
8. add an OIDC client and sign in through it in a second window;
9. add a webhook to a local receiver, see a delivery, redeliver it;
10. find all of it in the audit log.

Every screen is scanned by axe-core (no serious or critical violation) and saved desktop
and 390 px (``check_page``); the browser console has no error but the answers a step
expects (a refused form's 400, a created resource's 201).  Skipped, with the reason,
where Chromium is missing."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from authlib.common.security import generate_token  # noqa: E402
from authlib.integrations.requests_client import OAuth2Session  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402
from tests.console.test_console_browser import PASSWORD, fill, heading, sign_in, submit, wait_text  # noqa: E402

USER_PASSWORD = "Tenant-User-Pass-42"


@pytest.fixture
def config_overrides(live_url):
    # Writes come from the browser's origin; the webhook's receiver is on 127.0.0.1.
    return {"public_url": live_url, "webhook_allow_private_targets": True, "webhook_timeout": 2}


def test_a_tenants_first_day(live_server, browser, check_page, ctx, outbox, client, receiver):
    def screen(name: str, *allowed: str) -> None:
        """The page is clean (no console error but the loads of an ``allowed`` status:
        Chromium may log a created resource's 201, and a refused form's 400) and accessible."""
        errors = console_errors(browser)
        assert all(any(status in error for status in allowed) for error in errors), (name, errors)
        check_page(f"console-day-{name}")

    def api(method: str, path: str, key: str, body: dict | None = None):
        return client.simulate_request(method, f"/api/v1/applications/{app_id}{path}", json=body,
                                       headers={"Authorization": f"Bearer {key}"})

    # 1. Sign up, open the mailed link, confirm, sign in.
    browser.get(f"{live_server}/console/sign-up")
    fill(browser, {"name": "Grace Hopper", "email": "grace@example.com", "password": PASSWORD})
    submit(browser, "Create account")
    heading(browser, "Check your email")
    link = re.search(r"http://\S+/dashboard/verify-email\?token=\S+", outbox[-1].body).group(0)
    browser.get(link)
    submit(browser, "Confirm my address")
    wait_text(browser, "main", "is confirmed")
    sign_in(browser, live_server, SimpleNamespace(email="grace@example.com", password=PASSWORD))
    screen("applications-empty")

    # 2. An organization, an application in it, hosted login on.
    browser.find_element(By.LINK_TEXT, "Organizations").click()
    heading(browser, "Organizations")
    fill(browser, {"name": "Harbor"})
    submit(browser, "Create organization")
    heading(browser, "Harbor")
    harbor = browser.current_url
    screen("organization")
    # The account's two organizations (its personal one and Harbor), a page each: htmx
    # fetches the next page and swaps only the list, the URL following.
    browser.get(f"{live_server}/console/organizations?per_page=1")
    browser.execute_script("window.sameDocument = true")
    first = browser.find_element(By.ID, "organization-list").text
    browser.find_element(By.LINK_TEXT, "Next page").click()
    wait_text(browser, "organization-list", "Page 2 of 2")
    assert browser.find_element(By.ID, "organization-list").text != first
    assert browser.execute_script("return window.sameDocument") is True  # a swap, not a new page
    assert "page=2" in browser.current_url
    assert browser.switch_to.active_element.text == "Previous page"  # the keyboard's place is kept
    assert browser.find_element(By.ID, "busy").get_attribute("hidden") is not None  # done: nothing left behind
    assert browser.find_elements(By.CSS_SELECTOR, "[aria-busy=true]") == []
    screen("organizations-paged")
    browser.get(harbor)
    heading(browser, "Harbor")
    browser.find_element(By.LINK_TEXT, "Applications of Harbor").click()
    heading(browser, "Applications")
    fill(browser, {"name": "Docks"})
    submit(browser, "Create application")
    heading(browser, "Docks")
    app_id = browser.current_url.rstrip("/").rsplit("/", 1)[-1]
    browser.find_element(By.ID, "f-hosted-login").click()
    submit(browser, "Save settings")
    wait_text(browser, "main", "saved")
    assert ctx.applications.get(app_id)["oauth_hosted_login_enabled"] is True
    screen("application")

    # 3. Branding: the preview changes as the form does, before anything is saved.
    browser.find_element(By.LINK_TEXT, "Branding").click()
    heading(browser, "Branding of Docks")
    fill(browser, {"brand_name": "Docks", "brand_color": "#1a4d8f"})
    waiting(browser, 10).until(lambda b: "brand_color=%231a4d8f" in b.find_element(
        By.CSS_SELECTOR, "#preview iframe").get_attribute("src"))
    submit(browser, "Save branding")
    wait_text(browser, "main", "Branding saved.")
    assert ctx.applications.get(app_id)["brand_color"] == "#1a4d8f"
    screen("branding")

    # 4. An API key, its secret shown once, copied.
    browser.find_element(By.LINK_TEXT, "API keys").click()
    heading(browser, "API keys of Docks")
    fill(browser, {"name": "provisioning"})
    submit(browser, "Create key")
    # The page before the post has the same heading: wait for the one that shows the secret.
    key = waiting(browser, 10).until(lambda b: b.find_elements(By.ID, "new-secret"))[0].get_attribute("value")
    browser.find_element(By.XPATH, "//button[normalize-space()='Copy key']").click()
    waiting(browser, 10).until(lambda b: b.find_element(By.CSS_SELECTOR, "[data-copied-for=new-secret]").text)
    screen("api-key", "status of 201")

    # 5. A role and a user through the API with that key; the role assigned in the console.
    role = api("POST", "/roles", key, {"name": "dockhand", "display_name": "Dockhand",
                                        "permissions": ["cargo:read", "cargo:move"]})
    assert role.status_code == 201, role.text
    user = client.simulate_post(f"/api/v1/applications/{app_id}/users/register", json={
        "email": "ada@example.com", "password": USER_PASSWORD, "name": "Ada Lovelace"})
    assert user.status_code == 201, user.text
    user_id = user.json["data"]["id"]
    browser.find_element(By.LINK_TEXT, "Users").click()
    heading(browser, "Users")
    browser.find_element(By.LINK_TEXT, "ada@example.com").click()
    heading(browser, "ada@example.com")
    submit(browser, "Assign role")
    wait_text(browser, "main", "Dockhand")
    assert [a["role_id"] for a in ctx.roles.user_roles(app_id, user_id)] == [role.json["data"]["id"]]
    screen("user")

    # 6. A policy refused at its JSON path, then fixed.
    browser.find_element(By.LINK_TEXT, "Policies").click()
    heading(browser, "Policies of Docks")
    fill(browser, {"name": "day shift", "permissions": "cargo:move"})
    browser.find_element(By.NAME, "effect").send_keys("deny")
    bad = {"not": {"op": "between", "left": {"attr": "context.hour"}, "right": {"value": [6, 18]}}}
    fill(browser, {"condition": json.dumps(bad, indent=2)})
    submit(browser, "Create policy")
    wait_text(browser, "e-condition", "condition.not.op")
    assert any("status of 400" in error for error in console_errors(browser))  # the refusal, and only it
    screen("policy-error")
    good = {"not": {"all": [{"op": "gte", "left": {"attr": "context.hour"}, "right": {"value": 6}},
                            {"op": "lt", "left": {"attr": "context.hour"}, "right": {"value": 18}}]}}
    fill(browser, {"condition": json.dumps(good, indent=2)})
    submit(browser, "Create policy")
    heading(browser, "Policy day shift")

    # 7. The playground's trace: a night move is denied by the policy.
    browser.find_element(By.LINK_TEXT, "Check playground").click()
    heading(browser, "Check playground")
    fill(browser, {"user_id": user_id, "permission": "cargo:move", "context": '{"hour": 23}'})
    submit(browser, "Check")
    wait_text(browser, "decision-title", "Denied")
    assert "Denied by a deny policy" in browser.find_element(By.ID, "decision").text
    screen("check-playground")

    # 8. An OIDC client, and the user signing in through it in a second window.
    callback = f"{live_server}/callback"
    browser.find_element(By.LINK_TEXT, "OIDC clients").click()
    heading(browser, "OIDC clients")
    fill(browser, {"name": "Dock portal", "redirect_uris": callback})
    submit(browser, "Register client")
    # The page before has the same heading: wait for what only the answer shows.
    client_secret = waiting(browser, 10).until(lambda driver: driver.find_element(By.ID, "secret-value")).text
    client_id = browser.find_element(By.CSS_SELECTOR, "p.success code").text
    screen("oidc-client", "status of 201")
    console_window = browser.current_window_handle
    session = OAuth2Session(client_id, client_secret, scope="openid email", redirect_uri=callback,
                            code_challenge_method="S256")
    verifier = generate_token(48)
    url, _state = session.create_authorization_url(f"{live_server}/oidc/authorize", code_verifier=verifier)
    browser.switch_to.new_window("window")
    browser.get(url)
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.ID, "password")))
    assert "Docks" in browser.title  # the branding of step 3
    browser.find_element(By.ID, "email").send_keys("ada@example.com")
    browser.find_element(By.ID, "password").send_keys(USER_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    waiting(browser, 10).until(lambda b: "/callback" in b.current_url or b.find_elements(
        By.CSS_SELECTOR, "button[value=allow]"))
    if "/callback" not in browser.current_url:
        browser.find_element(By.CSS_SELECTOR, "button[value=allow]").click()  # consent
        waiting(browser, 10).until(expected_conditions.url_contains("/callback"))
    token = session.fetch_token(f"{live_server}/oidc/token", authorization_response=browser.current_url,
                                code_verifier=verifier)
    assert ctx.oidc.tokens.verify_id_token_hint(token["id_token"])["sub"] == user_id
    console_errors(browser)  # the RP's /callback is no page of ours: its 404 is expected
    browser.close()
    browser.switch_to.window(console_window)

    # 9. A webhook to a local receiver: a delivery, then a redelivery of it.
    browser.find_element(By.LINK_TEXT, "Webhooks").click()
    heading(browser, "Webhooks")
    fill(browser, {"url": receiver.url})
    browser.find_element(By.ID, "f-event_role.assigned").click()
    submit(browser, "Create webhook")
    heading(browser, "Webhooks")
    screen("webhooks", "status of 201")
    ctx.roles.unassign(app_id, user_id, role.json["data"]["id"], None)
    assert api("POST", f"/users/{user_id}/roles", key, {"role_id": role.json["data"]["id"]}).status_code == 201
    ctx.webhooks.dispatcher.catch_up()
    while ctx.webhooks.worker.run_once():
        pass
    assert receiver.events() == ["role.assigned"]
    browser.find_element(By.PARTIAL_LINK_TEXT, "127.0.0.1").click()
    waiting(browser, 10).until(expected_conditions.presence_of_element_located((By.TAG_NAME, "table")))
    assert "200" in browser.find_element(By.TAG_NAME, "table").text  # the receiver's answer
    webhook_page = browser.current_url
    submit(browser, "Redeliver")
    wait_text(browser, "main", "Queued again as delivery")
    while ctx.webhooks.worker.run_once():
        pass
    first, again = receiver.requests
    assert first["body"] == again["body"]  # the same event, the same payload
    assert first["headers"]["webhook-id"] != again["headers"]["webhook-id"]  # a new delivery
    browser.get(webhook_page)  # not a reload: that would post the redelivery again
    waiting(browser, 10).until(expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "table"),
                                                                                 "redelivery of"))
    screen("webhook-deliveries")

    # The loading state: nothing left behind once the answers are in; while a request is
    # in flight (htmx's events, as htmx sends them), the pill, the words for screen readers,
    # the busy region and the held buttons.
    assert browser.find_element(By.ID, "busy").get_attribute("hidden") is not None
    assert browser.find_elements(By.CSS_SELECTOR, "[aria-busy=true]") == []
    in_flight = """
        const form = document.querySelector("main form");
        if (arguments[0]) {
          window.request = new EventTarget();
          form.dispatchEvent(new CustomEvent("htmx:beforeRequest",
                                             {bubbles: true, detail: {elt: form, target: form, xhr: window.request}}));
        } else {
          window.request.dispatchEvent(new Event("loadend"));
        }
        return [document.getElementById("busy").hidden, document.getElementById("busy-status").textContent,
                form.getAttribute("aria-busy"), [...form.querySelectorAll("button")].every(b => b.disabled)];"""
    assert browser.execute_script(in_flight, True) == [False, "Loading…", "true", True]
    assert browser.execute_script(in_flight, False) == [True, "", None, False]

    # 10. All of it in the audit log.
    browser.find_element(By.LINK_TEXT, "Audit log").click()
    heading(browser, "Audit log")
    log = browser.find_element(By.TAG_NAME, "main").text
    for action in ("api_key.created", "role.created", "role.assigned", "policy.created", "oidc_client.created",
                   "webhook.created", "webhook.redelivered"):
        assert action in log, (action, log)
    screen("audit-log")
