"""A dashboard session ends with every change that ends the account's other sessions, even
one whose sign-in checked the credentials before the change and stored its session after
the change's revocation (docs/dashboard.md, "Sessions and cookies"): the account's stamp
moves with the change, and a session holds the stamp its sign-in read first."""
from __future__ import annotations

from controlplane.auth import SESSION_COOKIE
from shared.ids import digest
from tests.conftest import assert_error
from tests.dashboard.test_mfa import challenge_of, claim, code_step, enrol, rfc6238
from tests.plugins.users import fresh_address

BASE = "/api/dashboard"
ME = f"{BASE}/me"
SQUATTER_PASSWORD = "Squatter-Pass-1"
NEW_PASSWORD = "Brand-New-Secret-9"


def _after(monkeypatch, owner, name: str, action):
    """Run ``action`` once, right after ``owner.name`` next returns: the sign-in has passed
    that step and goes on once the change is done."""
    original, done = getattr(owner, name), []

    def step(*args, **kwargs):
        result = original(*args, **kwargs)
        if not done:
            done.append(True)
            action()
        return result

    monkeypatch.setattr(owner, name, step)
    return done


def _sign_in(client, email: str, password: str):
    return client.simulate_post(f"{BASE}/login", remote_addr=fresh_address(),
                                json={"email": email, "password": password})


def _me(client, raw: str):
    return client.simulate_get(ME, cookies={SESSION_COOKIE: raw})


def _reset(account, outbox, password=NEW_PASSWORD) -> None:
    outbox.clear()
    account.client.simulate_post(f"{BASE}/password/forgot", json={"email": account.email})
    reset = account.client.simulate_post(f"{BASE}/password/reset", json={"token": outbox[-1].token,
                                                                         "password": password})
    assert reset.status_code == 200, reset.text


def _live_sessions(ctx, account_id: str) -> int:
    return ctx.store["dashboard_sessions"].count_documents({"account_id": account_id})


# ---------------------------------------------------------------- a sign-in racing the change


def test_a_squatters_sign_in_racing_the_claim_keeps_no_session(make_dashboard_account, client, ctx, outbox,
                                                                monkeypatch):
    squatter = make_dashboard_account("alice@victim.com", password=SQUATTER_PASSWORD, verified=False)
    done = _after(monkeypatch, ctx.password_guard, "check", lambda: claim(squatter, outbox))
    signed_in = _sign_in(client, squatter.email, SQUATTER_PASSWORD)
    assert done
    assert_error(signed_in, 401, "AUTH_INVALID_CREDENTIALS")
    assert _live_sessions(ctx, squatter.id) == 0
    assert_error(_me(client, squatter.session), 401, "UNAUTHORIZED")


def test_a_sign_in_racing_a_password_reset_keeps_no_session(dashboard_account, client, ctx, outbox, monkeypatch):
    done = _after(monkeypatch, ctx.password_guard, "check", lambda: _reset(dashboard_account, outbox))
    signed_in = _sign_in(client, dashboard_account.email, dashboard_account.password)
    assert done
    assert_error(signed_in, 401, "AUTH_INVALID_CREDENTIALS")
    assert _live_sessions(ctx, dashboard_account.id) == 0
    assert _sign_in(client, dashboard_account.email, NEW_PASSWORD).status_code == 200


def test_a_sign_in_racing_a_password_change_keeps_no_session(dashboard_account, client, ctx, monkeypatch):
    changed = []

    def change():
        changed.append(dashboard_account.post(f"{ME}/password", json={"current_password": dashboard_account.password,
                                                                      "new_password": NEW_PASSWORD}))

    _after(monkeypatch, ctx.password_guard, "check", change)
    signed_in = _sign_in(client, dashboard_account.email, dashboard_account.password)
    assert changed[0].status_code == 200, changed[0].text
    assert_error(signed_in, 401, "AUTH_INVALID_CREDENTIALS")
    # The browser that changed it keeps its fresh session, and only that one.
    fresh = changed[0].cookies[SESSION_COOKIE].value
    assert _me(client, fresh).status_code == 200
    assert_error(_me(client, dashboard_account.session), 401, "UNAUTHORIZED")
    assert _live_sessions(ctx, dashboard_account.id) == 1


def test_a_sign_in_racing_the_first_second_factor_keeps_no_session(dashboard_account, client, ctx, clock,
                                                                   monkeypatch):
    """The password step found no factor; the factor is turned on, and the other sessions
    end, before the sign-in stores its session."""
    done = _after(monkeypatch, ctx.dashboard.accounts.second_factor, "login_challenge",
                  lambda: enrol(dashboard_account, clock))
    signed_in = _sign_in(client, dashboard_account.email, dashboard_account.password)
    assert done
    assert_error(signed_in, 401, "AUTH_INVALID_CREDENTIALS")
    assert _me(client, dashboard_account.session).status_code == 200  # the session that turned it on
    assert _live_sessions(ctx, dashboard_account.id) == 1


def test_a_challenge_opened_before_a_reset_opens_no_session(dashboard_account, client, ctx, clock, outbox):
    secret, _codes = enrol(dashboard_account, clock)
    challenge = challenge_of(dashboard_account)  # the old password's first step
    _reset(dashboard_account, outbox)
    assert_error(code_step(dashboard_account, challenge, rfc6238(secret, clock())), 401, "AUTH_INVALID_CREDENTIALS")
    assert _live_sessions(ctx, dashboard_account.id) == 0


def test_a_session_stored_after_the_reset_is_refused_at_use(dashboard_account, client, ctx, outbox):
    """A sign-in that read the account before the reset and wrote its session after the
    reset's revocation, then stopped before checking it: the session is refused anyway."""
    sessions = ctx.store["dashboard_sessions"]
    stored = sessions.find_one({"_id": digest(dashboard_account.session)})
    _reset(dashboard_account, outbox)
    sessions.insert_one(stored)
    assert_error(_me(client, dashboard_account.session), 401, "UNAUTHORIZED")
    assert_error(dashboard_account.get(f"{BASE}/organizations"), 401, "UNAUTHORIZED")


def test_a_squatters_password_change_racing_the_claim_puts_no_password_back(make_dashboard_account, client, ctx,
                                                                             outbox, monkeypatch):
    """The squatter's current password was checked just before the claim replaced it."""
    squatter = make_dashboard_account("alice@victim.com", password=SQUATTER_PASSWORD, verified=False)
    owners = []
    done = _after(monkeypatch, ctx.password_guard, "check", lambda: owners.append(claim(squatter, outbox)))
    changed = squatter.post(f"{ME}/password", json={"current_password": SQUATTER_PASSWORD,
                                                    "new_password": "Squatter-Again-2"})
    assert done
    assert_error(changed, 422, "INVALID_PASSWORD")
    assert SESSION_COOKIE not in changed.cookies
    assert _live_sessions(ctx, squatter.id) == 0
    assert_error(_sign_in(client, squatter.email, "Squatter-Again-2"), 401, "AUTH_INVALID_CREDENTIALS")
    assert _sign_in(client, squatter.email, owners[0]).status_code == 200


# ---------------------------------------------------------------- the sessions that stay


def test_the_session_that_turns_the_factor_on_stays_until_the_next_change(make_dashboard_account, client, clock,
                                                                          outbox):
    account = make_dashboard_account()
    other = _sign_in(client, account.email, account.password).cookies[SESSION_COOKIE].value
    enrol(account, clock)
    assert _me(client, account.session).status_code == 200
    assert account.get(f"{BASE}/organizations").status_code == 200
    assert_error(_me(client, other), 401, "UNAUTHORIZED")
    _reset(account, outbox)
    assert_error(_me(client, account.session), 401, "UNAUTHORIZED")


def test_a_session_from_before_stamps_keeps_working_until_the_next_change(dashboard_account, client, ctx):
    """Sessions and accounts stored before the stamp have none: they match."""
    sessions, accounts = ctx.store["dashboard_sessions"], ctx.store["dashboard_accounts"]
    raw = "session-stored-before-the-upgrade"
    stored = sessions.find_one({"_id": digest(dashboard_account.session)})
    sessions.insert_one({"_id": digest(raw), "account_id": dashboard_account.id, "created_at": stored["created_at"],
                         "expires_at": stored["expires_at"]})
    accounts.update_one({"_id": dashboard_account.id}, {"$unset": {"tokens_not_before": "", "kept_session": ""}})
    assert _me(client, raw).status_code == 200
    changed = dashboard_account.post(f"{ME}/password", json={"current_password": dashboard_account.password,
                                                             "new_password": NEW_PASSWORD})
    assert changed.status_code == 200, changed.text
    sessions.insert_one({"_id": digest(raw), "account_id": dashboard_account.id, "created_at": stored["created_at"],
                         "expires_at": stored["expires_at"]})  # even were it not deleted
    assert_error(_me(client, raw), 401, "UNAUTHORIZED")
