"""The hosted link page (linking "verify", /oidc/connections/link) proven by a passkey of
the existing account, driven through falcon.testing by the hosted tests' cookie-keeping
browser, the local provider of the sign-in tests and the passkey tests' software
authenticator: "Use a passkey" is offered only to an account that has one, its answer
links the identity and the authorization request goes on as after the password, and
another account's passkey is refused in words."""
from __future__ import annotations

import pytest
import requests

from shared.config import Rate
from tests.oidc.test_hosted import (
    Browser,
    assert_page,
    authorize_url,
    form_action,
    hidden_fields,
    passkey_form,
    post_passkey,
    query_of,
)
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True, "webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}


@pytest.fixture
def passkey_app(ctx, hosted_app):
    return ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})


@pytest.fixture
def rp(passkey_app, oidc_client):
    return oidc_client(passkey_app, name="Portal")


@pytest.fixture
def connection(passkey_app, provider, add_connection):
    return add_connection(passkey_app, provider, linking="verify", display_name="Local IdP")


@pytest.fixture
def owner(passkey_app, make_user_token):
    """The existing account whose email the provider vouches for (its "verified" account)."""
    return make_user_token(passkey_app, email="ada@example.com")


def link_page(client, rp, connection):
    """A browser from the client's authorize through the provider to the link page."""
    browser = Browser(client)
    went = browser.get(authorize_url(rp, connection=connection.name))
    assert went.status_code == 302, went.text
    back = requests.get(went.headers["location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    page = browser.get(back.headers["Location"])
    assert_page(page, "Link your account")
    return browser, page


def linked(ctx, app) -> list[str]:
    return [identity["user_id"] for identity in ctx.store["identities"].find({"app_id": app["_id"]})]


def test_the_link_page_offers_a_passkey_only_to_an_account_that_has_one(ctx, client, passkey_app, rp, connection, owner,
                                                                        register):
    _, page = link_page(client, rp, connection)
    assert "data-passkey-options" not in page.text and "Use a passkey" not in page.text
    assert "script-src 'self'" not in page.headers["content-security-policy"]

    assert register(passkey_app, owner, SoftAuthenticator()).status_code == 201
    _, page = link_page(client, rp, connection)
    assert "data-passkey-options" in page.text and "Use a passkey" in page.text
    # The ceremony is our own script file (CSP 'self'), no inline script.
    assert "script-src 'self' 'nonce-" in page.headers["content-security-policy"]
    assert '<script type="module" src="/oidc/assets/passkeys.' in page.text
    # Passkeys turned off for the application: the page no longer offers one.
    ctx.applications.update(passkey_app["_id"], {"passkeys": "off"})
    _, page = link_page(client, rp, connection)
    assert "data-passkey-options" not in page.text


def test_the_accounts_passkey_links_and_the_sign_in_goes_on(ctx, client, passkey_app, rp, connection, owner, register):
    authenticator = SoftAuthenticator()
    assert register(passkey_app, owner, authenticator).status_code == 201
    browser, page = link_page(client, rp, connection)
    after = post_passkey(browser, page, authenticator)
    assert linked(ctx, passkey_app) == [owner.user["id"]]
    assert "iamgate_connection" not in browser.cookies  # the link is done; its binding goes
    # As after the password: the account's passkey is its second factor, then consent, then the code.
    assert_page(after, "Two-step verification")
    consent = post_passkey(browser, after, authenticator)
    assert_page(consent, "Allow access?")
    assert query_of(browser.submit(consent, decision="allow"))["code"]


def test_another_accounts_passkey_is_refused_in_words(ctx, client, passkey_app, rp, connection, owner, register,
                                                      make_user_token):
    assert register(passkey_app, owner, SoftAuthenticator()).status_code == 201
    mallory, theirs = make_user_token(passkey_app), SoftAuthenticator()
    assert register(passkey_app, mallory, theirs).status_code == 201
    browser, page = link_page(client, rp, connection)
    refused = post_passkey(browser, page, theirs)
    assert_page(refused, "Link your account", 401)
    assert "The passkey is not one of this account&#39;s, or it did not verify." in refused.text
    assert linked(ctx, passkey_app) == []
    # A malformed answer is refused in words too, and the page keeps its ways to prove it.
    malformed = browser.post(form_action(refused), {**hidden_fields(refused, passkey_form(refused)),
                                                    "credential": "{"})
    assert_page(malformed, "Link your account", 400)
    assert "The passkey&#39;s answer is missing or malformed." in malformed.text
    assert "data-passkey-options" in malformed.text and 'name="password"' in malformed.text
    assert linked(ctx, passkey_app) == []


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True, "webauthn_rp_id": RP_ID,
                                               "webauthn_origins": (ORIGIN,), "rate_limit_login": Rate(5, 60)}])
def test_the_link_pages_passkey_challenges_draw_on_the_login_page_budget(ctx, client, passkey_app, rp, connection,
                                                                         owner, register):
    """Each showing of the page with "Use a passkey" stores a challenge, so it draws a unit
    of the client IP's login page budget (login-page:<app>:<ip>); once spent the page
    offers no passkey and still takes the password or a code."""
    assert register(passkey_app, owner, SoftAuthenticator()).status_code == 201
    stored_before = ctx.store["passkey_challenges"].count_documents({"app_id": passkey_app["_id"]})
    browser, page = link_page(client, rp, connection)
    shown = [page]
    for _ in range(15):  # an empty form is not an answer: the page again, and no attempt on the link
        page = browser.submit(page)
        assert_page(page, "Link your account", 400)
        shown.append(page)
    assert all("data-passkey-options" in page.text for page in shown[:5])
    assert not any("data-passkey-options" in page.text for page in shown[5:])
    assert 'name="password"' in shown[-1].text
    assert ctx.store["passkey_challenges"].count_documents({"app_id": passkey_app["_id"]}) - stored_before == 5
