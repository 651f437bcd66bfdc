"""The hosted OIDC login in a real browser (headless Chromium through Selenium): login,
the MFA code (computed with pyotp from the secret set up for the user), consent, the
redirect carrying a code that Authlib exchanges over real HTTP, logout, and the error
page.  Each page is saved under docs/screenshots/.  Skipped, with the reason, where
Chromium is not installed."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

import pyotp  # noqa: E402
from authlib.common.security import generate_token  # noqa: E402
from authlib.integrations.requests_client import OAuth2Session  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.browser import console_errors, save_screenshot  # noqa: E402
from tests.conftest import bearer  # noqa: E402
from tests.mfa.conftest import STEP, mfa_url  # noqa: E402


@pytest.fixture
def config_overrides(live_url):
    # The issuer, and so the token endpoint Authlib calls, is the address the browser uses.
    return {"public_url": live_url}


def test_login_mfa_consent_and_code_exchange_in_chromium(live_server, browser, ctx, clock, application,
                                                         make_user, login, make_api_key, client):
    app_id = application["_id"]
    ctx.applications.update(app_id, {"oauth_hosted_login_enabled": True})
    ctx.applications.update_branding(app_id, {"brand_name": "Acme Photos", "brand_color": "#0b7a53",
                                              "brand_background": "#eef4f1"})
    callback = f"{live_server}/callback"
    key = make_api_key(application, permissions=["oidc:manage"])
    created = client.simulate_post(f"/api/v1/applications/{app_id}/oidc/clients", headers=bearer(key),
                                   json={"name": "Photo Printer", "redirect_uris": [callback]})
    rp = created.json["data"]

    user = make_user(application, email="ada@example.com", name="Ada Lovelace")
    pair = login(application, user["email"], user["password"])
    setup = client.simulate_post(mfa_url(application, user["id"], "/totp/setup"), json={},
                                 headers=bearer(pair["access_token"]))
    secret = setup.json["data"]["secret"]
    totp = pyotp.TOTP(secret)
    confirm = client.simulate_post(mfa_url(application, user["id"], "/totp/confirm"),
                                   headers=bearer(pair["access_token"]),
                                   json={"method_id": setup.json["data"]["method_id"], "code": totp.at(clock())})
    assert confirm.status_code == 201, confirm.text
    clock.advance(2 * STEP)

    session = OAuth2Session(rp["client_id"], rp["client_secret"], scope="openid profile email",
                            redirect_uri=callback, code_challenge_method="S256")
    verifier, nonce = generate_token(48), generate_token(20)
    url, state = session.create_authorization_url(f"{live_server}/oidc/authorize", code_verifier=verifier,
                                                  nonce=nonce)

    # 1. The login page.
    browser.get(url)
    assert browser.title == "Sign in - Acme Photos"
    save_screenshot(browser, "oidc-login")
    browser.find_element(By.ID, "email").send_keys(user["email"])
    browser.find_element(By.ID, "password").send_keys(user["password"])
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    # 2. The MFA step.
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("Two-step"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Two-step verification"
    save_screenshot(browser, "oidc-mfa")
    browser.find_element(By.ID, "code").send_keys(totp.at(clock()))
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    # 3. Consent, naming the client and the scopes.
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("Allow access"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Allow access?"
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "Photo Printer asks to:" in text and "See your email address" in text
    save_screenshot(browser, "oidc-consent")
    browser.find_element(By.CSS_SELECTOR, "button[value=allow]").click()

    # 4. The redirect to the client, with the code Authlib exchanges.
    WebDriverWait(browser, 10).until(expected_conditions.url_contains("/callback"))
    assert browser.current_url.startswith(callback + "?")
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["state"] == [state] and query["code"]
    token = session.fetch_token(f"{live_server}/oidc/token", authorization_response=browser.current_url,
                                code_verifier=verifier)
    claims = ctx.oidc.tokens.verify_id_token_hint(token["id_token"])
    assert claims["sub"] == user["id"] and claims["nonce"] == nonce
    assert session.get(f"{live_server}/oidc/userinfo").json()["email"] == "ada@example.com"

    # 5. The browser session: a second authorize goes straight back with a code.
    url2, state2 = session.create_authorization_url(f"{live_server}/oidc/authorize", code_verifier=verifier)
    browser.get(url2)
    WebDriverWait(browser, 10).until(expected_conditions.url_contains("/callback"))
    assert browser.current_url.startswith(callback + "?") and "code=" in browser.current_url

    # 6. Logout ends it; the logged-out page.
    browser.get(f"{live_server}/oidc/logout")
    assert browser.find_element(By.TAG_NAME, "h1").text == "You are signed out"
    save_screenshot(browser, "oidc-logged-out")
    assert not [c for c in browser.get_cookies() if c["name"].startswith("iamgate_oidc_")]

    # 7. An error page: an unregistered redirect URI is never followed.
    browser.get(url.replace("callback", "elsewhere"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "This sign-in link is not valid"
    assert browser.current_url.startswith(f"{live_server}/oidc/authorize")
    save_screenshot(browser, "oidc-error")
    # No style, script or form target was refused on any page (the 404 of /callback and
    # the error page's 400 are the only failed loads).
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e] == []
