"""POST V1/oidc/clients/{clientId}/rotate-secret (oidc:manage): a confidential client's new
secret, shown once, authenticates at the token endpoint at once; the secret it replaced
goes on working for the grace the caller gave (``previous_secret_valid_for``) and not a
second longer, and a second rotation ends it.  Nothing records a secret; the per-worker
copy of the client never answers with the old one."""
from __future__ import annotations

import falcon.testing
import pytest

from controlplane.app import create_app
from controlplane.oidc.schemas import MAX_SECRET_GRACE
from shared.ids import digest
from shared.timeutil import isoformat, seconds
from tests.conftest import assert_error, bearer
from tests.oidc.conftest import assert_oauth_error, clients_url

MACHINE = {"grant_types": ["client_credentials"], "allowed_scopes": ["openid"]}
HOUR = 3600


@pytest.fixture
def machine(application, oidc_client):
    return oidc_client(application, **MACHINE)


@pytest.fixture
def rotate(client, application, manager_key):
    """``rotate(rp, **body)`` -> the rotate-secret response (``json=None``: no body)."""
    def do(rp, app=None, key=None, json=None, **body):
        return client.simulate_post(clients_url(app or application, f"/{rp['client_id']}/rotate-secret"),
                                    json=body if json is None else json, headers=bearer(key or manager_key))

    return do


def rotated(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json["data"]


def token(client, rp, secret):
    """A client credentials token request authenticated with ``secret``."""
    return client.simulate_post("/oidc/token", json={
        "grant_type": "client_credentials", "client_id": rp["client_id"], "client_secret": secret})


def introspect(client, rp, secret):
    return client.simulate_post("/oidc/introspect", json={"token": "not-a-token", "client_id": rp["client_id"],
                                                          "client_secret": secret})


def accepted(client, rp, secret) -> bool:
    response = token(client, rp, secret)
    if response.status_code == 200:
        return True
    assert_oauth_error(response, "invalid_grant")  # how the token endpoint refuses client credentials
    return False


def test_the_new_secret_is_shown_once_and_authenticates(client, ctx, application, manager_key, machine, rotate):
    response = rotate(machine)
    assert response.headers["cache-control"] == "no-store"
    data = rotated(response)
    assert set(data) == set(machine)  # the client as its registration answered it, client_secret included
    assert {k: v for k, v in data.items() if k not in ("client_secret", "updated_at")} == \
        {k: v for k, v in machine.items() if k not in ("client_secret", "updated_at")}
    assert data["client_secret"] != machine["client_secret"] and data["previous_secret_expires_at"] is None
    stored = ctx.store["oidc_clients"].find_one({"client_id": machine["client_id"]})
    assert stored["secret_digest"] == digest(data["client_secret"]) and data["client_secret"] not in str(stored)
    assert stored["previous_secret_digest"] is None and stored["previous_secret_expires_at"] is None
    assert accepted(client, machine, data["client_secret"])

    fetched = client.simulate_get(clients_url(application, f"/{machine['id']}"), headers=bearer(manager_key))
    assert "client_secret" not in fetched.json["data"] and fetched.json["data"]["previous_secret_expires_at"] is None


def test_by_its_id_too_and_with_no_body_the_old_secret_stops_at_once(client, application, manager_key, machine):
    response = client.simulate_post(clients_url(application, f"/{machine['id']}/rotate-secret"),
                                    headers={**bearer(manager_key), "Content-Type": "application/json"})
    new = rotated(response)["client_secret"]
    assert not accepted(client, machine, machine["client_secret"])
    assert accepted(client, machine, new)


def test_the_old_secret_works_within_the_grace_and_not_after(client, ctx, clock, application, manager_key,
                                                            machine, rotate):
    clock.now = clock.now.replace(microsecond=0)  # as stored (MongoDB keeps milliseconds): the end is exact
    data = rotated(rotate(machine, previous_secret_valid_for=HOUR))
    ends = clock() + seconds(HOUR)
    assert data["previous_secret_expires_at"] == isoformat(ends)
    fetched = client.simulate_get(clients_url(application, f"/{machine['id']}"), headers=bearer(manager_key))
    assert fetched.json["data"]["previous_secret_expires_at"] == isoformat(ends)
    stored = ctx.store["oidc_clients"].find_one({"client_id": machine["client_id"]})
    assert stored["previous_secret_digest"] == digest(machine["client_secret"])

    assert accepted(client, machine, machine["client_secret"]) and accepted(client, machine, data["client_secret"])
    assert introspect(client, machine, machine["client_secret"]).status_code == 200
    clock.advance(HOUR - 1)
    assert accepted(client, machine, machine["client_secret"])
    clock.advance(1)  # previous_secret_expires_at: no longer
    assert not accepted(client, machine, machine["client_secret"])
    assert_oauth_error(introspect(client, machine, machine["client_secret"]), "invalid_client", 401)
    assert accepted(client, machine, data["client_secret"])
    assert not accepted(client, machine, "not-any-secret")


def test_a_second_rotation_ends_the_first_ones_previous_secret(client, machine, rotate):
    first = rotated(rotate(machine, previous_secret_valid_for=HOUR))["client_secret"]
    second = rotated(rotate(machine, previous_secret_valid_for=HOUR))["client_secret"]
    assert not accepted(client, machine, machine["client_secret"])  # its grace had not run out
    assert accepted(client, machine, first) and accepted(client, machine, second)
    third = rotated(rotate(machine))["client_secret"]
    assert [accepted(client, machine, s) for s in (machine["client_secret"], first, second, third)] == \
        [False, False, False, True]


def test_the_old_secret_is_refused_at_once_even_by_a_warm_copy(client, ctx, config, clock, machine, rotate):
    """This worker authenticated the client with the old secret (its copy holds the old
    digest): the rotation's event drops the copy before the answer; another worker drops
    its copy at its next change-log poll."""
    app = create_app(config, store=ctx.store, clock=clock, start_background=False)
    other_client, other_ctx = falcon.testing.TestClient(app), app.services
    for worker in (client, other_client, client, other_client):  # the first token drops the copy it read
        assert accepted(worker, machine, machine["client_secret"])
    new = rotated(rotate(machine))["client_secret"]
    assert not accepted(client, machine, machine["client_secret"])
    assert accepted(client, machine, new)
    assert other_ctx.tailer.poll_once() >= 1
    assert not accepted(other_client, machine, machine["client_secret"])
    assert accepted(other_client, machine, new)


def test_a_public_client_has_no_secret_to_rotate(ctx, application, oidc_client, rotate):
    spa = oidc_client(application, token_endpoint_auth_method="none")
    error = assert_error(rotate(spa, previous_secret_valid_for=HOUR), 409, "OIDC_CLIENT_PUBLIC")
    assert error["details"] == {"client_id": spa["client_id"]}
    stored = ctx.store["oidc_clients"].find_one({"client_id": spa["client_id"]})
    assert stored["secret_digest"] is None and "previous_secret_digest" not in stored


def test_unknown_and_other_applications_clients_are_not_found(client, ctx, make_application, make_api_key,
                                                              oidc_client, machine, rotate):
    assert_error(rotate({"client_id": "oc_unknown"}), 404, "OIDC_CLIENT_NOT_FOUND")
    other_app = make_application()
    foreign = oidc_client(other_app, **MACHINE)
    assert_error(rotate(foreign), 404, "OIDC_CLIENT_NOT_FOUND")
    other_key = make_api_key(other_app, permissions=["oidc:manage"])
    assert_error(rotate(machine, app=other_app, key=other_key), 404, "OIDC_CLIENT_NOT_FOUND")
    assert accepted(client, foreign, foreign["client_secret"]) and accepted(client, machine, machine["client_secret"])


def test_a_caller_without_oidc_manage_is_refused(client, application, make_api_key, user_token, machine, rotate):
    reader = make_api_key(application, permissions=["users:read"])
    error = assert_error(rotate(machine, key=reader), 403, "FORBIDDEN")
    assert error["details"]["required_permission"] == "oidc:manage"
    assert_error(client.simulate_post(clients_url(application, f"/{machine['id']}/rotate-secret"), json={},
                                      headers=user_token.headers), 403, "FORBIDDEN")
    assert_error(client.simulate_post(clients_url(application, f"/{machine['id']}/rotate-secret"), json={}), 401)
    assert accepted(client, machine, machine["client_secret"])


@pytest.mark.parametrize("grace", [-1, MAX_SECRET_GRACE + 1, 1.5, "60", True, None, [60]])
def test_a_grace_that_is_no_whole_number_of_seconds_up_to_a_week_is_refused(client, machine, rotate, grace):
    error = assert_error(rotate(machine, previous_secret_valid_for=grace), 400, "VALIDATION_INVALID_FORMAT")
    assert set(error["details"]["fields"]) == {"previous_secret_valid_for"}
    assert accepted(client, machine, machine["client_secret"])


def test_a_body_that_is_no_json_object_is_refused(client, machine, rotate):
    assert_error(rotate(machine, json=[60]), 400)
    assert accepted(client, machine, machine["client_secret"])


def test_a_week_is_the_longest_grace(clock, machine, rotate):
    data = rotated(rotate(machine, previous_secret_valid_for=MAX_SECRET_GRACE))
    assert data["previous_secret_expires_at"] == isoformat(clock() + seconds(MAX_SECRET_GRACE))


def test_the_event_and_its_audit_record_name_no_secret(ctx, application, machine, rotate):
    data = rotated(rotate(machine, previous_secret_valid_for=60))
    [event] = ctx.store["events"].find({"type": "oidc_clients.changed", "data.action": "secret_rotated"})
    assert event["data"] == {"client_id": machine["client_id"], "action": "secret_rotated",
                             "fields": ["client_secret"], "previous_secret_valid_for": 60}
    assert event["action"] == "oidc_client.secret_rotated"
    assert (event["target"]["type"], event["target"]["id"]) == ("client", machine["client_id"])
    records = str(list(ctx.store["events"].find({"app_id": application["_id"]})))
    for secret in (machine["client_secret"], data["client_secret"]):
        assert secret not in records and digest(secret) not in records


def test_racing_rotations_take_turns_and_lose_no_secret(client, ctx, application, machine, rotate, monkeypatch):
    """Another rotation lands between this one's read and its write: this one reads again
    and replaces that one's secret, which it keeps as the previous one."""
    store, service = ctx.oidc.clients.store, ctx.oidc.clients
    real_get, racer = store.get, []

    def read_then_rotate(app_id, ref):
        found = real_get(app_id, ref)
        if not racer:
            racer.append(None)
            racer[0] = service.rotate_secret(app_id, ref, HOUR)[1]
        return found

    monkeypatch.setattr(store, "get", read_then_rotate)
    ours = rotated(rotate(machine, previous_secret_valid_for=HOUR))["client_secret"]
    assert [accepted(client, machine, s) for s in (machine["client_secret"], racer[0], ours)] == [False, True, True]


def test_rotations_that_always_lose_the_race_ask_for_a_retry(client, ctx, machine, rotate, monkeypatch):
    monkeypatch.setattr(ctx.oidc.clients.store, "replace_secret", lambda *args: None)
    assert_error(rotate(machine), 409, "CONFLICT")
    assert accepted(client, machine, machine["client_secret"])
