"""OAuth connections: consent, the connection events, and the self-service endpoints
that go through the OIDC area (DELETE consent, the export's oauth_connections)."""
from tests.conftest import events_of
from tests.selfservice.conftest import self_url


def test_connection_events_over_a_connections_life(client, ctx, application, issue_tokens, refresh_grant,
                                                   user_token, rp_client):
    first = issue_tokens(user_token, rp_client)
    issue_tokens(user_token, rp_client)  # a second exchange under the same consent
    refresh_grant(rp_client, first["refresh_token"])
    user_id, client_id = user_token.user["id"], rp_client["client_id"]
    created = events_of(ctx, "connection.created")
    assert len(created) == 1
    assert created[0]["data"]["user_id"] == user_id and created[0]["data"]["client_id"] == client_id
    assert created[0]["data"]["scopes"] == ["openid", "profile", "email"] and created[0]["data"]["grant_id"]
    assert [e["data"]["client_id"] for e in events_of(ctx, "connection.refreshed")] == [client_id]

    response = client.simulate_delete(self_url(application, user_id, "/consent"), headers=user_token.headers)
    assert response.status_code == 200 and response.json["data"]["revoked_count"] == 1
    revoked = events_of(ctx, "connection.revoked")
    assert [e["data"] for e in revoked] == [{"kind": "grant", "user_id": user_id, "client_id": client_id,
                                             "reason": "consent_withdrawn", "grants_revoked": 2}]
    assert refresh_grant(rp_client, first["refresh_token"]).status_code == 400

    # After a withdrawal, the next flow records consent and creates the connection anew.
    issue_tokens(user_token, rp_client)
    assert len(events_of(ctx, "consent.granted")) == 2 and len(events_of(ctx, "connection.created")) == 2


def test_export_lists_oauth_connections(client, application, issue_tokens, user_token, rp_client):
    issue_tokens(user_token, rp_client, scope="openid email")
    response = client.simulate_get(self_url(application, user_token.user["id"], "/data-export"),
                                   headers=user_token.headers)
    connections = response.json["data"]["oauth_connections"]
    assert connections == [{"client_id": rp_client["client_id"], "scopes": ["email", "openid"],
                            "granted_at": connections[0]["granted_at"], "withdrawn_at": None}]


def test_wider_scopes_extend_the_consent(authorize, ctx, user_token, rp_client):
    authorize(user_token, rp_client, scope="openid")
    authorize(user_token, rp_client, scope="openid email")
    authorize(user_token, rp_client, scope="openid")
    assert [e["data"]["scopes"] for e in events_of(ctx, "consent.granted")] == [["openid"], ["email", "openid"]]
