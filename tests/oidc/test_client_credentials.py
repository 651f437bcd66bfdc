"""The client credentials grant (RFC 6749 4.4): confidential clients whose grant_types
include it; a token without a user (sub = client_id, gty); userinfo refuses it;
introspection describes it; the machine client's connection events."""
import base64

import jwt
import pytest

from tests.conftest import events_of
from tests.oidc.conftest import assert_oauth_error, clients_url

MACHINE = {"grant_types": ["client_credentials"], "allowed_scopes": ["openid", "profile"]}


@pytest.fixture
def machine(application, oidc_client):
    return oidc_client(application, **MACHINE)


def client_credentials(client, rp, **overrides):
    body = {"grant_type": "client_credentials", "client_id": rp["client_id"],
            "client_secret": rp.get("client_secret"), **overrides}
    return client.simulate_post("/oidc/token", json={k: v for k, v in body.items() if v is not None})


def test_a_machine_client_gets_an_access_token_of_its_own(client, ctx, application, machine):
    basic = base64.b64encode(f"{machine['client_id']}:{machine['client_secret']}".encode()).decode()
    response = client.simulate_post("/oidc/token", body="grant_type=client_credentials&scope=profile",
                                    headers={"Content-Type": "application/x-www-form-urlencoded",
                                             "Authorization": f"Basic {basic}"})
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json
    assert set(body) == {"access_token", "token_type", "expires_in", "scope"}  # RFC 6749 4.4.3: no refresh token
    assert body["scope"] == "profile" and body["token_type"] == "Bearer"
    header = jwt.get_unverified_header(body["access_token"])
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert header["typ"] == "at+jwt"
    assert claims["sub"] == machine["client_id"] == claims["client_id"] and claims["gty"] == "client_credentials"
    assert claims["app_id"] == application["_id"] and claims["aud"] == ctx.config.public_url
    assert not {"grant_id", "sid", "auth_time"} & set(claims)
    assert ctx.store["oidc_refresh_tokens"].count_documents({}) == 0


def test_no_scope_asked_is_none_granted(client, machine):
    response = client_credentials(client, machine)
    assert response.status_code == 200 and response.json["scope"] == ""


def test_userinfo_refuses_it_and_introspection_describes_it(client, machine, application, oidc_client):
    token = client_credentials(client, machine, scope="openid").json["access_token"]
    userinfo = client.simulate_get("/oidc/userinfo", headers={"Authorization": f"Bearer {token}"})
    assert_oauth_error(userinfo, "invalid_token", 401)
    assert "WWW-Authenticate" in userinfo.headers
    credentials = {"client_id": machine["client_id"], "client_secret": machine["client_secret"]}
    described = client.simulate_post("/oidc/introspect", json={"token": token, **credentials}).json
    assert described["active"] is True and described["sub"] == machine["client_id"]
    assert described["gty"] == "client_credentials" and described["scope"] == "openid"
    other = oidc_client(application)
    answer = client.simulate_post("/oidc/introspect", json={"token": token, "client_id": other["client_id"],
                                                            "client_secret": other["client_secret"]})
    assert answer.json == {"active": False}


def test_the_client_must_list_the_grant_type(client, ctx, rp_client, machine):
    assert_oauth_error(client_credentials(client, rp_client), "unauthorized_client")
    failed = [e for e in events_of(ctx, "connection.failed") if e["data"]["client_id"] == rp_client["client_id"]]
    assert failed[-1]["data"] == {"kind": "grant", "user_id": None, "client_id": rp_client["client_id"],
                                  "reason": "unauthorized_client"}
    # ...and a machine-only client cannot redeem codes either
    assert_oauth_error(client.simulate_post("/oidc/token", json={
        "grant_type": "authorization_code", "code": "x", "redirect_uri": "https://rp.example.com/callback",
        "code_verifier": "v" * 43, "client_id": machine["client_id"], "client_secret": machine["client_secret"]}),
        "unauthorized_client")


@pytest.mark.parametrize("overrides, error", [
    ({"client_secret": "wrong"}, "invalid_grant"),
    ({"client_secret": None}, "invalid_request"),
    ({"scope": "email"}, "invalid_scope"),
])
def test_errors(client, machine, overrides, error):
    assert_oauth_error(client_credentials(client, machine, **overrides), error)


def test_the_connection_events_of_a_machine_client(client, ctx, machine):
    for _ in range(2):
        assert client_credentials(client, machine, scope="profile").status_code == 200
    assert client_credentials(client, machine, scope="email").status_code == 400
    mine = {"subject.client_id": machine["client_id"]}
    created = list(ctx.store["events"].find({"type": "connection.created", **mine}))
    refreshed = list(ctx.store["events"].find({"type": "connection.refreshed", **mine}))
    failed = list(ctx.store["events"].find({"type": "connection.failed", **mine}))
    assert [e["data"] for e in created] == [{"kind": "grant", "user_id": None, "client_id": machine["client_id"],
                                             "grant_id": None, "scopes": ["profile"],
                                             "grant_type": "client_credentials"}]
    assert len(refreshed) == 1 and refreshed[0]["data"]["user_id"] is None
    assert [e["data"]["reason"] for e in failed] == ["invalid_scope"]


def test_grant_types_are_validated_and_shown(client, application, manager_key, machine, rp_client):
    assert machine["grant_types"] == ["client_credentials"]
    assert rp_client["grant_types"] == ["authorization_code", "refresh_token"]
    response = client.simulate_post(clients_url(application), json={
        "name": "x", "redirect_uris": ["https://rp.example.com/cb"], "grant_types": ["password"]},
        headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 400 and "grant_types" in response.json["error"]["details"]["fields"]


def test_discovery_lists_the_grant(client):
    metadata = client.simulate_get("/.well-known/openid-configuration").json
    assert "client_credentials" in metadata["grant_types_supported"]


def test_a_machine_only_client_cannot_start_the_code_flow(authorize, user_token, machine):
    assert_oauth_error(authorize(user_token, machine), "unauthorized_client")


def test_only_the_first_token_writes_the_connection(client, ctx, machine, monkeypatch):
    """The client document read to authenticate says whether its connection exists: the
    tokens after the first cost no conditional write that would match nothing."""
    writes = []
    store = ctx.oidc.clients.store
    original = store.mark_connected
    monkeypatch.setattr(store, "mark_connected", lambda *args: writes.append(args) or original(*args))
    for _ in range(3):
        assert client_credentials(client, machine).status_code == 200
    assert len(writes) == 1
    assert len(list(ctx.store["events"].find({"type": "connection.created"}))) == 1


def test_no_client_of_an_application_whose_deletion_was_cut_short_gets_a_token(
        client, ctx, application, machine, issue_tokens, refresh_grant, user_token, rp_client, monkeypatch):
    """An application being deleted is marked first and purged after; a purge that
    stops part-way (a store failure) leaves its clients' documents behind until the
    next start finishes it, and neither they nor their refresh tokens may work meanwhile."""
    tokens = issue_tokens(user_token, rp_client)
    assert client_credentials(client, machine).status_code == 200  # the per-worker copies are warm

    def cut_short(_app_id):
        raise RuntimeError("the store went away mid-purge")

    monkeypatch.setattr(ctx.applications.store, "purge", cut_short)
    with pytest.raises(RuntimeError):
        ctx.applications.delete(application["_id"])
    assert ctx.store["oidc_clients"].count_documents({"app_id": application["_id"]}) == 2
    assert_oauth_error(client_credentials(client, machine), "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"]), "invalid_grant")
