"""The link codes' budget per account: each pending link (linking ``verify``) has its own
6-digit code and its own 5 answers, and anyone whose upstream account merely claims the
address opens a new link at each sign-in, so wrong codes also count per account, under
the login lock's rules in a scope of their own: past ``lockout_threshold`` of them, every
code is refused (429 AUTH_ACCOUNT_LOCKED) until the lock ends, the right one too, while
the account's password still signs in."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.connections.flow.conftest import Browser

VICTIM = "ada@example.com"
THRESHOLD, LOCK_SECONDS = 5, 60  # a lock shorter than the upstream's ID Tokens live


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True, "lockout_threshold": THRESHOLD, "lockout_seconds": LOCK_SECONDS}


@pytest.fixture
def account(ctx, idp_app, make_user):
    user = make_user(idp_app, email=VICTIM)
    ctx.store["users"].update_one({"_id": user["id"]}, {"$set": {"email_verified": True}})
    return user


@pytest.fixture
def connection(idp_app, provider, add_connection):
    provider.login_as = "unverified"  # an upstream account that only claims the address
    return add_connection(idp_app, provider, linking="verify")


def _code_in(mail) -> str:
    return next(word for word in mail.body.replace(".", " ").split() if word.isdigit() and len(word) == 6)


def _pending_link(client, idp_app, connection, outbox) -> tuple[Browser, str, str]:
    """A new sign-in's pending link, its code mailed: (browser, link_id, code)."""
    browser = Browser(client, idp_app)
    link_id = assert_error(browser.sign_in(connection.id), 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    assert browser.post("/link/code", {"link_id": link_id, "binding": browser.binding}).status_code == 202
    return browser, link_id, _code_in(outbox[-1])


def _answer(browser, link_id, code):
    return browser.post("/link", {"link_id": link_id, "binding": browser.binding, "code": code})


def _wrong(code: str) -> str:
    return str((int(code) + 1) % 10 ** 6).zfill(6)


def test_wrong_codes_across_links_lock_the_accounts_codes(client, ctx, clock, idp_app, connection, account,
                                                          outbox, login):
    statuses = []
    for _ in range(3):  # three links: 3 x 5 answers would be 15 guesses without the account's budget
        browser, link_id, code = _pending_link(client, idp_app, connection, outbox)
        statuses += [_answer(browser, link_id, _wrong(code)).status_code for _ in range(5)]
    assert statuses.count(401) == THRESHOLD and set(statuses[THRESHOLD:]) == {429}

    browser, link_id, code = _pending_link(client, idp_app, connection, outbox)
    locked = assert_error(_answer(browser, link_id, code), 429, "AUTH_ACCOUNT_LOCKED")
    assert locked["details"]["reason"] == "locked"
    assert ctx.store["identities"].count_documents({"app_id": idp_app["_id"]}) == 0
    # A scope of its own: the account's password still signs in.
    assert login(idp_app, VICTIM)["user"]["id"] == account["id"]

    clock.advance(LOCK_SECONDS + 1)
    browser, link_id, code = _pending_link(client, idp_app, connection, outbox)
    linked = _answer(browser, link_id, code)
    assert linked.status_code == 200, linked.text
    assert linked.json["data"]["user"]["id"] == account["id"]


def test_the_right_code_forgives_the_wrong_ones_before_it(client, idp_app, connection, account, outbox,
                                                          provider_b, add_connection):
    browser, link_id, code = _pending_link(client, idp_app, connection, outbox)
    for _ in range(THRESHOLD - 1):
        assert_error(_answer(browser, link_id, _wrong(code)), 401, "AUTH_INVALID_CREDENTIALS")
    assert _answer(browser, link_id, code).status_code == 200
    # Another provider's identity for the same address: a new link, and the budget whole again.
    provider_b.login_as = "unverified"
    other = add_connection(idp_app, provider_b, linking="verify")
    browser, link_id, code = _pending_link(client, idp_app, other, outbox)
    for _ in range(THRESHOLD - 1):
        assert_error(_answer(browser, link_id, _wrong(code)), 401, "AUTH_INVALID_CREDENTIALS")
    assert _answer(browser, link_id, code).status_code == 200


def test_wrong_passwords_on_the_link_do_not_spend_the_codes_budget(client, idp_app, connection, account, outbox):
    """The password has its own budget (the login lock), which the link draws on."""
    browser, link_id, code = _pending_link(client, idp_app, connection, outbox)
    for _ in range(4):
        assert_error(browser.post("/link", {"link_id": link_id, "binding": browser.binding, "password": "nope"}),
                     401, "AUTH_INVALID_CREDENTIALS")
    assert _answer(browser, link_id, code).status_code == 200
