"""Every bad input to V1/connections answers the error envelope with the field at fault,
and writes nothing."""
from __future__ import annotations

import pytest

from controlplane.connections.schemas import EMAIL_DOMAINS_MAX, NAME_MAX, SCOPES_MAX
from controlplane.connections.service import CONNECTIONS_MAX
from controlplane.connections.store import STALE_CLAIM
from tests.conftest import assert_error, in_parallel

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"type": "saml"}, "type", "saml is not supported yet"),
    ({"type": "ldap"}, "type", "must be one of oidc, oauth2"),
    ({"type": "oauth2"}, "type", "only available through the github preset"),
    ({"preset": "okta"}, "preset", "must be one of google, entra, github, gitlab"),
    ({"preset": "google", "type": "oauth2"}, "type", "preset google is of type oidc"),
    ({"name": "Acme Corp"}, "name", "invalid format"),
    ({"name": "-acme"}, "name", "invalid format"),
    ({"name": "a" * (NAME_MAX + 1)}, "name", f"at most {NAME_MAX} characters"),
    ({"name": None}, "name", "must not be null"),
    ({"client_id": ""}, "client_id", "must not be empty"),
    ({"issuer": "ftp://idp.example.com"}, "issuer", "must be a valid https or http URL"),
    ({"scopes": []}, "scopes", "at least 1 item"),
    ({"scopes": [f"s{i}" for i in range(SCOPES_MAX + 1)]}, "scopes", f"at most {SCOPES_MAX} items"),
    ({"scopes": ["has space"]}, "scopes", "item 0 has an invalid format"),
    ({"email_domains": [f"d{i}.example.com" for i in range(EMAIL_DOMAINS_MAX + 1)]}, "email_domains",
     f"at most {EMAIL_DOMAINS_MAX} items"),
    ({"email_domains": ["not a domain"]}, "email_domains", "must be a domain name"),
    ({"linking": "always"}, "linking", "must be one of none, verify, trusted_email"),
    ({"linking": "trusted_email"}, "linking", "needs trusted: true"),
    ({"jit": "yes"}, "jit", "must be true or false"),
    ({"role_mapping": [{"claim": "groups", "value": "admins"}]}, "role_mapping", "role is required"),
    ({"claim_mapping": {"attributes": {"bad key!": "dept"}}}, "claim_mapping.attributes",
     "invalid attribute name"),
    ({"tenant": TENANT}, "tenant", "only for preset entra"),
    ({"preset": "entra"}, "tenant", "is required with preset entra"),
    ({"preset": "entra", "tenant": "common"}, "tenant", "must be the directory (tenant) id"),
    ({"preset": "google", "issuer": "https://evil.example.com"}, "issuer", "is fixed by preset google"),
    ({"preset": "github", "tenant": TENANT}, "tenant", "only for preset entra, not github"),
])
def test_bad_fields_are_refused_with_the_field_named(create, ctx, fields, field, words):
    resp = create(**fields)
    error = assert_error(resp, 400)
    assert error["code"] in ("VALIDATION_INVALID_FORMAT", "VALIDATION_MULTIPLE_ERRORS")
    assert words in error["details"]["fields"][field], error
    assert ctx.store["connections"].count_documents({}) == 0


def test_name_and_client_id_are_required(client, connections_url, manager, provider):
    resp = client.simulate_post(connections_url, json={"issuer": provider.issuer}, headers=manager)
    error = assert_error(resp, 400, "VALIDATION_INVALID_FORMAT")
    assert error["details"]["fields"] == {"client_id": "is required"}
    resp = client.simulate_post(connections_url, json={"issuer": provider.issuer, "client_id": "c"}, headers=manager)
    assert assert_error(resp, 400)["details"]["fields"] == {"name": "is required without a preset"}
    resp = client.simulate_post(connections_url, json={"name": "x", "client_id": "c"}, headers=manager)
    assert assert_error(resp, 400)["details"]["fields"] == {"issuer": "is required without a preset"}


def test_a_body_that_is_not_an_object_is_refused(client, connections_url, manager):
    resp = client.simulate_post(connections_url, body="[1]", headers={**manager, "Content-Type": "application/json"})
    assert_error(resp, 400, "VALIDATION_INVALID_FORMAT")


def test_a_name_is_unique_in_the_application(create, ctx):
    assert create().status_code == 201
    error = assert_error(create(), 409, "CONNECTION_NAME_TAKEN")
    assert error["details"] == {"name": "acme"}
    assert ctx.store["connections"].count_documents({}) == 1


def test_renaming_onto_another_name_is_refused(create, client, connections_url, manager):
    create(name="one")
    second = create(name="two").json["data"]
    resp = client.simulate_patch(f"{connections_url}/{second['id']}", json={"name": "one"}, headers=manager)
    assert_error(resp, 409, "CONNECTION_NAME_TAKEN")
    assert client.simulate_get(f"{connections_url}/{second['id']}", headers=manager).json["data"]["name"] == "two"


def test_an_email_domain_belongs_to_one_active_connection(create, client, connections_url, manager):
    first = create(name="one", email_domains=["acme.com"]).json["data"]
    error = assert_error(create(name="two", email_domains=["other.com", "ACME.com"]), 409,
                         "CONNECTION_EMAIL_DOMAIN_TAKEN")
    assert error["details"] == {"domain": "acme.com", "connection": "one"}
    # An inactive connection may name it (it routes nothing) ...
    second = create(name="two", email_domains=["acme.com"], is_active=False).json["data"]
    # ... but not be activated while the first holds it.
    url = f"{connections_url}/{second['id']}"
    assert_error(client.simulate_patch(url, json={"is_active": True}, headers=manager), 409,
                 "CONNECTION_EMAIL_DOMAIN_TAKEN")
    client.simulate_patch(f"{connections_url}/{first['id']}", json={"is_active": False}, headers=manager)
    assert client.simulate_patch(url, json={"is_active": True}, headers=manager).status_code == 200


def test_the_number_of_connections_is_capped(client, connections_url, manager, ctx):
    for i in range(CONNECTIONS_MAX):  # github: fixed endpoints, no provider call
        resp = client.simulate_post(connections_url, json={"preset": "github", "name": f"gh-{i}", "client_id": "c"},
                                    headers=manager)
        assert resp.status_code == 201, resp.text
    resp = client.simulate_post(connections_url, json={"preset": "github", "name": "one-more", "client_id": "c"},
                                headers=manager)
    assert assert_error(resp, 409, "CONNECTION_LIMIT_EXCEEDED")["details"] == {"limit": CONNECTIONS_MAX}
    assert ctx.store["connections"].count_documents({}) == CONNECTIONS_MAX


def test_racing_creates_cannot_pass_the_cap(client, connections_url, manager, ctx):
    def post(i):
        return client.simulate_post(connections_url, json={"preset": "github", "name": f"gh-{i}", "client_id": "c"},
                                    headers=manager).status_code

    assert set(in_parallel(CONNECTIONS_MAX - 2, post)) == {201}
    statuses = in_parallel(10, lambda i: post(100 + i))
    assert set(statuses) <= {201, 409} and statuses.count(201) <= 2
    assert ctx.store["connections"].count_documents({}) <= CONNECTIONS_MAX


def test_a_bad_update_changes_nothing(create, client, connections_url, manager):
    created = create().json["data"]
    url = f"{connections_url}/{created['id']}"
    for body in ({"linking": "trusted_email"}, {"type": "saml", "scopes": []}, {"tenant": TENANT}):
        assert_error(client.simulate_patch(url, json=body, headers=manager), 400)
    assert client.simulate_get(url, headers=manager).json["data"] == created


def test_racing_writes_cannot_both_take_a_domain(client, connections_url, manager, ctx):
    def post(i):
        return client.simulate_post(connections_url, json={"preset": "github", "name": f"gh-{i}", "client_id": "c",
                                                           "email_domains": [f"own{i}.com", "acme.com"]},
                                    headers=manager).status_code

    assert sorted(in_parallel(4, post)) == [201, 409, 409, 409]
    winner = ctx.store["connections"].find_one({})
    claims = {c["domain"]: c["connection_id"] for c in ctx.store["connection_email_domains"].find()}
    assert claims == {"acme.com": winner["_id"], winner["email_domains"][0]: winner["_id"]}  # losers released theirs


def test_claims_follow_the_connection(create, client, connections_url, manager, ctx):
    claims = ctx.store["connection_email_domains"]
    connection_id = create(email_domains=["a.com", "b.com"]).json["data"]["id"]
    url = f"{connections_url}/{connection_id}"
    client.simulate_patch(url, json={"email_domains": ["b.com", "c.com"]}, headers=manager)
    assert sorted(c["domain"] for c in claims.find()) == ["b.com", "c.com"]
    client.simulate_patch(url, json={"is_active": False}, headers=manager)
    assert claims.count_documents({}) == 0
    client.simulate_patch(url, json={"is_active": True}, headers=manager)
    assert claims.count_documents({}) == 2
    client.simulate_delete(url, headers=manager)
    assert claims.count_documents({}) == 0


def test_a_claim_left_by_a_failed_write_is_taken_over_once_stale(create, provider, ctx, clock, application):
    provider.discovery["issuer"] = "https://elsewhere.example.com"
    assert create(email_domains=["acme.com"]).status_code == 502
    assert ctx.store["connection_email_domains"].count_documents({}) == 0  # released on failure
    # A process that died between its claim and its write leaves one behind.
    ctx.store["connection_email_domains"].insert_one({
        "_id": f"{application['_id']}:acme.com", "app_id": application["_id"], "domain": "acme.com",
        "connection_id": "0d5f7a0e-2f7e-4a5e-9f3c-1d2e3f4a5b6c", "claimed_at": clock()})
    provider.discovery["issuer"] = provider.issuer
    assert_error(create(email_domains=["acme.com"]), 409, "CONNECTION_EMAIL_DOMAIN_TAKEN")  # may be in flight
    clock.advance(STALE_CLAIM.total_seconds() + 1)
    assert create(email_domains=["acme.com"]).status_code == 201
