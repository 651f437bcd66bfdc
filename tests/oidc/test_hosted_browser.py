"""The hosted OIDC login in a real browser (headless Chromium through Selenium): login,
the MFA code (computed with pyotp from the secret set up for the user), consent, the
redirect carrying a code that Authlib exchanges over real HTTP, logout (its
confirmation, then the signed-out page), and the error page.  Each page is saved under
docs/screenshots/.  Skipped, with the reason, where Chromium is not installed."""
from __future__ import annotations

import tempfile
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

import pyotp  # noqa: E402
from authlib.common.security import generate_token  # noqa: E402
from authlib.integrations.requests_client import OAuth2Session  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.browser import console_errors  # noqa: E402
from tests.conftest import bearer  # noqa: E402
from tests.mfa.conftest import STEP, mfa_url  # noqa: E402


@pytest.fixture
def config_overrides(live_url):
    # The issuer, and so the token endpoint Authlib calls, is the address the browser uses.
    return {"public_url": live_url}


def test_login_mfa_consent_and_code_exchange_in_chromium(live_server, browser, check_page, ctx, clock, application,
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
    check_page("oidc-login")
    browser.find_element(By.ID, "email").send_keys(user["email"])
    browser.find_element(By.ID, "password").send_keys(user["password"])
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    # 2. The MFA step.
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("Two-step"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Two-step verification"
    check_page("oidc-mfa")
    browser.find_element(By.ID, "code").send_keys(totp.at(clock()))
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    # 3. Consent, naming the client and the scopes.
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("Allow access"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Allow access?"
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "Photo Printer asks to:" in text and "See your email address" in text
    check_page("oidc-consent")
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

    # 6. Logout without a hint asks first; confirming ends the session: the logged-out page.
    browser.get(f"{live_server}/oidc/logout")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sign out of Acme Photos?"
    check_page("oidc-logout-confirm")
    assert [c for c in browser.get_cookies() if c["name"].startswith("iamgate_oidc_")]
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("signed out"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "You are signed out"
    check_page("oidc-logged-out")
    assert not [c for c in browser.get_cookies() if c["name"].startswith("iamgate_oidc_")]

    # 7. An error page: an unregistered redirect URI is never followed.
    browser.get(url.replace("callback", "elsewhere"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "This sign-in link is not valid"
    assert browser.current_url.startswith(f"{live_server}/oidc/authorize")
    check_page("oidc-error")
    # No style, script or form target was refused on any page (the 404 of /callback and
    # the error page's 400 are the only failed loads).
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e] == []


LOGO = (b'<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40" viewBox="0 0 120 40">'
        b'<rect width="120" height="40" rx="8" fill="#0b7a53"/>'
        b'<text x="60" y="27" font-family="sans-serif" font-size="18" fill="#fff" text-anchor="middle">ACME</text>'
        b'</svg>')


def test_a_registered_https_logo_renders_under_the_pages_policy(live_server, ctx, application, make_api_key, client):
    """The API takes https logos only (the client's too), and the pages' img-src
    (https: data:) lets them load: the application's logo renders on the login page."""
    from controlplane.applications.schemas import BRANDING
    from tests.browser import https_files, missing_browser, start_chromium
    reason = missing_browser()
    if reason:
        pytest.skip(f"real-browser test skipped: {reason}")
    with https_files({"/logo.svg": ("image/svg+xml", LOGO)}) as (origin, trust_flag), \
            tempfile.TemporaryDirectory(prefix="iamgate-chromium-") as profile:
        app_id = application["_id"]
        ctx.applications.update(app_id, {"oauth_hosted_login_enabled": True})
        ctx.applications.update_branding(app_id, BRANDING.validate({"brand_name": "Acme",
                                                                    "brand_logo_url": f"{origin}/logo.svg"}))
        key = make_api_key(application, permissions=["oidc:manage"])
        created = client.simulate_post(f"/api/v1/applications/{app_id}/oidc/clients", headers=bearer(key),
                                       json={"name": "Printer", "redirect_uris": [f"{live_server}/callback"],
                                             "logo_url": f"{origin}/logo.svg?client"})
        assert created.status_code == 201, created.text
        session = OAuth2Session(created.json["data"]["client_id"], scope="openid",
                                redirect_uri=f"{live_server}/callback", code_challenge_method="S256")
        url, _ = session.create_authorization_url(f"{live_server}/oidc/authorize", code_verifier=generate_token(48))
        driver = start_chromium(profile, trust_flag)
        try:
            driver.set_page_load_timeout(30)
            driver.get(url)
            logo = driver.find_element(By.CSS_SELECTOR, "header img")
            assert logo.get_attribute("src") == f"{origin}/logo.svg"
            WebDriverWait(driver, 10).until(lambda d: d.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth", logo))
            assert driver.execute_script("return arguments[0].naturalWidth", logo) == 120
            assert [e for e in console_errors(driver) if "Failed to load resource" not in e] == []
        finally:
            driver.quit()


def test_every_other_hosted_page_in_chromium(live_server, browser, check_page, ctx, clock, application, make_user,
                                             make_api_key, client, outbox):
    """The pages off the main path, each scanned by axe-core and photographed: a wrong
    password, Forgot password? (asked, sent), Create account, Cancel, an expired form
    and a refused logout hint."""
    app_id = application["_id"]
    ctx.applications.update(app_id, {"oauth_hosted_login_enabled": True, "oauth_hosted_registration_enabled": True})
    ctx.applications.update_branding(app_id, {"brand_name": "Acme Photos", "brand_color": "#0b7a53",
                                              "brand_background": "#eef4f1"})
    callback = f"{live_server}/callback"
    key = make_api_key(application, permissions=["oidc:manage"])
    rp = client.simulate_post(f"/api/v1/applications/{app_id}/oidc/clients", headers=bearer(key),
                              json={"name": "Photo Printer", "redirect_uris": [callback]}).json["data"]
    user = make_user(application, email="ada@example.com", name="Ada Lovelace")
    session = OAuth2Session(rp["client_id"], rp["client_secret"], scope="openid email", redirect_uri=callback,
                            code_challenge_method="S256")

    def authorize() -> str:
        url, state = session.create_authorization_url(f"{live_server}/oidc/authorize",
                                                      code_verifier=generate_token(48))
        browser.get(url)
        return state

    def press(value: str, title: str) -> None:
        browser.find_element(By.CSS_SELECTOR, f"button[value={value}]").click()
        WebDriverWait(browser, 10).until(expected_conditions.title_contains(title))

    # A wrong password: the login page with its error.
    authorize()
    browser.find_element(By.ID, "email").send_keys(user["email"])
    browser.find_element(By.ID, "password").send_keys("not the password 1")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 10).until(expected_conditions.presence_of_element_located((By.ID, "form-error")))
    check_page("oidc-login-error")

    # Forgot password?: the request page, pre-filled, then the same answer for any email.
    browser.find_element(By.ID, "email").send_keys(user["email"])
    press("forgot", "Reset your password")
    assert browser.find_element(By.ID, "email").get_attribute("value") == user["email"]
    check_page("oidc-forgot")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]:not([value])").click()
    WebDriverWait(browser, 10).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "[role=status]")))
    assert [mail.to for mail in outbox if "reset" in mail.body] == [user["email"]]
    check_page("oidc-forgot-sent")

    # Back to the same sign-in, then Create account.
    press("back", "Sign in")
    press("register", "Create your account")
    check_page("oidc-register")
    browser.find_element(By.ID, "name").send_keys("Grace Hopper")
    browser.find_element(By.ID, "email").send_keys("grace@example.com")
    browser.find_element(By.ID, "password").send_keys("a sturdy passphrase 9")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]:not([value])").click()
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("Allow access"))
    assert "Signed in as grace@example.com." in browser.find_element(By.TAG_NAME, "main").text

    # Not you?: back to the login page of the same request; then Cancel goes back to the client.
    press("switch", "Sign in")
    press("cancel", "")
    WebDriverWait(browser, 10).until(expected_conditions.url_contains("/callback"))
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["error"] == ["access_denied"] and query["state"]

    # A form left open too long: the branded error page.
    authorize()
    clock.advance(601)
    browser.find_element(By.ID, "email").send_keys(user["email"])
    browser.find_element(By.ID, "password").send_keys(user["password"])
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("not valid"))
    assert "Acme Photos" in browser.title
    check_page("oidc-expired")

    # A logout link with a hint that is not ours: a page in plain words, not JSON.
    browser.get(f"{live_server}/oidc/logout?id_token_hint=not.a.token&client_id={rp['client_id']}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sign-out link is not valid"
    assert browser.title == "Sign-out link is not valid - Acme Photos"
    assert "you have not been signed out" in browser.find_element(By.TAG_NAME, "main").text
    check_page("oidc-logout-error")
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e] == []
