"""V1/connections: create, list, get, update and delete an application's upstream
identity providers, against a real HTTP provider on 127.0.0.1 (``conftest.Provider``)."""
from __future__ import annotations

import pytest

from controlplane.connections.model import secret_box
from tests.conftest import TEST_SECRET, assert_error, bearer


def test_create_pins_discovery_and_never_answers_the_secret(create, provider, client, connections_url, manager):
    resp = create(display_name="Acme SSO", email_domains=["Acme.com"], scopes=["email", "profile"])
    assert resp.status_code == 201, resp.text
    data = resp.json["data"]
    assert data["type"] == "oidc" and data["preset"] is None and data["name"] == "acme"
    assert data["display_name"] == "Acme SSO" and data["issuer"] == provider.issuer
    assert data["scopes"] == ["openid", "email", "profile"]  # openid added first
    assert data["email_domains"] == ["acme.com"]
    assert data["has_client_secret"] is True and "client_secret" not in data
    assert "s3cret-value" not in resp.text
    endpoints = data["endpoints"]
    assert endpoints["authorization_endpoint"] == f"{provider.issuer}/auth"
    assert endpoints["token_endpoint"] == f"{provider.issuer}/token"
    assert endpoints["jwks_uri"] == f"{provider.issuer}/jwks"
    assert endpoints["iss_parameter_supported"] is True and endpoints["fetched_at"]
    assert provider.requests == ["/.well-known/openid-configuration"]
    assert data["linking"] == "none" and data["jit"] is True and data["is_active"] is True
    assert data["claim_mapping"] == {"email": "email", "email_verified": "email_verified", "name": "name",
                                     "picture": "picture", "attributes": {}}

    listed = client.simulate_get(connections_url, headers=manager)
    assert [c["id"] for c in listed.json["data"]] == [data["id"]]
    got = client.simulate_get(f"{connections_url}/{data['id']}", headers=manager)
    assert got.json["data"] == data
    assert '"client_secret"' not in listed.text and "s3cret-value" not in listed.text + got.text


def test_the_secret_is_stored_encrypted(create, ctx):
    connection_id = create().json["data"]["id"]
    raw = ctx.store["connections"].find_one({"_id": connection_id})
    stored = raw["oidc"]["client_secret"]
    assert "s3cret-value" not in str(raw)
    assert secret_box(TEST_SECRET).decrypt(stored) == b"s3cret-value"
    assert ctx.connections.get(raw["app_id"], connection_id).client_secret(ctx.connections.box) == "s3cret-value"


def test_update_changes_only_what_is_sent(create, client, connections_url, manager, ctx):
    created = create(email_domains=["acme.com"]).json["data"]
    url = f"{connections_url}/{created['id']}"
    resp = client.simulate_patch(url, json={"display_name": "Acme", "jit": False, "linking": "verify",
                                            "claim_mapping": {"name": "preferred_username",
                                                              "attributes": {"department": "dept"}},
                                            "role_mapping": [{"claim": "groups", "value": "admins",
                                                              "role": "admin"}]}, headers=manager)
    assert resp.status_code == 200, resp.text
    data = resp.json["data"]
    assert data["display_name"] == "Acme" and data["jit"] is False and data["linking"] == "verify"
    assert data["claim_mapping"]["name"] == "preferred_username"
    assert data["claim_mapping"]["email"] == "email"  # not sent: unchanged
    assert data["claim_mapping"]["attributes"] == {"department": "dept"}
    assert data["role_mapping"] == [{"claim": "groups", "value": "admins", "role": "admin"}]
    assert data["email_domains"] == ["acme.com"] and data["has_client_secret"] is True
    assert data["updated_at"] > created["updated_at"]

    cleared = client.simulate_patch(url, json={"client_secret": None}, headers=manager)
    assert cleared.json["data"]["has_client_secret"] is False
    assert ctx.store["connections"].find_one({"_id": created["id"]})["oidc"]["client_secret"] is None


def test_update_of_the_issuer_pins_discovery_again(create, client, connections_url, manager, provider):
    created = create().json["data"]
    provider.discovery["token_endpoint"] = f"{provider.issuer}/token2"
    url = f"{connections_url}/{created['id']}"
    unchanged = client.simulate_patch(url, json={"display_name": "Other"}, headers=manager)
    assert unchanged.json["data"]["endpoints"]["token_endpoint"] == f"{provider.issuer}/token"
    repinned = client.simulate_patch(url, json={"issuer": provider.issuer}, headers=manager)
    assert repinned.status_code == 200, repinned.text
    assert repinned.json["data"]["endpoints"]["token_endpoint"] == f"{provider.issuer}/token2"


def test_delete(create, client, connections_url, manager, ctx):
    connection_id = create().json["data"]["id"]
    assert client.simulate_delete(f"{connections_url}/{connection_id}", headers=manager).status_code == 204
    assert ctx.store["connections"].count_documents({}) == 0
    assert_error(client.simulate_get(f"{connections_url}/{connection_id}", headers=manager), 404,
                 "CONNECTION_NOT_FOUND")
    assert_error(client.simulate_delete(f"{connections_url}/{connection_id}", headers=manager), 404,
                 "CONNECTION_NOT_FOUND")


@pytest.mark.parametrize("connection_id", ["not-a-uuid", "0d5f7a0e-2f7e-4a5e-9f3c-1d2e3f4a5b6c"])
def test_unknown_ids_are_not_found(client, connections_url, manager, connection_id):
    url = f"{connections_url}/{connection_id}"
    for resp in (client.simulate_get(url, headers=manager),
                 client.simulate_patch(url, json={"display_name": "x"}, headers=manager),
                 client.simulate_post(f"{url}/test", json={}, headers=manager)):
        assert assert_error(resp, 404, "CONNECTION_NOT_FOUND")["details"] == {"connection_id": connection_id}


def test_audit_records_name_the_fields_but_never_the_secret(create, client, connections_url, manager, ctx):
    connection_id = create().json["data"]["id"]
    client.simulate_patch(f"{connections_url}/{connection_id}", json={"client_secret": "another-secret",
                                                                       "display_name": "Acme 2"}, headers=manager)
    client.simulate_delete(f"{connections_url}/{connection_id}", headers=manager)
    records = list(ctx.store["events"].find({"action": {"$regex": "^upstream_connection\\."}}).sort("seq", 1))
    assert [r["action"] for r in records] == ["upstream_connection.created", "upstream_connection.updated",
                                            "upstream_connection.deleted"]
    assert all(r["target"] == {"type": "upstream_connection", "id": connection_id, "display": "acme"}
               for r in records)
    created, updated = records[0]["data"], records[1]["data"]
    assert "client_secret" in created["fields"] and "client_secret" not in created["after"]
    assert created["after"]["issuer"].startswith("http://127.0.0.1:")
    assert updated["fields"] == ["display_name", "client_secret"]
    assert updated["after"] == {"display_name": "Acme 2"}
    assert "secret" not in str(records).replace("client_secret", "")


# ---------------------------------------------------------------- the permission gate


def test_connections_manage_is_required_of_api_keys(client, application, connections_url, make_api_key, create):
    connection_id = create().json["data"]["id"]
    other = bearer(make_api_key(application, permissions=["webhooks:manage", "connections:tokens"]))
    for resp in (client.simulate_get(connections_url, headers=other),
                 client.simulate_post(connections_url, json={"name": "x", "client_id": "y"}, headers=other),
                 client.simulate_get(f"{connections_url}/{connection_id}", headers=other),
                 client.simulate_patch(f"{connections_url}/{connection_id}", json={"jit": False}, headers=other),
                 client.simulate_delete(f"{connections_url}/{connection_id}", headers=other),
                 client.simulate_post(f"{connections_url}/{connection_id}/test", json={}, headers=other)):
        error = assert_error(resp, 403, "FORBIDDEN")
        assert error["details"]["required_permission"] == "connections:manage"


def test_the_default_api_key_holds_connections_manage(client, connections_url, api_key):
    assert client.simulate_get(connections_url, headers=bearer(api_key)).status_code == 200


def test_end_users_need_a_role_granting_connections_manage(client, application, connections_url, stored_user,
                                                           token_for, make_role, assign_role, create):
    user = stored_user(application)
    token = bearer(token_for(application, user))
    assert_error(client.simulate_get(connections_url, headers=token), 403, "FORBIDDEN")
    assign_role(application, user, make_role(application, "sso-admin", ["connections:manage"]))
    create()
    assert [c["name"] for c in client.simulate_get(connections_url, headers=token).json["data"]] == ["acme"]


def test_the_openapi_document_says_connections_manage_is_administration(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    manage = [op for item in paths.values() for op in item.values()
              if "permission connections:manage" in op.get("description", "")]
    assert len(manage) == 6  # list, create, get, update, delete, test
    assert all("administration of sign-in" in op["description"] and "trusted_email" in op["description"]
               for op in manage)


def test_no_credential_is_401(client, connections_url):
    assert_error(client.simulate_get(connections_url), 401)


# ---------------------------------------------------------------- tenant isolation


def test_another_application_can_neither_see_nor_change_a_connection(create, client, connections_url, manager,
                                                                     make_application, make_api_key, ctx):
    connection_id = create().json["data"]["id"]
    other = make_application("Other App")
    other_url = f"/api/v1/applications/{other['_id']}/connections"
    other_key = bearer(make_api_key(other, permissions=["connections:manage"]))
    assert client.simulate_get(other_url, headers=other_key).json["data"] == []
    for resp in (client.simulate_get(f"{other_url}/{connection_id}", headers=other_key),
                 client.simulate_patch(f"{other_url}/{connection_id}", json={"display_name": "mine"},
                                       headers=other_key),
                 client.simulate_delete(f"{other_url}/{connection_id}", headers=other_key),
                 client.simulate_post(f"{other_url}/{connection_id}/test", json={}, headers=other_key)):
        assert_error(resp, 404, "CONNECTION_NOT_FOUND")
    # B's key on A's path is refused before anything is read.
    assert client.simulate_get(f"{connections_url}/{connection_id}", headers=other_key).status_code in (401, 403)
    assert client.simulate_get(f"{connections_url}/{connection_id}", headers=manager).json["data"]["name"] == "acme"
    # The same name is free in another application.
    assert client.simulate_post(other_url, json={"preset": "github", "client_id": "c"},
                                headers=other_key).status_code == 201
    assert ctx.store["connections"].count_documents({"app_id": other["_id"]}) == 1


def test_the_list_pages_when_asked(create, client, connections_url, manager, clock):
    ids = []
    for n in range(3):
        ids.append(create(name=f"acme-{n}").json["data"]["id"])
        clock.advance(1)  # oldest first
    whole = client.simulate_get(connections_url, headers=manager).json
    assert set(whole) == {"data"} and [c["id"] for c in whole["data"]] == ids
    page = client.simulate_get(connections_url, params={"per_page": 2, "page": 2}, headers=manager).json
    assert [c["id"] for c in page["data"]] == ids[2:]
    assert (page["current_page"], page["last_page"], page["per_page"], page["total"]) == (2, 2, 2, 3)
    assert "s3cret-value" not in str(page)
    assert_error(client.simulate_get(connections_url, params={"per_page": 101}, headers=manager), 400,
                 "VALIDATION_INVALID_FORMAT")
