"""Pre-account takeover: someone sets an account up under the victim's address before
the victim does (a sign-in through a provider that does not vouch for the email, or a
password registration), and waits.  The victim later proves the mailbox without the
account's credentials (a link code, a password reset): the account becomes theirs
alone, and nothing the squatter set up opens it any more."""
from __future__ import annotations

import jwt
import pytest

from controlplane.events import Event
from shared.invalidation import affected_users
from tests.conftest import assert_error, events_of
from tests.connections.flow.conftest import Browser
from tests.mfa.conftest import rfc6238
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.plugins.users import PASSWORD, fresh_address, users_url

VICTIM = "ada@example.com"  # the provider's accounts "verified" (the victim's) and "unverified"
NEW = "Fresh-Secret-42"


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True, "webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}


@pytest.fixture
def claim_app(ctx, idp_app):
    return ctx.applications.update(idp_app["_id"], {"passkeys": "second_factor"})


def _post(client, app, path: str, body: dict):
    return client.simulate_post(users_url(app, path), json=body, remote_addr=fresh_address())


def _owners(ctx, app) -> dict:
    return {doc["sub"]: doc["user_id"] for doc in ctx.store["identities"].find({"app_id": app["_id"]})}


def _refresh(client, app, refresh_token: str):
    return _post(client, app, "/token/refresh", {"refresh_token": refresh_token})


def _code(mail) -> str:
    return next(word for word in mail.body.replace(".", " ").split() if word.isdigit() and len(word) == 6)


def _link_by_code(browser: Browser, response, outbox):
    link_id = assert_error(response, 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    assert browser.post("/link/code", {"link_id": link_id, "binding": browser.binding}).status_code == 202
    return outbox[-1], browser.post("/link", {"link_id": link_id, "binding": browser.binding,
                                              "code": _code(outbox[-1])})


@pytest.fixture
def squatter_jit(client, claim_app, provider, add_connection):
    """The attacker's sign-in through an untrusted connection whose provider let them claim
    the victim's address unverified: a new account, their identity linked to it."""
    untrusted = add_connection(claim_app, provider, linking="verify")
    provider.login_as = "unverified"
    signed_in = Browser(client, claim_app).sign_in(untrusted.id)
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json["data"]["user"]["email_verified"] is False
    provider.login_as = "verified"
    return untrusted, signed_in.json["data"]


@pytest.fixture
def squatter_password(ctx, claim_app, make_user_token, enable_mfa, register):
    """The attacker registered the victim's address with a password of their own, turned
    TOTP on and added a passkey: every way in an account can have."""
    attacker = make_user_token(claim_app, email=VICTIM, password="Attacker-Chosen-1")
    enable_mfa(claim_app, attacker)
    assert register(claim_app, attacker, SoftAuthenticator()).status_code == 201
    return attacker


def _ways_in(ctx, app, user_id: str) -> dict:
    user = ctx.store["users"].find_one({"_id": user_id})
    count = lambda name: ctx.store[name].count_documents({"app_id": app["_id"], "user_id": user_id})  # noqa: E731
    return {"password": user.get("password_hash") is not None, "identities": count("identities"),
            "passkeys": count("passkeys"), "totp": count("mfa_methods"), "backup_codes": count("mfa_backup_codes")}


# ---------------------------------------------------------------- the link code


def test_a_link_code_hands_a_jit_account_to_the_mailbox_owner(client, ctx, claim_app, provider_b, add_connection,
                                                               squatter_jit, outbox):
    untrusted, attacker = squatter_jit
    user_id = attacker["user"]["id"]
    trusted = add_connection(claim_app, provider_b, linking="trusted_email", trusted=True)
    victim = Browser(client, claim_app)
    mail, linked = _link_by_code(victim, victim.sign_in(trusted.id), outbox)
    assert mail.to == VICTIM and "never confirmed" in mail.body
    assert linked.status_code == 200, linked.text
    assert linked.json["data"]["user"]["id"] == user_id
    assert linked.json["data"]["user"]["email_verified"] is True
    # The attacker's identity is gone, the victim's is the account's only one.
    assert _owners(ctx, claim_app) == {"sub-verified": user_id}
    [revoked] = [event for event in events_of(ctx, "connection.revoked", user_id)
                 if event["data"].get("kind") == "upstream"]
    assert revoked["data"]["reason"] == "account_claimed" and revoked["data"]["connection_id"] == untrusted.id
    [claimed] = events_of(ctx, "user.claimed", user_id)
    assert claimed["data"] == {"user_id": user_id, "via": "link_code"}
    # The attacker's session is over, and signing in again asks them to prove an
    # account that is now the victim's.
    assert_error(_refresh(client, claim_app, attacker["refresh_token"]), 401)
    assert_error(Browser(client, claim_app).sign_in(untrusted.id), 409, "CONNECTION_LINK_REQUIRED")


def test_a_link_code_removes_every_way_in_the_squatter_set_up(client, ctx, claim_app, provider, add_connection,
                                                              squatter_password, outbox):
    attacker = squatter_password
    user_id = attacker.user["id"]
    assert _ways_in(ctx, claim_app, user_id) == {"password": True, "identities": 0, "passkeys": 1, "totp": 1,
                                           "backup_codes": 10}
    trusted = add_connection(claim_app, provider, linking="trusted_email", trusted=True)
    victim = Browser(client, claim_app)
    _, linked = _link_by_code(victim, victim.sign_in(trusted.id), outbox)
    assert linked.status_code == 200, linked.text
    # Signed in at once: the squatter's TOTP and passkey no longer stand in the way.
    assert linked.json["data"]["user"]["id"] == user_id and "access_token" in linked.json["data"]
    assert _ways_in(ctx, claim_app, user_id) == {"password": False, "identities": 1, "passkeys": 0, "totp": 0,
                                           "backup_codes": 0}
    assert_error(_post(client, claim_app, "/login", {"email": VICTIM, "password": "Attacker-Chosen-1"}), 401)
    assert_error(_refresh(client, claim_app, attacker.refresh_token), 401)
    disabled = events_of(ctx, "mfa.disabled", user_id)
    assert sorted(event["data"]["method"] for event in disabled) == ["totp", "webauthn"]


def test_a_password_proves_the_account_and_keeps_it_as_it_is(client, ctx, claim_app, provider, add_connection,
                                                            make_user_token, outbox):
    """The password's holder is whoever holds the account: linking with it hands nothing
    over, even while the email is unverified."""
    owner = make_user_token(claim_app, email=VICTIM)
    connection = add_connection(claim_app, provider, linking="verify")
    browser = Browser(client, claim_app)
    link_id = assert_error(browser.sign_in(connection.id), 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    linked = browser.post("/link", {"link_id": link_id, "binding": browser.binding, "password": PASSWORD})
    assert linked.status_code == 200, linked.text
    assert linked.json["data"]["user"]["email_verified"] is False
    assert _post(client, claim_app, "/login", {"email": VICTIM, "password": PASSWORD}).status_code == 200
    assert _refresh(client, claim_app, owner.refresh_token).status_code == 200
    assert events_of(ctx, "user.claimed") == []


def test_a_link_code_on_a_verified_account_hands_nothing_over(client, ctx, claim_app, provider, add_connection,
                                                              make_user_token, outbox):
    owner = make_user_token(claim_app, email=VICTIM)
    ctx.store["users"].update_one({"_id": owner.user["id"]}, {"$set": {"email_verified": True}})
    connection = add_connection(claim_app, provider, linking="verify")
    browser = Browser(client, claim_app)
    mail, linked = _link_by_code(browser, browser.sign_in(connection.id), outbox)
    assert linked.status_code == 200, linked.text
    assert "never confirmed" not in mail.body
    assert _post(client, claim_app, "/login", {"email": VICTIM, "password": PASSWORD}).status_code == 200
    assert _refresh(client, claim_app, owner.refresh_token).status_code == 200
    assert events_of(ctx, "user.claimed") == []


# ---------------------------------------------------------------- the password reset


def _reset(client, app, outbox, password=NEW):
    outbox.clear()
    assert _post(client, app, "/password/forgot", {"email": VICTIM}).status_code == 200
    return _post(client, app, "/password/reset",
                 {"token": outbox[-1].token, "email": VICTIM, "password": password})


def test_a_reset_hands_a_jit_account_to_the_mailbox_owner(client, ctx, claim_app, squatter_jit, outbox):
    untrusted, attacker = squatter_jit
    user_id = attacker["user"]["id"]
    assert _reset(client, claim_app, outbox).status_code == 200
    assert _ways_in(ctx, claim_app, user_id)["identities"] == 0
    assert events_of(ctx, "user.claimed", user_id)[0]["data"]["via"] == "password_reset"
    assert_error(Browser(client, claim_app).sign_in(untrusted.id), 409, "CONNECTION_LINK_REQUIRED")
    assert _post(client, claim_app, "/login", {"email": VICTIM, "password": NEW}).status_code == 200


def test_a_reset_removes_the_squatters_second_factors(client, ctx, claim_app, squatter_password, outbox):
    user_id = squatter_password.user["id"]
    assert _reset(client, claim_app, outbox).status_code == 200
    assert _ways_in(ctx, claim_app, user_id) == {"password": True, "identities": 0, "passkeys": 0, "totp": 0,
                                           "backup_codes": 0}
    # The new password alone signs in: no second factor the squatter holds is asked.
    signed_in = _post(client, claim_app, "/login", {"email": VICTIM, "password": NEW})
    assert signed_in.status_code == 200 and "access_token" in signed_in.json["data"], signed_in.text


def test_a_reset_of_a_verified_account_keeps_its_ways_in(client, ctx, claim_app, provider, add_connection,
                                                         make_user_token, outbox):
    owner = make_user_token(claim_app, email=VICTIM)
    ctx.store["users"].update_one({"_id": owner.user["id"]}, {"$set": {"email_verified": True}})
    connection = add_connection(claim_app, provider, linking="trusted_email", trusted=True)
    assert Browser(client, claim_app).sign_in(connection.id).status_code == 200
    assert _reset(client, claim_app, outbox).status_code == 200
    assert _ways_in(ctx, claim_app, owner.user["id"])["identities"] == 1
    assert Browser(client, claim_app).sign_in(connection.id).json["data"]["user"]["id"] == owner.user["id"]
    assert events_of(ctx, "user.claimed") == []


# ---------------------------------------------------------------- the verification link


def test_an_account_a_provider_made_gets_no_verification_link(client, claim_app, squatter_jit, outbox):
    """Confirming the email would vouch for the squatter's identity: such an account
    proves its mailbox by a reset, which hands it over."""
    outbox.clear()
    assert _post(client, claim_app, "/email/resend", {"email": VICTIM}).status_code == 200
    assert outbox == []


# ---------------------------------------------------------------- what the squatter held a moment before

ATTACKER_PW = "Attacker-Chosen-1"


def _victim_claims_by_code(client, app, connection, outbox) -> dict:
    """The victim signs in through a trusted provider and enters the mailed code."""
    victim = Browser(client, app)
    _, linked = _link_by_code(victim, victim.sign_in(connection.id), outbox)
    assert linked.status_code == 200, linked.text
    assert linked.json["data"]["user"]["email_verified"] is True
    return linked.json["data"]


def _during(monkeypatch, owner, name: str, action):
    """Run ``action`` once, right after ``owner.name`` next returns something truthy: the
    squatter's request has passed that step and goes on while the victim claims."""
    original, done = getattr(owner, name), []

    def step(*args, **kwargs):
        result = original(*args, **kwargs)
        if result and not done:
            done.append(True)
            action()
        return result

    monkeypatch.setattr(owner, name, step)
    return done


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/{user_id}/mfa/totp/setup", {}),
    ("GET", "/{user_id}/data-export", None),
    ("DELETE", "/{user_id}", None),
])
def test_the_squatters_access_token_opens_nothing_after_the_hand_over(client, ctx, claim_app, provider_b,
                                                                      add_connection, squatter_jit, outbox,
                                                                      method, path, body):
    """An access token outlives its session, but not its account changing hands: one
    issued before the hand-over is refused (401), and one issued after it works."""
    _, attacker = squatter_jit
    trusted = add_connection(claim_app, provider_b, linking="trusted_email", trusted=True)
    victim = _victim_claims_by_code(client, claim_app, trusted, outbox)
    url = users_url(claim_app, path.format(user_id=attacker["user"]["id"]))

    def call(token):
        return client.simulate_request(method, url, json=body, headers={"Authorization": f"Bearer {token}"})

    assert_error(call(attacker["access_token"]), 401, "UNAUTHORIZED")
    assert call(victim["access_token"]).status_code in (200, 204)


def test_a_login_racing_the_hand_over_gets_no_session(client, ctx, claim_app, provider, add_connection, make_user,
                                                      outbox, monkeypatch):
    """The squatter's password was checked just before the hand-over removed it: the
    session that login would start is revoked and the login refused."""
    make_user(claim_app, email=VICTIM, password=ATTACKER_PW)
    trusted = add_connection(claim_app, provider, linking="trusted_email", trusted=True)
    done = _during(monkeypatch, ctx.password_guard, "check",
                   lambda: _victim_claims_by_code(client, claim_app, trusted, outbox))
    assert_error(_post(client, claim_app, "/login", {"email": VICTIM, "password": ATTACKER_PW}), 401,
                 "AUTH_INVALID_CREDENTIALS")
    assert done
    user = ctx.store["users"].find_one({"email": VICTIM})
    live = ctx.store["sessions"].count_documents({"user_id": user["_id"], "revoked_at": None})
    assert live == 1  # the victim's
    assert events_of(ctx, "user.login", user["_id"])[-1]["data"].get("method") == "connection"


def test_a_refresh_racing_the_hand_over_mints_nothing(client, ctx, clock, claim_app, provider, add_connection,
                                                      make_user_token, outbox, monkeypatch):
    """The squatter's refresh token rotated just before the hand-over revoked its session:
    the refresh is refused rather than answered with a token for the claimed account."""
    attacker = make_user_token(claim_app, email=VICTIM, password=ATTACKER_PW)
    trusted = add_connection(claim_app, provider, linking="trusted_email", trusted=True)
    clock.advance(1)  # the squatter's session began before the hand-over
    done = _during(monkeypatch, ctx.users.sessions.sessions, "rotate",
                   lambda: _victim_claims_by_code(client, claim_app, trusted, outbox))
    assert_error(_refresh(client, claim_app, attacker.refresh_token), 401, "UNAUTHORIZED")
    assert done


def test_a_password_change_racing_the_hand_over_puts_no_password_back(client, ctx, claim_app, provider,
                                                                       add_connection, make_user_token, outbox,
                                                                       monkeypatch):
    attacker = make_user_token(claim_app, email=VICTIM, password=ATTACKER_PW)
    trusted = add_connection(claim_app, provider, linking="trusted_email", trusted=True)
    done = _during(monkeypatch, ctx.password_guard, "check",
                   lambda: _victim_claims_by_code(client, claim_app, trusted, outbox))
    changed = client.simulate_post(users_url(claim_app, f"/{attacker.user['id']}/change-password"),
                                   headers=attacker.headers,
                                   json={"current_password": ATTACKER_PW, "new_password": "Attacker-Again-2",
                                         "new_password_confirmation": "Attacker-Again-2"})
    assert done
    assert_error(changed, 422, "INVALID_PASSWORD")
    assert _ways_in(ctx, claim_app, attacker.user["id"])["password"] is False


def test_a_link_racing_the_hand_over_links_nothing(client, ctx, claim_app, provider, provider_b, add_connection,
                                                   make_user, outbox, monkeypatch):
    """The squatter proves a pending link with their password just before the hand-over:
    their identity is not left on the claimed account."""
    make_user(claim_app, email=VICTIM, password=ATTACKER_PW)
    untrusted = add_connection(claim_app, provider, linking="verify")
    trusted = add_connection(claim_app, provider_b, linking="trusted_email", trusted=True)
    provider.login_as = "unverified"
    squatter = Browser(client, claim_app)
    link_id = assert_error(squatter.sign_in(untrusted.id), 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    done = _during(monkeypatch, ctx.password_guard, "check",
                   lambda: _victim_claims_by_code(client, claim_app, trusted, outbox))
    linked = squatter.post("/link", {"link_id": link_id, "binding": squatter.binding, "password": ATTACKER_PW})
    assert done
    assert_error(linked, 400, "CONNECTION_STATE_INVALID")
    user = ctx.store["users"].find_one({"email": VICTIM})
    assert _owners(ctx, claim_app) == {"sub-verified": user["_id"]}


def test_the_squatters_consents_are_withdrawn(client, ctx, claim_app, provider_b, add_connection, squatter_jit,
                                              outbox):
    """The victim is asked again by the clients the squatter approved."""
    _, attacker = squatter_jit
    user_id = attacker["user"]["id"]
    ctx.oidc.connections.grant_consent(claim_app["_id"], user_id, "some-client", ["openid", "email"])
    trusted = add_connection(claim_app, provider_b, linking="trusted_email", trusted=True)
    _victim_claims_by_code(client, claim_app, trusted, outbox)
    assert not ctx.oidc.connections.consent_covers(claim_app["_id"], user_id, "some-client", ["openid"])


def test_a_suspended_account_is_neither_linked_nor_handed_over(client, ctx, claim_app, provider_b, add_connection,
                                                               squatter_jit, outbox):
    _, attacker = squatter_jit
    user_id = attacker["user"]["id"]
    ctx.users.admin.suspend(claim_app["_id"], user_id)
    trusted = add_connection(claim_app, provider_b, linking="trusted_email", trusted=True)
    victim = Browser(client, claim_app)
    link_id = assert_error(victim.sign_in(trusted.id), 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    assert_error(victim.post("/link/code", {"link_id": link_id, "binding": victim.binding}), 403,
                 "AUTH_ACCOUNT_SUSPENDED")
    assert_error(victim.post("/link", {"link_id": link_id, "binding": victim.binding, "code": "000000"}), 403,
                 "AUTH_ACCOUNT_SUSPENDED")
    assert events_of(ctx, "user.claimed", user_id) == [] and outbox == []


def test_decision_services_learn_the_stamp_with_the_grants(client, ctx, claim_app, provider_b, add_connection,
                                                           squatter_jit, outbox):
    """A decision service verifies access tokens itself: the grants it fetches carry the
    stamp its tokens must have, and the hand-over is a change that drops the user's."""
    _, attacker = squatter_jit
    user_id = attacker["user"]["id"]
    assert ctx.roles.grants(claim_app["_id"], user_id).token_stamp is None
    trusted = add_connection(claim_app, provider_b, linking="trusted_email", trusted=True)
    victim = _victim_claims_by_code(client, claim_app, trusted, outbox)
    stamp = jwt.decode(victim["access_token"], options={"verify_signature": False})["tnb"]
    assert ctx.roles.grants(claim_app["_id"], user_id).token_stamp == stamp
    assert affected_users(Event.from_doc(events_of(ctx, "user.claimed", user_id)[0])) == [user_id]


def _while_the_ways_in_go(monkeypatch, ctx, action):
    """Run ``action`` once, right after the hand-over's first end of sessions: the account
    is stamped, the squatter's ways in are not removed yet."""
    claim = ctx.users.passwords.claim
    original, got = claim._end_sessions, []

    def end_sessions(*args):
        original(*args)
        if not got:
            got.append(action())

    monkeypatch.setattr(claim, "_end_sessions", end_sessions)
    return got


def test_a_connection_sign_in_while_the_ways_in_go_keeps_nothing(client, ctx, claim_app, provider, squatter_jit,
                                                                 outbox, monkeypatch):
    untrusted, attacker = squatter_jit
    user_id = attacker["user"]["id"]

    def squatter_signs_in():
        provider.login_as = "unverified"
        try:
            return Browser(client, claim_app).sign_in(untrusted.id)
        finally:
            provider.login_as = "verified"

    got = _while_the_ways_in_go(monkeypatch, ctx, squatter_signs_in)
    assert _reset(client, claim_app, outbox).status_code == 200
    [signed_in] = got
    assert signed_in.status_code == 200, signed_in.text  # the identity was still there
    pair = signed_in.json["data"]
    export = client.simulate_get(users_url(claim_app, f"/{user_id}/data-export"),
                                 headers={"Authorization": f"Bearer {pair['access_token']}"})
    assert_error(export, 401, "UNAUTHORIZED")
    assert_error(_refresh(client, claim_app, pair["refresh_token"]), 401)


def test_an_mfa_answer_while_the_ways_in_go_keeps_nothing(client, ctx, clock, claim_app, make_user_token,
                                                          enable_mfa, outbox, monkeypatch):
    attacker = enable_mfa(claim_app, make_user_token(claim_app, email=VICTIM, password=ATTACKER_PW))
    challenge = _post(client, claim_app, "/login", {"email": VICTIM, "password": ATTACKER_PW})
    assert challenge.json["data"].get("mfa_required"), challenge.text

    def squatter_answers():
        return _post(client, claim_app, "/mfa/verify", {"challenge_token": challenge.json["data"]["challenge_token"],
                                                         "code": rfc6238(attacker.secret, clock())})

    got = _while_the_ways_in_go(monkeypatch, ctx, squatter_answers)
    assert _reset(client, claim_app, outbox).status_code == 200
    [answered] = got  # the challenge was opened before the stamp: no session
    assert_error(answered, 401, "AUTH_INVALID_CREDENTIALS")


def test_the_owners_session_refreshes_whatever_the_workers_clocks_say(client, clock, claim_app, squatter_jit,
                                                                      outbox):
    """A session refreshes under the stamp it began with, not by comparing one worker's
    clock (the sign-in's) with another's (the hand-over's)."""
    assert _reset(client, claim_app, outbox).status_code == 200
    clock.advance(-1)  # the next request lands on a worker whose clock is a second behind
    signed_in = _post(client, claim_app, "/login", {"email": VICTIM, "password": NEW})
    assert signed_in.status_code == 200, signed_in.text
    refreshed = _refresh(client, claim_app, signed_in.json["data"]["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
