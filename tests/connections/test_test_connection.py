"""POST V1/connections/{id}/test: discovery and the JWKS fetched now, each check
reported in words; 200 whatever the checks find, and nothing changes."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.connections.conftest import EC_KEY, RSA_KEY


@pytest.fixture
def connection(create):
    return create().json["data"]


@pytest.fixture
def run_test(client, connections_url, manager, connection):
    def run():
        resp = client.simulate_post(f"{connections_url}/{connection['id']}/test", json={}, headers=manager)
        assert resp.status_code == 200, resp.text
        assert resp.headers["Cache-Control"] == "no-store"
        report = resp.json["data"]
        assert report["ok"] is all(check["ok"] for check in report["checks"])
        return report

    return run


def messages(report) -> dict:
    return {check["name"]: (check["ok"], check["message"]) for check in report["checks"]}


def test_a_healthy_provider_passes_every_check(run_test, provider, connection):
    provider.requests.clear()
    report = run_test()
    assert report["ok"] is True and report["checked_at"]
    assert messages(report) == {
        "discovery": (True, f"fetched {provider.issuer}/.well-known/openid-configuration"),
        "issuer": (True, f"the discovery issuer is the configured {provider.issuer}"),
        "endpoints": (True, "the pinned endpoints match discovery"),
        "pkce": (True, "PKCE S256 is supported"),
        "jwks": (True, "JWKS has 1 RS256 signing key(s)"),
    }
    assert provider.requests == ["/.well-known/openid-configuration", "/jwks"]


def test_an_issuer_that_differs_is_reported(run_test, provider):
    provider.discovery["issuer"] = "https://a.example.com"
    report = run_test()
    assert report["ok"] is False
    assert messages(report)["issuer"] == (False, f"discovery issuer https://a.example.com differs from the "
                                                 f"configured {provider.issuer}; sign-in refuses every answer "
                                                 "of this provider")


@pytest.mark.parametrize("keys", [[EC_KEY], [{**RSA_KEY, "use": "enc"}], [{**RSA_KEY, "alg": "RS512"}], []])
def test_a_jwks_without_an_rs256_signing_key_is_reported(run_test, provider, keys):
    provider.jwks = {"keys": keys}
    assert messages(run_test())["jwks"] == (False, "JWKS has no RS256 signing key")


def test_a_jwks_that_is_not_a_key_set_is_reported(run_test, provider):
    provider.jwks = {"key": RSA_KEY}
    assert messages(run_test())["jwks"] == (False, f"the JWKS could not be fetched: {provider.issuer}/jwks is not "
                                                   "a JWK Set (no keys list)")


def test_moved_endpoints_and_missing_pkce_are_reported(run_test, provider):
    provider.discovery["token_endpoint"] = f"{provider.issuer}/v2/token"
    provider.discovery["code_challenge_methods_supported"] = ["plain"]
    found = messages(run_test())
    assert found["endpoints"] == (False, f"the provider's endpoints changed since they were pinned: token_endpoint "
                                         f"is now {provider.issuer}/v2/token, pinned {provider.issuer}/token. "
                                         "Save the issuer again to pin them anew")
    assert found["pkce"] == (False, "PKCE S256 is not among the advertised methods ['plain']")


def test_a_timeout_is_reported(run_test, provider, ctx):
    ctx.connections.http.timeout, provider.delay = 1, 1.5
    report = run_test()
    assert report["ok"] is False
    assert messages(report) == {"discovery": (False, f"the discovery document could not be fetched: "
                                                     f"{provider.issuer}/.well-known/openid-configuration did not "
                                                     "answer within 1 seconds")}


def _move_issuer(ctx, connection, issuer):
    ctx.store["connections"].update_one({"_id": connection["id"]}, {"$set": {"oidc.issuer": issuer}})


def test_a_tls_failure_is_reported(run_test, provider, ctx, connection):
    https = provider.issuer.replace("http://", "https://")
    _move_issuer(ctx, connection, https)
    ok, message = messages(run_test())["discovery"]
    assert not ok
    assert message.startswith(f"the discovery document could not be fetched: TLS with 127.0.0.1 failed for "
                              f"{https}/.well-known/openid-configuration: [SSL")


def test_an_ssrf_refusal_is_reported_without_the_override(run_test, provider, ctx, connection):
    https = provider.issuer.replace("http://", "https://")
    _move_issuer(ctx, connection, https)
    ctx.connections.http.policy.allow_private = False  # as in production
    assert messages(run_test())["discovery"] == (
        False, f"the discovery document could not be fetched: {https}/.well-known/openid-configuration is "
               "refused: 127.0.0.1 is not a public address (loopback); private targets are allowed only with "
               "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS, for development")


def test_testing_changes_nothing(run_test, provider, client, connections_url, manager, connection, ctx):
    provider.discovery["token_endpoint"] = f"{provider.issuer}/v2/token"
    run_test()
    assert client.simulate_get(f"{connections_url}/{connection['id']}", headers=manager).json["data"] == connection
    assert ctx.store["events"].count_documents({"action": "upstream_connection.updated"}) == 0


def test_testing_another_applications_connection_is_not_found(client, connection, make_application, make_api_key):
    other = make_application("Other")
    resp = client.simulate_post(f"/api/v1/applications/{other['_id']}/connections/{connection['id']}/test",
                                json={}, headers={"Authorization": f"Bearer {make_api_key(other)}"})
    assert_error(resp, 404, "CONNECTION_NOT_FOUND")
