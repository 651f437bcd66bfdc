"""Passkeys on the hosted login in a real browser: headless Chromium through Selenium,
with Chromium's virtual authenticator (WebDriver's Virtual Authenticators, WebAuthn
Level 3 section 11) standing in for the device, against a live server on ``localhost``
(an IP address cannot be an RP ID).

One browser for every case (the suite's time budget): a discoverable passkey added at
the offer that follows a password sign-in, then signed in with without typing an email; the email field's autofill
(conditional mediation); a failed user verification; a sign count that goes backwards;
the passkey deleted from the account (a lost device); and a non-resident security key
(added at the offer too) as the MFA page's second factor.  Each sign-in's code is exchanged and the ID token's
``amr`` checked.  The new pages are saved and scanned with axe-core.  Skipped, with the
reason, where Chromium is not installed."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from authlib.common.security import generate_token  # noqa: E402
from authlib.integrations.requests_client import OAuth2Session  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.virtual_authenticator import Credential, VirtualAuthenticatorOptions  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from controlplane.passkeys.errors import CredentialUnknown, SignCountInvalid  # noqa: E402
from shared.config import Rate  # noqa: E402
from tests.browser import console_errors  # noqa: E402
from tests.conftest import bearer  # noqa: E402


def platform(user_verified: bool = True) -> VirtualAuthenticatorOptions:
    """A platform authenticator (a laptop's or a phone's) that keeps discoverable credentials."""
    return VirtualAuthenticatorOptions(
        protocol=VirtualAuthenticatorOptions.Protocol.CTAP2, transport=VirtualAuthenticatorOptions.Transport.INTERNAL,
        has_resident_key=True, has_user_verification=True, is_user_verified=user_verified)


@pytest.fixture
def live_url(live_port) -> str:
    return f"http://localhost:{live_port}"


@pytest.fixture
def config_overrides(live_url):
    # The issuer is the address the browser uses, and so is the one origin passkeys accept.
    # Each login page shown stores a passkey challenge, drawing on the IP's login page
    # budget (at this rate): the cases load it more often in a minute than 10 allow.
    return {"public_url": live_url, "webauthn_rp_id": "localhost", "webauthn_origins": (live_url,),
            "rate_limit_login": Rate(100, 60)}


def test_passkeys_on_the_hosted_login_in_chromium(live_server, browser, check_page, ctx, application, make_user,
                                                  make_api_key, client):
    app_id = application["_id"]
    ctx.applications.update(app_id, {"oauth_hosted_login_enabled": True, "passkeys": "passwordless"})
    ctx.applications.update_branding(app_id, {"brand_name": "Acme Photos", "brand_color": "#0b7a53"})
    callback = f"{live_server}/callback"
    created = client.simulate_post(f"/api/v1/applications/{app_id}/oidc/clients",
                                   headers=bearer(make_api_key(application, permissions=["oidc:manage"])),
                                   json={"name": "Photo Printer", "redirect_uris": [callback]})
    rp = created.json["data"]
    # Pages replace pages under a waiting lookup: a node gone meanwhile is looked up again.
    wait = WebDriverWait(browser, 10, ignored_exceptions=[StaleElementReferenceException, WebDriverException])

    def start(stays=True):
        """A new authorization that asks for a login (prompt=login): the login page
        (which an autofill may leave at once: ``stays=False``)."""
        session = OAuth2Session(rp["client_id"], rp["client_secret"], scope="openid email", redirect_uri=callback,
                                code_challenge_method="S256")
        verifier = generate_token(48)
        url, _ = session.create_authorization_url(f"{live_server}/oidc/authorize", code_verifier=verifier,
                                                  prompt="login")
        browser.get(url)
        if stays:
            assert browser.find_element(By.TAG_NAME, "h1").text == "Sign in"
        return session, verifier

    def start_without_autofill(*credentials, user_verified=True):
        """The login page loaded while no authenticator is attached; then it is attached
        again with its credentials (or ``credentials``), for the button to use."""
        held = credentials or browser.get_credentials()
        browser.remove_virtual_authenticator()
        started = start()
        browser.add_virtual_authenticator(platform(user_verified))
        for credential in held:
            browser.add_credential(credential)
        return started

    def finish(session, verifier) -> dict:
        """Allow on the consent page when it asks, then the code's ID token claims."""
        wait.until(lambda b: "/callback" in b.current_url or b.title.startswith("Allow access"))
        if "/callback" not in browser.current_url:
            browser.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
            wait.until(expected_conditions.url_contains("/callback"))
        assert parse_qs(urlsplit(browser.current_url).query)["code"]
        token = session.fetch_token(f"{live_server}/oidc/token", authorization_response=browser.current_url,
                                    code_verifier=verifier)
        return ctx.oidc.tokens.verify_id_token_hint(token["id_token"])

    def ask_passkey() -> None:
        """Click "Sign in with a passkey", unless the page's autofill request (pending
        since the page loaded) was answered first when the authenticator came back:
        both ask with the page's one challenge, and the outcome is the same."""
        try:
            wait.until(expected_conditions.visibility_of_element_located(
                (By.CSS_SELECTOR, "button[data-passkey-button]"))).click()
        except (StaleElementReferenceException, TimeoutException):
            pass

    def refused_with(words: str) -> None:
        """The page again, in words: the server's error (role=alert) or the script's (role=status)."""
        wait.until(lambda b: words in b.find_element(By.TAG_NAME, "main").text)
        assert "/callback" not in browser.current_url

    def password_then_offer(person) -> tuple:
        """Sign in with the password; the offer to add a passkey follows."""
        session, verifier = start()
        browser.find_element(By.ID, "email").send_keys(person["email"])
        browser.find_element(By.ID, "password").send_keys(person["password"])
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(expected_conditions.title_contains("Sign in faster"))
        return session, verifier

    # 1. After a password, the offer: "Add a passkey" creates a discoverable passkey with
    #    user verification (a phone's or a laptop's platform authenticator).
    ada = make_user(application, email="ada@example.com", name="Ada Lovelace")
    browser.add_virtual_authenticator(platform())
    session, verifier = password_then_offer(ada)
    check_page("oidc-passkey-offer")
    browser.find_element(By.CSS_SELECTOR, "button[data-passkey-button]").click()
    assert finish(session, verifier)["amr"] == ["pwd"]
    [passkey] = ctx.passkeys.list(app_id, ada["id"])
    assert passkey["discoverable"] is True and passkey["user_verified"] is True

    # 2. Autofill: the email field's conditional request (autocomplete="username
    #    webauthn").  Headless Chromium's virtual authenticator answers it as soon as the
    #    page asks, as a user picking the suggestion would: no email typed, no button.
    #    The authorization continues as after a password (consent, then the code), and
    #    the ID token says how: a key (hwk) that verified the user (user).
    session, verifier = start(stays=False)
    claims = finish(session, verifier)
    assert claims["sub"] == ada["id"] and claims["amr"] == ["hwk", "user"]

    # 3. "Sign in with a passkey".  The page is loaded while the authenticator holds no
    #    credential, so the autofill request stays pending (and the screenshot shows the
    #    page); the button's request takes over from it.
    session, verifier = start_without_autofill()
    email_field = browser.find_element(By.ID, "email")
    assert email_field.get_attribute("autocomplete") == "username webauthn"
    check_page("oidc-login-passkey")
    ask_passkey()
    claims = finish(session, verifier)
    assert claims["sub"] == ada["id"] and claims["amr"] == ["hwk", "user"]

    # 4. The authenticator cannot verify the user: Chromium refuses the ceremony that
    #    requires it, and the page says so in words; nothing is posted.
    session, verifier = start_without_autofill(user_verified=False)
    ask_passkey()
    refused_with("The passkey sign-in was cancelled or timed out.")

    # 5. A sign count that goes backwards (a cloned authenticator): the same key put back
    #    with its counter at 0 is refused with PASSKEY_SIGN_COUNT_INVALID's words.
    [stored] = browser.get_credentials()
    assert stored.sign_count > 0, stored.sign_count
    session, verifier = start_without_autofill(Credential.from_dict({**stored.to_dict(), "signCount": 0}))
    ask_passkey()
    refused_with(SignCountInvalid.message)

    # 6. The passkey deleted from the account (a lost device): the authenticator still
    #    holds the key, the server no longer knows it.
    ctx.passkeys.delete(ctx.applications.get(app_id), ada["id"], passkey["id"])  # the API's DELETE
    session, verifier = start_without_autofill()
    ask_passkey()
    refused_with(CredentialUnknown.message)
    browser.remove_virtual_authenticator()

    # 7. A security key without resident keys or user verification, added at the offer,
    #    then the second factor: the password first, then "Use a passkey" on the MFA page.
    grace = make_user(application, email="grace@example.com", name="Grace Hopper")
    browser.add_virtual_authenticator(VirtualAuthenticatorOptions(
        protocol=VirtualAuthenticatorOptions.Protocol.CTAP2, transport=VirtualAuthenticatorOptions.Transport.USB,
        has_resident_key=False, has_user_verification=False))
    session, verifier = password_then_offer(grace)
    browser.find_element(By.CSS_SELECTOR, "button[data-passkey-button]").click()
    assert finish(session, verifier)["amr"] == ["pwd"]
    [key] = ctx.passkeys.list(app_id, grace["id"])
    assert key["discoverable"] is not True
    session, verifier = start()
    browser.find_element(By.ID, "email").send_keys(grace["email"])
    browser.find_element(By.ID, "password").send_keys(grace["password"])
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(expected_conditions.title_contains("Two-step"))
    check_page("oidc-mfa-passkey")
    ask_passkey()
    claims = finish(session, verifier)
    assert claims["sub"] == grace["id"] and claims["amr"] == ["pwd", "hwk", "mfa"]

    # The script ran under the pages' policy: nothing was refused (the callback's 404 and
    # the refused sign-ins' 4xx pages are the only failed loads).
    assert [e for e in console_errors(browser) if "Failed to load resource" not in e] == []

