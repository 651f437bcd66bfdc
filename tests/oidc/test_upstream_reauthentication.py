"""A relying party's demand of a fresh authentication (OIDC Core 3.1.2.1: ``prompt=login``,
``max_age``) when the hosted login signs the user in through a connection
(controlplane/oidc/upstream.py, controlplane/connections/flow.py).

The only authentication is then the upstream provider's, so dropping iamgate's browser
session is not enough.  These tests prove that the demand reaches the provider
(``prompt=login`` with ``max_age=0``, or ``max_age``), that the provider's answer is
taken only when its ID Token's ``auth_time`` shows the demand was met (a sign-in after
the request began; one within ``max_age``; never a missing ``auth_time``), refused in
words and audited otherwise, and that the ``auth_time`` the client's ID token carries is
the provider's, not the moment iamgate's session began, through the MFA step and the
link page too.  An ``oauth2`` connection (GitHub-style: no ID Token, no ``auth_time``)
cannot prove a fresh sign-in: it is not offered for such a request, naming it is
``login_required`` on the client's redirect URI, and its answer to a sign-in that
demanded one is refused before the code is exchanged.

Driven through falcon.testing by the hosted tests' cookie-keeping browser, with the
sign-in tests' local provider (tests/connections/flow/provider.py), whose ID Tokens carry
the ``auth_time`` a test gives them."""
from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from controlplane.connections.flow import REFUSED
from controlplane.connections.idtoken import LEEWAY_SECONDS, IdTokenRejected, check_auth_time
from controlplane.connections.model import ClaimMapping, Connection, Endpoints, secret_box
from shared.ids import new_id
from tests.conftest import bearer
from tests.connections.flow.conftest import REDIRECT as APP_UI_REDIRECT
from tests.connections.flow.conftest import Browser as AppUi
from tests.connections.flow.provider import CLIENT_ID, CLIENT_SECRET, Provider
from tests.mfa.conftest import STEP, mfa_url, rfc6238
from tests.oidc.conftest import REDIRECT_URI, pkce_pair
from tests.oidc.test_hosted import Browser, assert_page, authorize_url, query_of

IDP = "https://idp.example.com"


@pytest.fixture
def config_overrides():
    # The local provider listens on 127.0.0.1.
    return {"webhook_allow_private_targets": True}


@pytest.fixture
def idp():
    """The sign-in tests' local provider: it signs ID Tokens (``id_token_claims`` adds to
    them, a None value removes one) and scripts its answers."""
    running = Provider()
    yield running
    running.close()


def _add_connection(ctx, clock, app, name="acme", **fields):
    """A saved, active ``oidc`` connection: to https://idp.example.com (never called), or
    to ``_add_connection(..., idp=idp)``'s local provider (with its client secret)."""
    now = clock().replace(microsecond=clock().microsecond // 1000 * 1000)
    local = fields.pop("idp", None)
    issuer = IDP if local is None else local.issuer
    endpoints = Endpoints(issuer=issuer, authorization_endpoint=f"{issuer}/authorize", token_endpoint=f"{issuer}/token",
                          userinfo_endpoint=None if local is None else f"{issuer}/userinfo", jwks_uri=f"{issuer}/jwks",
                          iss_parameter_supported=local is not None and local.iss_parameter, fetched_at=now)
    secret = None if local is None else secret_box(ctx.config.secret_key).encrypt(CLIENT_SECRET)
    connection = Connection(
        id=new_id(), application_id=app["_id"], type="oidc", preset=None, name=name, display_name="Acme SSO",
        issuer=issuer, client_id="client-1" if local is None else CLIENT_ID, client_secret_enc=secret,
        scopes=("openid", "email"), claim_mapping=ClaimMapping(), role_mapping=(), linking="none", trusted=False,
        jit=True, auto_update=False, store_tokens=False, email_domains=(), is_active=True, endpoints=endpoints,
        created_at=now, updated_at=now,
    )
    connection = replace(connection, **fields)
    ctx.connections.store.insert(connection)
    return connection


def _authorize_query(rp, **params) -> str:
    query = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": REDIRECT_URI,
             "scope": "openid profile email", "state": "st-1", "nonce": "n-1",
             "code_challenge": pkce_pair()[1], "code_challenge_method": "S256", **params}
    return urlencode(query)


def _oauth2_connection(ctx, clock, app, idp, **fields):
    """A GitHub-style connection to the local provider: OAuth 2.0, its user API, no ID Token."""
    idp.accounts["verified"]["github_id"] = 583231
    endpoints = Endpoints(issuer=idp.issuer, authorization_endpoint=f"{idp.issuer}/authorize",
                          token_endpoint=f"{idp.issuer}/token", userinfo_endpoint=f"{idp.issuer}/user",
                          jwks_uri=None, iss_parameter_supported=idp.iss_parameter, fetched_at=None)
    return _add_connection(ctx, clock, app, name="octo", idp=idp, type="oauth2", scopes=("read:user", "user:email"),
                           display_name="Octo", endpoints=endpoints, **fields)


def _enable_totp(client, clock, app, token) -> str:
    """TOTP confirmed for the user of ``token``; its secret."""
    headers = bearer(token.access_token)
    setup = client.simulate_post(mfa_url(app, token.user["id"], "/totp/setup"), json={}, headers=headers)
    assert setup.status_code == 200, setup.text
    data = setup.json["data"]
    confirm = client.simulate_post(mfa_url(app, token.user["id"], "/totp/confirm"), headers=headers,
                                   json={"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    assert confirm.status_code == 201, confirm.text
    clock.advance(2 * STEP)  # past the step the confirmation spent
    return data["secret"]


def _now(clock) -> int:
    return int(clock().timestamp())


def _through_provider(browser, rp, connection, *, challenge=None, **params):
    """The client's authorize naming ``connection``, the provider (which signs its account
    in at once), and back to iamgate's callback: (what the provider was asked, the page
    or redirect the callback answers)."""
    went = browser.get(authorize_url(rp, connection=connection.name, challenge=challenge, **params))
    assert went.status_code == 302, went.text
    asked = query_of(went)
    back = requests.get(went.headers["location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    return asked, browser.get(back.headers["Location"])


def _client_id_token(ctx, browser, exchange, rp, answer, verifier) -> dict:
    """Consent when asked, then the code exchanged: the claims of the client's ID token."""
    if answer.status_code == 200:
        assert_page(answer, "Allow access?")
        answer = browser.submit(answer, decision="allow")
    tokens = exchange(rp, query_of(answer)["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    return ctx.oidc.tokens.verify_id_token_hint(tokens.json["id_token"])


def _refusals(ctx) -> list[str]:
    return [record["result"]["reason"]
            for record in ctx.store["events"].find({"action": "user.login", "result.status": "failure"})]


def _assert_refused_in_words(ctx, page, app, why: str):
    """The callback's error page, audited, and nobody signed in."""
    assert_page(page, "The sign-in provider&#39;s answer was refused", 400)
    assert why in page.text, page.text
    assert "location" not in page.headers
    assert _refusals(ctx) == ["connection_callback_invalid:auth_time"]
    assert ctx.store["oidc_codes"].count_documents({}) == 0
    assert ctx.users.directory.by_email(app["_id"], "ada@example.com") is None


# ---------------------------------------------------------------- the demand reaches the provider


def test_a_request_for_reauthentication_reaches_the_upstream_connection(ctx, client, clock, hosted_app,
                                                                        oidc_client):
    """OIDC Core 3.1.2.1: ``prompt=login`` and ``max_age`` ask the OP to authenticate the
    End-User again (or within max_age seconds).  When the hosted login signs the user in
    through a connection, the only authentication is the upstream provider's; yet the
    upstream authorization request carried neither ``prompt=login`` nor ``max_age``, so
    the upstream provider's existing SSO session answered silently, and iamgate then
    minted a brand-new V1 session whose ``iat`` became the ID token's ``auth_time`` (now).
    The relying party was told the user just authenticated when nobody did.  (The
    review's test; its body is unchanged.)"""
    rp = oidc_client(hosted_app)
    _add_connection(ctx, clock, hosted_app)
    for extra in ({"prompt": "login"}, {"max_age": "0"}, {"max_age": "60"}):
        response = client.simulate_get("/oidc/authorize",
                                       query_string=_authorize_query(rp, connection="acme", **extra))
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(f"{IDP}/authorize?"), location
        upstream = parse_qs(urlsplit(location).query)
        asked_again = upstream.get("prompt") == ["login"] or "max_age" in upstream
        assert asked_again, f"{extra}: the upstream request does not ask for reauthentication: {upstream}"


@pytest.mark.parametrize(("demand", "asked", "stored"), [
    ({}, {}, (False, None)),
    ({"prompt": "login"}, {"prompt": "login", "max_age": "0"}, (True, None)),
    ({"max_age": "0"}, {"prompt": "login", "max_age": "0"}, (True, None)),
    ({"max_age": "60"}, {"max_age": "60"}, (False, 60)),
    ({"prompt": "login", "max_age": "60"}, {"prompt": "login", "max_age": "0"}, (True, 60)),
], ids=["none", "prompt-login", "max-age-0", "max-age-60", "both"])
def test_the_provider_is_asked_for_exactly_the_demand_and_the_state_keeps_it(ctx, client, clock, hosted_app,
                                                                             oidc_client, demand, asked, stored):
    """``max_age=0`` is ``prompt=login`` (3.1.2.1); a new sign-in is also asked as
    ``max_age=0``, which makes ``auth_time`` REQUIRED in the provider's ID Token."""
    rp = oidc_client(hosted_app)
    _add_connection(ctx, clock, hosted_app)
    response = client.simulate_get("/oidc/authorize", query_string=_authorize_query(rp, connection="acme", **demand))
    assert response.status_code == 302, response.text
    upstream = {name: values[0] for name, values in parse_qs(urlsplit(response.headers["location"]).query).items()}
    assert {name: upstream[name] for name in ("prompt", "max_age") if name in upstream} == asked
    [state] = ctx.store["connection_states"].find()
    assert (state["prompt_login"], state["max_age"]) == stored


# ---------------------------------------------------------------- prompt=login


@pytest.mark.parametrize("demand", [{"prompt": "login"}, {"max_age": "0"}], ids=["prompt-login", "max-age-0"])
def test_a_new_sign_in_at_the_provider_is_the_auth_time_the_client_gets(ctx, client, clock, hosted_app, oidc_client,
                                                                        idp, exchange, demand):
    """The provider signed the user in again as the request began (within the leeway):
    the client's ID token says when, and that is the provider's time, not the moment
    iamgate's own session began a little later."""
    rp = oidc_client(hosted_app)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp)
    upstream_time = _now(clock) - 5
    idp.id_token_claims = {"auth_time": upstream_time}
    clock.advance(3)  # iamgate's session begins after the provider's sign-in
    verifier, challenge = pkce_pair()
    browser = Browser(client)
    asked, answer = _through_provider(browser, rp, connection, challenge=challenge, **demand)
    assert (asked["prompt"], asked["max_age"]) == ("login", "0")
    claims = _client_id_token(ctx, browser, exchange, rp, answer, verifier)
    assert claims["auth_time"] == upstream_time and claims["amr"] == ["fed"]
    [session] = ctx.store["oidc_browser_sessions"].find()
    assert session["auth_time"] == upstream_time
    assert _refusals(ctx) == []


@pytest.mark.parametrize("demand", [{"prompt": "login"}, {"max_age": "0"}], ids=["prompt-login", "max-age-0"])
def test_prompt_login_answered_by_the_providers_old_session_is_refused(ctx, client, clock, hosted_app, oidc_client,
                                                                       idp, demand):
    """The provider's session answered without signing the user in again (its
    ``auth_time`` an hour old, before this request began): refused in words, audited,
    and the client gets no code."""
    rp = oidc_client(hosted_app)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp)
    idp.id_token_claims = {"auth_time": _now(clock) - 3600}
    _, page = _through_provider(Browser(client), rp, connection, **demand)
    _assert_refused_in_words(ctx, page, hosted_app, "did not sign the user in again")


# ---------------------------------------------------------------- max_age


def test_max_age_met_by_the_providers_sign_in_is_taken_and_its_auth_time_kept(ctx, client, clock, hosted_app,
                                                                              oidc_client, idp, exchange):
    """``max_age=300`` and a provider sign-in 2 minutes old: taken, and the client's ID
    token says 2 minutes ago.  The browser session keeps that time: a later request of
    the same browser with ``max_age=60`` goes to the provider again, one with
    ``max_age=300`` gets its code at once."""
    rp = oidc_client(hosted_app)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp)
    upstream_time = _now(clock) - 120
    idp.id_token_claims = {"auth_time": upstream_time}
    verifier, challenge = pkce_pair()
    browser = Browser(client)
    asked, answer = _through_provider(browser, rp, connection, challenge=challenge, max_age="300")
    assert asked["max_age"] == "300" and "prompt" not in asked
    claims = _client_id_token(ctx, browser, exchange, rp, answer, verifier)
    assert claims["auth_time"] == upstream_time

    stricter = browser.get(authorize_url(rp, connection=connection.name, max_age="60"))
    assert stricter.headers["location"].startswith(f"{idp.issuer}/authorize?"), stricter.headers
    assert query_of(stricter)["max_age"] == "60"
    looser = browser.get(authorize_url(rp, connection=connection.name, max_age="300"))
    assert query_of(looser)["code"] and looser.headers["location"].startswith(REDIRECT_URI)


@pytest.mark.parametrize("age", [1000, 300 + LEEWAY_SECONDS + 5], ids=["long-ago", "just-past-the-leeway"])
def test_max_age_not_met_by_the_providers_sign_in_is_refused(ctx, client, clock, hosted_app, oidc_client, idp, age):
    rp = oidc_client(hosted_app)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp)
    idp.id_token_claims = {"auth_time": _now(clock) - age}
    _, page = _through_provider(Browser(client), rp, connection, max_age="300")
    _assert_refused_in_words(ctx, page, hosted_app, "more than max_age (300 s) ago")


@pytest.mark.parametrize("demand", [{"prompt": "login"}, {"max_age": "300"}], ids=["prompt-login", "max-age"])
def test_a_demand_answered_without_auth_time_is_refused(ctx, client, clock, hosted_app, oidc_client, idp, demand):
    """OIDC Core 3.1.2.1: with ``max_age`` (which a new sign-in is asked as, too) the ID
    Token's ``auth_time`` is REQUIRED; without it nothing shows the demand was met."""
    rp = oidc_client(hosted_app)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp)
    idp.id_token_claims = {"auth_time": None}
    _, page = _through_provider(Browser(client), rp, connection, **demand)
    _assert_refused_in_words(ctx, page, hosted_app, "the id_token has no auth_time")


# ---------------------------------------------------------------- auth_time without a demand, after MFA, after a link


def test_without_a_demand_the_providers_auth_time_is_still_the_sign_ins(ctx, client, clock, hosted_app, oidc_client,
                                                                        idp, exchange):
    """A provider session three days old signs the user in here without a demand; the
    client's ID token says three days ago, as it is.  A provider that gives no
    ``auth_time`` leaves iamgate's own sign-in time."""
    rp = oidc_client(hosted_app)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp)
    upstream_time = _now(clock) - 3 * 86400
    idp.id_token_claims = {"auth_time": upstream_time}
    verifier, challenge = pkce_pair()
    browser = Browser(client)
    _, answer = _through_provider(browser, rp, connection, challenge=challenge)
    assert _client_id_token(ctx, browser, exchange, rp, answer, verifier)["auth_time"] == upstream_time

    idp.id_token_claims = {}
    clock.advance(10)
    verifier, challenge = pkce_pair()
    browser = Browser(client)
    _, answer = _through_provider(browser, rp, connection, challenge=challenge)
    assert _client_id_token(ctx, browser, exchange, rp, answer, verifier)["auth_time"] == _now(clock)


def test_the_providers_auth_time_survives_the_mfa_step(ctx, client, clock, hosted_app, oidc_client, idp,
                                                        make_user_token):
    """The second factor answered here does not make the sign-in newer than its first
    factor, the provider's."""
    rp = oidc_client(hosted_app)
    token = make_user_token(hosted_app, email="ada@example.com")
    ctx.store["users"].update_one({"_id": token.user["id"]}, {"$set": {"email_verified": True}})
    secret = _enable_totp(client, clock, hosted_app, token)
    connection = _add_connection(ctx, clock, hosted_app, idp=idp, linking="trusted_email", trusted=True)
    upstream_time = _now(clock) - 10
    idp.id_token_claims = {"auth_time": upstream_time}
    browser = Browser(client)
    _, page = _through_provider(browser, rp, connection, prompt="login")
    assert_page(page, "Two-step verification")
    clock.advance(20)
    consent = browser.submit(page, code=rfc6238(secret, clock()))
    assert_page(consent, "Allow access?")
    assert query_of(browser.submit(consent, decision="allow"))["code"]
    [code] = ctx.store["oidc_codes"].find()
    assert code["auth_time"] == upstream_time and code["amr"] == ["fed", "otp", "mfa"]


def test_the_providers_auth_time_survives_the_link_page(ctx, client, clock, hosted_app, oidc_client, idp, make_user):
    rp = oidc_client(hosted_app)
    existing = make_user(hosted_app, email="ada@example.com")
    connection = _add_connection(ctx, clock, hosted_app, idp=idp, linking="verify")
    upstream_time = _now(clock) - 10
    idp.id_token_claims = {"auth_time": upstream_time}
    browser = Browser(client)
    _, page = _through_provider(browser, rp, connection, prompt="login")
    assert_page(page, "Link your account")
    clock.advance(30)
    consent = browser.submit(page, password=existing["password"])
    assert_page(consent, "Allow access?")
    assert query_of(browser.submit(consent, decision="allow"))["code"]
    [code] = ctx.store["oidc_codes"].find()
    assert code["auth_time"] == upstream_time


# ---------------------------------------------------------------- oauth2 connections cannot prove a fresh sign-in


def _buttons(page) -> list[str]:
    return re.findall(r'<button type="submit" name="connection" value="[^"]+" class="secondary">([^<]+)</button>',
                      page.text)


@pytest.mark.parametrize("demand", [{"prompt": "login"}, {"max_age": "0"}, {"max_age": "600"}])
def test_a_demand_hides_the_oauth2_connections_button(ctx, client, clock, hosted_app, oidc_client, idp, demand):
    rp = oidc_client(hosted_app)
    _add_connection(ctx, clock, hosted_app, idp=idp, display_name="Acme SSO")
    clock.advance(1)  # the buttons come in creation order
    _oauth2_connection(ctx, clock, hosted_app, idp)
    assert _buttons(Browser(client).get(authorize_url(rp))) == ["Continue with Acme SSO", "Continue with Octo"]
    page = Browser(client).get(authorize_url(rp, **demand))
    assert_page(page, "Sign in")
    assert _buttons(page) == ["Continue with Acme SSO"]


@pytest.mark.parametrize("demand", [{"prompt": "login"}, {"max_age": "60"}], ids=["prompt-login", "max-age"])
def test_naming_an_oauth2_connection_with_a_demand_is_login_required(ctx, client, clock, hosted_app, oidc_client,
                                                                     idp, demand):
    """OIDC Core 3.1.2.1: an OP that cannot reauthenticate the End-User MUST return an
    error, typically ``login_required``; by ``connection=``, by a ``login_hint`` of its
    domain, or by an email of its domain typed on the login page.  The request is spent."""
    rp = oidc_client(hosted_app)
    connection = _oauth2_connection(ctx, clock, hosted_app, idp, email_domains=("octo.test",))
    for params in ({"connection": connection.name}, {"login_hint": "ada@octo.test"}):
        answer = query_of(Browser(client).get(authorize_url(rp, **params, **demand)))
        assert (answer["error"], answer["state"]) == ("login_required", "st-1"), answer
        assert "cannot prove" in answer["error_description"]

    browser = Browser(client)
    page = browser.get(authorize_url(rp, **demand))
    assert_page(page, "Sign in")
    refused = browser.submit(page, email="ada@octo.test", password="")
    assert refused.headers["location"].startswith(REDIRECT_URI)
    assert query_of(refused)["error"] == "login_required"
    spent = browser.submit(page, email="ada@octo.test", password="")
    assert_page(spent, "This sign-in link is not valid", 400)
    assert "expired or was already used" in spent.text
    assert ctx.store["connection_states"].count_documents({}) == 0 and idp.codes == {}


def test_without_a_demand_an_oauth2_connection_signs_in_as_before(ctx, client, clock, hosted_app, oidc_client, idp):
    rp = oidc_client(hosted_app)
    connection = _oauth2_connection(ctx, clock, hosted_app, idp)
    _, consent = _through_provider(Browser(client), rp, connection)
    assert_page(consent, "Allow access?")


def test_an_oauth2_answer_to_a_sign_in_with_a_demand_is_refused_before_the_code_is_used(ctx, clock, hosted_app,
                                                                                        idp):
    """The flow's own guard, under the hosted login's: whoever starts a sign-in with a
    demand through an ``oauth2`` connection gets its answer refused, and its code is never
    exchanged."""
    connection = _oauth2_connection(ctx, clock, hosted_app, idp)
    flow = ctx.connection_sign_in.flow
    url = flow.start(hosted_app, connection.id, redirect_uri=f"{REDIRECT_URI}/upstream", binding="b" * 32,
                     prompt_login=True)
    assert "prompt=" not in url and "max_age=" not in url  # OAuth 2.0 has neither
    back = requests.get(url, allow_redirects=False, timeout=10)
    params = {name: values[0] for name, values in parse_qs(urlsplit(back.headers["Location"]).query).items()}
    result = flow.finish(hosted_app, params=params, binding="b" * 32)
    assert result.outcome == REFUSED and result.error.details["reason"] == "auth_time"
    assert idp.token_requests == []
    assert _refusals(ctx) == ["connection_callback_invalid:auth_time"]


# ---------------------------------------------------------------- a browser session that proved no time


@pytest.mark.parametrize("kind", ["oauth2", "oidc-without-auth_time"])
def test_max_age_is_not_met_by_a_browser_session_from_a_connection_that_never_said_when(
        ctx, client, clock, hosted_app, oidc_client, idp, exchange, kind):
    """A sign-in through a connection whose provider does not say when the user
    authenticated (``oauth2``; an ``oidc`` ID Token without ``auth_time``), made with no
    demand, is taken; but its browser session proved no time (its ``auth_time`` is only
    when iamgate's session began, while the provider may have answered from a session
    months old), so a ``max_age`` request a minute later does not get a code from it:
    the login page asks again (where the connection meets the demand or is refused).
    Without this, one more click would undo the step-up above."""
    rp = oidc_client(hosted_app)
    if kind == "oauth2":
        connection = _oauth2_connection(ctx, clock, hosted_app, idp)
    else:
        connection = _add_connection(ctx, clock, hosted_app, idp=idp)
        idp.id_token_claims = {"auth_time": None}
    verifier, challenge = pkce_pair()
    browser = Browser(client)
    _, answer = _through_provider(browser, rp, connection, challenge=challenge)  # no demand: taken
    _client_id_token(ctx, browser, exchange, rp, answer, verifier)
    assert ctx.store["oidc_browser_sessions"].find_one({})["auth_proven"] is False

    clock.advance(60)
    assert "code" in query_of(browser.get(authorize_url(rp)))  # no demand: the session serves
    assert_page(browser.get(authorize_url(rp, max_age="600")), "Sign in")  # a demand: it does not


def test_a_password_sign_ins_session_meets_a_later_max_age(ctx, client, clock, hosted_app, oidc_client, make_user):
    """The other side: a factor checked here proves the sign-in's own time."""
    rp = oidc_client(hosted_app)
    person = make_user(hosted_app)
    browser = Browser(client)
    consent = browser.submit(browser.get(authorize_url(rp)), email=person["email"], password=person["password"])
    browser.submit(consent, decision="allow")
    assert ctx.store["oidc_browser_sessions"].find_one({})["auth_proven"] is True
    clock.advance(60)
    assert "code" in query_of(browser.get(authorize_url(rp, max_age="600")))


@pytest.mark.parametrize("kind", ["oauth2", "oidc-without-auth_time", "oidc-with-auth_time"])
def test_the_json_modes_max_age_and_a_session_started_through_a_connections_api(
        ctx, client, clock, hosted_app, oidc_client, idp, authorize, exchange, kind):
    """The JSON mode (a bearer of the application's user) measures ``max_age`` from the
    V1 session's sign-in. A session started by the application's own connection sign-in
    (``POST V1/auth/connections/.../callback``) signed in when its provider's ID Token
    says, when earlier; one whose provider did not say proved no time, and any
    ``max_age`` is ``login_required`` for it (without one, a code as ever)."""
    app = ctx.applications.update(hosted_app["_id"], {"oauth_redirect_uris": [APP_UI_REDIRECT]})
    rp = oidc_client(app)
    connection = _oauth2_connection(ctx, clock, app, idp) if kind == "oauth2" else \
        _add_connection(ctx, clock, app, idp=idp)
    given = _now(clock) - 120
    if kind != "oauth2":
        idp.id_token_claims = {"auth_time": given if kind == "oidc-with-auth_time" else None}
    signed_in = AppUi(client, app).sign_in(connection.id)
    assert signed_in.status_code == 200, signed_in.text
    user = SimpleNamespace(access_token=signed_in.json["data"]["access_token"])

    verifier, challenge = pkce_pair()
    answered = authorize(user, rp, challenge=challenge, max_age="600")
    if kind == "oidc-with-auth_time":
        assert answered.status_code == 200, answered.text
        tokens = exchange(rp, answered.json["code"], verifier)
        assert ctx.oidc.tokens.verify_id_token_hint(tokens.json["id_token"])["auth_time"] == given
        assert authorize(user, rp, max_age="60").json["error"] == "login_required"  # 120 s ago
    else:
        assert answered.status_code == 400 and answered.json["error"] == "login_required", answered.text
        assert authorize(user, rp).status_code == 200


# ---------------------------------------------------------------- check_auth_time (OIDC Core 3.1.3.7, step 13)


def test_check_auth_time_bounds(clock):
    now = clock().replace(microsecond=0)
    started = now - timedelta(seconds=200)
    at = int(now.timestamp())

    def check(auth_time, **demand):
        return check_auth_time({} if auth_time is None else {"auth_time": auth_time}, now=now, **demand)

    assert check(None) is None and check("yesterday") is None  # nothing demanded: only read
    assert check(at + 3600) == at  # never later than now
    assert check(at - 200 - LEEWAY_SECONDS, not_before=started) == at - 200 - LEEWAY_SECONDS
    assert check(at - 300 - LEEWAY_SECONDS, max_age=300) == at - 300 - LEEWAY_SECONDS
    assert check(at + LEEWAY_SECONDS, max_age=300) == at
    for auth_time, demand in ((None, {"max_age": 300}), ("now", {"not_before": started}), (True, {"max_age": 1}),
                              (float("nan"), {"max_age": 300}), (float("inf"), {"not_before": started}),
                              (at - 201 - LEEWAY_SECONDS, {"not_before": started}),
                              (at - 301 - LEEWAY_SECONDS, {"max_age": 300}),
                              (at + LEEWAY_SECONDS + 1, {"max_age": 300})):
        with pytest.raises(IdTokenRejected):
            check(auth_time, **demand)

