"""A sign-in through a connection in a real browser (headless Chromium through Selenium):
the relying party's authorize -> iamgate's login page with its "Continue with Local IdP"
button -> the real login page of panva's oidc-provider (tests/connections/upstream.py) ->
back through the callback -> consent -> the client's code, which it exchanges.  The login
page with its buttons is scanned by axe-core and saved, desktop and 390 px wide, as
docs/screenshots/oidc-login-connections.png and its -mobile twin (``make screenshots``).  The link
page (linking "verify") is proven by the account's password, and by its passkey held in
Chromium's virtual authenticator (WebAuthn Level 3, 11.2).  Skipped, saying why,
without Chromium or Node; failed in CI."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

import requests  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.virtual_authenticator import Credential, VirtualAuthenticatorOptions  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402

from tests.browser import console_errors, waiting  # noqa: E402
from tests.conftest import bearer  # noqa: E402
from tests.oidc.conftest import pkce_pair  # noqa: E402
from tests.passkeys.authenticator import SoftAuthenticator  # noqa: E402


@pytest.fixture
def live_url(live_port) -> str:
    # A host name, not an IP address: a passkey is bound to one (the RP ID "localhost").
    return f"http://localhost:{live_port}"


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url, "webhook_allow_private_targets": True, "webauthn_rp_id": "localhost",
            "webauthn_origins": (live_url,)}


def test_continue_with_the_local_provider_through_its_real_login_page(live_server, browser, check_page, ctx, clock,
                                                                     hosted_app, oidc_client, local_idp,
                                                                     add_connection):
    app_id = hosted_app["_id"]
    ctx.applications.update_branding(app_id, {"brand_name": "Acme Photos", "brand_color": "#0b7a53",
                                              "brand_background": "#eef4f1"})
    rp_callback = f"{live_server}/rp/callback"  # a 404 page of the test server; its URL carries the code
    rp = oidc_client(hosted_app, name="Photo Printer", redirect_uris=[rp_callback])
    upstream, _ = local_idp()
    clock.advance(1)  # the buttons come in creation order
    add_connection(hosted_app, name="acme-entra", display_name="Acme Corporation (Microsoft Entra ID)",
                   email_domains=("acme.test",))

    verifier, challenge = pkce_pair()
    url = requests.Request("GET", f"{live_server}/oidc/authorize", params={
        "response_type": "code", "client_id": rp["client_id"], "redirect_uri": rp_callback,
        "scope": "openid email profile", "state": "rp-state", "nonce": "rp-nonce", "code_challenge": challenge,
        "code_challenge_method": "S256"}).prepare().url

    # 1. iamgate's login page: a button per connection, above the email form.
    browser.get(url)
    assert browser.title == "Sign in - Acme Photos"
    buttons = browser.find_elements(By.CSS_SELECTOR, ".connections button")
    assert [button.text for button in buttons] == ["Continue with Local IdP",
                                                   "Continue with Acme Corporation (Microsoft Entra ID)"]
    check_page("oidc-login-connections")
    browser.set_window_size(390, 760)
    width = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], "the page scrolls sideways at 390 px"
    assert all(button.size["width"] <= 390 for button in buttons)
    browser.set_window_size(1000, 760)
    buttons[0].click()

    # 2. The provider's own login page (oidc-provider's development interaction).
    waiting(browser).until(expected_conditions.url_contains(upstream.issuer))
    login = waiting(browser).until(expected_conditions.presence_of_element_located((By.NAME, "login")))
    login.send_keys("verified")
    browser.find_element(By.NAME, "password").send_keys("any password")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    # 3. Back at iamgate: the consent page for the new user, then the code.
    waiting(browser).until(expected_conditions.title_contains("Allow access"))
    assert browser.current_url.startswith(f"{live_server}/oidc/connections/{app_id}/callback")
    browser.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
    waiting(browser).until(expected_conditions.url_contains("/rp/callback"))
    query = parse_qs(urlsplit(browser.current_url).query)
    assert query["state"] == ["rp-state"] and query["code"]
    assert not [c for c in browser.get_cookies() if c["name"] == "iamgate_connection"]

    token = requests.post(f"{live_server}/oidc/token", auth=(rp["client_id"], rp["client_secret"]), timeout=10, data={
        "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": rp_callback,
        "code_verifier": verifier})
    assert token.status_code == 200, token.text
    claims = ctx.oidc.tokens.verify_id_token_hint(token.json()["id_token"])
    assert claims["email"] == "ada@example.com" and claims["nonce"] == "rp-nonce"
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e] == []


def to_the_link_page(browser, live_server, hosted_app, oidc_client, local_idp) -> None:
    """The relying party's authorize with connection=local, the provider's login as its
    "verified" account (ada@example.com, an existing account here), then the link page."""
    rp_callback = f"{live_server}/rp/callback"
    rp = oidc_client(hosted_app, name="Photo Printer", redirect_uris=[rp_callback])
    local_idp(linking="verify")
    browser.get(requests.Request("GET", f"{live_server}/oidc/authorize", params={
        "response_type": "code", "client_id": rp["client_id"], "redirect_uri": rp_callback, "scope": "openid email",
        "state": "rp-state", "code_challenge": pkce_pair()[1], "code_challenge_method": "S256",
        "connection": "local"}).prepare().url)
    login = waiting(browser).until(expected_conditions.presence_of_element_located((By.NAME, "login")))
    login.send_keys("verified")
    browser.find_element(By.NAME, "password").send_keys("any password")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    waiting(browser).until(expected_conditions.title_contains("Link your account"))
    assert "An account with ada@example.com already exists" in browser.find_element(By.TAG_NAME, "main").text


def allow_to_the_client(browser) -> None:
    waiting(browser).until(expected_conditions.title_contains("Allow access"))
    browser.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
    waiting(browser).until(expected_conditions.url_contains("/rp/callback"))
    assert "code=" in browser.current_url


def test_the_link_page_asks_for_the_existing_accounts_password(live_server, browser, check_page, ctx, hosted_app,
                                                              oidc_client, local_idp, make_user):
    existing = make_user(hosted_app, email="ada@example.com")
    to_the_link_page(browser, live_server, hosted_app, oidc_client, local_idp)
    assert not browser.find_elements(By.CSS_SELECTOR, "button[data-passkey-button]")  # the account has none
    check_page("oidc-connection-link")
    browser.find_element(By.ID, "password").send_keys(existing["password"])
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    allow_to_the_client(browser)
    assert [i["sub"] for i in ctx.connection_sign_in.identities.list(hosted_app["_id"], existing["id"])] == ["verified"]


def test_the_link_page_takes_the_existing_accounts_passkey(live_server, browser, ctx, client, hosted_app, oidc_client,
                                                           local_idp, make_user, login):
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    existing = make_user(app, email="ada@example.com")
    # The account's passkey, registered through the API by the software authenticator,
    # then handed (its private key) to Chromium's virtual authenticator: a platform one, as
    # the passkey was registered with transports internal and hybrid, the only
    # authenticators the browser then asks.
    held = SoftAuthenticator()
    headers = bearer(login(app, existing["email"], existing["password"])["access_token"])
    registration = f"/api/v1/applications/{app['_id']}/auth/passkeys/registration"
    options = client.simulate_post(f"{registration}/options", json={}, headers=headers).json["data"]
    registered = client.simulate_post(f"{registration}/verify", headers=headers, json={
        "challenge_id": options["challenge_id"], "credential": held.create(options["options"], origin=live_server)})
    assert registered.status_code == 201, registered.text
    browser.add_virtual_authenticator(VirtualAuthenticatorOptions(
        protocol=VirtualAuthenticatorOptions.Protocol.CTAP2, transport=VirtualAuthenticatorOptions.Transport.INTERNAL,
        has_resident_key=True, has_user_verification=True, is_user_verified=True))
    browser.add_credential(Credential.create_non_resident_credential(
        held.credential_id, "localhost", held.key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 1))

    to_the_link_page(browser, live_server, app, oidc_client, local_idp)
    waiting(browser).until(expected_conditions.visibility_of_element_located(
        (By.CSS_SELECTOR, "button[data-passkey-button]"))).click()
    # Linked; the sign-in goes on as after the password: the passkey as second factor, then consent.
    waiting(browser).until(expected_conditions.title_contains("Two-step"))
    assert [i["sub"] for i in ctx.connection_sign_in.identities.list(app["_id"], existing["id"])] == ["verified"]
    waiting(browser).until(expected_conditions.visibility_of_element_located(
        (By.CSS_SELECTOR, "button[data-passkey-button]"))).click()
    allow_to_the_client(browser)
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e] == []
