"""Every self-service route is JWT-owner: only the user named by {userId}, with an access
token of this application, gets through.  Refused requests change nothing."""
import pytest

from shared.ids import new_id
from tests.conftest import assert_error, bearer
from tests.selfservice.conftest import self_url

ROUTES = [
    ("GET", "/profile", None),
    ("PUT", "/profile", {"name": "Mallory"}),
    ("DELETE", "", None),
    ("GET", "/data-export", None),
    ("DELETE", "/consent", None),
    ("GET", "/sessions", None),
    ("DELETE", "/sessions", None),
    ("DELETE", "/sessions/{session_id}", None),
]


@pytest.fixture
def victim(application, make_user_token):
    return make_user_token(application, name="Victim")


@pytest.fixture
def victim_session(ctx, victim):
    return ctx.store["sessions"].find_one({"user_id": victim.user["id"]})["_id"]


def request(client, app, user_id, method, path, body, session_id, headers):
    kwargs = {"headers": headers}
    if body is not None:
        kwargs["json"] = body
    return client.simulate_request(method, self_url(app, user_id, path.format(session_id=session_id)), **kwargs)


def snapshot(ctx, user_id):
    """Everything a self-service route could change about the user."""
    return {
        "user": ctx.store["users"].find_one({"_id": user_id}),
        "sessions": list(ctx.store["sessions"].find({"user_id": user_id}).sort("_id", 1)),
        "consents": list(ctx.store["oidc_consents"].find({"user_id": user_id}).sort("_id", 1)),
        "exports": ctx.store["rate_limits"].count_documents({"_id": {"$regex": f"^export:.*{user_id}"}}),
        "events": ctx.store["events"].count_documents({}),
    }


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_another_users_token_is_403(client, ctx, application, victim, victim_session, make_user_token,
                                    oidc_consent, method, path, body):
    oidc_consent(application, victim.user["id"])
    attacker = make_user_token(application, name="Mallory")
    before = snapshot(ctx, victim.user["id"])
    response = request(client, application, victim.user["id"], method, path, body, victim_session, attacker.headers)
    assert_error(response, 403, "FORBIDDEN")
    assert snapshot(ctx, victim.user["id"]) == before


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_an_api_key_is_403_even_with_every_permission(client, ctx, application, victim, victim_session,
                                                      make_api_key, method, path, body):
    key = make_api_key(application, permissions=["*:*"])
    before = snapshot(ctx, victim.user["id"])
    response = request(client, application, victim.user["id"], method, path, body, victim_session, bearer(key))
    assert_error(response, 403, "FORBIDDEN")
    assert snapshot(ctx, victim.user["id"]) == before


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_no_credential_is_401(client, ctx, application, victim, victim_session, method, path, body):
    before = snapshot(ctx, victim.user["id"])
    response = request(client, application, victim.user["id"], method, path, body, victim_session, {})
    assert_error(response, 401, "UNAUTHORIZED")
    assert snapshot(ctx, victim.user["id"]) == before


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_a_token_of_another_application_is_401(client, ctx, application, victim, victim_session, make_application,
                                               method, path, body):
    # A token minted for the same user id by another application (audience mismatch).
    other_app = make_application()
    token, _ = ctx.tokens.issue_access_token(other_app["_id"], victim.user["id"], None)
    before = snapshot(ctx, victim.user["id"])
    response = request(client, application, victim.user["id"], method, path, body, victim_session, bearer(token))
    assert_error(response, 401, "UNAUTHORIZED")
    assert snapshot(ctx, victim.user["id"]) == before


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_an_expired_token_is_401(client, ctx, clock, application, victim, victim_session, method, path, body):
    clock.advance(901)
    before = snapshot(ctx, victim.user["id"])
    response = request(client, application, victim.user["id"], method, path, body, victim_session, victim.headers)
    assert_error(response, 401, "UNAUTHORIZED")
    assert snapshot(ctx, victim.user["id"]) == before


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_the_owner_gets_through(client, application, victim, victim_session, method, path, body):
    response = request(client, application, victim.user["id"], method, path, body, victim_session, victim.headers)
    assert response.status_code in (200, 204), response.text


def test_unknown_application_is_404(client, victim):
    response = client.simulate_get(f"/api/v1/applications/{new_id()}/users/{victim.user['id']}/profile",
                                   headers=victim.headers)
    assert_error(response, 404, "NOT_FOUND")


def test_every_route_is_documented_as_jwt_owner(client):
    document = client.simulate_get("/openapi.json").json
    base = "/api/v1/applications/{applicationId}/users/{userId}"
    expected = {
        base: {"delete": "204"},
        f"{base}/profile": {"get": "200", "put": "200"},
        f"{base}/data-export": {"get": "200"},
        f"{base}/consent": {"delete": "200"},
        f"{base}/sessions": {"get": "200", "delete": "200"},
        f"{base}/sessions/{{sessionId}}": {"delete": "204"},
    }
    for path, operations in expected.items():
        item = document["paths"][path]
        assert set(item) == set(operations), path
        for method, ok in operations.items():
            operation = item[method]
            assert operation["tags"] == ["user self-service"]
            assert operation["summary"] and "(undocumented)" not in operation["summary"]
            assert "JWT-owner" in operation["description"]
            assert operation["security"] == [{"bearer": []}]
            assert {ok, "401", "403"} <= set(operation["responses"])
    export = document["paths"][f"{base}/data-export"]["get"]
    assert "RATE_LIMIT_EXCEEDED" in export["responses"]["429"]["description"]
    items = export["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["data"]["properties"]
    assert set(items) >= {"user", "sessions", "roles", "mfa_methods", "oauth_connections", "audit_logs"}
    assert set(items["mfa_methods"]["items"]["properties"]) == {"id", "type", "label", "is_primary", "status",
                                                               "verified_at", "last_used_at"}
    assert "SESSION_NOT_FOUND" in document["paths"][f"{base}/sessions/{{sessionId}}"]["delete"]["responses"]["404"][
        "description"]
    put = document["paths"][f"{base}/profile"]["put"]
    body = put["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"name", "avatar_url", "metadata"} and "required" not in body
