"""The whole JSON-mode flow driven by Authlib, an independent relying party: discovery,
PKCE, the code exchange (client_secret_basic and client_secret_post), the ID token
validated against our JWKS (signature, iss, aud, nonce, at_hash), userinfo, refresh,
introspection, revocation and logout."""
from urllib.parse import parse_qs, urlsplit

import pytest
from authlib.common.security import generate_token
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken
from joserfc.errors import InvalidClaimError  # what Authlib 1.9 raises (it builds on joserfc)

from tests.conftest import events_of
from tests.oidc.conftest import REDIRECT_URI


def validated_id_token(rp_session, metadata, client_id, id_token, *, nonce, access_token):
    """OIDC Core 3.1.3.7 as Authlib performs it, keys fetched from our jwks_uri."""
    keys = JsonWebKey.import_key_set(rp_session.get(metadata["jwks_uri"], withhold_token=True).json())
    claims = jwt.decode(id_token, keys, claims_cls=CodeIDToken, claims_options={
        "iss": {"essential": True, "value": metadata["issuer"]},
        "aud": {"essential": True, "value": client_id},
    }, claims_params={"nonce": nonce, "client_id": client_id, "access_token": access_token})
    claims.validate()
    return claims


def run_code_flow(rp_session, client, user, metadata, nonce):
    """Authlib builds the authorization URL (PKCE S256, state, nonce); the application's
    front end calls it with the user's JWT and hands the code back to the relying party."""
    verifier = generate_token(48)
    url, state = rp_session.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier,
                                                     nonce=nonce)
    query = parse_qs(urlsplit(url).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] == [nonce]
    answer = client.simulate_get(urlsplit(url).path, query_string=urlsplit(url).query, headers=user.headers)
    assert answer.status_code == 200, answer.text
    assert answer.json["state"] == state and answer.json["redirect_uri"] == REDIRECT_URI
    callback = f"{answer.json['redirect_uri']}?code={answer.json['code']}&state={answer.json['state']}"
    return rp_session.fetch_token(metadata["token_endpoint"], authorization_response=callback,
                                  code_verifier=verifier)


@pytest.mark.parametrize("auth_method", ["client_secret_basic", "client_secret_post"])
def test_authlib_signs_a_user_in_end_to_end(client, ctx, application, user_token, rp_client, relying_party,
                                            auth_method):
    rp_session = relying_party(rp_client, token_endpoint_auth_method=auth_method,
                               revocation_endpoint_auth_method=auth_method)
    metadata = rp_session.get(f"{ctx.config.public_url}/.well-known/openid-configuration", withhold_token=True).json()
    assert metadata["issuer"] == ctx.config.public_url

    token = run_code_flow(rp_session, client, user_token, metadata, nonce="n-0S6_WzA2Mj")
    assert token["token_type"] == "Bearer" and token["expires_in"] == 3600
    claims = validated_id_token(rp_session, metadata, rp_client["client_id"], token["id_token"],
                                nonce="n-0S6_WzA2Mj", access_token=token["access_token"])
    assert claims["sub"] == user_token.user["id"]
    assert claims["email"] == user_token.user["email"] and claims["name"] == user_token.user["name"]
    assert claims["email_verified"] is False and "auth_time" in claims and claims["sid"]

    info = rp_session.get(metadata["userinfo_endpoint"])
    assert info.status_code == 200
    assert info.json() == {"sub": user_token.user["id"], "email": user_token.user["email"], "email_verified": False,
                           "name": user_token.user["name"]}

    refreshed = rp_session.refresh_token(metadata["token_endpoint"])
    assert refreshed["refresh_token"] != token["refresh_token"]
    validated_id_token(rp_session, metadata, rp_client["client_id"], refreshed["id_token"], nonce=None,
                       access_token=refreshed["access_token"])

    active = rp_session.introspect_token(metadata["introspection_endpoint"], token=refreshed["access_token"]).json()
    assert active["active"] is True and active["client_id"] == rp_client["client_id"]
    assert active["sub"] == user_token.user["id"] and active["scope"] == "openid profile email"
    assert rp_session.introspect_token(metadata["introspection_endpoint"], token=refreshed["refresh_token"],
                                       token_type_hint="refresh_token").json()["active"] is True

    revoked = rp_session.revoke_token(metadata["revocation_endpoint"], token=refreshed["refresh_token"],
                                      token_type_hint="refresh_token")
    assert revoked.status_code == 200
    assert rp_session.introspect_token(metadata["introspection_endpoint"], token=refreshed["refresh_token"]) \
        .json() == {"active": False}

    logout = rp_session.get(metadata["end_session_endpoint"], params={
        "id_token_hint": refreshed["id_token"], "post_logout_redirect_uri": "https://rp.example.com/bye",
        "state": "bye-1"}, allow_redirects=False, withhold_token=True)
    assert logout.status_code == 302
    assert logout.headers["Location"] == "https://rp.example.com/bye?state=bye-1"

    kinds = [e["type"] for e in ctx.store["events"].find({"type": {"$regex": "^(connection|consent)"}}).sort("seq", 1)]
    assert kinds == ["consent.granted", "connection.created", "connection.refreshed", "connection.revoked"]


def test_authlib_refuses_an_id_token_with_another_nonce(client, ctx, user_token, rp_client, relying_party):
    rp_session = relying_party(rp_client)
    metadata = rp_session.get(f"{ctx.config.public_url}/.well-known/openid-configuration", withhold_token=True).json()
    token = run_code_flow(rp_session, client, user_token, metadata, nonce="the-real-nonce")
    with pytest.raises(InvalidClaimError):
        validated_id_token(rp_session, metadata, rp_client["client_id"], token["id_token"], nonce="another",
                           access_token=token["access_token"])
    with pytest.raises(InvalidClaimError):  # at_hash binds the ID token to its access token
        validated_id_token(rp_session, metadata, rp_client["client_id"], token["id_token"], nonce="the-real-nonce",
                           access_token=token["access_token"] + "x")


def test_logout_revokes_the_sessions_refresh_tokens(client, ctx, user_token, rp_client, relying_party):
    rp_session = relying_party(rp_client)
    metadata = rp_session.get(f"{ctx.config.public_url}/.well-known/openid-configuration", withhold_token=True).json()
    token = run_code_flow(rp_session, client, user_token, metadata, nonce="n")
    page = client.simulate_get("/oidc/logout", params={"id_token_hint": token["id_token"]})
    assert page.status_code == 200 and "signed out" in page.text
    assert page.headers["content-type"].startswith("text/html")
    refused = rp_session.post(metadata["token_endpoint"], data={
        "grant_type": "refresh_token", "refresh_token": token["refresh_token"]},
        auth=(rp_client["client_id"], rp_client["client_secret"]), withhold_token=True)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    revoked = events_of(ctx, "connection.revoked")
    assert revoked[-1]["data"]["reason"] == "logout"
