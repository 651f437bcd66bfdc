"""Deleting a connection removes its identities (their stored upstream tokens with them),
its pending links and its email-domain claims, with connection.revoked per identity; the
users stay.  A delete that fails part way leaves an inactive connection and whole
identities, and a retry finishes it."""
from __future__ import annotations

import pytest

from controlplane.connections.store import ConnectionStore
from tests.conftest import assert_error, bearer, events_of
from tests.connections.flow.conftest import Browser


@pytest.fixture
def linked(client, ctx, idp_app, provider, add_connection):
    """A storing connection claiming example.com, a user signed in through it, and a
    pending link of it."""
    connection = add_connection(idp_app, provider, store_tokens=True, email_domains=("example.com",))
    ConnectionStore(ctx.store).claim_domains(idp_app["_id"], connection.id, ["example.com"], ctx.clock())
    response = Browser(client, idp_app).sign_in(connection.id)
    assert response.status_code == 200, response.text
    user_id = response.json["data"]["user"]["id"]
    ctx.store["connection_links"].insert_one({"_id": "pending", "app_id": idp_app["_id"],
                                              "connection_id": connection.id, "expires_at": ctx.clock()})
    return connection, user_id


def _delete(client, app, connection_id, key):
    return client.simulate_delete(f"/api/v1/applications/{app['_id']}/connections/{connection_id}",
                                  headers=bearer(key))


def test_deleting_a_connection_removes_its_identities_tokens_links_and_domains(client, ctx, idp_app, linked,
                                                                               make_api_key):
    connection, user_id = linked
    identity = ctx.store["identities"].find_one({"user_id": user_id})
    assert identity["tokens"]
    response = _delete(client, idp_app, connection.id, make_api_key(idp_app, ["connections:manage"]))
    assert response.status_code == 204, response.text
    assert ctx.store["identities"].count_documents({"connection_id": connection.id}) == 0
    assert ctx.store["connection_links"].count_documents({"connection_id": connection.id}) == 0
    assert ctx.store["connection_email_domains"].count_documents({"connection_id": connection.id}) == 0
    [event] = events_of(ctx, "connection.revoked", user_id)
    assert event["data"] == {"kind": "upstream", "connection_id": connection.id, "identity_id": identity["_id"],
                             "user_id": user_id, "reason": "connection_deleted"}
    # The user keeps the account, and can take it back with a password reset by email.
    assert ctx.store["users"].find_one({"_id": user_id})["status"] == "active"


def test_a_delete_that_fails_part_way_leaves_an_inactive_connection_a_retry_removes(client, ctx, idp_app, linked,
                                                                                     make_api_key, monkeypatch):
    connection, user_id = linked
    key = make_api_key(idp_app, ["connections:manage"])

    def broken(self, app_id, connection_id):
        raise RuntimeError("the store went away")

    with monkeypatch.context() as patched:
        patched.setattr(ConnectionStore, "delete", broken)
        assert _delete(client, idp_app, connection.id, key).status_code == 500
    stored = ctx.store["connections"].find_one({"_id": connection.id})
    assert stored["is_active"] is False  # no sign-in goes through it meanwhile
    assert_error(Browser(client, idp_app).post(f"/{connection.id}/start", {
        "redirect_uri": "https://app.example.com/signed-in", "binding": "b" * 32}), 409)
    assert _delete(client, idp_app, connection.id, key).status_code == 204
    assert ctx.store["connections"].count_documents({"_id": connection.id}) == 0
    assert ctx.store["identities"].count_documents({"connection_id": connection.id}) == 0
    assert ctx.store["connection_email_domains"].count_documents({"connection_id": connection.id}) == 0
    assert len(events_of(ctx, "connection.revoked", user_id)) == 1


def test_a_sign_in_finishing_while_its_connection_is_deleted_links_nothing(client, ctx, idp_app, provider,
                                                                           add_connection, make_api_key,
                                                                           monkeypatch):
    """The delete makes the connection inactive before it sweeps; a sign-in that read the
    connection before that and links after the sweep sees it inactive after its insert
    and takes its identity back."""
    connection = add_connection(idp_app, provider)
    browser = Browser(client, idp_app)
    params = browser.at_provider(browser.start(connection.id))
    store = ctx.connection_sign_in.identities.identities
    insert = store.insert

    def insert_then_the_delete_runs(doc):
        insert(doc)
        ctx.store["connections"].update_one({"_id": connection.id}, {"$set": {"is_active": False}})

    monkeypatch.setattr(store, "insert", insert_then_the_delete_runs)
    assert_error(browser.callback(params), 409, "CONNECTION_INACTIVE")
    assert ctx.store["identities"].count_documents({"connection_id": connection.id}) == 0
    assert events_of(ctx, "connection.created") == []
