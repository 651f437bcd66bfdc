"""GET /oidc/logout (OpenID Connect RP-Initiated Logout): the hint is verified (expired
accepted; alg none and HS256 refused), the redirect only to a URI registered on the
hinted client, state passed back, the session's OIDC refresh tokens revoked."""
import base64
import json
from urllib.parse import urlencode

import jwt
import pytest

from controlplane.oidc.backchannel import LogoutNotice
from tests.conftest import events_of
from tests.oidc.conftest import FORM, REDIRECT_URI, assert_oauth_error, clients_url, pkce_pair
from tests.oidc.test_hosted import Browser, authorize_url, query_of

BYE = "https://rp.example.com/bye"


@pytest.fixture
def tokens(issue_tokens, user_token, rp_client):
    return issue_tokens(user_token, rp_client)


def logout(client, **params):
    return client.simulate_get("/oidc/logout", params=params)


def test_without_a_hint_the_logged_out_page(client):
    response = logout(client, post_logout_redirect_uri=BYE, state="s")
    assert response.status_code == 200 and "signed out" in response.text
    assert response.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_redirect_with_state_and_revocation(client, ctx, refresh_grant, rp_client, tokens, user_token):
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=BYE, state="s 1")
    assert response.status_code == 302 and response.headers["location"] == f"{BYE}?state=s+1"
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 400
    event = events_of(ctx, "connection.revoked")[0]["data"]
    assert event == {"kind": "grant", "user_id": user_token.user["id"], "client_id": rp_client["client_id"],
                     "reason": "logout", "grants_revoked": 1}


def test_a_deactivated_clients_hint_signs_out_without_a_redirect(client, ctx, application, manager_key,
                                                                 refresh_grant, rp_client, tokens):
    """A client switched off is sent no one, but the person signing out is signed out."""
    response = client.simulate_put(clients_url(application, f"/{rp_client['id']}"), json={"is_active": False},
                                   headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 200, response.text
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=BYE, state="s")
    assert response.status_code == 200 and "signed out" in response.text
    assert [event["data"]["reason"] for event in events_of(ctx, "connection.revoked")] == ["logout"]


def test_an_expired_hint_is_accepted(client, clock, tokens):
    clock.advance(7200)
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=BYE)
    assert response.status_code == 302


def test_open_redirect_through_post_logout_redirect_uri(client, application, oidc_client, issue_tokens,
                                                        user_token, tokens):
    assert logout(client, id_token_hint=tokens["id_token"],
                  post_logout_redirect_uri="https://evil.example.com/").status_code == 200
    # Registered on another client, not on the hinted one: no redirect either.
    other = oidc_client(application, name="Other", post_logout_redirect_uris=["https://other.example.com/bye"])
    assert logout(client, id_token_hint=tokens["id_token"],
                  post_logout_redirect_uri="https://other.example.com/bye").status_code == 200
    assert other["post_logout_redirect_uris"] == ["https://other.example.com/bye"]


@pytest.mark.parametrize("uri", ["https://rp_app.example.com/bye", "https://rp.example.com:99999/bye"])
def test_an_unusable_uri_stored_before_the_rules_is_not_followed(client, ctx, rp_client, tokens, uri):
    ctx.store["oidc_clients"].update_one({"_id": rp_client["id"]}, {"$set": {"post_logout_redirect_uris": [uri]}})
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=uri, state="s")
    assert response.status_code == 200 and "signed out" in response.text


def _forged(tokens, alg: str, key) -> str:
    claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
    header = jwt.get_unverified_header(tokens["id_token"])
    if alg == "none":
        def part(value):
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
        return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": header["kid"]})


@pytest.mark.parametrize("alg", ["none", "HS256"])
def test_alg_none_and_hs256_hints_are_refused(client, ctx, refresh_grant, rp_client, tokens, alg):
    # HS256 keyed with our public key: the classic algorithm-confusion forgery.
    public_pem = client.simulate_get("/.well-known/jwks.json").json["keys"][0]["n"]
    forged = _forged(tokens, alg, public_pem)
    response = logout(client, id_token_hint=forged, post_logout_redirect_uri=BYE)
    assert_oauth_error(response, "invalid_request")
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 200  # nothing was revoked


def test_a_hint_signed_by_another_key_is_refused(client, tokens):
    from cryptography.hazmat.primitives.asymmetric import rsa
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert_oauth_error(logout(client, id_token_hint=_forged(tokens, "RS256", other_key)), "invalid_request")
    assert_oauth_error(logout(client, id_token_hint="garbage"), "invalid_request")


def _resigned(ctx, tokens, headers=None, **extra) -> str:
    """The ID token's claims (with ``extra``), signed again with our key under ``headers``."""
    claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
    return ctx.tokens.sign({**claims, **extra}, headers=headers)


def test_a_back_channel_logout_token_is_not_a_hint(client, ctx, application, refresh_grant, rp_client, tokens,
                                                  user_token):
    """A logout token has our key, issuer, the client as aud, and the user's sub and sid: only
    its type (header typ logout+jwt, an events claim) tells it from an ID token."""
    sid = jwt.decode(tokens["id_token"], options={"verify_signature": False})["sid"]
    logout_token = ctx.oidc.connections.backchannel.logout_token(
        LogoutNotice(application["_id"], rp_client["client_id"], "https://rp.example.com/bc", user_token.user["id"],
                     sid))
    response = logout(client, id_token_hint=logout_token, post_logout_redirect_uri=BYE)
    assert_oauth_error(response, "invalid_request")
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 200  # nothing was revoked


@pytest.mark.parametrize("headers, extra", [
    ({"typ": "logout+jwt"}, {}),
    ({"typ": "at+jwt"}, {}),
    ({"typ": "secevent+jwt"}, {}),
    ({"typ": "JWT"}, {"events": {"http://schemas.openid.net/event/backchannel-logout": {}}}),
    ({"typ": None}, {"events": {}}),
])
def test_a_token_of_ours_typed_otherwise_is_not_a_hint(client, ctx, refresh_grant, rp_client, tokens, headers,
                                                       extra):
    response = logout(client, id_token_hint=_resigned(ctx, tokens, headers, **extra), post_logout_redirect_uri=BYE)
    assert_oauth_error(response, "invalid_request")
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 200


@pytest.mark.parametrize("headers", [{"typ": "jwt"}, {"typ": None}])
def test_an_id_token_typed_jwt_in_any_case_or_untyped_is_a_hint(client, ctx, tokens, headers):
    """JWT BCP 3.11: typ is compared case-insensitively, and an ID token need not carry it."""
    assert jwt.get_unverified_header(tokens["id_token"])["typ"] == "JWT"  # what iamgate issues
    hint = _resigned(ctx, tokens, headers)
    assert jwt.get_unverified_header(hint).get("typ") == headers["typ"]
    assert logout(client, id_token_hint=hint, post_logout_redirect_uri=BYE).status_code == 302


# ---------------------------------------------------------------- issue 26: the spec's registration rules


def test_without_post_logout_redirect_uris_a_redirect_uri_is_followed(client, application, oidc_client, issue_tokens,
                                                                     user_token):
    """A client registered as the spec shows it (redirect_uris only) logs out to its own URI."""
    rp = oidc_client(application, post_logout_redirect_uris=[])
    tokens = issue_tokens(user_token, rp)
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=REDIRECT_URI, state="s")
    assert response.status_code == 302 and response.headers["location"] == f"{REDIRECT_URI}?state=s"


def test_with_post_logout_redirect_uris_a_redirect_uri_is_not_followed(client, tokens):
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=REDIRECT_URI)
    assert response.status_code == 200 and "location" not in response.headers


def test_without_state_the_redirect_has_no_empty_query(client, tokens):
    response = logout(client, id_token_hint=tokens["id_token"], post_logout_redirect_uri=BYE, state="")
    assert response.status_code == 302 and response.headers["location"] == BYE


def test_a_client_id_that_is_not_the_hints_aud_is_refused(client, ctx, application, oidc_client, refresh_grant,
                                                          rp_client, tokens):
    other = oidc_client(application, name="Other")
    response = logout(client, id_token_hint=tokens["id_token"], client_id=other["client_id"],
                      post_logout_redirect_uri=BYE)
    assert_oauth_error(response, "invalid_request")
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 200  # nothing was revoked


def test_logout_by_post(client, refresh_grant, rp_client, tokens):
    """RP-Initiated Logout 2: the OP must support POST (form-encoded) as well as GET."""
    body = urlencode({"id_token_hint": tokens["id_token"], "client_id": rp_client["client_id"],
                      "post_logout_redirect_uri": BYE, "state": "s"})
    response = client.simulate_post("/oidc/logout", body=body, headers=FORM)
    assert response.status_code == 302 and response.headers["location"] == f"{BYE}?state=s"
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 400


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_hint_ends_the_browser_session_without_its_cookie(client, hosted_app, oidc_client, make_user, exchange,
                                                             method):
    """An RP that logs out by an auto-submitted cross-site form POST (RP-Initiated Logout
    2) sends no ``SameSite=Lax`` cookie, nor does a back end or another device: the ID
    token's ``sid`` names the sign-in, and its browser sessions end all the same, so the
    next authorize in that browser asks for the login again."""
    rp, person, browser = oidc_client(hosted_app, name="Portal"), make_user(hosted_app), Browser(client)
    verifier, challenge = pkce_pair()
    login = browser.get(authorize_url(rp, challenge=challenge))
    consent = browser.submit(login, email=person["email"], password=person["password"])
    code = query_of(browser.submit(consent, decision="allow"))["code"]
    id_token = exchange(rp, code, verifier).json["id_token"]
    other = Browser(client)  # signed in elsewhere too, with a sign-in of its own: it stays
    other_login = other.submit(other.get(authorize_url(rp)), email=person["email"], password=person["password"])
    assert query_of(other_login)["code"]

    body = urlencode({"id_token_hint": id_token})
    out = (client.simulate_post("/oidc/logout", body=body, headers=FORM) if method == "POST"
           else client.simulate_get("/oidc/logout", query_string=body))  # the RP's request: no browser cookie
    assert out.status_code == 200, out.text
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"
    assert query_of(other.get(authorize_url(rp, prompt="none")))["code"]
