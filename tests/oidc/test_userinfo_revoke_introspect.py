"""GET/POST /oidc/userinfo (OIDC Core 5.3, RFC 6750), POST /oidc/revoke (RFC 7009) and
POST /oidc/introspect (RFC 7662)."""
import base64

import pytest

from tests.conftest import bearer, events_of
from tests.oidc.conftest import FORM, assert_oauth_error, pkce_pair


@pytest.fixture
def tokens(issue_tokens, user_token, rp_client):
    return issue_tokens(user_token, rp_client)


def basic(rp) -> dict:
    raw = base64.b64encode(f"{rp['client_id']}:{rp['client_secret']}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


# ---------------------------------------------------------------- userinfo


def test_userinfo_refuses_the_tokens_of_an_application_being_deleted(client, ctx, application, tokens, monkeypatch):
    """The application is marked first and purged after; until a purge cut short is
    finished, the documents it has not reached must not answer (the V1 token is 404)."""
    def cut_short(_app_id):
        raise RuntimeError("the store went away mid-purge")

    monkeypatch.setattr(ctx.applications.store, "purge", cut_short)
    with pytest.raises(RuntimeError):
        ctx.applications.delete(application["_id"])
    response = client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"]))
    assert_oauth_error(response, "invalid_token", status=401)


@pytest.mark.parametrize("scope, expected", [
    ("openid", {"sub"}),
    ("openid email", {"sub", "email", "email_verified"}),
    ("openid profile", {"sub", "name"}),
])
def test_claims_by_scope(client, issue_tokens, user_token, rp_client, scope, expected):
    tokens = issue_tokens(user_token, rp_client, scope=scope)
    response = client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"]))
    assert response.status_code == 200 and set(response.json) == expected
    assert response.headers["cache-control"] == "no-store"


def test_picture_comes_with_profile(client, ctx, application, user_token, rp_client, issue_tokens):
    ctx.store["users"].update_one({"_id": user_token.user["id"]},
                                  {"$set": {"avatar_url": "https://img.example.com/a.png"}})
    tokens = issue_tokens(user_token, rp_client, scope="openid profile")
    assert client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"])).json["picture"] == \
        "https://img.example.com/a.png"


def test_post_with_the_token_in_the_form(client, tokens):
    response = client.simulate_post("/oidc/userinfo", body=f"access_token={tokens['access_token']}", headers=FORM)
    assert response.status_code == 200
    assert client.simulate_post("/oidc/userinfo", headers=bearer(tokens["access_token"])).status_code == 200


def test_401_with_www_authenticate(client, ctx, clock, application, user_token, tokens):
    missing = client.simulate_get("/oidc/userinfo")
    assert_oauth_error(missing, "invalid_token", status=401)
    assert missing.headers["www-authenticate"] == 'Bearer realm="iamgate"'
    for token in ("garbage", tokens["id_token"], user_token.access_token):  # an ID token or a V1 token is not one
        response = client.simulate_get("/oidc/userinfo", headers=bearer(token))
        assert_oauth_error(response, "invalid_token", status=401)
        assert response.headers["www-authenticate"].startswith('Bearer realm="iamgate", error="invalid_token"')
    clock.advance(3601)
    assert_oauth_error(client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"])),
                       "invalid_token", status=401)


def test_a_suspended_user_gets_401(client, ctx, application, user_token, tokens):
    ctx.users.admin.suspend(application["_id"], user_token.user["id"])
    assert_oauth_error(client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"])),
                       "invalid_token", status=401)


# ---------------------------------------------------------------- revocation


def test_revoking_a_refresh_token_revokes_the_grant(client, ctx, refresh_grant, rp_client, tokens):
    response = client.simulate_post("/oidc/revoke", body=f"token={tokens['refresh_token']}",
                                    headers={**FORM, **basic(rp_client)})
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"]), "invalid_grant")
    # RFC 7009 2.1: the access tokens of the grant stop too.
    assert_oauth_error(client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"])),
                       "invalid_token", status=401)
    introspected = client.simulate_post("/oidc/introspect", json={"token": tokens["access_token"]},
                                        headers=basic(rp_client))
    assert introspected.json == {"active": False}
    revoked = events_of(ctx, "connection.revoked")
    assert [e["data"]["reason"] for e in revoked] == ["revoked"]
    # Revoking again, an unknown token, or an access token: 200, nothing changes.
    for token in (tokens["refresh_token"], "unknown", tokens["access_token"]):
        again = client.simulate_post("/oidc/revoke", json={"token": token, "client_id": rp_client["client_id"],
                                                           "client_secret": rp_client["client_secret"]})
        assert again.status_code == 200
    assert len(events_of(ctx, "connection.revoked")) == 1


def test_another_client_cannot_revoke(client, application, oidc_client, refresh_grant, rp_client, tokens):
    other = oidc_client(application, name="Other")
    response = client.simulate_post("/oidc/revoke", body=f"token={tokens['refresh_token']}",
                                    headers={**FORM, **basic(other)})
    assert response.status_code == 200
    assert refresh_grant(rp_client, tokens["refresh_token"]).status_code == 200


@pytest.mark.parametrize("path", ["/oidc/revoke", "/oidc/introspect"])
def test_client_authentication_is_required(client, rp_client, tokens, path):
    response = client.simulate_post(path, json={"token": tokens["refresh_token"], "client_id": rp_client["client_id"],
                                                "client_secret": "wrong"})
    assert_oauth_error(response, "invalid_client", status=401)
    assert response.headers["www-authenticate"] == 'Basic realm="iamgate"'
    for anonymous in ({"token": "x"}, {"token": "x", "client_id": rp_client["client_id"]}):
        # RFC 6749 5.2 (to which RFC 7009 2.2.1 and RFC 7662 2.3 refer): "no client authentication included"
        response = client.simulate_post(path, json=anonymous)
        assert_oauth_error(response, "invalid_client", status=401)
        assert response.headers["www-authenticate"] == 'Basic realm="iamgate"'
    assert_oauth_error(client.simulate_post(path, body="", headers={**FORM, **basic(rp_client)}), "invalid_request")


# ---------------------------------------------------------------- introspection


def test_introspection(client, application, oidc_client, rp_client, tokens, user_token):
    def introspect(rp, token, hint=None):
        body = f"token={token}" + (f"&token_type_hint={hint}" if hint else "")
        response = client.simulate_post("/oidc/introspect", body=body, headers={**FORM, **basic(rp)})
        assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
        return response.json

    access = introspect(rp_client, tokens["access_token"])
    assert access["active"] is True and access["sub"] == user_token.user["id"]
    assert access["client_id"] == rp_client["client_id"] and access["token_type"] == "Bearer"
    refresh = introspect(rp_client, tokens["refresh_token"], "refresh_token")
    assert refresh["active"] is True and refresh["token_type"] == "refresh_token"
    assert introspect(rp_client, "garbage") == {"active": False}
    assert introspect(rp_client, tokens["id_token"]) == {"active": False}
    other = oidc_client(application, name="Other")
    assert introspect(other, tokens["access_token"]) == {"active": False}
    assert introspect(other, tokens["refresh_token"]) == {"active": False}


# ---------------------------------------------------------------- the end of a grant ends its access tokens


def _revoke_the_refresh_token(client, rp, tokens, exchange, code):
    client.simulate_post("/oidc/revoke", body=f"token={tokens['refresh_token']}", headers={**FORM, **basic(rp)})


def _replay_the_code(client, rp, tokens, exchange, code):
    assert_oauth_error(exchange(rp, code, "v" * 43), "invalid_grant")


def _log_out(client, rp, tokens, exchange, code):
    assert client.simulate_post("/oidc/logout", body=f"id_token_hint={tokens['id_token']}",
                                headers=FORM).status_code == 200


@pytest.mark.parametrize("end", [_revoke_the_refresh_token, _replay_the_code, _log_out],
                         ids=["revoked-refresh-token", "replayed-code", "logout"])
def test_the_end_of_a_grant_ends_its_access_token(client, authorize, exchange, user_token, rp_client, end):
    """Issue 26, item 9: a revoked refresh token, a replayed code and a logout end the
    access tokens of that grant at userinfo and introspection, at once."""
    verifier, challenge = pkce_pair()
    code = authorize(user_token, rp_client, challenge=challenge).json["code"]
    tokens = exchange(rp_client, code, verifier).json
    introspect = {**FORM, **basic(rp_client)}
    assert client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"])).status_code == 200
    assert client.simulate_post("/oidc/introspect", body=f"token={tokens['access_token']}",
                                headers=introspect).json["active"] is True
    end(client, rp_client, tokens, exchange, code)
    assert_oauth_error(client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"])),
                       "invalid_token", 401)
    assert client.simulate_post("/oidc/introspect", body=f"token={tokens['access_token']}",
                                headers=introspect).json == {"active": False}
