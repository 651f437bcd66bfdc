"""GET /oidc/authorize in the JSON mode: the answer, consent on first use, and every
error (never a redirect: the spec's 400 bodies)."""
from urllib.parse import urlencode

import pytest

from tests.conftest import events_of
from tests.oidc.conftest import FORM, REDIRECT_URI, assert_oauth_error, clients_url, pkce_pair


def test_answer_and_stored_code(authorize, ctx, application, user_token, rp_client):
    response = authorize(user_token, rp_client, state="xyz")
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json
    assert set(body) == {"code", "state", "redirect_uri", "branding"}
    assert body["state"] == "xyz" and body["redirect_uri"] == REDIRECT_URI
    assert body["branding"] == {"name": "Test App", "logo_url": None, "color": None, "background": None}
    stored = list(ctx.store["oidc_codes"].find())
    assert len(stored) == 1 and body["code"] not in str(stored[0])  # kept as its digest only
    assert (stored[0]["expires_at"] - stored[0]["created_at"]).total_seconds() == 60


def test_consent_is_recorded_on_first_use_only(authorize, ctx, user_token, rp_client):
    authorize(user_token, rp_client)
    authorize(user_token, rp_client)
    granted = events_of(ctx, "consent.granted", user_token.user["id"])
    assert len(granted) == 1
    assert granted[0]["data"] == {"user_id": user_token.user["id"], "client_id": rp_client["client_id"],
                                  "scopes": ["email", "openid", "profile"]}


@pytest.mark.parametrize("params, error", [
    ({"client_id": None}, "invalid_request"),
    ({"client_id": "oc_unknown"}, "invalid_client"),
    ({"redirect_uri": None}, "invalid_request"),
    ({"redirect_uri": "https://evil.example.com/callback"}, "invalid_request"),
    ({"redirect_uri": REDIRECT_URI + "/"}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"response_type": None}, "invalid_request"),
    ({"scope": "profile email"}, "invalid_scope"),
    ({"scope": None}, "invalid_scope"),
    ({"scope": "openid admin"}, "invalid_scope"),
    ({"code_challenge": None}, "invalid_request"),
    ({"code_challenge_method": None}, "invalid_request"),
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge": "short"}, "invalid_request"),
    ({"prompt": "none login"}, "invalid_request"),
])
def test_errors_are_400_bodies_never_redirects(authorize, user_token, rp_client, params, error):
    response = authorize(user_token, rp_client, **params)
    assert_oauth_error(response, error)
    assert "Location" not in response.headers


def test_a_scope_the_client_may_not_ask_for(authorize, application, oidc_client, user_token):
    narrow = oidc_client(application, allowed_scopes=["openid"])
    assert_oauth_error(authorize(user_token, narrow, scope="openid email"), "invalid_scope")
    assert authorize(user_token, narrow, scope="openid offline_access").status_code == 200


def test_an_inactive_client_is_invalid_client(client, authorize, application, manager_key, user_token, rp_client):
    client.simulate_put(clients_url(application, f"/{rp_client['id']}"), json={"is_active": False},
                        headers={"Authorization": f"Bearer {manager_key}"})
    assert_oauth_error(authorize(user_token, rp_client), "invalid_client")


def test_a_repeated_parameter_is_refused(client, user_token, rp_client):
    _, challenge = pkce_pair()
    query = (f"response_type=code&client_id={rp_client['client_id']}&redirect_uri={REDIRECT_URI}"
             f"&scope=openid&code_challenge={challenge}&code_challenge_method=S256&state=a&state=b")
    response = client.simulate_get("/oidc/authorize", query_string=query, headers=user_token.headers)
    assert_oauth_error(response, "invalid_request")


def test_without_a_bearer_token_and_without_hosted_login(authorize, rp_client):
    response = authorize(None, rp_client)
    assert_oauth_error(response, "invalid_token", status=401)
    assert response.headers["www-authenticate"] == 'Bearer realm="iamgate"'


def test_a_token_of_another_application_is_refused(authorize, make_application, make_user_token, rp_client):
    stranger = make_user_token(make_application())
    response = authorize(stranger, rp_client)
    assert_oauth_error(response, "invalid_token", status=401)
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_an_api_key_is_not_a_user(authorize, application, api_key, rp_client):
    class KeyHolder:
        access_token = api_key
    assert_oauth_error(authorize(KeyHolder, rp_client), "invalid_token", status=401)


def test_a_suspended_users_token_is_refused(authorize, ctx, application, user_token, rp_client):
    ctx.users.admin.suspend(application["_id"], user_token.user["id"])
    assert_oauth_error(authorize(user_token, rp_client), "invalid_token", status=401)


@pytest.mark.parametrize("uri", ["https://rp_app.example.com/cb", "https://bücher.example/cb",
                                 "https://rp.example.com:99999/cb", "evil.example.com"])
def test_an_unusable_redirect_uri_stored_before_the_rules_is_refused(authorize, ctx, user_token, rp_client, uri):
    """A client registered before registration refused such URIs: 400, never a code for it."""
    ctx.store["oidc_clients"].update_one({"_id": rp_client["id"]}, {"$set": {"redirect_uris": [uri]}})
    body = assert_oauth_error(authorize(user_token, rp_client, redirect_uri=uri), "invalid_request")
    assert "update the client" in body["error_description"]
    assert ctx.store["oidc_codes"].count_documents({}) == 0


# ---------------------------------------------------------------- issue 26: OIDC Core conformance


@pytest.mark.parametrize("params, error", [
    ({"response_mode": "fragment"}, "invalid_request"),
    ({"response_mode": "web_message"}, "invalid_request"),
    ({"request": "eyJhbGciOiJub25lIn0.e30."}, "request_not_supported"),
    ({"request_uri": "https://rp.example.com/request.jwt"}, "request_uri_not_supported"),
    ({"max_age": "-1"}, "invalid_request"),
    ({"max_age": "soon"}, "invalid_request"),
])
def test_refused_parameters(authorize, user_token, rp_client, params, error):
    assert_oauth_error(authorize(user_token, rp_client, **params), error)


@pytest.mark.parametrize("params", [
    {"response_mode": "query"}, {"display": "popup"}, {"ui_locales": "fr"}, {"claims_locales": "fr"},
    {"acr_values": "urn:mace:incommon:iap:silver"}, {"login_hint": "someone@example.com"}, {"unknown": "x"},
])
def test_ignored_parameters_are_harmless(authorize, user_token, rp_client, params):
    assert authorize(user_token, rp_client, **params).status_code == 200


def test_max_age_refuses_a_user_token_issued_longer_ago(authorize, clock, user_token, rp_client):
    """The JSON mode cannot sign the user in again: login_required (never redirected)."""
    clock.advance(30)
    assert_oauth_error(authorize(user_token, rp_client, max_age="10"), "login_required")
    assert authorize(user_token, rp_client, max_age="60").status_code == 200


@pytest.mark.parametrize("params", [{"prompt": "login"}, {"prompt": "login consent"}, {"max_age": "0"},
                                    {"prompt": "login", "max_age": "3600"}])
def test_a_request_for_a_new_sign_in_is_login_required(authorize, ctx, user_token, rp_client, params):
    """OIDC Core 3.1.2.1: prompt=login (and max_age=0) ask for a new authentication,
    which the JSON mode cannot give, even with a token issued this very second."""
    body = assert_oauth_error(authorize(user_token, rp_client, **params), "login_required")
    assert "sign the user in again" in body["error_description"]
    assert ctx.store["oidc_codes"].count_documents({}) == 0


@pytest.mark.parametrize("name, error", [("request", "request_not_supported"),
                                         ("request_uri", "request_uri_not_supported")])
def test_an_empty_request_object_is_as_if_omitted(authorize, user_token, rp_client, name, error):
    """RFC 6749 3.1: a parameter sent without a value is treated as omitted."""
    assert authorize(user_token, rp_client, **{name: ""}).status_code == 200
    assert_oauth_error(authorize(user_token, rp_client, **{name: "x"}), error)


def test_authorize_by_post_in_the_json_mode(client, user_token, rp_client):
    """OIDC Core 3.1.2.1: the authorization request may be a form-encoded POST."""
    _, challenge = pkce_pair()
    body = urlencode({"response_type": "code", "client_id": rp_client["client_id"], "redirect_uri": REDIRECT_URI,
                      "scope": "openid", "state": "st", "code_challenge": challenge, "code_challenge_method": "S256"})
    response = client.simulate_post("/oidc/authorize", body=body, headers={**FORM, **user_token.headers})
    assert response.status_code == 200, response.text
    assert response.json["state"] == "st" and response.json["code"]
    refused = client.simulate_post("/oidc/authorize", json={"client_id": rp_client["client_id"]},
                                   headers=user_token.headers)
    assert_oauth_error(refused, "invalid_request")  # RFC 6749 5.2: malformed, in the OAuth body


def test_a_client_registered_without_pkce_may_omit_it(authorize, application, oidc_client, user_token, rp_client):
    pkce_less = oidc_client(application, require_pkce=False)
    assert authorize(user_token, pkce_less, code_challenge=None, code_challenge_method=None).status_code == 200
    # It may still send PKCE, which is then checked as for every client.
    assert_oauth_error(authorize(user_token, pkce_less, code_challenge_method="plain"), "invalid_request")
    assert_oauth_error(authorize(user_token, rp_client, code_challenge=None, code_challenge_method=None),
                       "invalid_request")
