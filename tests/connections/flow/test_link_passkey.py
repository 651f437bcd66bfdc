"""Linking "verify" proven by a passkey of the existing account (besides its password and
a mailed code), with the software authenticator of the passkey tests: only that
account's passkeys, of this application, prove it."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.connections.flow.conftest import Browser
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True, "webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}


@pytest.fixture
def passkey_idp_app(ctx, idp_app):
    return ctx.applications.update(idp_app["_id"], {"passkeys": "second_factor"})


@pytest.fixture
def pending(client, ctx, passkey_idp_app, provider, add_connection, make_user_token, register):
    """(browser, link_id, the account's user token, its authenticator): a verify-mode
    sign-in whose email is an account with a passkey."""
    app = passkey_idp_app
    owner = make_user_token(app, email="ada@example.com")
    authenticator = SoftAuthenticator()
    assert register(app, owner, authenticator).status_code == 201
    browser = Browser(client, app)
    details = assert_error(browser.sign_in(add_connection(app, provider, linking="verify").id), 409,
                           "CONNECTION_LINK_REQUIRED")["details"]
    assert details["methods"] == ["password", "email_code", "passkey"]
    return browser, details["link_id"], owner, authenticator


def _prove(browser, link_id, authenticator, **falsify):
    options = browser.post("/link/passkey", {"link_id": link_id, "binding": browser.binding})
    assert options.status_code == 200, options.text
    data = options.json["data"]
    assert data["options"]["userVerification"] == "required"
    return browser.post("/link", {"link_id": link_id, "binding": browser.binding,
                                  "challenge_id": data["challenge_id"],
                                  "credential": authenticator.get(data["options"], **falsify)})


def test_a_passkey_of_the_account_proves_it_and_links(ctx, pending):
    browser, link_id, owner, authenticator = pending
    response = _prove(browser, link_id, authenticator)
    assert response.status_code == 200, response.text
    assert ctx.store["identities"].count_documents({"user_id": owner.user["id"]}) == 1


def test_a_passkey_without_user_verification_proves_nothing(ctx, pending):
    """The proof stands in for the account's password: a security key answering without
    its PIN (possession alone: stolen, it would link a stranger's upstream identity and,
    through the second step, sign them in) proves nothing."""
    browser, link_id, owner, authenticator = pending
    response = _prove(browser, link_id, authenticator, user_verified=False)
    assert_error(response, 401, "AUTH_INVALID_CREDENTIALS")
    assert ctx.store["identities"].count_documents({"user_id": owner.user["id"]}) == 0
    assert _prove(browser, link_id, authenticator).status_code == 200  # with it, the link holds


def test_another_accounts_passkey_proves_nothing(client, ctx, passkey_idp_app, pending, make_user_token, register):
    browser, link_id, owner, _ = pending
    app = passkey_idp_app
    mallory, theirs = make_user_token(app), SoftAuthenticator()
    assert register(app, mallory, theirs).status_code == 201
    response = _prove(browser, link_id, theirs)
    assert_error(response, 401, "AUTH_INVALID_CREDENTIALS")
    assert ctx.store["identities"].count_documents({"app_id": app["_id"]}) == 0


def test_a_passkey_needs_its_challenge(ctx, pending):
    browser, link_id, _, authenticator = pending
    assert_error(browser.post("/link", {"link_id": link_id, "binding": browser.binding,
                                        "credential": authenticator.get({"rpId": RP_ID, "challenge": "AAAA"})}),
                 400, "VALIDATION_INVALID_FORMAT")
    assert ctx.store["identities"].count_documents({}) == 0
