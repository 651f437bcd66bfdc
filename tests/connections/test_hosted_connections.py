"""The hosted login's sign-in through a connection (controlplane/oidc/upstream.py), over real
HTTP (the test's control plane served by ``live_server``, a ``requests`` session as the
browser): a "Continue with ..." button per active connection, an email whose domain a
connection claims going to it, ``connection`` and ``login_hint`` at /oidc/authorize, the
binding cookie, and the callback.  The journeys through a real provider (panva's
oidc-provider, tests/connections/upstream.py) run the whole way: provider login, back to
the callback, consent, the code, and the token exchange."""
from __future__ import annotations

import html
import re
from dataclasses import replace
from urllib.parse import parse_qsl, urlsplit

import pyotp
import pytest
import requests

from tests.conftest import bearer
from tests.connections.upstream import callback_url, provider_login, redirect_params
from tests.mfa.conftest import STEP, mfa_url
from tests.oidc.conftest import pkce_pair

RP_CALLBACK = "https://rp.example.com/callback"  # the relying party's; never opened


@pytest.fixture
def config_overrides(live_url):
    # The issuer and the callback URL are the address the client uses; the provider is on loopback.
    return {"public_url": live_url, "webhook_allow_private_targets": True}


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, redirect_uris=[RP_CALLBACK])


def authorize_url(live_url, rp, **params) -> str:
    query = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": RP_CALLBACK,
             "scope": "openid email profile", "state": "rp-state", "nonce": "rp-nonce",
             "code_challenge": pkce_pair()[1], "code_challenge_method": "S256", **params}
    return requests.Request("GET", f"{live_url}/oidc/authorize", params=query).prepare().url


def hidden_fields(page: requests.Response, form: int = 0) -> dict:
    text = page.text.split("</form>")[form]
    return dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', text))


def form_action(page: requests.Response, live_url: str, form: int = 0) -> str:
    actions = re.findall(r'<form method="post" action="([^"]+)">', page.text)
    return live_url + html.unescape(actions[form])


def location_query(response: requests.Response) -> dict:
    assert response.status_code == 302, f"{response.status_code}: {response.text[:800]}"
    return dict(parse_qsl(urlsplit(response.headers["Location"]).query))


# ---------------------------------------------------------------- buttons and routing (no provider needed)


def test_the_login_page_has_a_button_per_active_connection(live_server, clock, hosted_app, rp, add_connection):
    for name, display_name, active in (("acme", "Acme SSO", True), ("old", "Retired IdP", False),
                                       ("b", "Beta <Corp>", True)):
        add_connection(hosted_app, name=name, display_name=display_name, is_active=active)
        clock.advance(1)  # the buttons come in creation order
    page = requests.get(authorize_url(live_server, rp), timeout=10)
    assert page.status_code == 200
    buttons = re.findall(r'<button type="submit" name="connection" value="([^"]+)" class="secondary">([^<]+)</button>',
                         page.text)
    assert [label for _, label in buttons] == ["Continue with Acme SSO", "Continue with Beta &lt;Corp&gt;"]
    assert "Retired IdP" not in page.text
    # A button's post answers a redirect to the provider, which form-action must allow.
    assert "form-action 'self' https://rp.example.com https://idp.example.com;" in \
        page.headers["Content-Security-Policy"]
    assert 'id="password" name="password" type="password" autocomplete="current-password" required' in page.text


def test_a_login_page_without_connections_has_no_buttons(live_server, hosted_app, rp):
    page = requests.get(authorize_url(live_server, rp), timeout=10)
    assert page.status_code == 200 and 'name="connection"' not in page.text and "Continue with" not in page.text


@pytest.mark.parametrize("sends_iss", [True, False], ids=["iss", "no-iss"])
def test_a_button_sends_the_browser_to_the_provider_with_a_binding_cookie(live_server, hosted_app, rp, add_connection,
                                                                          sends_iss):
    """The redirect URI: the application's callback for a provider that sends RFC 9207's
    iss, the connection's own for one that does not (the mix-up defence, RFC 9700 4.4.2)."""
    connection = add_connection(hosted_app, name="acme", display_name="Acme SSO")
    if sends_iss:
        connection = add_connection(hosted_app, name="acme2", display_name="Acme SSO 2",
                                    endpoints=replace(connection.endpoints, iss_parameter_supported=True))
    browser = requests.Session()
    page = browser.get(authorize_url(live_server, rp, login_hint="ada@example.com"), timeout=10)
    went = browser.post(form_action(page, live_server), data={**hidden_fields(page), "connection": connection.id},
                        allow_redirects=False, timeout=10)
    assert went.status_code == 302
    assert went.headers["Location"].startswith("https://idp.example.com/authorize?")
    upstream = location_query(went)
    assert upstream["client_id"] == connection.client_id and upstream["code_challenge_method"] == "S256"
    assert upstream["redirect_uri"] == callback_url(live_server, hosted_app, None if sends_iss else connection.id)
    assert upstream["login_hint"] == "ada@example.com" and upstream["state"] and upstream["nonce"]
    cookie = went.headers["Set-Cookie"]
    assert cookie.startswith("iamgate_connection=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Path=/oidc/connections" in cookie and "Max-Age=600" in cookie


def test_an_email_of_a_claimed_domain_goes_to_its_connection(live_server, hosted_app, rp, add_connection):
    add_connection(hosted_app, name="acme", display_name="Acme SSO", email_domains=("acme.test",))
    browser = requests.Session()
    page = browser.get(authorize_url(live_server, rp), timeout=10)
    # With a connection that claims domains, the password may be left empty (and the page says so).
    assert 'autocomplete="current-password" maxlength="128" aria-describedby="password-hint"' in page.text
    went = browser.post(form_action(page, live_server, form=1),
                        data={**hidden_fields(page, form=1), "email": "Ada@ACME.test", "password": ""},
                        allow_redirects=False, timeout=10)
    assert went.status_code == 302 and location_query(went)["login_hint"] == "Ada@ACME.test"

    page = browser.get(authorize_url(live_server, rp), timeout=10)
    again = browser.post(form_action(page, live_server, form=1),
                         data={**hidden_fields(page, form=1), "email": "ada@elsewhere.test", "password": ""},
                         timeout=10)
    assert again.status_code == 400 and "Enter your password." in again.text
    assert 'value="ada@elsewhere.test"' in again.text


def test_authorize_with_connection_or_a_claimed_login_hint_skips_the_page(live_server, hosted_app, rp,
                                                                          add_connection):
    connection = add_connection(hosted_app, name="acme", display_name="Acme SSO", email_domains=("acme.test",))
    for params in ({"connection": "acme"}, {"connection": connection.id}, {"login_hint": "grace@acme.test"}):
        went = requests.get(authorize_url(live_server, rp, **params), allow_redirects=False, timeout=10)
        assert went.status_code == 302, params
        assert went.headers["Location"].startswith("https://idp.example.com/authorize?"), params
        assert "iamgate_connection=" in went.headers["Set-Cookie"]
    assert location_query(went)["login_hint"] == "grace@acme.test"

    page = requests.get(authorize_url(live_server, rp, login_hint="grace@other.test"), timeout=10)
    assert page.status_code == 200 and 'value="grace@other.test"' in page.text


def test_an_unknown_or_inactive_connection_is_invalid_request_to_the_client(live_server, hosted_app, rp,
                                                                            add_connection):
    add_connection(hosted_app, name="old", display_name="Retired", is_active=False)
    for name in ("nope", "old"):
        refused = requests.get(authorize_url(live_server, rp, connection=name), allow_redirects=False, timeout=10)
        answer = location_query(refused)
        assert refused.headers["Location"].startswith(RP_CALLBACK)
        assert answer["error"] == "invalid_request" and answer["state"] == "rp-state"


def test_a_callback_without_its_binding_cookie_is_refused_in_words(live_server, hosted_app, rp, add_connection):
    connection = add_connection(hosted_app, name="acme", display_name="Acme SSO")
    browser = requests.Session()
    went = browser.get(authorize_url(live_server, rp, connection=connection.name), allow_redirects=False, timeout=10)
    state = location_query(went)["state"]
    # Another browser (no binding cookie) brings the provider's answer back.
    stranger = requests.get(callback_url(live_server, hosted_app), params={"code": "c", "state": state}, timeout=10)
    assert stranger.status_code == 400 and "This sign-in has expired" in stranger.text


def test_an_answer_at_another_redirect_uri_than_its_sign_ins_is_refused(live_server, hosted_app, rp,
                                                                        add_connection):
    """The mix-up defence without iss (RFC 9700 4.4.2): providers that send no iss send
    the browser back to their connection's own callback, so an answer to connection A's
    state arriving at B's callback (B's provider, sent A's authorization request by A's
    provider run by an attacker), or at the application's callback, is refused before its
    code goes to any token endpoint."""
    a = add_connection(hosted_app, name="acme", display_name="Acme SSO")
    b = add_connection(hosted_app, name="beta", display_name="Beta SSO")
    for elsewhere in (callback_url(live_server, hosted_app, b.id), callback_url(live_server, hosted_app)):
        browser = requests.Session()
        went = browser.get(authorize_url(live_server, rp, connection=a.name), allow_redirects=False, timeout=10)
        upstream = location_query(went)
        assert upstream["redirect_uri"] == callback_url(live_server, hosted_app, a.id)
        refused = browser.get(elsewhere, params={"code": "c", "state": upstream["state"]}, timeout=10)
        assert refused.status_code == 400, refused.text[:500]
        assert "another redirect URI than the one this sign-in sent the browser to" in refused.text
        # The state is spent: the answer does not go through at A's own callback afterwards.
        again = browser.get(callback_url(live_server, hosted_app, a.id),
                            params={"code": "c", "state": upstream["state"]}, timeout=10)
        assert again.status_code == 400 and "This sign-in has expired" in again.text


def test_a_sign_in_sent_to_the_applications_callback_needs_iss_beside_other_connections(
        ctx, live_server, hosted_app, rp, add_connection):
    """A sign-in started before connections had callbacks of their own (its state names
    the application's callback) from a provider that sends no iss: refused when another
    connection could have sent the answer, since nothing says which did."""
    a = add_connection(hosted_app, name="acme", display_name="Acme SSO")
    add_connection(hosted_app, name="beta", display_name="Beta SSO")
    browser = requests.Session()
    went = browser.get(authorize_url(live_server, rp, connection=a.name), allow_redirects=False, timeout=10)
    state = location_query(went)["state"]
    ctx.store["connection_states"].update_many({}, {"$set": {"redirect_uri": callback_url(live_server, hosted_app)}})
    refused = browser.get(callback_url(live_server, hosted_app), params={"code": "c", "state": state}, timeout=10)
    assert refused.status_code == 400 and "has no iss parameter" in refused.text


# ---------------------------------------------------------------- through a real provider


def through_provider(browser, live_url, rp, upstream, login: str, **params) -> requests.Response:
    """The browser from the client's authorize to the provider's login (signed in as
    ``login``) and back to the callback; returns the callback's answer."""
    went = browser.get(authorize_url(live_url, rp, connection="local", **params), allow_redirects=False, timeout=10)
    assert went.status_code == 302 and went.headers["Location"].startswith(upstream.issuer), went.text[:500]
    back = provider_login(browser, upstream, went.headers["Location"], login)
    assert back.headers["Location"].startswith(f"{live_url}/oidc/connections/"), back.headers["Location"]
    assert redirect_params(back)["iss"] == upstream.issuer
    return browser.get(back.headers["Location"], allow_redirects=False, timeout=10)


def allow_and_exchange(browser, live_url, rp, consent_page) -> dict:
    """Allow on the consent page, then the client's code exchange; the ID token's claims."""
    assert consent_page.status_code == 200 and "Allow access?" in consent_page.text, consent_page.text[:800]
    done = browser.post(form_action(consent_page, live_url), data={**hidden_fields(consent_page), "decision": "allow"},
                        allow_redirects=False, timeout=10)
    answer = location_query(done)
    assert done.headers["Location"].startswith(RP_CALLBACK) and answer["state"] == "rp-state"
    return answer


def test_a_first_sign_in_through_the_provider_creates_the_user_and_gets_the_client_a_code(
        live_server, ctx, hosted_app, rp, local_idp):
    upstream, connection = local_idp(jit=True)
    browser = requests.Session()
    callback = through_provider(browser, live_server, rp, upstream, "verified")
    assert "iamgate_connection=;" in callback.headers.get("Set-Cookie", "") or \
        'iamgate_connection=""' in callback.headers.get("Set-Cookie", "")
    answer = allow_and_exchange(browser, live_server, rp, callback)

    verifier, challenge = pkce_pair()
    assert answer["code"]
    user = ctx.users.directory.by_email(hosted_app["_id"], "ada@example.com")
    assert user is not None and user["name"] == "Ada Lovelace"
    # A second authorize from this browser is signed in already: straight back with a code.
    again = browser.get(authorize_url(live_server, rp, code_challenge=challenge), allow_redirects=False, timeout=10)
    assert again.headers["Location"].startswith(RP_CALLBACK) and location_query(again)["code"]
    token = requests.post(f"{live_server}/oidc/token", auth=(rp["client_id"], rp["client_secret"]), timeout=10, data={
        "grant_type": "authorization_code", "code": location_query(again)["code"], "redirect_uri": RP_CALLBACK,
        "code_verifier": verifier})
    assert token.status_code == 200, token.text
    claims = ctx.oidc.tokens.verify_id_token_hint(token.json()["id_token"])
    assert claims["sub"] == user["_id"] and claims["amr"] == ["fed"]


def test_verify_linking_asks_for_the_accounts_password_on_the_link_page(live_server, ctx, hosted_app, rp, local_idp,
                                                                       make_user):
    existing = make_user(hosted_app, email="ada@example.com")
    upstream, connection = local_idp(linking="verify")
    browser = requests.Session()
    link_page = through_provider(browser, live_server, rp, upstream, "verified")
    assert link_page.status_code == 200 and "Link your account" in link_page.text, link_page.text[:800]
    assert "<strong>ada@example.com</strong>" in link_page.text and "Local IdP" in link_page.text

    wrong = browser.post(form_action(link_page, live_server), data={**hidden_fields(link_page), "password": "nope"},
                         timeout=10)
    assert wrong.status_code == 401 and "Link your account" in wrong.text
    consent = browser.post(form_action(wrong, live_server),
                           data={**hidden_fields(wrong), "password": existing["password"]}, allow_redirects=False,
                           timeout=10)
    allow_and_exchange(browser, live_server, rp, consent)
    identities = ctx.connection_sign_in.identities.list(hosted_app["_id"], existing["id"])
    assert [(i["connection_id"], i["sub"]) for i in identities] == [(connection.id, "verified")]


def test_the_link_page_takes_a_code_mailed_to_the_account_and_cancel_answers_the_client(
        live_server, ctx, hosted_app, rp, local_idp, make_user, outbox):
    existing = make_user(hosted_app, email="ada@example.com")
    upstream, _ = local_idp(linking="verify")
    browser = requests.Session()
    link_page = through_provider(browser, live_server, rp, upstream, "verified")
    outbox.clear()
    code_page = browser.post(form_action(link_page, live_server),
                             data={**hidden_fields(link_page), "decision": "send_code"}, timeout=10)
    assert code_page.status_code == 200 and "Code from the email to ada@example.com" in code_page.text
    [mail] = outbox
    assert mail.to == "ada@example.com"
    code = re.search(r"\b(\d{6})\b", mail.body).group(1)
    consent = browser.post(form_action(code_page, live_server), data={**hidden_fields(code_page), "code": code},
                           allow_redirects=False, timeout=10)
    allow_and_exchange(browser, live_server, rp, consent)
    assert len(ctx.connection_sign_in.identities.list(hosted_app["_id"], existing["id"])) == 1

    # Another sign-in that stops at the link page: Cancel is access_denied to the client.
    other = make_user(hosted_app, email="grace@example.com")
    browser = requests.Session()
    link_page = through_provider(browser, live_server, rp, upstream, "changer")
    cancelled = browser.post(form_action(link_page, live_server), data={**hidden_fields(link_page),
                                                                        "decision": "cancel"},
                             allow_redirects=False, timeout=10)
    answer = location_query(cancelled)
    assert (answer["error"], answer["state"]) == ("access_denied", "rp-state")
    assert ctx.connection_sign_in.identities.list(hosted_app["_id"], other["id"]) == []


def test_a_user_with_a_second_factor_gets_the_mfa_step_after_the_provider(live_server, ctx, clock, client, hosted_app,
                                                                          rp, local_idp, make_user, login):
    user = make_user(hosted_app, email="ada@example.com")
    ctx.store["users"].update_one({"_id": user["id"]}, {"$set": {"email_verified": True}})
    pair = login(hosted_app, user["email"], user["password"])
    setup = client.simulate_post(mfa_url(hosted_app, user["id"], "/totp/setup"), json={},
                                 headers=bearer(pair["access_token"]))
    totp = pyotp.TOTP(setup.json["data"]["secret"])
    confirmed = client.simulate_post(mfa_url(hosted_app, user["id"], "/totp/confirm"),
                                     headers=bearer(pair["access_token"]),
                                     json={"method_id": setup.json["data"]["method_id"], "code": totp.at(clock())})
    assert confirmed.status_code == 201, confirmed.text
    clock.advance(2 * STEP)
    upstream, _ = local_idp(linking="trusted_email", trusted=True)

    browser = requests.Session()
    mfa_page = through_provider(browser, live_server, rp, upstream, "verified")
    assert mfa_page.status_code == 200 and "Two-step verification" in mfa_page.text, mfa_page.text[:500]
    consent = browser.post(form_action(mfa_page, live_server),
                           data={**hidden_fields(mfa_page), "code": totp.at(clock())}, allow_redirects=False,
                           timeout=10)
    answer = allow_and_exchange(browser, live_server, rp, consent)
    assert answer["code"]
    code = ctx.store["oidc_codes"].find_one({"user_id": user["id"]})
    assert code["amr"] == ["fed", "otp", "mfa"]  # the provider, then the one-time code


def test_an_existing_email_under_linking_none_is_an_error_page_in_words(live_server, hosted_app, rp, local_idp,
                                                                       make_user):
    make_user(hosted_app, email="ada@example.com")
    upstream, _ = local_idp(linking="none")
    refused = through_provider(requests.Session(), live_server, rp, upstream, "verified")
    assert refused.status_code == 409 and "This email already has an account" in refused.text
