"""Public clients (token_endpoint_auth_method none, RFC 6749 2.1): no secret, PKCE S256
always, the code and refresh grants with client_id alone, rotation and reuse detection,
revocation by client_id; no introspection, no client credentials, no secret accepted."""
import pytest

from tests.conftest import events_of
from tests.oidc.conftest import REDIRECT_URI, assert_oauth_error, clients_url, pkce_pair

PUBLIC = {"token_endpoint_auth_method": "none"}


@pytest.fixture
def spa(application, oidc_client):
    return oidc_client(application, **PUBLIC)


@pytest.fixture
def public_tokens(client, authorize, user_token, spa):
    verifier, challenge = pkce_pair()
    code = authorize(user_token, spa, challenge=challenge).json["code"]
    response = client.simulate_post("/oidc/token", json={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "code_verifier": verifier,
        "client_id": spa["client_id"]})
    assert response.status_code == 200, response.text
    return response.json


def refresh(client, spa, token, **extra):
    return client.simulate_post("/oidc/token", json={"grant_type": "refresh_token", "refresh_token": token,
                                                     "client_id": spa["client_id"], **extra})


def test_a_public_client_has_no_secret(ctx, spa):
    assert "client_secret" not in spa and spa["token_endpoint_auth_method"] == "none"
    assert ctx.store["oidc_clients"].find_one({"_id": spa["id"]})["secret_digest"] is None


def test_the_code_flow_with_client_id_alone(public_tokens, user_token):
    assert {"access_token", "refresh_token", "id_token"} <= set(public_tokens)


def test_pkce_is_required(authorize, user_token, spa):
    response = authorize(user_token, spa, code_challenge=None, code_challenge_method=None)
    assert_oauth_error(response, "invalid_request")


def test_a_public_client_can_never_turn_pkce_off(client, ctx, application, make_api_key, spa):
    headers = {"Authorization": f"Bearer {make_api_key(application, permissions=['oidc:manage'])}"}
    created = client.simulate_post(clients_url(application), headers=headers, json={
        "name": "SPA", "redirect_uris": [REDIRECT_URI], **PUBLIC, "require_pkce": False})
    updated = client.simulate_put(clients_url(application, f"/{spa['id']}"), headers=headers,
                                    json={"require_pkce": False})
    for response in (created, updated):
        assert response.status_code == 400 and "require_pkce" in response.json["error"]["details"]["fields"]
    assert ctx.store["oidc_clients"].count_documents({"app_id": application["_id"]}) == 1
    assert ctx.store["oidc_clients"].find_one({"_id": spa["id"]}).get("require_pkce") is not False


def test_a_stored_public_client_without_pkce_is_still_refused(ctx, authorize, user_token, spa):
    """A document written around the registration rule still gets no code without PKCE."""
    ctx.store["oidc_clients"].update_one({"_id": spa["id"]}, {"$set": {"require_pkce": False}})
    response = authorize(user_token, spa, code_challenge=None, code_challenge_method=None)
    assert_oauth_error(response, "invalid_request")


def test_refresh_rotates_and_reuse_revokes(client, ctx, public_tokens, spa, clock):
    first = public_tokens["refresh_token"]
    rotated = refresh(client, spa, first)
    assert rotated.status_code == 200 and rotated.json["refresh_token"] != first
    clock.advance(3600)  # past the reuse grace
    assert_oauth_error(refresh(client, spa, first), "invalid_grant")
    assert_oauth_error(refresh(client, spa, rotated.json["refresh_token"]), "invalid_grant")
    assert events_of(ctx, "connection.revoked")[-1]["data"]["reason"] == "refresh_token_reused"


def test_a_secret_is_never_accepted_for_it(client, public_tokens, spa):
    assert_oauth_error(refresh(client, spa, public_tokens["refresh_token"], client_secret="anything"),
                       "invalid_grant")


def test_a_confidential_client_still_needs_its_secret(client, rp_client):
    response = client.simulate_post("/oidc/token", json={"grant_type": "refresh_token", "refresh_token": "x",
                                                         "client_id": rp_client["client_id"]})
    assert_oauth_error(response, "invalid_request")


def test_revocation_by_client_id_and_no_introspection(client, public_tokens, spa):
    token = public_tokens["refresh_token"]
    introspected = client.simulate_post("/oidc/introspect", json={"token": token, "client_id": spa["client_id"]})
    assert introspected.status_code in (400, 401) and introspected.json["error"] in ("invalid_request",
                                                                                     "invalid_client")
    revoked = client.simulate_post("/oidc/revoke", json={"token": token, "client_id": spa["client_id"]})
    assert revoked.status_code == 200, revoked.text
    assert_oauth_error(refresh(client, spa, token), "invalid_grant")


def test_no_client_credentials_for_a_public_client(client, application, manager_key, spa):
    response = client.simulate_post(clients_url(application), json={
        "name": "x", "redirect_uris": ["https://rp.example.com/cb"], "grant_types": ["client_credentials"], **PUBLIC},
        headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 400 and "grant_types" in response.json["error"]["details"]["fields"]
    update = client.simulate_put(clients_url(application, f"/{spa['id']}"), json={
        "grant_types": ["client_credentials"]}, headers={"Authorization": f"Bearer {manager_key}"})
    assert update.status_code == 400
    refused = client.simulate_post("/oidc/token", json={"grant_type": "client_credentials",
                                                        "client_id": spa["client_id"]})
    assert_oauth_error(refused, "unauthorized_client")


def test_the_auth_method_is_set_at_registration_only(client, application, manager_key, spa):
    response = client.simulate_put(clients_url(application, f"/{spa['id']}"), json={
        "token_endpoint_auth_method": "client_secret_post"}, headers={"Authorization": f"Bearer {manager_key}"})
    assert response.json["data"]["token_endpoint_auth_method"] == "none"  # not an updatable field
    bad = client.simulate_post(clients_url(application), json={
        "name": "x", "redirect_uris": ["https://rp.example.com/cb"], "token_endpoint_auth_method": "private_key_jwt"},
        headers={"Authorization": f"Bearer {manager_key}"})
    assert bad.status_code == 400


def test_discovery_says_so(client):
    metadata = client.simulate_get("/.well-known/openid-configuration").json
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert "none" in metadata["revocation_endpoint_auth_methods_supported"]
    assert "none" not in metadata["introspection_endpoint_auth_methods_supported"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
