"""The upstream provider the connection tests sign in through (tests/connections/upstream.py)
does what those tests rely on: PKCE required, RFC 9207's ``iss`` on the authorization
response, the account fixtures' claims in the id_token, a changed email under the same
``sub``, and the GitHub-style user API.  A relying party written here with Authlib
(not iamgate's code) drives it."""
from __future__ import annotations

import jwt
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session

from tests.connections.upstream import follow, provider_login, redirect_params

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never opened: the tests stop at the redirect
CLIENT = {"client_id": "harness", "client_secret": "harness-secret-0123456789", "redirect_uris": [REDIRECT_URI]}


def _sign_in(upstream, login: str, *, pkce: bool = True, scope: str = "openid email profile"):
    rp = OAuth2Session(CLIENT["client_id"], CLIENT["client_secret"], scope=scope,
                       redirect_uri=REDIRECT_URI, code_challenge_method="S256" if pkce else None,
                       token_endpoint_auth_method="client_secret_basic")
    verifier, nonce = generate_token(48), generate_token(20)
    extra = {"nonce": nonce} if "openid" in scope.split() else {}  # OAuth 2.0 alone has no nonce
    url, state = rp.create_authorization_url(f"{upstream.issuer}/auth", code_verifier=verifier if pkce else None,
                                             **extra)
    return rp, verifier, nonce, state, provider_login(requests.Session(), upstream, url, login)


def _claims(upstream, rp, verifier, answer) -> dict:
    token = rp.fetch_token(f"{upstream.issuer}/token", code=answer["code"], code_verifier=verifier)
    keys = jwt.PyJWKClient(f"{upstream.issuer}/jwks")
    claims = jwt.decode(token["id_token"], keys.get_signing_key_from_jwt(token["id_token"]), algorithms=["RS256"],
                        audience=CLIENT["client_id"], issuer=upstream.issuer)
    return {"claims": claims, "access_token": token["access_token"]}


def test_a_sign_in_answers_with_iss_and_the_accounts_claims(upstreams):
    upstream = upstreams.start(clients=[CLIENT])
    discovery = requests.get(f"{upstream.issuer}/.well-known/openid-configuration", timeout=5).json()
    assert discovery["authorization_response_iss_parameter_supported"] is True
    assert discovery["code_challenge_methods_supported"] == ["S256"]

    rp, verifier, nonce, state, redirect = _sign_in(upstream, "verified")
    answer = redirect_params(redirect)
    assert redirect.headers["Location"].startswith(REDIRECT_URI)
    assert answer["state"] == state and answer["iss"] == upstream.issuer
    claims = _claims(upstream, rp, verifier, answer)["claims"]
    assert claims["sub"] == "verified" and claims["nonce"] == nonce and claims["iss"] == upstream.issuer
    assert (claims["email"], claims["email_verified"], claims["groups"]) == ("ada@example.com", True, ["engineering"])

    upstream.set_account("verified", email="ada.lovelace@example.com", email_verified=True)
    rp, verifier, _, _, redirect = _sign_in(upstream, "verified")
    again = _claims(upstream, rp, verifier, redirect_params(redirect))["claims"]
    assert (again["sub"], again["email"]) == ("verified", "ada.lovelace@example.com")


def test_pkce_is_required(upstreams):
    upstream = upstreams.start(clients=[CLIENT])
    rp = OAuth2Session(CLIENT["client_id"], CLIENT["client_secret"], scope="openid", redirect_uri=REDIRECT_URI)
    url, _ = rp.create_authorization_url(f"{upstream.issuer}/auth", nonce="n")
    refused = follow(requests.Session(), requests.get(url, allow_redirects=False, timeout=10), within=upstream.issuer)
    answer = redirect_params(refused)
    assert answer["error"] == "invalid_request" and "PKCE" in answer["error_description"]


def test_two_instances_are_two_issuers_and_the_github_user_api_answers(upstreams):
    first = upstreams.start(clients=[CLIENT])
    second = upstreams.start(clients=[CLIENT], github=True)
    assert first.issuer != second.issuer

    # The github preset's request: OAuth 2.0 scopes only, no id_token; then the user API.
    rp, verifier, _, _, redirect = _sign_in(second, "twin", scope="read:user user:email")
    answer = redirect_params(redirect)
    assert answer["iss"] == second.issuer
    token = rp.fetch_token(f"{second.issuer}/token", code=answer["code"], code_verifier=verifier)
    assert "id_token" not in token
    auth = {"Authorization": f"Bearer {token['access_token']}"}
    user = requests.get(f"{second.issuer}/user", headers=auth, timeout=5)
    assert user.status_code == 200 and user.json()["login"] == "twin" and user.json()["email"] == "twin@example.com"
    assert isinstance(user.json()["id"], int)
    emails = requests.get(f"{second.issuer}/user/emails", headers=auth, timeout=5).json()
    assert emails == [{"email": "twin@example.com", "verified": True, "primary": True, "visibility": "private"}]
    assert requests.get(f"{second.issuer}/user", headers={"Authorization": "Bearer nope"}, timeout=5).status_code == 401
