"""Linking an upstream identity to an existing account, mode by mode, with the
takeovers each mode must stop: nOAuth (an upstream that lets anyone claim any email),
pre-account hijack (an account pre-registered locally with the victim's address and
never verified), and an upstream email that changes."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error, events_of
from tests.connections.flow.conftest import Browser
from tests.plugins.users import PASSWORD

VICTIM = "ada@example.com"  # the email of the provider's accounts "verified" and "unverified"


def _users(ctx, app) -> int:
    return ctx.store["users"].count_documents({"app_id": app["_id"]})


def _identities(ctx, app) -> list:
    return list(ctx.store["identities"].find({"app_id": app["_id"]}))


@pytest.fixture
def local_user(ctx, idp_app, make_user):
    """The victim's own local account: password, verified email."""
    user = make_user(idp_app, email=VICTIM)
    ctx.store["users"].update_one({"_id": user["id"]}, {"$set": {"email_verified": True}})
    return user


def _link_required(response) -> dict:
    error = assert_error(response, 409, "CONNECTION_LINK_REQUIRED")
    details = error["details"]
    assert details["email"] == VICTIM and details["methods"] == ["password", "email_code"]
    return details


# ---------------------------------------------------------------- none


def test_none_refuses_an_email_that_has_an_account(client, ctx, idp_app, provider, add_connection, local_user):
    connection = add_connection(idp_app, provider, linking="none")
    assert_error(Browser(client, idp_app).sign_in(connection.id), 409, "CONNECTION_EMAIL_EXISTS")
    assert _users(ctx, idp_app) == 1 and _identities(ctx, idp_app) == []


def test_none_creates_a_new_user_for_a_new_email(client, ctx, idp_app, provider, add_connection, local_user):
    connection = add_connection(idp_app, provider, linking="none")
    provider.login_as = "other"
    response = Browser(client, idp_app).sign_in(connection.id)
    assert response.status_code == 200 and response.json["data"]["user"]["email"] == "bob@example.com"
    assert _users(ctx, idp_app) == 2


# ---------------------------------------------------------------- verify


def test_verify_links_only_after_the_password(client, ctx, idp_app, provider, add_connection, local_user):
    connection = add_connection(idp_app, provider, linking="verify")
    browser = Browser(client, idp_app)
    details = _link_required(browser.sign_in(connection.id))
    assert _identities(ctx, idp_app) == []

    wrong = browser.post("/link", {"link_id": details["link_id"], "binding": browser.binding, "password": "nope"})
    assert_error(wrong, 401, "AUTH_INVALID_CREDENTIALS")
    assert _identities(ctx, idp_app) == []

    right = browser.post("/link", {"link_id": details["link_id"], "binding": browser.binding, "password": PASSWORD})
    assert right.status_code == 200, right.text
    assert right.json["data"]["user"]["id"] == local_user["id"]
    [identity] = _identities(ctx, idp_app)
    assert identity["user_id"] == local_user["id"] and identity["sub"] == "sub-verified"
    [created] = events_of(ctx, "connection.created", local_user["id"])
    assert created["data"]["kind"] == "upstream" and created["data"]["identity_id"] == identity["_id"]
    # Single use.
    again = browser.post("/link", {"link_id": details["link_id"], "binding": browser.binding, "password": PASSWORD})
    assert_error(again, 400, "CONNECTION_STATE_INVALID")
    # The next sign-in needs no proof: the identity is linked.
    assert Browser(client, idp_app).sign_in(connection.id).json["data"]["user"]["id"] == local_user["id"]


def test_verify_links_after_the_emailed_code(client, ctx, idp_app, provider, add_connection, local_user, outbox):
    connection = add_connection(idp_app, provider, linking="verify")
    browser = Browser(client, idp_app)
    link_id = _link_required(browser.sign_in(connection.id))["link_id"]
    sent = browser.post("/link/code", {"link_id": link_id, "binding": browser.binding})
    assert sent.status_code == 202, sent.text
    [mail] = outbox
    assert mail.to == VICTIM
    code = next(word for word in mail.body.replace(".", " ").split() if word.isdigit() and len(word) == 6)
    wrong = str((int(code) + 1) % 10 ** 6).zfill(6)
    assert_error(browser.post("/link", {"link_id": link_id, "binding": browser.binding, "code": wrong}),
                 401, "AUTH_INVALID_CREDENTIALS")
    done = browser.post("/link", {"link_id": link_id, "binding": browser.binding, "code": code})
    assert done.status_code == 200, done.text
    assert done.json["data"]["user"]["id"] == local_user["id"]


def test_a_pending_link_mails_few_codes(client, idp_app, provider, add_connection, local_user, outbox):
    connection = add_connection(idp_app, provider, linking="verify")
    browser = Browser(client, idp_app)
    link_id = _link_required(browser.sign_in(connection.id))["link_id"]
    for _ in range(3):
        assert browser.post("/link/code", {"link_id": link_id, "binding": browser.binding}).status_code == 202
    assert_error(browser.post("/link/code", {"link_id": link_id, "binding": browser.binding}), 429,
                 "RATE_LIMIT_EXCEEDED")
    assert len(outbox) == 3


def test_a_pending_link_belongs_to_its_browser_and_has_few_attempts(client, ctx, idp_app, provider,
                                                                    add_connection, local_user):
    connection = add_connection(idp_app, provider, linking="verify")
    browser = Browser(client, idp_app)
    link_id = _link_required(browser.sign_in(connection.id))["link_id"]
    other = Browser(client, idp_app)
    assert_error(other.post("/link", {"link_id": link_id, "binding": other.binding, "password": PASSWORD}),
                 400, "CONNECTION_STATE_INVALID")
    for _ in range(5):
        assert_error(browser.post("/link", {"link_id": link_id, "binding": browser.binding, "password": "no"}), 401)
    # Spent: even the right password no longer links.
    assert_error(browser.post("/link", {"link_id": link_id, "binding": browser.binding, "password": PASSWORD}),
                 400, "CONNECTION_STATE_INVALID")
    assert _identities(ctx, idp_app) == []


# ---------------------------------------------------------------- trusted_email


def test_trusted_email_links_when_every_condition_holds(client, ctx, idp_app, provider, add_connection,
                                                        local_user):
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=True)
    response = Browser(client, idp_app).sign_in(connection.id)
    assert response.status_code == 200, response.text
    assert response.json["data"]["user"]["id"] == local_user["id"]
    assert _users(ctx, idp_app) == 1


def test_trusted_email_on_an_untrusted_connection_asks_for_proof(client, ctx, idp_app, provider, add_connection,
                                                                 local_user):
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=False)
    _link_required(Browser(client, idp_app).sign_in(connection.id))
    assert _identities(ctx, idp_app) == []


def test_noauth_an_unverified_upstream_email_never_takes_over_the_account(client, ctx, idp_app, provider,
                                                                          add_connection, local_user):
    """nOAuth: the attacker's upstream account claims the victim's email without having
    verified it; even a trusted connection then asks for proof of the local account."""
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=True)
    provider.login_as = "unverified"
    details = _link_required(Browser(client, idp_app).sign_in(connection.id))
    assert details["email"] == VICTIM
    assert _identities(ctx, idp_app) == [] and _users(ctx, idp_app) == 1
    assert events_of(ctx, "user.login", local_user["id"]) == []


@pytest.mark.parametrize("upstream_email", [
    "\u212aate@example.com",         # KELVIN SIGN: NFC makes it "K", lower-casing "k"
    "kate@\uff45xample.com",         # FULLWIDTH e: IDNA maps the domain to "example.com"
])
def test_trusted_email_never_merges_an_address_normalisation_folded(client, ctx, idp_app, provider,
                                                                    add_connection, make_user, upstream_email):
    """A trusted provider verified the mailbox it was given, not the ASCII one
    normalisation folds it into: the person proves the account (``verify``)."""
    victim = make_user(idp_app, email="kate@example.com")
    ctx.store["users"].update_one({"_id": victim["id"]}, {"$set": {"email_verified": True}})
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=True)
    provider.accounts["other"]["email"] = upstream_email
    provider.login_as = "other"
    details = assert_error(Browser(client, idp_app).sign_in(connection.id), 409,
                           "CONNECTION_LINK_REQUIRED")["details"]
    assert details["email"] == "kate@example.com"
    assert _identities(ctx, idp_app) == [] and _users(ctx, idp_app) == 1
    assert events_of(ctx, "user.login", victim["id"]) == []


def test_trusted_email_links_an_address_that_differs_only_in_case(client, ctx, idp_app, provider,
                                                                  add_connection, local_user):
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=True)
    provider.accounts["verified"]["email"] = "Ada@EXAMPLE.com"
    response = Browser(client, idp_app).sign_in(connection.id)
    assert response.status_code == 200, response.text
    assert response.json["data"]["user"]["id"] == local_user["id"]


def test_pre_account_hijack_an_unverified_local_account_is_never_merged(client, ctx, idp_app, provider,
                                                                        add_connection, make_user):
    """The attacker registered the victim's address locally first (and cannot verify
    it); the victim then signs in with a verified upstream email: no automatic merge into
    the attacker's account, only the verify path (the attacker's password, or a code to
    the victim's mailbox, which hands the account over: test_account_claim.py)."""
    attacker = make_user(idp_app, email=VICTIM, password="Attacker-Chosen-1")
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=True)
    _link_required(Browser(client, idp_app).sign_in(connection.id))
    assert _identities(ctx, idp_app) == []
    assert events_of(ctx, "user.login", attacker["id"]) == []


# ---------------------------------------------------------------- the email is not the identity


def test_a_changed_upstream_email_is_the_same_identity_and_user(client, ctx, idp_app, provider, add_connection):
    connection = add_connection(idp_app, provider, linking="none")
    first = Browser(client, idp_app).sign_in(connection.id).json["data"]["user"]
    provider.accounts["verified"]["email"] = "ada.lovelace@example.org"
    second = Browser(client, idp_app).sign_in(connection.id)
    assert second.status_code == 200, second.text
    assert second.json["data"]["user"]["id"] == first["id"]
    assert _users(ctx, idp_app) == 1
    [identity] = _identities(ctx, idp_app)
    assert identity["email"] == "ada.lovelace@example.org"
    # The local account keeps its own email: a sign-in never rewrites it.
    assert second.json["data"]["user"]["email"] == VICTIM


def test_the_same_email_from_two_providers_is_two_identities(client, ctx, idp_app, provider, provider_b,
                                                             add_connection):
    a = add_connection(idp_app, provider, linking="none")
    b = add_connection(idp_app, provider_b, linking="none")
    assert Browser(client, idp_app).sign_in(a.id).status_code == 200
    # B's account has the same email: not B's identity, so linking (none) refuses it.
    assert_error(Browser(client, idp_app).sign_in(b.id), 409, "CONNECTION_EMAIL_EXISTS")
    assert len(_identities(ctx, idp_app)) == 1
