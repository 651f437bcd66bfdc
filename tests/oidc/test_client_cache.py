"""The per-worker copy of OIDC clients the token endpoint authenticates against
(controlplane.oidc.clients, ``controlplane.lookup_cache``): a warm client costs no store
read, and still a change to the client (its secret, its grant types, its deactivation, its
deletion, its application's deletion) is refused at once in the worker that made it, at
the next change-log poll in every other worker, and within ``CLIENT_CACHE_TTL`` when no
event says so at all.

Two apps on one store stand for two workers (or replicas) of the same deployment.  Each
test warms both workers first, so a stale copy would be there to be (wrongly) used."""
from __future__ import annotations

import falcon.testing
import pytest

from controlplane.app import create_app
from controlplane.lookup_cache import LookupCache
from controlplane.oidc.clients import CLIENT_CACHE_TTL
from shared.ids import digest
from tests.conftest import bearer
from tests.oidc.conftest import assert_oauth_error, clients_url

MACHINE = {"grant_types": ["client_credentials"], "allowed_scopes": ["openid"]}


@pytest.fixture
def other(config, clock, ctx):
    """A second worker on the same store, with its own caches and tailer."""
    app = create_app(config, store=ctx.store, clock=clock, start_background=False)
    return falcon.testing.TestClient(app), app.services


@pytest.fixture
def machine(application, oidc_client):
    return oidc_client(application, **MACHINE)


def token(client, rp, secret=None):
    return client.simulate_post("/oidc/token", json={
        "grant_type": "client_credentials", "client_id": rp["client_id"],
        "client_secret": secret or rp["client_secret"]})


def warm(*clients, rp):
    for client in clients:
        for _ in range(2):  # the first token writes connected_at and drops the copy it read
            assert token(client, rp).status_code == 200


def put(client, application, manager_key, rp, **changes):
    response = client.simulate_put(clients_url(application, f"/{rp['client_id']}"), json=changes,
                                   headers=bearer(manager_key))
    assert response.status_code == 200, response.text


def test_a_warm_client_costs_no_store_read(client, ctx, machine, monkeypatch):
    warm(client, rp=machine)
    reads = []
    real = ctx.oidc.clients.store.by_client_id
    monkeypatch.setattr(ctx.oidc.clients.store, "by_client_id", lambda *a: reads.append(a) or real(*a))
    warm(client, rp=machine)
    assert reads == []


def test_a_secret_changed_by_hand_stops_the_old_one_within_the_ttl(client, ctx, clock, machine):
    """A write that emits no event (an operator's, a restore): the copy lives at most the TTL."""
    warm(client, rp=machine)
    ctx.store["oidc_clients"].update_one({"client_id": machine["client_id"]},
                                         {"$set": {"secret_digest": digest("the new secret")}})
    clock.advance(CLIENT_CACHE_TTL + 0.1)
    assert_oauth_error(token(client, machine), "invalid_grant")
    assert token(client, machine, "the new secret").status_code == 200


@pytest.mark.parametrize("change", ["deactivated", "grant_types", "deleted", "application_deleted"])
def test_a_change_stops_the_client_at_once_here_and_at_the_next_poll_elsewhere(client, ctx, other, application,
                                                                               manager_key, machine, change):
    other_client, other_ctx = other
    warm(client, other_client, rp=machine)
    if change == "deactivated":
        put(client, application, manager_key, machine, is_active=False)
    elif change == "grant_types":
        put(client, application, manager_key, machine, grant_types=["authorization_code"])
    elif change == "deleted":
        assert client.simulate_delete(clients_url(application, f"/{machine['client_id']}"),
                                      headers=bearer(manager_key)).status_code == 204
    else:
        ctx.applications.delete(application["_id"])
    expected = "unauthorized_client" if change == "grant_types" else "invalid_grant"
    assert_oauth_error(token(client, machine), expected)  # this worker: before the change's answer
    assert other_ctx.tailer.poll_once() >= 1
    assert_oauth_error(token(other_client, machine), expected)


def test_a_reactivated_client_is_accepted_again_everywhere(client, ctx, other, application, manager_key, machine):
    other_client, other_ctx = other
    warm(client, other_client, rp=machine)
    put(client, application, manager_key, machine, is_active=False)
    other_ctx.tailer.poll_once()
    assert_oauth_error(token(other_client, machine), "invalid_grant")  # misses are not cached
    put(client, application, manager_key, machine, is_active=True)
    other_ctx.tailer.poll_once()
    assert token(client, machine).status_code == 200
    assert token(other_client, machine).status_code == 200


def test_a_load_racing_a_change_does_not_keep_the_old_client(client, ctx, application, machine, monkeypatch):
    """A token request read the client just before a deactivation landed: its copy is not
    stored, so the next request reads the deactivated client."""
    warm(client, rp=machine)  # connected: a token writes nothing that would drop the copy
    ctx.oidc.clients._by_client_id.drop(machine["client_id"])
    store = ctx.oidc.clients.store
    real = store.by_client_id

    def read_then_change(client_id):
        found = real(client_id)
        monkeypatch.setattr(store, "by_client_id", real)
        ctx.oidc.clients.update(application["_id"], client_id, {"is_active": False})
        return found

    monkeypatch.setattr(store, "by_client_id", read_then_change)
    assert token(client, machine).status_code == 200  # answered from what it read
    assert_oauth_error(token(client, machine), "invalid_grant")


def test_only_the_first_token_of_each_worker_writes_the_connection(client, ctx, other, machine, monkeypatch):
    """The copy read before the first token has no connected_at: the write that sets it
    drops the copy, so later tokens neither write nor emit connection.created."""
    other_client, _ = other
    writes = []
    real = ctx.oidc.clients.store.mark_connected
    monkeypatch.setattr(ctx.oidc.clients.store, "mark_connected", lambda *a: writes.append(a) or real(*a))
    for _ in range(4):
        assert token(client, machine).status_code == 200
    assert len(writes) == 1
    created = list(ctx.store["events"].find({"type": "connection.created", "data.client_id": machine["client_id"]}))
    warm(other_client, rp=machine)
    assert len(created) == 1
    assert ctx.store["events"].count_documents({"type": "connection.created"}) == 1


def test_with_and_without_the_copy_every_answer_is_the_same(client, ctx, other, application, manager_key,
                                                           oidc_client, monkeypatch):
    """Two worlds on one store: the same scenario of token requests and client changes (by
    this worker and by another) runs on a fresh client once with no copy (a cache of TTL 0,
    every request reads the store: the reference) and once with the copy; after every
    step both answer alike."""
    other_client, other_ctx = other

    def scenario():
        rp = oidc_client(application, grant_types=["client_credentials", "authorization_code"],
                         allowed_scopes=["openid"])
        answers = []

        def ask(worker=client, secret=None, **extra):
            response = worker.simulate_post("/oidc/token", json={
                "grant_type": "client_credentials", "client_id": rp["client_id"],
                "client_secret": secret or rp["client_secret"], **extra})
            answers.append((response.status_code, response.json.get("error"), response.json.get("scope")))

        ask(), ask(), ask(other_client), ask(scope="openid"), ask(secret="wrong")
        put(client, application, manager_key, rp, allowed_scopes=["profile"])
        other_ctx.tailer.poll_once()
        ask(scope="openid"), ask(other_client, scope="openid"), ask()
        put(other_client, application, manager_key, rp, grant_types=["authorization_code"])
        ctx.tailer.poll_once()
        ask(), ask(other_client)
        put(client, application, manager_key, rp, grant_types=["client_credentials"], is_active=False)
        other_ctx.tailer.poll_once()
        ask(), ask(other_client)
        put(client, application, manager_key, rp, is_active=True)
        other_ctx.tailer.poll_once()
        ask(), ask(other_client)
        assert client.simulate_delete(clients_url(application, f"/{rp['client_id']}"),
                                      headers=bearer(manager_key)).status_code == 204
        other_ctx.tailer.poll_once()
        ask(), ask(other_client)
        return answers

    with monkeypatch.context() as patch:
        for services in (ctx, other_ctx):
            patch.setattr(services.oidc.clients, "_by_client_id",
                          LookupCache(ttl=0, maxsize=1, timer=lambda: 0.0))
        reference = scenario()
    assert scenario() == reference
    assert [status for status, _, _ in reference] == [200, 200, 200, 200, 400, 400, 400, 200, 400, 400, 400, 400,
                                                       200, 200, 400, 400]
