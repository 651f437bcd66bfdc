"""The connection model's documents and ConnectionStore: names unique per application,
every read scoped to its application, email-domain routing to active connections."""
from __future__ import annotations

from dataclasses import replace

import pytest

from controlplane.connections.errors import ConnectionNameTaken
from controlplane.connections.model import ClaimMapping, Connection, RoleRule, secret_box
from tests.conftest import TEST_SECRET


@pytest.fixture
def store(ctx):
    return ctx.connections.store


def test_a_connection_survives_its_document(make_connection, clock):
    connection = make_connection(
        "app-1", claim_mapping=ClaimMapping(email="mail", attributes={"department": "dept"}),
        role_mapping=(RoleRule(claim="groups", value="admins", role="admin"),), email_domains=("acme.com",))
    doc = connection.to_document()
    assert doc["type"] == "oidc" and doc["oidc"]["issuer"] == "https://idp.example.com"
    assert "issuer" not in doc  # protocol settings live under the type's own key
    again = Connection.from_document(doc)
    assert again == connection and hash(again) == hash(connection)
    assert dict(again.claim_mapping.attributes) == {"department": "dept"}


def test_client_secret_is_decrypted_only_through_the_box(make_connection):
    box = secret_box(TEST_SECRET)
    connection = make_connection("app-1", client_secret_enc=box.encrypt("s3cret"))
    assert "s3cret" not in str(connection.to_document())
    assert connection.client_secret(box) == "s3cret"
    assert make_connection("app-1").client_secret(box) is None


def test_store_round_trip_scoped_to_the_application(store, make_connection):
    connection = make_connection("app-1")
    store.insert(connection)
    assert store.get("app-1", connection.id) == connection
    assert store.get("app-2", connection.id) is None
    assert store.list("app-2") == []
    assert [c.id for c in store.list("app-1")] == [connection.id]


def test_names_are_unique_per_application(store, make_connection):
    store.insert(make_connection("app-1", name="acme"))
    with pytest.raises(ConnectionNameTaken):
        store.insert(make_connection("app-1", name="acme"))
    store.insert(make_connection("app-2", name="acme"))  # another application may use it


def test_the_name_index_is_created_with_the_others(ctx):
    ctx.store.ensure_indexes()
    keys = [list(index["key"]) for index in ctx.store["connections"].index_information().values()
            if index.get("unique")]
    assert [("app_id", 1), ("name", 1)] in keys


def test_list_active_only_and_email_domain_routing(store, make_connection, clock):
    active = make_connection("app-1", name="a", email_domains=("acme.com",))
    inactive = make_connection("app-1", name="b", email_domains=("other.com",), is_active=False)
    store.insert(active)
    store.insert(inactive)
    assert [c.name for c in store.list("app-1", active_only=True)] == ["a"]
    assert store.for_email_domain("app-1", "ACME.com").id == active.id
    assert store.for_email_domain("app-1", "other.com") is None
    assert store.for_email_domain("app-2", "acme.com") is None


def test_replace_is_compare_and_set(store, make_connection, clock):
    connection = make_connection("app-1")
    store.insert(connection)
    clock.advance(1)
    renamed = replace(connection, display_name="Acme SSO", updated_at=clock())
    assert store.replace(renamed, expected_updated_at=connection.updated_at)
    assert not store.replace(replace(connection, display_name="stale"), expected_updated_at=connection.updated_at)
    assert store.get("app-1", connection.id).display_name == "Acme SSO"
