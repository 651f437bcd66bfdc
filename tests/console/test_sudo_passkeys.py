"""Sudo mode in the console with a passkey: a refused sensitive write shows, beside the
password form, "Use a passkey instead" when the account has a passkey; its answer
(posted by passkeys.js) re-authenticates and sends the browser back to the page, as the
password does; a refused answer shows both forms again with a fresh challenge."""
from __future__ import annotations

import json
import re
from html import unescape

import pytest

from controlplane.auth import SESSION_COOKIE
from tests.dashboard.test_passkeys import add_passkey
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator

WINDOW = 900
PASSKEY_FORM = re.compile(r'<form method="post" action="/console/account/reauthenticate/passkey"[^>]*'
                          r"data-passkey-options='([^']*)'.*?</form>", re.S)


@pytest.fixture
def config_overrides():
    return {"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}


@pytest.fixture
def key(owner, dashboard_account):
    """A passkey of the owner's, registered through the visitor's own session (the
    first second factor ends the account's other sessions)."""
    visitor, _app_id = owner
    dashboard_account.session = visitor.cookies[SESSION_COOKIE]
    key = SoftAuthenticator()
    assert add_passkey(dashboard_account, key).status_code == 201
    return key


def passkey_answer(page_text: str, key: SoftAuthenticator, **falsify) -> dict:
    """What passkeys.js posts: the form's hidden fields and the authenticator's answer."""
    form = PASSKEY_FORM.search(page_text)
    assert form, "no passkey form on the page"
    fields = {name: unescape(value) for name, value in
              re.findall(r'<input type="hidden" name="(challenge_id|next)" value="([^"]*)"', form.group(0))}
    options = json.loads(unescape(form.group(1)))
    return {**fields, "credential": json.dumps(key.get(options, **falsify))}


def refused_api_key(visitor, app_id, clock):
    page = f"/console/applications/{app_id}/api-keys"
    visitor.get(page)
    clock.advance(WINDOW)
    refused = visitor.post(page, {"name": "backend", "permission:roles:read": "on"})
    assert refused.status_code == 403 and "DASHBOARD_REAUTH_REQUIRED" in refused.text
    return page, refused


def test_a_passkey_brings_the_session_back_to_the_page(owner, key, ctx, clock):
    visitor, app_id = owner
    page, refused = refused_api_key(visitor, app_id, clock)
    assert "Use a passkey instead" in refused.text and 'id="reauthenticate"' in refused.text

    back = visitor.post("/console/account/reauthenticate/passkey", passkey_answer(refused.text, key))

    assert back.status_code == 303 and back.headers["location"] == f"{page}?notice=reauthenticated"
    done = visitor.post(page, {"name": "backend", "permission:roles:read": "on"})
    assert done.status_code in (200, 201, 303), done.text
    assert [k["name"] for k in ctx.api_keys.list(app_id)] == ["backend"]


def test_a_refused_answer_shows_both_forms_again(owner, key, ctx, clock):
    visitor, app_id = owner
    page, refused = refused_api_key(visitor, app_id, clock)

    again = visitor.post("/console/account/reauthenticate/passkey", passkey_answer(refused.text, key,
                                                                                   user_verified=False))

    assert again.status_code == 400 and "PASSKEY_USER_VERIFICATION_REQUIRED" in again.text
    assert 'id="reauthenticate"' in again.text
    assert visitor.post("/console/account/reauthenticate/passkey",
                        passkey_answer(again.text, key)).headers["location"] == f"{page}?notice=reauthenticated"


def test_an_account_without_a_passkey_is_offered_the_password_only(owner, clock):
    visitor, app_id = owner
    _page, refused = refused_api_key(visitor, app_id, clock)
    assert 'id="reauthenticate"' in refused.text and "Use a passkey instead" not in refused.text
