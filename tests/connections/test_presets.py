"""Presets fill a connection's type, issuer, scopes and claim mapping (GitHub: its fixed
endpoints too, with no discovery).  Each preset against a provider standing in for it
is conn-web's harness; here, what each fills in."""
from __future__ import annotations

import pytest

from controlplane.app import create_app
from controlplane.connections.presets import PRESETS
from shared.errors import ValidationFailed
from tests.conftest import assert_error

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
# Names of the real providers, answered without DNS: a public address for GitHub (never
# connected to by these tests), loopback for the OIDC ones, where nothing listens on 443.
NAMES = {"github.com": ["140.82.112.3"], "api.github.com": ["140.82.112.6"],
         "accounts.google.com": ["127.0.0.1"], "login.microsoftonline.com": ["127.0.0.1"]}


@pytest.fixture
def app(config, clock):
    return create_app(config, clock=clock, resolver=lambda host, port: NAMES[host], start_background=False)


def test_google():
    google = PRESETS["google"]
    assert (google.type, google.issuer, google.display_name) == ("oidc", "https://accounts.google.com", "Google")
    assert google.scopes == ("openid", "email", "profile")
    mapping = google.claim_mapping
    assert (mapping.email, mapping.email_verified, mapping.name, mapping.picture) == (
        "email", "email_verified", "name", "picture")


def test_entra_needs_its_tenant_id_and_trusts_only_a_verified_domain():
    entra = PRESETS["entra"]
    assert entra.issuer_for(issuer=None, tenant=TENANT) == f"https://login.microsoftonline.com/{TENANT}/v2.0"
    assert entra.type == "oidc" and entra.scopes == ("openid", "email", "profile")
    assert entra.claim_mapping.email_verified == "xms_edov"  # Entra's email claim is not verified by Microsoft
    for tenant in (None, "common", "organizations", "contoso.onmicrosoft.com"):
        with pytest.raises(ValidationFailed):
            entra.issuer_for(issuer=None, tenant=tenant)


def test_github_is_oauth2_with_fixed_endpoints_and_its_user_api():
    github = PRESETS["github"]
    assert github.type == "oauth2" and github.scopes == ("read:user", "user:email")
    assert github.endpoints.authorization_endpoint == "https://github.com/login/oauth/authorize"
    assert github.endpoints.token_endpoint == "https://github.com/login/oauth/access_token"
    assert github.endpoints.userinfo_endpoint == "https://api.github.com/user"
    assert github.endpoints.jwks_uri is None and github.endpoints.fetched_at is None
    assert github.user_api == ("https://api.github.com/user", "https://api.github.com/user/emails")
    assert github.subject_claim == "id" and github.claim_mapping.picture == "avatar_url"


def test_gitlab_may_name_a_self_managed_instance():
    gitlab = PRESETS["gitlab"]
    assert gitlab.issuer == "https://gitlab.com" and gitlab.type == "oidc"
    assert gitlab.issuer_for(issuer=None, tenant=None) == "https://gitlab.com"
    assert gitlab.issuer_for(issuer="https://git.example.com", tenant=None) == "https://git.example.com"


def test_github_needs_no_discovery(client, connections_url, manager):
    resp = client.simulate_post(connections_url, json={"preset": "github", "client_id": "Iv1.abc",
                                                       "client_secret": "s"}, headers=manager)
    assert resp.status_code == 201, resp.text
    data = resp.json["data"]
    assert (data["type"], data["preset"], data["name"], data["display_name"]) == ("oauth2", "github", "github",
                                                                                  "GitHub")
    assert data["issuer"] == "https://github.com" and data["scopes"] == ["read:user", "user:email"]
    assert data["claim_mapping"]["picture"] == "avatar_url"
    assert data["endpoints"] == {"authorization_endpoint": "https://github.com/login/oauth/authorize",
                                 "token_endpoint": "https://github.com/login/oauth/access_token",
                                 "userinfo_endpoint": "https://api.github.com/user", "jwks_uri": None,
                                 "iss_parameter_supported": False, "fetched_at": None}


def test_what_the_request_gives_wins_over_the_preset(client, connections_url, manager):
    resp = client.simulate_post(connections_url, json={
        "preset": "github", "name": "gh", "display_name": "GitHub Enterprise", "client_id": "c",
        "scopes": ["read:user"], "claim_mapping": {"name": "login"}}, headers=manager)
    data = resp.json["data"]
    assert (data["name"], data["display_name"], data["scopes"]) == ("gh", "GitHub Enterprise", ["read:user"])
    assert data["claim_mapping"]["name"] == "login" and data["claim_mapping"]["picture"] == "avatar_url"


def test_a_self_managed_gitlab_is_discovered(create, provider):
    resp = create(preset="gitlab", issuer=provider.issuer)
    assert resp.status_code == 201, resp.text
    data = resp.json["data"]
    assert (data["type"], data["display_name"], data["issuer"]) == ("oidc", "GitLab", provider.issuer)
    assert data["scopes"] == ["openid", "email", "profile"]
    assert data["endpoints"]["jwks_uri"] == f"{provider.issuer}/jwks"


@pytest.mark.parametrize(("fields", "discovery"), [
    ({"preset": "google"}, "https://accounts.google.com/.well-known/openid-configuration"),
    ({"preset": "entra", "tenant": TENANT},
     f"https://login.microsoftonline.com/{TENANT}/v2.0/.well-known/openid-configuration"),
])
def test_oidc_presets_fetch_the_discovery_of_the_issuer_they_fill(create, ctx, fields, discovery):
    # No provider answers at these names here: the failure names the URL the preset built.
    reason = assert_error(create(**fields), 502, "CONNECTION_PROVIDER_ERROR")["details"]["reason"]
    assert reason == f"cannot connect to {discovery} (ConnectionError)"
    assert ctx.store["connections"].count_documents({}) == 0


def test_testing_a_github_connection_checks_its_fixed_endpoints(client, connections_url, manager):
    connection_id = client.simulate_post(connections_url, json={"preset": "github", "client_id": "c"},
                                         headers=manager).json["data"]["id"]
    report = client.simulate_post(f"{connections_url}/{connection_id}/test", json={}, headers=manager).json["data"]
    assert report["ok"] is True
    assert [(c["name"], c["message"]) for c in report["checks"]] == [
        ("authorization_endpoint", "https://github.com/login/oauth/authorize resolves to an allowed address"),
        ("token_endpoint", "https://github.com/login/oauth/access_token resolves to an allowed address"),
        ("userinfo_endpoint", "https://api.github.com/user resolves to an allowed address"),
    ]
