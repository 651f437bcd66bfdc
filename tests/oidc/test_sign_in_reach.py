"""Where a sign-in's reach ends at the provider: RP-initiated logout with another user's
ID token signs nobody else's browser out; a code the logged-out sign-in gave is not
exchanged after the logout; and the JSON mode's auth_time (and max_age) is the session's
sign-in, not the last refresh of its tokens."""
from __future__ import annotations

from urllib.parse import urlencode

import jwt
import pytest

from tests.oidc.conftest import FORM, pkce_pair
from tests.oidc.test_hosted import Browser, assert_page, authorize_url, query_of
from tests.plugins.users import fresh_address, users_url


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, name="Portal")


@pytest.fixture
def person(hosted_app, make_user):
    return make_user(hosted_app, name="Victim")


def _hosted_sign_in(browser, rp, person, **params):
    """Login + consent in the browser; returns (code, verifier)."""
    verifier, challenge = pkce_pair()
    page = browser.get(authorize_url(rp, challenge=challenge, **params))
    assert_page(page, "Sign in")
    consent = browser.submit(page, email=person["email"], password=person["password"])
    assert_page(consent, "Allow access?")
    return query_of(browser.submit(consent, decision="allow"))["code"], verifier


# ------------------------------------------------------------------ logout CSRF with a foreign hint


def test_a_hint_of_another_user_does_not_sign_this_browser_out(client, hosted_app, rp, person, make_user_token,
                                                               issue_tokens):
    """RP-Initiated Logout 2: the OP MUST ask the End-User when the supplied ID token
    does not belong to the currently logged-in End-User.  Here any valid ID token of any
    user of the application (the attacker's own) signs the victim's browser out without
    asking: a top-level cross-site GET carries the Lax cookie."""
    victim = Browser(client)
    _hosted_sign_in(victim, rp, person)
    assert query_of(victim.get(authorize_url(rp, prompt="none")))["code"]

    attacker = make_user_token(hosted_app)  # a user of the same application
    attacker_id_token = issue_tokens(attacker, rp)["id_token"]
    assert jwt.decode(attacker_id_token, options={"verify_signature": False})["sub"] != person["id"]

    # The attacker's page navigates the victim's browser here (a link, a top-level redirect).
    out = victim.request("GET", "/oidc/logout", query_string=urlencode({"id_token_hint": attacker_id_token}),
                         headers={"Accept": "text/html", "Sec-Fetch-Dest": "document"})
    assert out.status_code in (200, 302), out.text
    assert "code" in query_of(victim.get(authorize_url(rp, prompt="none"))), \
        "another user's id_token_hint ended the victim's browser session without asking"


# ------------------------------------------------------------------ a code issued before the logout


def test_a_code_issued_before_rp_logout_does_not_outlive_it(client, hosted_app, rp, person, exchange,
                                                            refresh_grant):
    """RP-initiated logout with the hint's sid revokes the session's grants and browser
    sessions, but not the V1 session; a code issued in that session a moment before the
    logout (e.g. a prompt=none of another tab/client) is still exchanged afterwards: a live
    refresh token and ID token for a sign-in that was logged out."""
    browser = Browser(client)
    code, verifier = _hosted_sign_in(browser, rp, person)
    id_token = exchange(rp, code, verifier).json["id_token"]
    sid = jwt.decode(id_token, options={"verify_signature": False})["sid"]

    verifier2, challenge2 = pkce_pair()
    code2 = query_of(browser.get(authorize_url(rp, challenge=challenge2, prompt="none")))["code"]

    out = client.simulate_post("/oidc/logout", body=urlencode({"id_token_hint": id_token}), headers=FORM)
    assert out.status_code == 200, out.text
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"

    late = exchange(rp, code2, verifier2)
    if late.status_code == 200:
        refreshed = refresh_grant(rp, late.json["refresh_token"])
        pytest.fail(f"code issued before logout exchanged after it (sid {sid}); "
                    f"its refresh token then answers {refreshed.status_code}")
    assert late.status_code == 400 and late.json["error"] == "invalid_grant"


# ------------------------------------------------------------------ JSON mode auth_time / max_age


def test_json_mode_auth_time_is_the_sign_in_not_the_last_refresh(client, clock, hosted_app, rp, make_user_token,
                                                                 authorize, exchange):
    """OIDC Core 2: auth_time is when the End-User authenticated.  The JSON mode takes the
    iat of the bearer, which a V1 refresh renews without any authentication, so a sign-in
    an hour old passes max_age=60 and the ID token claims a fresh authentication."""
    user = make_user_token(hosted_app)
    signed_in_at = int(clock().timestamp())
    clock.advance(3600)
    refreshed = client.simulate_post(users_url(hosted_app, "/token/refresh"),
                                     json={"refresh_token": user.refresh_token}, remote_addr=fresh_address())
    assert refreshed.status_code == 200, refreshed.text
    user.access_token = refreshed.json["data"]["access_token"]

    verifier, challenge = pkce_pair()
    response = authorize(user, rp, challenge=challenge, max_age="60")
    if response.status_code == 200:
        tokens = exchange(rp, response.json["code"], verifier).json
        auth_time = jwt.decode(tokens["id_token"], options={"verify_signature": False})["auth_time"]
        pytest.fail(f"max_age=60 passed for a sign-in 3600 s old; id_token auth_time={auth_time}, "
                    f"real sign-in at {signed_in_at}")
    assert response.json["error"] == "login_required"
    # Without max_age the code is given, and its ID token says when the user signed in.
    verifier, challenge = pkce_pair()
    response = authorize(user, rp, challenge=challenge)
    assert response.status_code == 200, response.text
    tokens = exchange(rp, response.json["code"], verifier).json
    assert jwt.decode(tokens["id_token"], options={"verify_signature": False})["auth_time"] == signed_in_at
