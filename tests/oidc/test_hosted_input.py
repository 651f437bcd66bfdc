"""What a person types into the hosted login's forms is read as the API reads it: an
email in any case signs in, asks for a reset and is taken at registration exactly as
POST V1/users/login, forgot-password and register take it; and the application's custom
CSS, however it was stored, cannot end the page's <style> element."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.oidc.test_hosted import Browser, assert_page, authorize_url
from tests.plugins.users import fresh_address, users_url

PHISHING_CSS = "a{background:url(x</style><a/href=https://evil.example/>Session_expired:_continue_here</a><!--)}"


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, name="Portal")


@pytest.fixture
def person(hosted_app, make_user):
    return make_user(hosted_app, email="ada@example.com", name="Ada Lovelace")


@pytest.fixture
def browser(client):
    return Browser(client)


def login_page(browser, rp):
    page = browser.get(authorize_url(rp))
    assert_page(page, "Sign in")
    return page


def v1_login(client, app, email, password):
    return client.simulate_post(users_url(app, "/login"), json={"email": email, "password": password},
                                remote_addr=fresh_address())


# ---------------------------------------------------------------- the email


@pytest.mark.parametrize("typed", ["Ada@Example.com", "ADA@EXAMPLE.COM", "  ada@Example.COM  "])
def test_an_email_in_any_case_signs_in_as_the_api_login_does(client, hosted_app, browser, rp, person, typed):
    assert v1_login(client, hosted_app, typed, person["password"]).status_code == 200
    consent = browser.submit(login_page(browser, rp), email=typed, password=person["password"])
    assert_page(consent, "Allow access?")
    assert "Signed in as ada@example.com." in consent.text


def test_wrong_passwords_lock_the_account_whatever_the_case_they_were_typed_in(client, hosted_app, browser, rp,
                                                                               person):
    page = login_page(browser, rp)
    for attempt, typed in enumerate(["Ada@example.com", "ADA@example.com", "ada@EXAMPLE.com", "Ada@Example.Com",
                                     "ada@example.com"]):
        page = browser.submit(page, email=typed, password=f"wrong password {attempt}")
        assert_page(page, "Sign in", 401)
    assert_error(v1_login(client, hosted_app, "ada@example.com", person["password"]), 429, "AUTH_ACCOUNT_LOCKED")


def test_an_email_the_api_refuses_as_malformed_is_asked_again(ctx, browser, rp, person):
    page = browser.submit(login_page(browser, rp), email="ada@@example.com", password=person["password"])
    assert_page(page, "Sign in", 400)
    assert "Enter a valid email address." in page.text
    assert 'value="ada@@example.com"' in page.text  # what was typed, to correct
    assert ctx.store["events"].count_documents({"type": "user.login"}) == 0  # no login was tried


def test_a_reset_asked_in_capitals_goes_to_the_account(browser, rp, person, outbox):
    forgot = browser.submit(login_page(browser, rp), email="", decision="forgot")
    sent = browser.submit(forgot, email="ADA@Example.com")
    assert_page(sent, "Reset your password")
    assert [mail.to for mail in outbox] == ["ada@example.com"]


def test_registration_takes_an_email_in_capitals_as_the_address_it_is(ctx, hosted_app, browser, rp, person):
    ctx.applications.update(hosted_app["_id"], {"oauth_hosted_registration_enabled": True})
    page = browser.submit(login_page(browser, rp), decision="register")
    taken = browser.submit(page, name="Ada", email="ADA@Example.com", password="a sturdy passphrase 9")
    assert_page(taken, "Create your account", 409)
    assert ctx.store["users"].count_documents({"app_id": hosted_app["_id"]}) == 1


# ---------------------------------------------------------------- the custom CSS


def test_the_branding_api_keeps_no_custom_css_that_ends_the_style_element(dashboard_account, dashboard_app):
    response = dashboard_account.put(f"/api/dashboard/applications/{dashboard_app['id']}/branding",
                                     json={"branding_options": {"custom_css": PHISHING_CSS + " b{color:red}"}})
    assert response.status_code == 200, response.text
    assert response.json["data"]["branding_options"]["custom_css"] == "a{}\nb{color:red}"  # the declaration went


def test_custom_css_stored_around_the_api_cannot_end_the_style_element(ctx, hosted_app, browser, rp):
    ctx.applications.update(hosted_app["_id"], {"branding_options": {"custom_css": PHISHING_CSS}})
    page = login_page(browser, rp)
    assert page.text.count("</style>") == 1
    assert "evil.example" not in page.text and "Session_expired" not in page.text
