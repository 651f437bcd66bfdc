"""Upstream tokens kept for the application's back end (store_tokens): encrypted at rest,
served by GET V1/users/{id}/identities/{identityId}/token with connections:tokens,
refreshed near expiry, with connection.refreshed / connection.failed."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error, bearer, events_of
from tests.connections.flow.conftest import Browser, identities_url
from tests.plugins.users import PASSWORD


@pytest.fixture
def signed_in(client, ctx, idp_app, provider, add_connection):
    """(connection, user id, identity id) after a sign-in through a storing connection."""
    connection = add_connection(idp_app, provider, store_tokens=True)
    response = Browser(client, idp_app).sign_in(connection.id)
    assert response.status_code == 200, response.text
    user_id = response.json["data"]["user"]["id"]
    identity = ctx.store["identities"].find_one({"user_id": user_id})
    return connection, user_id, identity["_id"]


def _token(client, app, user_id, identity_id, key):
    return client.simulate_get(identities_url(app, user_id, f"/{identity_id}/token"), headers=bearer(key))


def test_tokens_are_encrypted_at_rest_and_served_with_the_permission(client, ctx, idp_app, provider, signed_in,
                                                                      make_api_key):
    _, user_id, identity_id = signed_in
    [issued] = provider.access_tokens
    stored = ctx.store["identities"].find_one({"_id": identity_id})["tokens"]
    assert issued not in str(stored)  # only ciphertext
    response = _token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["connections:tokens"]))
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert data["access_token"] == issued and data["token_type"] == "Bearer" and data["id_token"]
    assert "refresh_token" not in data
    assert response.headers["Cache-Control"].startswith("no-store")


def test_the_permission_is_required(client, idp_app, signed_in, make_api_key):
    _, user_id, identity_id = signed_in
    assert_error(_token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["users:read"])), 403)


def test_not_stored_is_404(client, idp_app, provider, add_connection, make_api_key, ctx):
    connection = add_connection(idp_app, provider, store_tokens=False)
    user_id = Browser(client, idp_app).sign_in(connection.id).json["data"]["user"]["id"]
    identity_id = ctx.store["identities"].find_one({"user_id": user_id})["_id"]
    key = make_api_key(idp_app, ["connections:tokens"])
    assert_error(_token(client, idp_app, user_id, identity_id, key), 404, "IDENTITY_TOKENS_NOT_STORED")
    assert_error(_token(client, idp_app, user_id, "00000000-0000-4000-8000-000000000000", key), 404,
                 "IDENTITY_NOT_FOUND")


def _patch(client, app, connection_id, body, make_api_key):
    return client.simulate_patch(f"/api/v1/applications/{app['_id']}/connections/{connection_id}", json=body,
                                 headers=bearer(make_api_key(app, ["connections:manage"])))


def test_turning_store_tokens_off_forgets_the_stored_tokens(client, ctx, clock, idp_app, provider, signed_in,
                                                            make_api_key):
    """The tokens go with the setting, and are neither served nor refreshed any more."""
    connection, user_id, identity_id = signed_in
    patched = _patch(client, idp_app, connection.id, {"store_tokens": False}, make_api_key)
    assert patched.status_code == 200, patched.text
    assert not ctx.store["identities"].find_one({"_id": identity_id}).get("tokens")
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200  # a later sign-in keeps none
    assert not ctx.store["identities"].find_one({"_id": identity_id}).get("tokens")
    clock.advance(3600)
    requests = len(provider.token_requests)
    assert_error(_token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["connections:tokens"])),
                 404, "IDENTITY_TOKENS_NOT_STORED")
    assert len(provider.token_requests) == requests  # no refresh at the provider


def test_tokens_kept_while_the_connection_stored_them_are_not_served(client, ctx, clock, idp_app, provider,
                                                                     signed_in, make_api_key):
    """A sign-in that read the connection before the setting changed may store tokens
    after they were forgotten: the connection's setting decides what is served."""
    connection, user_id, identity_id = signed_in
    ctx.store["connections"].update_one({"_id": connection.id}, {"$set": {"store_tokens": False}})
    ctx.store["identities"].update_one({"_id": identity_id}, {"$set": {"tokens.expires_at": clock()}})  # to refresh
    requests = len(provider.token_requests)
    assert_error(_token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["connections:tokens"])),
                 404, "IDENTITY_TOKENS_NOT_STORED")
    assert len(provider.token_requests) == requests
    # The next sign-in through the connection drops them.
    assert Browser(client, idp_app).sign_in(connection.id).status_code == 200
    assert not ctx.store["identities"].find_one({"_id": identity_id}).get("tokens")


def test_an_update_that_fails_keeps_the_tokens(client, ctx, idp_app, provider, signed_in, add_connection,
                                               make_api_key):
    connection, user_id, identity_id = signed_in
    other = add_connection(idp_app, provider)
    refused = _patch(client, idp_app, connection.id, {"store_tokens": False, "name": other.name}, make_api_key)
    assert_error(refused, 409, "CONNECTION_NAME_TAKEN")
    assert ctx.store["identities"].find_one({"_id": identity_id})["tokens"]
    served = _token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["connections:tokens"]))
    assert served.status_code == 200, served.text


def test_a_pending_link_completed_after_store_tokens_is_off_keeps_no_tokens(client, ctx, idp_app, provider,
                                                                            add_connection, make_user,
                                                                            make_api_key):
    user = make_user(idp_app, email="ada@example.com")
    connection = add_connection(idp_app, provider, linking="verify", store_tokens=True)
    browser = Browser(client, idp_app)
    link_id = assert_error(browser.sign_in(connection.id), 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    assert _patch(client, idp_app, connection.id, {"store_tokens": False}, make_api_key).status_code == 200
    linked = browser.post("/link", {"link_id": link_id, "binding": browser.binding, "password": PASSWORD})
    assert linked.status_code == 200, linked.text
    assert not ctx.store["identities"].find_one({"user_id": user["id"]}).get("tokens")


def test_near_expiry_the_token_is_refreshed_once(client, ctx, clock, idp_app, provider, signed_in, make_api_key):
    connection, user_id, identity_id = signed_in
    key = make_api_key(idp_app, ["connections:tokens"])
    [first] = provider.access_tokens
    clock.advance(3600 - 30)  # 30 seconds left: within the margin
    response = _token(client, idp_app, user_id, identity_id, key)
    assert response.status_code == 200, response.text
    fresh = response.json["data"]["access_token"]
    assert fresh != first and fresh in provider.access_tokens
    refresh = provider.token_requests[-1]
    assert refresh["form"]["grant_type"] == "refresh_token" and refresh["authorization"].startswith("Basic ")
    [event] = events_of(ctx, "connection.refreshed", user_id)
    assert event["data"] == {"kind": "upstream", "connection_id": connection.id, "identity_id": identity_id,
                             "user_id": user_id}
    # Served again without another refresh while it is fresh.
    assert _token(client, idp_app, user_id, identity_id, key).json["data"]["access_token"] == fresh
    assert len(events_of(ctx, "connection.refreshed", user_id)) == 1


def test_a_failed_refresh_is_502_and_connection_failed(client, ctx, clock, idp_app, provider, signed_in,
                                                       make_api_key):
    connection, user_id, identity_id = signed_in
    provider.refresh_fails = True
    clock.advance(3600)
    response = _token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["connections:tokens"]))
    error = assert_error(response, 502, "CONNECTION_PROVIDER_ERROR")
    assert "invalid_grant" in error["message"]
    [event] = events_of(ctx, "connection.failed", user_id)
    assert event["data"]["kind"] == "upstream" and event["data"]["identity_id"] == identity_id


def test_a_deleted_users_identities_and_tokens_go_with_it(client, ctx, idp_app, provider, signed_in):
    _, user_id, identity_id = signed_in
    pair = Browser(client, idp_app).sign_in(signed_in[0].id).json["data"]
    response = client.simulate_delete(f"/api/v1/applications/{idp_app['_id']}/users/{user_id}",
                                      headers=bearer(pair["access_token"]))
    assert response.status_code in (200, 204), response.text
    assert ctx.store["identities"].count_documents({"_id": identity_id}) == 0
    # The same upstream account is no longer linked to anyone.
    assert ctx.store["identities"].count_documents({"app_id": idp_app["_id"]}) == 0


def test_only_the_applications_back_end_reads_upstream_tokens(client, ctx, idp_app, signed_in, make_api_key,
                                                                make_application, stored_user, make_role,
                                                                assign_role, token_for):
    """The user's own token is not enough (the tokens are for the back end); another
    application's key, a key without the permission and another user's token are refused;
    a user whose roles grant connections:tokens is served."""
    _, user_id, identity_id = signed_in
    own = ctx.tokens.issue_access_token(idp_app["_id"], user_id, None)[0]
    assert_error(_token(client, idp_app, user_id, identity_id, own), 403)
    other_app_key = make_api_key(make_application("Other App"), ["connections:tokens"])
    assert _token(client, idp_app, user_id, identity_id, other_app_key).status_code in (401, 403, 404)
    assert_error(_token(client, idp_app, user_id, identity_id, make_api_key(idp_app, ["users:manage"])), 403)
    backend = stored_user(idp_app)
    assert_error(_token(client, idp_app, user_id, identity_id, token_for(idp_app, backend)), 403)
    assign_role(idp_app, backend, make_role(idp_app, permissions=["connections:tokens"]))
    response = _token(client, idp_app, user_id, identity_id, token_for(idp_app, backend))
    assert response.status_code == 200, response.text
