"""Signing in through a connection from an application's own UI, against a local
provider: the whole flow, and every way its answer can be forged, replayed or mixed up
(state, RFC 9207 iss, the ID Token's checks, the mix-up between two providers)."""
from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from controlplane.connections.jwks import LIFETIME as JWKS_LIFETIME
from tests.conftest import assert_error, events_of, in_parallel
from tests.connections.flow.conftest import REDIRECT, Browser
from tests.connections.flow.provider import CLIENT_ID
from tests.mfa.conftest import STEP, rfc6238
from tests.plugins.users import users_url


@pytest.fixture
def connection(idp_app, provider, add_connection):
    return add_connection(idp_app, provider)


def test_sign_in_creates_the_user_and_answers_the_password_logins_token_pair(client, ctx, idp_app, provider,
                                                                            connection):
    browser = Browser(client, idp_app)
    url = browser.start(connection.id, login_hint="ada@example.com")
    assert url.startswith(f"{provider.issuer}/authorize?")
    for expected in ("code_challenge_method=S256", "code_challenge=", "nonce=", "state=", "login_hint=ada%40"):
        assert expected in url

    response = browser.callback(browser.at_provider(url))

    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert set(data) == {"access_token", "refresh_token", "token_type", "expires_in", "user"}
    user = data["user"]
    assert user["email"] == "ada@example.com" and user["name"] == "Ada"
    assert user["email_verified"] is False  # the connection is not trusted: its word verifies nothing here
    # The code went to the token endpoint with the PKCE verifier and client_secret_basic.
    [exchange] = provider.token_requests
    assert exchange["form"]["grant_type"] == "authorization_code" and len(exchange["form"]["code_verifier"]) >= 43
    assert exchange["authorization"].startswith("Basic ") and "client_secret" not in exchange["form"]
    [login] = events_of(ctx, "user.login", user["id"])
    assert login["data"]["method"] == "connection" and login["data"]["connection_id"] == connection.id
    [linked] = events_of(ctx, "connection.created", user["id"])
    assert linked["data"]["kind"] == "upstream" and linked["data"]["connection_id"] == connection.id
    me = client.simulate_get(users_url(idp_app, f"/{user['id']}/identities"),
                             headers={"Authorization": f"Bearer {data['access_token']}"})
    assert me.status_code == 200, me.text
    [identity] = me.json["data"]
    assert (identity["issuer"], identity["sub"], identity["connection_id"]) == (
        provider.issuer, "sub-verified", connection.id)


def test_second_sign_in_is_the_same_user(client, ctx, idp_app, connection):
    first = Browser(client, idp_app).sign_in(connection.id)
    second = Browser(client, idp_app).sign_in(connection.id)
    assert first.json["data"]["user"]["id"] == second.json["data"]["user"]["id"]
    assert ctx.store["users"].count_documents({"app_id": idp_app["_id"]}) == 1


def test_redirect_uri_must_be_one_the_application_allows(client, idp_app, connection):
    browser = Browser(client, idp_app)
    response = browser.post(f"/{connection.id}/start",
                            {"redirect_uri": "https://evil.example/cb", "binding": browser.binding})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert "redirect_uri" in response.json["error"]["details"]["fields"]


def test_inactive_and_unknown_connections_do_not_start(client, idp_app, provider, add_connection):
    inactive = add_connection(idp_app, provider, is_active=False)
    browser = Browser(client, idp_app)
    body = {"redirect_uri": REDIRECT, "binding": browser.binding}
    assert_error(browser.post(f"/{inactive.id}/start", body), 409, "CONNECTION_INACTIVE")
    assert_error(browser.post("/00000000-0000-4000-8000-000000000000/start", body), 404, "CONNECTION_NOT_FOUND")


# ---------------------------------------------------------------- state


def test_a_state_is_single_use(client, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    assert browser.callback(params).status_code == 200
    replay = browser.callback(params)
    assert_error(replay, 400, "CONNECTION_STATE_INVALID")
    assert replay.json["error"]["details"]["reason"] == "unknown"


def test_a_made_up_state_is_refused(client, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    response = browser.callback({**params, "state": params["state"][:-2] + "xy"})
    assert_error(response, 400, "CONNECTION_STATE_INVALID")


def test_a_state_expires_after_ten_minutes(client, clock, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    clock.advance(601)
    response = browser.callback(params)
    assert_error(response, 400, "CONNECTION_STATE_INVALID")
    assert response.json["error"]["details"]["reason"] == "expired"


def test_a_state_answers_only_the_browser_that_started_it(client, ctx, idp_app, connection):
    victim = Browser(client, idp_app)
    params = victim.at_provider(victim.start(connection.id))
    attacker = Browser(client, idp_app)  # login CSRF / a stolen redirect: another binding
    response = attacker.callback(params)
    assert_error(response, 400, "CONNECTION_STATE_INVALID")
    assert response.json["error"]["details"]["reason"] == "binding"
    assert ctx.store["users"].count_documents({"app_id": idp_app["_id"]}) == 0
    [audit] = ctx.store["events"].find({"action": "user.login", "result.status": "failure"})
    assert audit["data"] == {"method": "connection", "connection_id": connection.id}
    assert audit["result"]["reason"] == "connection_state_invalid:binding"


# ---------------------------------------------------------------- RFC 9207 and the mix-up


def test_iss_is_required_when_the_provider_advertises_it(client, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    del params["iss"]
    response = browser.callback(params)
    assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert response.json["error"]["details"]["reason"] == "iss_missing"


def test_a_wrong_iss_is_refused(client, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    response = browser.callback({**params, "iss": "https://elsewhere.example"})
    assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert response.json["error"]["details"]["reason"] == "iss_mismatch"


def test_mix_up_provider_bs_answer_to_as_state_is_refused(client, ctx, idp_app, provider, provider_b,
                                                          add_connection):
    """The attacker's provider B receives the browser sent to A's authorization request
    (a mix-up, RFC 9700 4.4) and answers with its own code and iss: the state names
    connection A, so B's answer is refused before any code reaches a token endpoint."""
    a = add_connection(idp_app, provider)
    add_connection(idp_app, provider_b)
    browser = Browser(client, idp_app)
    url_a = browser.start(a.id)
    answer_b = Browser.at_provider(url_a.replace(provider.issuer, provider_b.issuer))
    assert answer_b["iss"] == provider_b.issuer
    response = browser.callback(answer_b)
    assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert response.json["error"]["details"]["reason"] == "iss_mismatch"
    assert provider.token_requests == [] and provider_b.token_requests == []


# Without iss (RFC 9207), only where an answer arrives tells two providers apart (RFC 9700 4.4.2).
REDIRECT_B = REDIRECT + "/b"


def _answer(authorization_url: str) -> tuple[str, dict]:
    """Where the provider sends the browser back, and the answer's query."""
    answer = requests.get(authorization_url, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["Location"])
    return (f"{location.scheme}://{location.netloc}{location.path}",
            {name: values[0] for name, values in parse_qs(location.query).items()})


def _query(url: str) -> dict:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


@pytest.fixture
def honest_and_evil(ctx, idp_app, provider, provider_b, add_connection):
    """Two connections of one application whose providers send no iss: an honest one, and
    one run by an attacker (a customer's own identity provider, say); the application's UI
    has a redirect URI for each."""
    ctx.applications.update(idp_app["_id"], {"oauth_redirect_uris": [REDIRECT, REDIRECT_B]})
    provider.iss_parameter = provider_b.iss_parameter = False
    return add_connection(idp_app, provider), add_connection(idp_app, provider_b)


def _mixed_up(client, idp_app, provider, honest, evil, **victims_start):
    """The mix-up (RFC 9700 4.4.1): the attacker starts a sign-in through the honest
    connection; the victim starts one through the attacker's, whose provider sends the
    browser on to the honest provider with the victim's state and the attacker's PKCE
    challenge and nonce. Returns the attacker's browser, their request, and where the
    honest provider's answer (its code under the victim's state) came back."""
    attacker = Browser(client, idp_app)
    attacker_request = _query(attacker.start(honest.id))
    victim = Browser(client, idp_app)
    victim_state = _query(victim.start(evil.id, **victims_start))["state"]
    forged = {**attacker_request, "state": victim_state}
    arrived_at, answer = _answer(f"{provider.issuer}/authorize?{urlencode(forged)}")
    assert "iss" not in answer and answer["state"] == victim_state
    return victim, attacker, attacker_request, arrived_at, answer


def test_a_mix_up_without_iss_is_refused_before_the_code_goes_anywhere(client, idp_app, provider, provider_b,
                                                                       honest_and_evil):
    """The honest provider's code under the attacker's connection's state: without iss or
    the redirect_uri it came back to, nothing tells it from the attacker's provider's
    answer, so it is refused instead of being posted to the attacker's token endpoint
    (from where the attacker would redeem it in their own sign-in, as the victim)."""
    honest, evil = honest_and_evil
    victim, attacker, attacker_request, _, answer = _mixed_up(client, idp_app, provider, honest, evil)
    response = victim.callback(answer)
    assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert response.json["error"]["details"]["reason"] == "iss_missing"
    assert "redirect_uri" in response.json["error"]["message"]
    assert provider_b.token_requests == []  # the attacker's token endpoint saw no code


def test_a_mix_up_is_refused_by_the_redirect_uri_the_answer_came_back_to(client, idp_app, provider, provider_b,
                                                                         honest_and_evil):
    """With a redirect URI per connection, the honest provider's answer comes back to the
    honest connection's, not to the one the victim's sign-in (through the attacker's
    connection) sent the browser to."""
    honest, evil = honest_and_evil
    victim, *_, arrived_at, answer = _mixed_up(client, idp_app, provider, honest, evil, redirect_uri=REDIRECT_B)
    assert arrived_at == REDIRECT
    response = victim.callback(answer, redirect_uri=arrived_at)
    assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert response.json["error"]["details"]["reason"] == "redirect_uri_mismatch"
    assert provider_b.token_requests == [] and provider.token_requests == []
    # The state is spent: the answer cannot be tried again at the other redirect URI.
    again = victim.callback(answer, redirect_uri=REDIRECT_B)
    assert again.json["error"]["details"]["reason"] == "unknown"


def test_an_answer_without_iss_signs_in_at_its_own_redirect_uri(client, idp_app, provider, honest_and_evil):
    honest, _ = honest_and_evil
    browser = Browser(client, idp_app)
    arrived_at, answer = _answer(browser.start(honest.id))
    assert arrived_at == REDIRECT and "iss" not in answer
    response = browser.callback(answer, redirect_uri=arrived_at)
    assert response.status_code == 200, response.text


def test_an_answer_with_its_iss_needs_no_redirect_uri_beside_other_connections(client, idp_app, connection,
                                                                               provider_b, add_connection):
    add_connection(idp_app, provider_b)
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200


def test_the_only_connection_needs_neither_iss_nor_redirect_uri(client, idp_app, provider, add_connection):
    provider.iss_parameter = False
    only = add_connection(idp_app, provider)
    assert Browser(client, idp_app).sign_in(only.id).status_code == 200


def test_an_inactive_connection_does_not_count_as_another(client, ctx, idp_app, provider, provider_b,
                                                          add_connection):
    provider.iss_parameter = False
    only = add_connection(idp_app, provider)
    other = add_connection(idp_app, provider_b)
    browser = Browser(client, idp_app)
    answer = browser.at_provider(browser.start(only.id))
    assert browser.callback(answer).json["error"]["details"]["reason"] == "iss_missing"
    ctx.store["connections"].update_one({"_id": other.id}, {"$set": {"is_active": False}})
    assert Browser(client, idp_app).sign_in(only.id).status_code == 200


def test_a_redirect_uri_other_than_the_sign_ins_is_refused_even_with_iss(client, ctx, idp_app, connection):
    ctx.applications.update(idp_app["_id"], {"oauth_redirect_uris": [REDIRECT, REDIRECT_B]})
    browser = Browser(client, idp_app)
    answer = browser.at_provider(browser.start(connection.id))
    response = browser.callback(answer, redirect_uri=REDIRECT_B)
    assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert response.json["error"]["details"]["reason"] == "redirect_uri_mismatch"


def test_the_providers_error_answer_is_refused_in_words(client, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    response = browser.callback({"state": params["state"], "iss": params["iss"], "error": "access_denied",
                                 "error_description": "the user said no"})
    error = assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert "access_denied" in error["message"] and "the user said no" in error["message"]


# ---------------------------------------------------------------- the ID Token


@pytest.mark.parametrize("change, words", [
    ({"aud": "someone-else"}, "aud"),
    ({"aud": [CLIENT_ID, "someone-else"]}, "azp"),
    ({"azp": "someone-else"}, "azp"),
    ({"nonce": "not-the-nonce"}, "nonce"),
    ({"nonce": None}, "nonce"),
    ({"iss": "https://impostor.example"}, "issuer"),
    ({"exp": 1_000_000}, "expired"),
    ({"iat": 4_000_000_000}, "iat"),
    ({"nbf": 4_000_000_000}, "not valid before"),
])
def test_id_token_claims_are_checked(client, ctx, idp_app, provider, connection, change, words):
    provider.id_token_claims = change
    response = Browser(client, idp_app).sign_in(connection.id)
    error = assert_error(response, 400, "CONNECTION_CALLBACK_INVALID")
    assert words in error["message"]
    assert ctx.store["users"].count_documents({"app_id": idp_app["_id"]}) == 0


def test_several_audiences_with_our_azp_are_accepted(client, idp_app, provider, connection):
    provider.id_token_claims = {"aud": [CLIENT_ID, "another-api"], "azp": CLIENT_ID}
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200


@pytest.mark.parametrize("signing", ["none", "hs256"])
def test_unsigned_and_hmac_id_tokens_are_refused(client, idp_app, provider, connection, signing):
    provider.sign_with = signing
    error = assert_error(Browser(client, idp_app).sign_in(connection.id), 400, "CONNECTION_CALLBACK_INVALID")
    assert "algorithm" in error["message"]


def test_an_unknown_kid_refreshes_the_jwks_once_then_refuses(client, idp_app, provider, connection):
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    assert provider.jwks_fetches == 1
    provider.sign_with = "other_rsa"
    error = assert_error(Browser(client, idp_app).sign_in(connection.id), 400, "CONNECTION_CALLBACK_INVALID")
    assert "kid" in error["message"]
    assert provider.jwks_fetches == 2


def test_a_rotated_key_is_picked_up_by_the_one_refresh(client, idp_app, provider, connection):
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    provider.rotate()
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    assert provider.jwks_fetches == 2


def signed_now(provider, clock) -> None:
    """The scripted provider dates its ID Tokens by the test's clock (it is moved ahead)."""
    now = int(clock().timestamp())
    provider.id_token_claims = {"iat": now, "exp": now + 300}


def test_the_jwks_is_fetched_again_once_an_hour_old(client, clock, idp_app, provider, connection):
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    clock.advance(JWKS_LIFETIME - 1)
    signed_now(provider, clock)
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    assert provider.jwks_fetches == 1  # within the hour: the stored set
    clock.advance(1)
    signed_now(provider, clock)
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    assert provider.jwks_fetches == 2


def test_a_key_the_provider_withdrew_stops_verifying_once_the_set_is_fetched_again(client, clock, idp_app,
                                                                                   provider, connection):
    """A provider withdraws a (leaked) signing key from its JWKS; whoever holds that key
    signs ID Tokens under its old ``kid``.  The stored set names it, so the unknown-kid
    refresh never runs: only the set's lifetime makes the withdrawal heard."""
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    leaked, leaked_kid = provider._key, provider.kid
    provider.rotate()
    published = provider.jwks()  # only the new key from now on
    provider.jwks = lambda: published
    provider._key, provider.kid = leaked, leaked_kid  # the holder of the leaked key signs
    clock.advance(JWKS_LIFETIME)
    signed_now(provider, clock)
    error = assert_error(Browser(client, idp_app).sign_in(connection.id), 400, "CONNECTION_CALLBACK_INVALID")
    assert "kid" in error["message"]


# ---------------------------------------------------------------- MFA, GitHub


def test_a_user_with_mfa_gets_the_logins_challenge(client, ctx, clock, idp_app, provider, add_connection,
                                                   make_user_token, enable_mfa):
    token = make_user_token(idp_app, email="ada@example.com")
    mfa = enable_mfa(idp_app, token)
    ctx.store["users"].update_one({"_id": token.user["id"]}, {"$set": {"email_verified": True}})
    connection = add_connection(idp_app, provider, linking="trusted_email", trusted=True)
    response = Browser(client, idp_app).sign_in(connection.id)
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert data["mfa_required"] is True and "totp" in data["mfa_methods"] and "access_token" not in data
    # The session the code then starts is audited as a sign-in through the connection.
    clock.advance(STEP)
    code = rfc6238(mfa.secret, clock())
    verified = client.simulate_post(users_url(idp_app, "/mfa/verify"),
                                    json={"challenge_token": data["challenge_token"], "code": code})
    assert verified.status_code == 200, verified.text
    [login] = events_of(ctx, "user.login", token.user["id"])[-1:]
    assert login["data"]["method"] == "connection" and login["data"]["connection_id"] == connection.id


def _github_connection(idp_app, provider, add_connection):
    provider.accounts["verified"]["github_id"] = 583231
    provider.iss_parameter = False
    endpoints = add_connection(idp_app, provider).endpoints
    return add_connection(idp_app, provider, type="oauth2", preset=None, scopes=("read:user", "user:email"),
                          endpoints=replace(endpoints, userinfo_endpoint=f"{provider.issuer}/user", jwks_uri=None,
                                            iss_parameter_supported=False))


def _identity_after_sign_in(client, idp_app, connection) -> dict:
    browser = Browser(client, idp_app)
    url = browser.start(connection.id)
    assert "nonce=" not in url  # OAuth 2.0: no ID Token to bind a nonce to
    response = browser.callback(browser.at_provider(url), redirect_uri=REDIRECT)  # two connections without iss
    assert response.status_code == 200, response.text
    data = response.json["data"]
    me = client.simulate_get(users_url(idp_app, f"/{data['user']['id']}/identities"),
                             headers={"Authorization": f"Bearer {data['access_token']}"})
    [identity] = me.json["data"]
    return identity


def test_github_style_oauth2_takes_the_numeric_id_as_subject(client, idp_app, provider, add_connection):
    connection = _github_connection(idp_app, provider, add_connection)
    identity = _identity_after_sign_in(client, idp_app, connection)
    assert identity["sub"] == "583231" and identity["email"] == "ada@example.com"


def test_github_style_email_is_unverified_unless_primary_and_verified(client, idp_app, provider, add_connection):
    provider.emails_answer = [{"email": "ada@example.com", "primary": False, "verified": True},
                              {"email": "other@example.com", "primary": True, "verified": False}]
    connection = _github_connection(idp_app, provider, add_connection)
    assert _identity_after_sign_in(client, idp_app, connection)["email_verified"] is False


def test_github_style_primary_verified_email_counts_as_verified(client, idp_app, provider, add_connection):
    connection = _github_connection(idp_app, provider, add_connection)
    assert _identity_after_sign_in(client, idp_app, connection)["email_verified"] is True


@pytest.mark.parametrize("path, kind", [("/token", "oidc"), ("/userinfo", "oidc"), ("/token", "oauth2"),
                                        ("/user", "oauth2")])
def test_a_provider_answering_an_array_where_an_object_belongs_is_refused_in_words(
        client, ctx, idp_app, provider, add_connection, path, kind):
    """A token response, a UserInfo answer and a user API's user are JSON objects; an
    array from a broken provider (or an attacker's own connection) is 502
    CONNECTION_PROVIDER_ERROR, audited as every refused callback is, never a crash."""
    connection = add_connection(idp_app, provider) if kind == "oidc" else \
        _github_connection(idp_app, provider, add_connection)
    if path == "/userinfo":
        provider.id_token_claims = {"email": None}  # the ID Token lacks the email: UserInfo is asked
    provider.answer_as[path] = [{"access_token": "at", "sub": "s", "id": 1}]
    browser = Browser(client, idp_app)
    answer = browser.at_provider(browser.start(connection.id))
    error = assert_error(browser.callback(answer, redirect_uri=REDIRECT), 502, "CONNECTION_PROVIDER_ERROR")
    assert f"{path} did not answer a JSON object" in error["message"]
    refused = ctx.store["events"].find_one({"action": "user.login", "result.status": "failure"})
    assert refused["result"]["reason"].startswith("connection_provider_error")


def test_parallel_callbacks_with_one_state_sign_in_once(client, ctx, idp_app, connection):
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    statuses = in_parallel(4, lambda i: browser.callback(params).status_code)
    assert sorted(statuses) == [200, 400, 400, 400]
    assert ctx.store["identities"].count_documents({"app_id": idp_app["_id"]}) == 1


@pytest.mark.parametrize("address", ["x,victim@corp.com", "not an address", "a@b@c.example"])
def test_an_upstream_email_that_is_no_single_address_is_no_email(client, ctx, idp_app, provider, add_connection,
                                                                 address):
    """The provider account's owner chooses its email: one that is not a single valid
    address (a recipient list would receive every later mail of the account) is taken as
    none, so no account is created with it."""
    connection = add_connection(idp_app, provider)
    provider.accounts["verified"]["email"] = address
    answer = Browser(client, idp_app).sign_in(connection.id)
    assert answer.status_code >= 400 and answer.json["error"]["details"]["reason"] == "no_email", answer.text
    assert ctx.store["users"].count_documents({"app_id": idp_app["_id"]}) == 0


def test_an_upstream_email_is_stored_as_a_registration_stores_it(client, ctx, idp_app, provider, add_connection):
    connection = add_connection(idp_app, provider)
    provider.accounts["verified"]["email"] = " Ada@EXAMPLE.com "
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    assert ctx.store["users"].find_one({"app_id": idp_app["_id"]})["email"] == "ada@example.com"
