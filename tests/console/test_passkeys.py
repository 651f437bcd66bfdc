"""Passkeys in the console: the account's Security page lists them, adds one ("Add a
passkey": the page's creation options, the browser's credential posted back) and
deletes one; the sign-in page signs in with one alone, and the second step takes one.

The browser's part is the software authenticator of the API tests
(tests/passkeys/authenticator.py); tests/console/test_passkeys_browser.py runs the
pages' script in Chromium."""
from __future__ import annotations

import html
import json
import re

import pytest

from controlplane.auth import SESSION_COOKIE
from controlplane.console.resources import ENROL_PAGE
from shared.config import Rate
from tests.conftest import assert_error
from tests.dashboard.test_mfa import APPS, ORGS, enrol
from tests.dashboard.test_passkeys import add_passkey as add_passkey_through_the_api
from tests.mfa.conftest import rfc6238
from tests.passkeys.authenticator import SoftAuthenticator
from tests.plugins.dashboard import DASHBOARD_PASSWORD

PUBLIC_URL = "http://localhost:8000"  # passkeys need a host name; the software authenticator's origin
SECURITY = "/console/account/security"
PASSKEYS = {"public_url": PUBLIC_URL, "webauthn_rp_id": "localhost", "webauthn_origins": (PUBLIC_URL,)}


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", PASSKEYS)


def passkey_form(page) -> dict:
    """The page's passkey form: its action, options, challenge_id and whether it offers autofill."""
    match = re.search(r'<form method="post" action="([^"]+)" class="card" data-passkey-options=\'([^\']*)\'([^>]*)>',
                      page.text)
    assert match, "no passkey form on the page"
    challenge_id = re.search(r'name="challenge_id" value="([^"]+)"', page.text[match.start():]).group(1)
    return {"action": match.group(1), "options": json.loads(html.unescape(match.group(2))),
            "challenge_id": challenge_id, "autofill": "data-passkey-autofill" in match.group(3)}


@pytest.fixture
def visitor(console):
    def make(account=None):
        someone = console()
        if account is not None:
            someone.get("/console/sign-in")
            response = someone.post("/console/sign-in", {"email": account.email, "password": account.password},
                                    origin=PUBLIC_URL)
            assert response.status_code == 303, response.text
        return someone

    return make


def add_passkey(signed_in, key: SoftAuthenticator, name="", password=DASHBOARD_PASSWORD):
    form = passkey_form(signed_in.get(SECURITY))
    assert form["action"] == SECURITY and form["options"]["rp"]["id"] == "localhost"
    return signed_in.post(SECURITY, {"step": "passkey-add", "challenge_id": form["challenge_id"], "name": name,
                                     "credential": json.dumps(key.create(form["options"])), "password": password},
                          origin=PUBLIC_URL)


def test_the_security_page_adds_lists_and_deletes_passkeys(visitor, dashboard_account, ctx):
    signed_in = visitor(dashboard_account)
    page = signed_in.get(SECURITY)
    assert page.status_code == 200 and 'id="no-passkeys"' in page.text
    assert "Add a passkey" in page.text and "data-passkey-create" in page.text
    assert re.search(r'<script type="module" src="/console/assets/passkeys\.[0-9a-f]{16}\.js"></script>', page.text)

    key = SoftAuthenticator(aaguid=bytes.fromhex("bada5566a7aa401fbd9645619a55120d"))
    added = add_passkey(signed_in, key, name="Work laptop")
    assert added.status_code == 303 and added.headers["location"] == f"{SECURITY}?notice=passkey-added"
    stored = ctx.store["passkeys"].find_one({"app_id": "dashboard", "user_id": dashboard_account.id})
    assert stored["credential_id"] == key.id and stored["name"] == "Work laptop"

    page = signed_in.get(f"{SECURITY}?notice=passkey-added")
    assert "Passkey added." in page.text and "Work laptop" in page.text and "1Password" in page.text
    wrong = signed_in.post(SECURITY, {"step": "passkey-delete", "passkey_id": stored["_id"], "password": "wrong"},
                           origin=PUBLIC_URL)
    assert wrong.status_code == 422 and 'id="e-passkey-delete"' in wrong.text
    deleted = signed_in.post(SECURITY, {"step": "passkey-delete", "passkey_id": stored["_id"],
                                        "password": dashboard_account.password}, origin=PUBLIC_URL)
    assert deleted.status_code == 303 and deleted.headers["location"] == f"{SECURITY}?notice=passkey-deleted"
    assert ctx.store["passkeys"].count_documents({}) == 0


def test_adding_a_passkey_takes_the_password(visitor, dashboard_account, ctx):
    """The form asks for the password beside the name; without it, or with a wrong one,
    nothing is stored and the page says so at the field."""
    signed_in = visitor(dashboard_account)
    page = signed_in.get(SECURITY)
    assert re.search(r'<input id="a-password" name="password" type="password" autocomplete="current-password" '
                     r'required>', page.text)
    missing = add_passkey(signed_in, SoftAuthenticator(), password="")
    assert missing.status_code == 400 and 'id="e-passkey-add"' in missing.text
    wrong = add_passkey(signed_in, SoftAuthenticator(), password="not the password")
    assert wrong.status_code == 422 and 'id="e-passkey-add"' in wrong.text and "INVALID_PASSWORD" in wrong.text
    assert ctx.store["passkeys"].count_documents({}) == 0
    assert add_passkey(signed_in, SoftAuthenticator()).status_code == 303
    assert ctx.store["passkeys"].count_documents({}) == 1


def test_a_rows_delete_button_asks_for_the_password_of_that_passkey(visitor, dashboard_account, ctx):
    """A row's Delete button sends no password: the page answers with the password form
    in the error's help, the pressed passkey selected, and the page's own sections once
    (one passkey form, no id twice)."""
    signed_in = visitor(dashboard_account)
    for name in ("Phone", "Laptop"):
        assert add_passkey(signed_in, SoftAuthenticator(), name=name).status_code == 303
    laptop = ctx.store["passkeys"].find_one({"name": "Laptop"})
    asked = signed_in.post(SECURITY, {"step": "passkey-delete", "passkey_id": laptop["_id"]}, origin=PUBLIC_URL)
    assert asked.status_code == 400 and 'id="p-password"' in asked.text
    assert re.search(rf'<option value="{laptop["_id"]}" selected>Laptop ', asked.text)
    assert asked.text.count("data-passkey-options") == 1 and asked.text.count("<h2>Passkeys</h2>") == 1
    ids = re.findall(r'\bid="([^"]+)"', asked.text)
    assert len(ids) == len(set(ids))
    other_error = signed_in.post(SECURITY, {"step": "backup-codes", "password": "x"}, origin=PUBLIC_URL)
    assert other_error.status_code in (400, 422) and 'id="p-password"' not in other_error.text
    assert other_error.text.count("<h2>Passkeys</h2>") == 1


def test_a_refused_passkey_shows_the_page_with_its_error(visitor, dashboard_account, ctx):
    signed_in = visitor(dashboard_account)
    form = passkey_form(signed_in.get(SECURITY))
    credential = SoftAuthenticator().create(form["options"], origin="https://evil.example")
    refused = signed_in.post(SECURITY, {"step": "passkey-add", "challenge_id": form["challenge_id"],
                                        "credential": json.dumps(credential), "password": DASHBOARD_PASSWORD},
                             origin=PUBLIC_URL)
    assert refused.status_code == 400 and "PASSKEY_ORIGIN_MISMATCH" in refused.text
    assert passkey_form(refused)["challenge_id"] != form["challenge_id"]  # a fresh challenge to try again
    malformed = signed_in.post(SECURITY, {"step": "passkey-add", "challenge_id": "x", "credential": "{not json"},
                               origin=PUBLIC_URL)
    assert malformed.status_code == 400 and "VALIDATION" in malformed.text
    assert ctx.store["passkeys"].count_documents({}) == 0


def test_the_console_cannot_delete_another_accounts_passkey(visitor, dashboard_account, make_dashboard_account,
                                                            ctx):
    assert add_passkey(visitor(dashboard_account), SoftAuthenticator()).status_code == 303
    victims = ctx.store["passkeys"].find_one({"user_id": dashboard_account.id})
    attacker_account = make_dashboard_account()
    attacker = visitor(attacker_account)
    refused = attacker.post(SECURITY, {"step": "passkey-delete", "passkey_id": victims["_id"],
                                       "password": attacker_account.password}, origin=PUBLIC_URL)
    assert refused.status_code == 404 and "PASSKEY_NOT_FOUND" in refused.text
    assert ctx.store["passkeys"].find_one({"_id": victims["_id"]}) is not None


def test_sign_in_with_a_passkey_alone(visitor, dashboard_account):
    key = SoftAuthenticator()
    assert add_passkey(visitor(dashboard_account), key).status_code == 303
    someone = visitor()
    page = someone.get("/console/sign-in")
    assert 'autocomplete="username webauthn"' in page.text and "Sign in with a passkey" in page.text
    form = passkey_form(page)
    assert form["action"] == "/console/sign-in/passkey" and form["autofill"] is True
    assert form["options"]["allowCredentials"] == [] and form["options"]["userVerification"] == "required"
    signed_in = someone.post(form["action"], {"challenge_id": form["challenge_id"],
                                              "credential": json.dumps(key.get(form["options"]))}, origin=PUBLIC_URL)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/console/applications"
    assert SESSION_COOKIE in someone.cookies
    assert dashboard_account.email in someone.get("/console/account").text


def test_a_refused_passkey_sign_in_shows_the_page_without_autofill(visitor, make_dashboard_account):
    someone = visitor()
    form = passkey_form(someone.get("/console/sign-in"))
    stranger = SoftAuthenticator()  # registered nowhere
    stranger.user_handle = b"nobody"
    refused = someone.post(form["action"], {"challenge_id": form["challenge_id"],
                                            "credential": json.dumps(stranger.get(form["options"]))},
                           origin=PUBLIC_URL)
    assert refused.status_code == 400 and "PASSKEY_CREDENTIAL_UNKNOWN" in refused.text
    assert passkey_form(refused)["autofill"] is False
    assert SESSION_COOKIE not in someone.cookies


def test_the_second_step_takes_a_passkey(visitor, dashboard_account):
    key = SoftAuthenticator(resident=False, user_verifying=False)
    assert add_passkey(visitor(dashboard_account), key).status_code == 303
    someone = visitor()
    someone.get("/console/sign-in")
    step = someone.post("/console/sign-in", {"email": dashboard_account.email,
                                             "password": dashboard_account.password}, origin=PUBLIC_URL)
    assert step.status_code == 200 and "Use a passkey" in step.text
    assert 'name="code"' not in step.text  # no authenticator app: the passkey only
    form = passkey_form(step)
    assert [c["id"] for c in form["options"]["allowCredentials"]] == [key.id]
    token = re.search(r'name="challenge_token" value="([^"]+)"', step.text).group(1)
    signed_in = someone.post(form["action"], {"challenge_id": form["challenge_id"], "challenge_token": token,
                                              "credential": json.dumps(key.get(form["options"]))},
                             origin=PUBLIC_URL)
    assert signed_in.status_code == 303 and SESSION_COOKIE in someone.cookies


@pytest.mark.parametrize("config_overrides", [{**PASSKEYS, "rate_limit_dashboard_login": Rate(3, 60)}],
                         indirect=True)
def test_the_sign_in_pages_passkey_challenges_draw_on_the_ips_page_budget(console, client, ctx):
    """Each showing of the sign-in page draws a unit of the client IP's sign-in page
    budget (dashboard-login-page:<ip>), not of its sign-in budget, which the API's
    options route and the sign-in attempts draw (dashboard-login:<ip>)."""
    someone = console()
    for _ in range(3):
        assert "data-passkey-options" in someone.get("/console/sign-in").text
    spent = someone.get("/console/sign-in")  # the page still renders, without the passkey button
    assert spent.status_code == 200 and "data-passkey-options" not in spent.text
    assert 'autocomplete="username"' in spent.text
    assert ctx.store["passkey_challenges"].count_documents({"app_id": "dashboard"}) == 3
    api = client.simulate_post("/api/dashboard/login/passkey/options", json={}, remote_addr=someone.remote_addr)
    assert api.status_code == 200  # the sign-in budget is untouched by the page's showings
    assert "data-passkey-options" in console().get("/console/sign-in").text  # another IP's is its own


@pytest.mark.parametrize("config_overrides", [{**PASSKEYS, "rate_limit_dashboard_login": Rate(3, 60)}],
                         indirect=True)
def test_another_sites_cookieless_gets_of_the_sign_in_page_never_refuse_a_password(console, client,
                                                                                   dashboard_account):
    """Any web page can make a browser GET /console/sign-in (an ``<img>``: no cookie, no
    CSRF token, no click), and so can colleagues behind the same NAT opening the page.
    Those showings spend the page budget, which only hides the passkey button: a
    password sign-in from that address goes through."""
    someone = console()
    for _ in range(10):  # the other page's <img> tags: the same address, no cookies
        assert client.simulate_get("/console/sign-in", remote_addr=someone.remote_addr).status_code == 200
    page = someone.get("/console/sign-in")
    assert page.status_code == 200 and "data-passkey-options" not in page.text
    signed_in = someone.post("/console/sign-in", {"email": dashboard_account.email,
                                                  "password": dashboard_account.password}, origin=PUBLIC_URL)
    assert signed_in.status_code == 303 and SESSION_COOKIE in someone.cookies


def sign_in_challenges(ctx) -> int:
    """Passkey challenges stored for a sign-in by passkey alone (the page's button)."""
    return ctx.store["passkey_challenges"].count_documents({"app_id": "dashboard"})


def units_of(ctx, someone, budget: str = "dashboard-login") -> int:
    """Units of ``someone``'s IP's ``budget`` (dashboard-login, dashboard-login-page)
    drawn in this window (the counter goes past the limit once refusals count too)."""
    counters = ctx.store["rate_limits"].find({"_id": {"$regex": f"^{budget}:{someone.remote_addr}\\|"}})
    return min(ctx.config.rate_limit_dashboard_login.limit, sum(counter["n"] for counter in counters))


@pytest.mark.parametrize("config_overrides", [{**PASSKEYS, "lockout_threshold": 100}], indirect=True)
def test_a_failed_console_sign_in_costs_one_unit_of_the_ips_budget_as_the_api_does(
        console, client, make_dashboard_account, ctx):
    limit = ctx.config.rate_limit_dashboard_login.limit
    api_ip, account = "198.51.100.20", make_dashboard_account()
    wrong = {"email": account.email, "password": "Wrong-Horse-42"}
    for _ in range(limit):
        assert_error(client.simulate_post("/api/dashboard/login", json=wrong, remote_addr=api_ip),
                     401, "AUTH_INVALID_CREDENTIALS")
    assert_error(client.simulate_post("/api/dashboard/login", json=wrong, remote_addr=api_ip),
                 429, "RATE_LIMIT_EXCEEDED")

    someone = console()
    assert "data-passkey-options" in someone.get("/console/sign-in").text  # the page's challenge: a page unit
    for attempt in range(1, limit + 1):
        again = someone.post("/console/sign-in", wrong, origin=PUBLIC_URL)
        assert again.status_code == 401 and "AUTH_INVALID_CREDENTIALS" in again.text
        # The page shown again, on a unit of the page budget, which the GET started.
        assert ("data-passkey-options" in again.text) == (attempt < limit)
    spent = someone.post("/console/sign-in", wrong, origin=PUBLIC_URL)
    assert spent.status_code == 429 and "RATE_LIMIT_EXCEEDED" in spent.text
    assert "data-passkey-options" not in spent.text
    assert sign_in_challenges(ctx) == limit  # no more challenges than page units


@pytest.mark.parametrize("config_overrides", [{**PASSKEYS, "rate_limit_dashboard_login": Rate(5, 60)}],
                         indirect=True)
def test_the_console_and_the_api_draw_one_unit_an_attempt_from_one_budget(console, client, dashboard_account, ctx):
    """Sign-in attempts, the console's and the API's, draw on one sign-in budget; the
    pages' showings draw on the page budget instead."""
    someone = console()
    wrong = {"email": dashboard_account.email, "password": "Wrong-Horse-42"}
    someone.get("/console/sign-in")  # a page unit
    assert someone.post("/console/sign-in", wrong, origin=PUBLIC_URL).status_code == 401  # 1
    for _ in range(3):  # 2, 3, 4
        assert_error(client.simulate_post("/api/dashboard/login", json=wrong, remote_addr=someone.remote_addr),
                     401, "AUTH_INVALID_CREDENTIALS")
    right = someone.post("/console/sign-in", {"email": dashboard_account.email,
                                              "password": dashboard_account.password}, origin=PUBLIC_URL)  # 5
    assert right.status_code == 303 and SESSION_COOKIE in someone.cookies  # the last unit still signs in
    assert_error(client.simulate_post("/api/dashboard/login", json=wrong, remote_addr=someone.remote_addr),
                 429, "RATE_LIMIT_EXCEEDED")
    other = console(someone.remote_addr)  # another browser at the address: its GET of the page, a page unit
    refused = other.post("/console/sign-in", wrong, origin=PUBLIC_URL)
    assert refused.status_code == 429
    assert "data-passkey-options" in refused.text  # the page shown again: the page budget's fourth unit
    assert (units_of(ctx, someone), units_of(ctx, someone, "dashboard-login-page")) == (5, 4)
    assert sign_in_challenges(ctx) == 4  # two GETs, and the page shown again after each refusal


@pytest.mark.parametrize("config_overrides", [{**PASSKEYS, "rate_limit_dashboard_login": Rate(10, 60)}],
                         indirect=True)
def test_pages_shown_again_never_carry_more_challenges_than_units_drawn(console, dashboard_account, ctx):
    """Every way the sign-in page is shown again (a wrong password, the login lock, a form
    the schema refuses, a refused passkey) draws at most one unit of the page budget and
    carries at most one challenge; once that budget is spent no page carries one."""
    someone = console()
    wrong = {"email": dashboard_account.email, "password": "Wrong-Horse-42"}
    stranger = SoftAuthenticator()
    stranger.user_handle = b"nobody"

    def units() -> int:
        return units_of(ctx, someone, "dashboard-login-page")

    page = someone.get("/console/sign-in")
    shown = [page]
    for _ in range(5):  # the 5th wrong password locks the email
        shown.append(someone.post("/console/sign-in", wrong, origin=PUBLIC_URL))
    shown.append(locked := someone.post("/console/sign-in", wrong, origin=PUBLIC_URL))
    assert locked.status_code == 429 and "AUTH_ACCOUNT_LOCKED" in locked.text
    shown.append(invalid := someone.post("/console/sign-in", {"email": "", "password": ""}, origin=PUBLIC_URL))
    assert invalid.status_code == 400
    form = passkey_form(shown[-1])
    shown.append(refused := someone.post(form["action"], {"challenge_id": form["challenge_id"],
                                                          "credential": json.dumps(stranger.get(form["options"]))},
                                         origin=PUBLIC_URL))
    assert refused.status_code == 400 and "PASSKEY_CREDENTIAL_UNKNOWN" in refused.text
    assert len({passkey_form(response)["challenge_id"] for response in shown}) == units() == 9
    assert sign_in_challenges(ctx) == 8  # and the one the refused passkey used up
    assert units_of(ctx, someone) == 7  # the attempts: five passwords, the locked one, the passkey

    last = someone.post("/console/sign-in", wrong, origin=PUBLIC_URL)
    assert "data-passkey-options" in last.text and units() == 10 and sign_in_challenges(ctx) == 9
    for spent in (someone.post("/console/sign-in", wrong, origin=PUBLIC_URL),
                  someone.post("/console/sign-in", {"email": ""}, origin=PUBLIC_URL),
                  someone.get("/console/sign-in")):
        assert spent.status_code in (200, 400, 429) and "data-passkey-options" not in spent.text
    assert sign_in_challenges(ctx) == 9


@pytest.mark.parametrize("config_overrides", [{**PASSKEYS, "rate_limit_dashboard_login": Rate(5, 60)}],
                         indirect=True)
def test_the_second_steps_passkey_challenges_draw_on_the_ips_sign_in_budget(console, client, dashboard_account,
                                                                            clock, ctx):
    """Every showing of the code page stores a passkey challenge: the one the password
    leads to takes the password's unit of the sign-in budget (so no third party can take
    away the passkey of an account whose only second factor it is); shown again after a
    refused passkey or code it takes a unit of the page budget (an empty code is not
    even an MFA attempt, so nothing else bounds how often it comes back).  Once that
    budget is spent the page offers no passkey and still takes a code."""
    assert add_passkey_through_the_api(dashboard_account, SoftAuthenticator()).status_code == 201
    secret, _ = enrol(dashboard_account, clock)
    someone = console()
    stranger = SoftAuthenticator()  # registered nowhere

    def units() -> tuple[int, int]:
        return units_of(ctx, someone), units_of(ctx, someone, "dashboard-login-page")

    shown = [someone.get("/console/sign-in")]  # page 1
    shown.append(step := someone.post("/console/sign-in", {"email": dashboard_account.email,  # sign-in 1, its page
                                                           "password": dashboard_account.password}, origin=PUBLIC_URL))
    assert step.status_code == 200 and 'name="code"' in step.text
    token = re.search(r'name="challenge_token" value="([^"]+)"', step.text).group(1)
    form = passkey_form(step)
    answer = {"challenge_id": form["challenge_id"], "challenge_token": token,
              "credential": json.dumps(stranger.get(form["options"]))}
    shown.append(refused := someone.post(form["action"], answer, origin=PUBLIC_URL))  # sign-in 2, page 2
    assert refused.status_code == 400 and "PASSKEY_CREDENTIAL_UNKNOWN" in refused.text
    for _ in range(3):  # page 3, 4, 5
        shown.append(again := someone.post("/console/sign-in/code", {"challenge_token": token, "code": ""},
                                           origin=PUBLIC_URL))
        assert again.status_code == 400 and 'name="code"' in again.text
    assert len({passkey_form(page)["challenge_id"] for page in shown}) == 6
    assert units() == (2, 5)
    assert sign_in_challenges(ctx) == 5  # and the one the refused passkey used up

    for _ in range(30):
        spent = someone.post("/console/sign-in/code", {"challenge_token": token, "code": ""}, origin=PUBLIC_URL)
        assert spent.status_code == 400 and 'name="code"' in spent.text and "data-passkey-options" not in spent.text
    assert sign_in_challenges(ctx) == 5 and units() == (2, 5)
    api = client.simulate_post("/api/dashboard/login/passkey/options", json={"challenge_token": token},
                               remote_addr=someone.remote_addr)
    assert api.status_code == 200  # the API's options draw on the sign-in budget, which the pages did not spend
    signed_in = someone.post("/console/sign-in/code", {"challenge_token": token, "code": rfc6238(secret, clock())},
                             origin=PUBLIC_URL)
    assert signed_in.status_code == 303 and SESSION_COOKIE in someone.cookies


def test_an_unconfirmed_account_is_told_to_confirm_before_adding_a_factor(visitor, make_dashboard_account, ctx):
    account = make_dashboard_account(verified=False)
    page = visitor(account).get(SECURITY)
    assert page.status_code == 200
    assert 'id="mfa-confirm-first"' in page.text and 'id="passkeys-confirm-first"' in page.text
    assert "Confirm your email address first" in page.text
    assert "data-passkey-create" not in page.text and 'name="step" value="setup"' not in page.text
    assert ctx.store["passkey_challenges"].count_documents({"user_id": account.id}) == 0


@pytest.mark.parametrize("config_overrides", [{}], indirect=True)  # the public URL is an IP address
def test_without_an_rp_id_the_pages_offer_no_passkey(console, dashboard_account):
    someone = console()
    page = someone.get("/console/sign-in")
    assert "data-passkey-options" not in page.text and 'autocomplete="username"' in page.text
    someone.sign_in(dashboard_account)
    security = someone.get(SECURITY)
    assert "Passkeys are not available on this server" in security.text


def test_a_member_sent_to_enrol_adds_a_passkey_then_reaches_the_console(visitor, make_dashboard_account, clock):
    owner = make_dashboard_account(name="Olivia Owner")
    enrol(owner, clock)
    org_id = owner.post(ORGS, json={"name": "Acme"}).json["data"]["id"]
    app = owner.post(APPS, json={"name": "Shop", "organization_id": org_id}).json["data"]
    member = make_dashboard_account(name="Member")
    assert owner.post(f"{ORGS}/{org_id}/members", json={"email": member.email, "role": "member"}).status_code == 201
    assert owner.request("PATCH", f"{ORGS}/{org_id}", json={"require_mfa": True}).status_code == 200

    someone = visitor()
    someone.get("/console/sign-in")
    signed_in = someone.post("/console/sign-in", {"email": member.email, "password": member.password},
                             origin=PUBLIC_URL)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == ENROL_PAGE
    assert 'id="enrol-notice"' in someone.get(ENROL_PAGE).text
    assert someone.get(f"/console/applications/{app['id']}").status_code == 403  # the MFA-required page
    assert add_passkey(someone, SoftAuthenticator()).status_code == 303
    assert someone.get(f"/console/applications/{app['id']}").status_code == 200
    # The next sign-in goes to the console itself: the password, then the passkey's second step.
    again = visitor(None)
    again.get("/console/sign-in")
    step = again.post("/console/sign-in", {"email": member.email, "password": member.password}, origin=PUBLIC_URL)
    assert step.status_code == 200 and "Use a passkey" in step.text
