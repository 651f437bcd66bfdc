"""GET and POST answer alike at /oidc/authorize (OIDC Core 3.1.2.1: the authorization
request may be a GET or a form-encoded POST) and at /oidc/logout (RP-Initiated Logout
1.0 section 2).  Each request here is sent both ways, the same parameters in the query
and in the form body; the two answers must be the same, and then the answer is checked.

RFC 6749 3.1 decides what the answers are: a parameter sent without a value is treated
as omitted, and a repeated one is an error, which each endpoint answers as it answers
its other errors (on the redirect URI once it is known good, else a page to a browser
and a JSON body to a program)."""
from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from tests.oidc.conftest import FORM, REDIRECT_URI, assert_oauth_error, pkce_pair
from tests.oidc.test_hosted import NAVIGATE, assert_page, query_of
from tests.plugins.users import fresh_address

NOT_VALID = "This sign-in link is not valid"


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, name="Portal")


def authorization_request(rp, *repeated, **changes) -> list[tuple[str, str]]:
    """The pairs of an authorization request; ``changes`` replace a parameter (None
    leaves it out), ``repeated`` pairs are sent after the others."""
    params = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": REDIRECT_URI,
              "scope": "openid profile email", "state": "st-1", "code_challenge": pkce_pair()[1],
              "code_challenge_method": "S256", **changes}
    return [(name, value) for name, value in params.items() if value is not None] + list(repeated)


def answer(response) -> dict:
    """What a GET and a POST must agree on: status, media type, location, and the JSON
    body (but its code) or the page's title, error code and hidden fields (but the CSRF
    token and the request handle, which are new on every page)."""
    media = (response.headers.get("content-type") or "").split(";")[0]
    seen = {"status": response.status_code, "media": media, "location": response.headers.get("location")}
    if media == "application/json" and response.content:
        seen["body"] = {name: value for name, value in response.json.items() if name != "code"}
    elif media == "text/html":
        error_code = re.search(r"Error code: <code>([^<]*)</code>", response.text)
        seen.update(title=re.search(r"<h1>(.*?)</h1>", response.text).group(1),
                    error=error_code and error_code.group(1),
                    fields={name: value for name, value in
                            re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', response.text)
                            if name not in ("csrf_token", "request")})
    return seen


def same_answer(client, path: str, pairs: list, headers: dict):
    """Send ``pairs`` by GET and by POST; check both get the same answer; the GET's."""
    encoded = urlencode(pairs)
    by_get = client.simulate_get(path, query_string=encoded, headers=headers, remote_addr=fresh_address())
    by_post = client.simulate_post(path, body=encoded, headers={**FORM, **headers}, remote_addr=fresh_address())
    assert answer(by_post) == answer(by_get), (by_get.text, by_post.text)
    return by_get


# ---------------------------------------------------------------- authorize, hosted mode (a browser)


def test_a_repeated_scope_is_answered_on_the_redirect_uri(client, rp):
    response = same_answer(client, "/oidc/authorize", authorization_request(rp, ("scope", "openid")), NAVIGATE)
    assert query_of(response) == {"error": "invalid_request", "state": "st-1",
                                  "error_description": "The parameter scope must not be repeated."}


@pytest.mark.parametrize("name", ["redirect_uri", "client_id"])
def test_a_repeated_client_id_or_redirect_uri_is_the_error_page(client, rp, name):
    """Not yet known good, so never a redirect (RFC 6749 4.1.2.1): the page, not JSON."""
    pairs = authorization_request(rp, (name, rp["client_id"] if name == "client_id" else REDIRECT_URI))
    response = same_answer(client, "/oidc/authorize", pairs, NAVIGATE)
    assert_page(response, NOT_VALID, 400)
    assert "Error code: <code>invalid_request</code>" in response.text


@pytest.mark.parametrize("name", ["request", "request_uri", "state", "nonce", "prompt", "max_age", "login_hint"])
def test_a_parameter_without_a_value_is_as_if_omitted(client, rp, name):
    response = same_answer(client, "/oidc/authorize", authorization_request(rp, **{name: ""}), NAVIGATE)
    assert_page(response, "Sign in")


def test_a_repeated_unknown_parameter_is_ignored(client, rp):
    pairs = authorization_request(rp, ("display_mode", "a"), ("display_mode", "b"))
    assert_page(same_answer(client, "/oidc/authorize", pairs, NAVIGATE), "Sign in")


def test_a_body_that_is_not_utf8_is_the_error_page_without_a_bearer_and_json_with_one(client, rp, user_token):
    """Read as the client is unknown yet: the error page, as a GET's unknown client is."""
    body = urlencode(authorization_request(rp)).encode() + b"&nonce=\xff"
    assert_page(client.simulate_post("/oidc/authorize", body=body, headers={**FORM, **NAVIGATE}), NOT_VALID, 400)
    in_the_json_mode = client.simulate_post("/oidc/authorize", body=body, headers={**FORM, **user_token.headers})
    assert_oauth_error(in_the_json_mode, "invalid_request")


# ---------------------------------------------------------------- authorize, JSON mode (a bearer)


@pytest.mark.parametrize("repeated", [("scope", "openid"), ("redirect_uri", REDIRECT_URI), ("state", "st-2")])
def test_a_repeated_parameter_is_a_400_body_in_the_json_mode(client, rp, user_token, repeated):
    response = same_answer(client, "/oidc/authorize", authorization_request(rp, repeated), user_token.headers)
    assert_oauth_error(response, "invalid_request")
    assert "location" not in response.headers


@pytest.mark.parametrize("name", ["request", "request_uri"])
def test_an_empty_request_object_is_as_if_omitted_in_the_json_mode(client, rp, user_token, name):
    response = same_answer(client, "/oidc/authorize", authorization_request(rp, **{name: ""}), user_token.headers)
    assert response.status_code == 200 and response.json["code"] and response.json["state"] == "st-1"


def test_without_hosted_login_a_repeated_parameter_is_a_page_for_a_browser(client, application, oidc_client):
    plain = oidc_client(application)
    response = same_answer(client, "/oidc/authorize", authorization_request(plain, ("scope", "openid")), NAVIGATE)
    assert_page(response, NOT_VALID, 400)


# ---------------------------------------------------------------- logout


def test_a_repeated_logout_parameter_is_a_page_for_a_browser(client, rp):
    pairs = [("client_id", rp["client_id"]), ("state", "a"), ("state", "b")]
    response = same_answer(client, "/oidc/logout", pairs, NAVIGATE)
    assert_page(response, "Sign-out link is not valid", 400)
    assert "Error code: <code>invalid_request</code>" in response.text


def test_a_repeated_logout_parameter_is_a_400_body_for_a_program(client, rp):
    response = same_answer(client, "/oidc/logout", [("state", "a"), ("state", "b")], {})
    assert_oauth_error(response, "invalid_request")


def test_logout_parameters_without_a_value_are_as_if_omitted(client, rp):
    pairs = [("id_token_hint", ""), ("client_id", rp["client_id"]), ("post_logout_redirect_uri", ""),
             ("state", "")]
    assert_page(same_answer(client, "/oidc/logout", pairs, NAVIGATE), "Sign out of Test App?")
    assert_page(same_answer(client, "/oidc/logout", pairs, {}), "You are signed out")


def test_a_logout_body_that_is_not_utf8_is_a_page_for_a_browser(client):
    response = client.simulate_post("/oidc/logout", body=b"state=\xff", headers={**FORM, **NAVIGATE})
    assert_page(response, "Sign-out link is not valid", 400)
