"""POST /oidc/token: the code grant (single use, 60 s, redirect_uri, PKCE, client
authentication), the refresh grant (rotation, reuse detection), encodings, and the
security paths: code replay, another client's code, reused refresh tokens."""
import base64

import jwt
import pytest

from controlplane.oidc.store import GrantStore
from shared.timeutil import seconds
from tests.conftest import events_of
from tests.oidc.conftest import FORM, REDIRECT_URI, assert_oauth_error, clients_url, pkce_pair
from tests.plugins.users import fresh_address, users_url


@pytest.fixture
def code_and_verifier(authorize, user_token, rp_client):
    verifier, challenge = pkce_pair()
    response = authorize(user_token, rp_client, challenge=challenge)
    return response.json["code"], verifier


def test_the_token_response_and_the_access_token_claims(exchange, ctx, user_token, rp_client, code_and_verifier):
    code, verifier = code_and_verifier
    response = exchange(rp_client, code, verifier)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store" and response.headers["pragma"] == "no-cache"
    body = response.json
    assert set(body) == {"access_token", "token_type", "expires_in", "refresh_token", "id_token", "scope"}
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600 and body["scope"] == "openid profile email"
    header = jwt.get_unverified_header(body["access_token"])
    assert header["alg"] == "RS256" and header["typ"] == "at+jwt"
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["aud"] == ctx.config.public_url and claims["client_id"] == rp_client["client_id"]
    assert claims["sub"] == user_token.user["id"] and claims["scope"] == "openid profile email"
    assert claims["exp"] - claims["iat"] == 3600 and claims["sid"]
    id_claims = jwt.decode(body["id_token"], options={"verify_signature": False})
    assert id_claims["aud"] == rp_client["client_id"] and id_claims["nonce"] == "nonce-1"
    assert id_claims["sid"] == claims["sid"]
    assert body["refresh_token"] not in str(list(ctx.store["oidc_refresh_tokens"].find()))
    grant = ctx.store["oidc_refresh_tokens"].find_one({"_id": claims["grant_id"]})  # the token names its grant
    assert grant["client_id"] == rp_client["client_id"] and grant["user_id"] == user_token.user["id"]


def test_the_oidc_access_token_does_not_open_the_v1_api(client, application, exchange, rp_client, user_token,
                                                        code_and_verifier):
    tokens = exchange(rp_client, *code_and_verifier).json
    response = client.simulate_get(f"/api/v1/applications/{application['_id']}/users/{user_token.user['id']}/profile",
                                   headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert response.status_code == 401


def test_form_encoding_and_client_secret_basic(client, rp_client, code_and_verifier):
    code, verifier = code_and_verifier
    basic = base64.b64encode(f"{rp_client['client_id']}:{rp_client['client_secret']}".encode()).decode()
    body = f"grant_type=authorization_code&code={code}&redirect_uri={REDIRECT_URI}&code_verifier={verifier}"
    response = client.simulate_post("/oidc/token", body=body, headers={**FORM, "Authorization": f"Basic {basic}"})
    assert response.status_code == 200, response.text


def test_other_media_types_are_refused_as_oauth_does_a_malformed_request(client, application):
    """RFC 6749 5.2: a body the endpoint cannot read is a malformed request, answered
    ``invalid_request`` in the OAuth body, not 415 in the V1 envelope; V1 keeps its 415."""
    for path in ("/oidc/token", "/oidc/revoke", "/oidc/introspect", "/oidc/userinfo"):
        response = client.simulate_post(path, body="x", headers={"Content-Type": "text/plain"})
        assert "Content-Type must be" in assert_oauth_error(response, "invalid_request")["error_description"], path
    v1 = client.simulate_post(users_url(application, "/login"), body="x",
                              headers={"Content-Type": "text/plain"}, remote_addr=fresh_address())
    assert v1.status_code == 415 and v1.json["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    userinfo = client.simulate_post("/oidc/userinfo", body="x", headers={"Content-Type": "text/plain"})
    assert userinfo.json["error_description"] == ("Content-Type must be application/x-www-form-urlencoded or "
                                                  "application/json (or no body).")


@pytest.mark.parametrize("path", ["/oidc/authorize", "/oidc/logout"])
def test_a_browser_posting_another_media_type_where_it_lands_gets_a_page(client, path):
    """A relying party's auto-submitting form with another ``enctype`` (multipart, here)
    lands the browser on authorize or logout: it gets the error as the HTML error page,
    as every other error a browser meets there, never the JSON body programs get."""
    multipart = "multipart/form-data; boundary=----x"
    body = '------x\r\nContent-Disposition: form-data; name="client_id"\r\n\r\nx\r\n------x--\r\n'
    response = client.simulate_post(path, body=body, headers={
        "Content-Type": multipart, "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"})
    assert response.status_code == 400 and response.headers["content-type"].startswith("text/html")
    assert "invalid_request" in response.text and response.headers["cache-control"] == "no-store"
    program = client.simulate_post(path, body=body, headers={"Content-Type": multipart})
    assert program.status_code == 400 and program.json["error"] == "invalid_request"


@pytest.mark.parametrize("overrides, error", [
    ({"grant_type": "password"}, "unsupported_grant_type"),
    ({"grant_type": None}, "invalid_request"),
    ({"code": None}, "invalid_request"),
    ({"code_verifier": None}, "invalid_request"),
    ({"redirect_uri": None}, "invalid_request"),
    ({"client_secret": None}, "invalid_request"),
    ({"client_secret": "wrong"}, "invalid_grant"),
    ({"client_id": "oc_unknown"}, "invalid_grant"),
    ({"code": "not-a-code"}, "invalid_grant"),
    ({"redirect_uri": "https://rp.example.com/other"}, "invalid_grant"),
    ({"code_verifier": "x" * 43}, "invalid_grant"),
    ({"code_verifier": "short"}, "invalid_grant"),
])
def test_errors(exchange, rp_client, code_and_verifier, overrides, error):
    values = {"code": code_and_verifier[0], "verifier": code_and_verifier[1], **overrides}
    values["verifier"] = values.pop("code_verifier", values["verifier"])
    assert_oauth_error(exchange(rp_client, values.pop("code"), values.pop("verifier"), **values), error)


def test_a_wrong_verifier_is_a_failed_connection_and_spends_the_code(exchange, ctx, user_token, rp_client,
                                                                     code_and_verifier):
    code, verifier = code_and_verifier
    assert_oauth_error(exchange(rp_client, code, "y" * 43), "invalid_grant")
    assert events_of(ctx, "connection.failed")[0]["data"] == {
        "kind": "grant", "user_id": user_token.user["id"], "client_id": rp_client["client_id"],
        "reason": "invalid_verifier"}
    assert_oauth_error(exchange(rp_client, code, verifier), "invalid_grant")


def test_a_code_lives_60_seconds(exchange, clock, rp_client, code_and_verifier):
    clock.advance(61)
    assert_oauth_error(exchange(rp_client, *code_and_verifier), "invalid_grant")


def test_both_client_authentication_methods_at_once_are_refused(client, rp_client, code_and_verifier):
    code, verifier = code_and_verifier
    basic = base64.b64encode(f"{rp_client['client_id']}:{rp_client['client_secret']}".encode()).decode()
    body = (f"grant_type=authorization_code&code={code}&redirect_uri={REDIRECT_URI}&code_verifier={verifier}"
            f"&client_secret={rp_client['client_secret']}")
    response = client.simulate_post("/oidc/token", body=body, headers={**FORM, "Authorization": f"Basic {basic}"})
    assert_oauth_error(response, "invalid_request")


def test_repeated_form_parameters_are_refused(client, rp_client):
    response = client.simulate_post("/oidc/token", body="grant_type=refresh_token&grant_type=refresh_token",
                                    headers=FORM)
    assert_oauth_error(response, "invalid_request")


# ---------------------------------------------------------------- security


def test_code_replay_revokes_what_the_first_exchange_issued(exchange, refresh_grant, ctx, rp_client,
                                                            code_and_verifier):
    first = exchange(rp_client, *code_and_verifier).json
    replay = exchange(rp_client, *code_and_verifier)
    assert_oauth_error(replay, "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, first["refresh_token"]), "invalid_grant")
    assert [e["data"]["reason"] for e in events_of(ctx, "connection.failed")] == ["code_reused"]
    assert [e["data"]["reason"] for e in events_of(ctx, "connection.revoked")] == ["code_reused"]


@pytest.mark.parametrize("verifier", [None, "wrong-verifier-" + "x" * 40], ids=["no verifier", "a wrong one"])
def test_a_replay_without_the_right_verifier_revokes_too(exchange, refresh_grant, ctx, rp_client, code_and_verifier,
                                                         verifier):
    """Whoever replays a leaked code seldom holds its verifier: the replay is a replay
    before it is a request without (or with a wrong) verifier (RFC 6749 4.1.2)."""
    code, good = code_and_verifier
    first = exchange(rp_client, code, good).json
    assert_oauth_error(exchange(rp_client, code, verifier), "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, first["refresh_token"]), "invalid_grant")
    assert [e["data"]["reason"] for e in events_of(ctx, "connection.revoked")] == ["code_reused"]


def _logout(client, application, user_token):
    response = client.simulate_post(users_url(application, "/logout"), headers=user_token.headers,
                                    json={"refresh_token": user_token.refresh_token})
    assert response.status_code == 204, response.text


def _revoke_the_session(client, application, user_token):
    session_id = jwt.decode(user_token.access_token, options={"verify_signature": False})["sid"]
    response = client.simulate_delete(users_url(application, f"/{user_token.user['id']}/sessions/{session_id}"),
                                      headers=user_token.headers)
    assert response.status_code == 204, response.text


def _revoke_every_session(client, application, user_token):
    response = client.simulate_delete(users_url(application, f"/{user_token.user['id']}/sessions"),
                                      headers=user_token.headers)
    assert response.status_code in (200, 204), response.text


def _reset_the_password(client, application, user_token, outbox):
    email = user_token.user["email"]
    client.simulate_post(users_url(application, "/password/forgot"), json={"email": email},
                         remote_addr=fresh_address())
    response = client.simulate_post(users_url(application, "/password/reset"), remote_addr=fresh_address(),
                                    json={"token": outbox[-1].token, "email": email, "password": "Another-Horse-77"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("end", [_logout, _revoke_the_session, _revoke_every_session, _reset_the_password],
                         ids=["logout", "one session revoked", "every session revoked", "password reset"])
def test_a_code_from_a_session_that_ended_gets_no_grant(client, application, exchange, refresh_grant, ctx, outbox,
                                                        user_token, rp_client, code_and_verifier, end):
    """A code outlives the sign-in it came from by up to 60 s; the exchange must not
    turn it into a grant the sign-in's end has already swept (nor may a still valid
    access token of a logged-out session authorize one)."""
    if end is _reset_the_password:
        # Of a verified account: an unverified one is handed over to the mailbox's owner,
        # its consents and access tokens with it (test_account_claim.py).
        ctx.store["users"].update_one({"_id": user_token.user["id"]}, {"$set": {"email_verified": True}})
        end(client, application, user_token, outbox)
    else:
        end(client, application, user_token)
    head = ctx.events.head()
    assert_oauth_error(exchange(rp_client, *code_and_verifier), "invalid_grant")
    assert [g["revoked_reason"] for g in ctx.store["oidc_refresh_tokens"].find({"revoked_at": None})] == []
    after = ctx.store["events"].find({"type": {"$regex": "^connection[.]"}, "seq": {"$gt": head}}).sort("seq", 1)
    assert [(e["type"], e["data"]["reason"]) for e in after] == [("connection.revoked", "session_ended"),
                                                                  ("connection.failed", "session_ended")]
    verifier, challenge = pkce_pair()  # the same access token, still within its 15 minutes
    code = client.simulate_get("/oidc/authorize", headers=user_token.headers, params={
        "response_type": "code", "client_id": rp_client["client_id"], "redirect_uri": REDIRECT_URI,
        "scope": "openid", "code_challenge": challenge, "code_challenge_method": "S256"})
    if end is _reset_the_password:  # a reset ends the access tokens of before too
        assert code.status_code == 401, code.text
        return
    # The JSON mode reads when the token's session began (auth_time): an ended one gives no code.
    assert_oauth_error(code, "login_required")


def test_a_session_ended_between_the_insert_and_the_check_revokes_the_new_grant(
        exchange, ctx, application, user_token, rp_client, code_and_verifier, monkeypatch):
    """The race the order closes: the session ends after the grant is stored (so the
    sweep of its end may have run before), and the check after the insert finds it over."""
    store = ctx.oidc.token.code_grant.grants
    insert = store.insert

    def insert_then_end(grant):
        insert(grant)
        ctx.users.sessions.sessions.revoke(application["_id"], grant["session_id"], ctx.clock(), "logout")

    monkeypatch.setattr(store, "insert", insert_then_end)
    assert_oauth_error(exchange(rp_client, *code_and_verifier), "invalid_grant")
    assert ctx.store["oidc_refresh_tokens"].count_documents({"revoked_at": None}) == 0


def test_another_clients_code_is_refused_and_not_spent(exchange, application, oidc_client, rp_client,
                                                       code_and_verifier):
    thief = oidc_client(application, name="Thief")
    code, verifier = code_and_verifier
    assert_oauth_error(exchange(thief, code, verifier), "invalid_grant")
    assert exchange(rp_client, code, verifier).status_code == 200


def test_consent_withdrawn_before_the_exchange(exchange, ctx, application, user_token, rp_client,
                                               code_and_verifier):
    ctx.oidc.connections.withdraw_consents(application["_id"], user_token.user["id"])
    assert_oauth_error(exchange(rp_client, *code_and_verifier), "invalid_grant")


def test_refresh_rotates_and_reuse_revokes_the_grant(refresh_grant, issue_tokens, ctx, clock, user_token,
                                                     rp_client):
    tokens = issue_tokens(user_token, rp_client)
    second = refresh_grant(rp_client, tokens["refresh_token"])
    assert second.status_code == 200 and second.json["refresh_token"] != tokens["refresh_token"]
    assert "nonce" not in jwt.decode(second.json["id_token"], options={"verify_signature": False})
    # Within the grace window the token rotated last yields the same successor (two workers).
    again = refresh_grant(rp_client, tokens["refresh_token"])
    assert again.status_code == 200 and again.json["refresh_token"] == second.json["refresh_token"]
    clock.advance(ctx.config.refresh_reuse_grace + 1)
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"]), "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, second.json["refresh_token"]), "invalid_grant")  # grant revoked
    assert [e["data"]["reason"] for e in events_of(ctx, "connection.failed")] == ["refresh_token_reused"]
    assert len(events_of(ctx, "connection.refreshed")) == 2


def test_an_older_spent_refresh_token_revokes_too(refresh_grant, issue_tokens, user_token, rp_client):
    first = issue_tokens(user_token, rp_client)["refresh_token"]
    second = refresh_grant(rp_client, first).json["refresh_token"]
    third = refresh_grant(rp_client, second).json["refresh_token"]
    assert_oauth_error(refresh_grant(rp_client, first), "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, third), "invalid_grant")


def test_a_rotation_answers_without_the_spent_tokens(ctx, clock):
    """The rotation's write returns the grant without ``spent_digests``, which grows by one
    a rotation (MongoDB would send the whole list back at every refresh); the list is
    still stored, and still finds the grant of a spent token."""
    grants, now = GrantStore(ctx.store), clock()
    grants.insert({"_id": "g1", "app_id": "a1", "client_id": "c1", "user_id": "u1", "token_digest": "t0",
                   "previous_digest": None, "rotated_at": None, "spent_digests": [], "revoked_at": None,
                   "expires_at": now + seconds(3600)})
    for n in range(1, 5):
        live = grants.live_by_token("c1", f"t{n - 1}", now)
        rotated = grants.rotate(live, f"t{n - 1}", f"t{n}", now)
        assert "spent_digests" not in rotated
        assert (rotated["token_digest"], rotated["previous_digest"]) == (f"t{n}", f"t{n - 1}")
    assert ctx.store["oidc_refresh_tokens"].find_one({"_id": "g1"})["spent_digests"] == ["t0", "t1", "t2"]
    assert grants.by_token("t1")["_id"] == "g1"


def test_refresh_errors(refresh_grant, issue_tokens, application, oidc_client, user_token, rp_client, ctx):
    tokens = issue_tokens(user_token, rp_client)
    other = oidc_client(application, name="Other")
    assert_oauth_error(refresh_grant(other, tokens["refresh_token"]), "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, "unknown"), "invalid_grant")
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"], scope="openid admin"), "invalid_scope")
    narrowed = refresh_grant(rp_client, tokens["refresh_token"], scope="openid")
    assert narrowed.status_code == 200 and narrowed.json["scope"] == "openid"
    ctx.users.admin.suspend(application["_id"], user_token.user["id"])
    assert_oauth_error(refresh_grant(rp_client, narrowed.json["refresh_token"]), "invalid_grant")


def test_refresh_tokens_expire(refresh_grant, issue_tokens, clock, ctx, user_token, rp_client):
    tokens = issue_tokens(user_token, rp_client)
    clock.advance(ctx.config.refresh_token_ttl + 1)
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"]), "invalid_grant")


@pytest.mark.parametrize("scope", ["openid admin", "profile email", "openid offline_access"])
def test_a_refused_scope_leaves_the_refresh_token_live(refresh_grant, issue_tokens, clock, ctx, user_token,
                                                       rp_client, scope):
    """RFC 6749 6: a refresh refused with invalid_scope changes nothing, so the client can
    retry it (after the reuse grace window too) without the retry counting as reuse."""
    tokens = issue_tokens(user_token, rp_client, scope="openid email")
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"], scope=scope), "invalid_scope")
    clock.advance(ctx.config.refresh_reuse_grace + 1)
    retry = refresh_grant(rp_client, tokens["refresh_token"], scope="openid")
    assert retry.status_code == 200, retry.text
    assert retry.json["scope"] == "openid"
    assert refresh_grant(rp_client, retry.json["refresh_token"]).status_code == 200  # the grant stands
    assert events_of(ctx, "connection.failed") == [] and events_of(ctx, "connection.revoked") == []
    assert len(events_of(ctx, "connection.refreshed")) == 2


def test_narrowing_a_clients_allowed_scopes_narrows_what_its_refresh_tokens_get(
        client, refresh_grant, issue_tokens, application, manager_key, user_token, rp_client):
    tokens = issue_tokens(user_token, rp_client)
    assert tokens["scope"] == "openid profile email"

    def allow(*scopes):
        response = client.simulate_put(clients_url(application, f"/{rp_client['id']}"),
                                         json={"allowed_scopes": list(scopes)},
                                         headers={"Authorization": f"Bearer {manager_key}"})
        assert response.status_code == 200, response.text

    allow("openid", "profile")
    narrowed = refresh_grant(rp_client, tokens["refresh_token"])
    assert narrowed.status_code == 200, narrowed.text
    assert narrowed.json["scope"] == "openid profile"
    assert jwt.decode(narrowed.json["access_token"], options={"verify_signature": False})["scope"] == "openid profile"
    assert "email" not in jwt.decode(narrowed.json["id_token"], options={"verify_signature": False})
    assert_oauth_error(refresh_grant(rp_client, narrowed.json["refresh_token"], scope="openid email"), "invalid_scope")
    # The grant keeps what was consented: allowed again, the scope comes back.
    allow("openid", "profile", "email")
    assert refresh_grant(rp_client, narrowed.json["refresh_token"]).json["scope"] == "openid profile email"


def test_a_client_no_longer_allowed_openid_gets_no_tokens(client, refresh_grant, issue_tokens, application,
                                                          manager_key, user_token, rp_client):
    tokens = issue_tokens(user_token, rp_client)
    response = client.simulate_put(clients_url(application, f"/{rp_client['id']}"),
                                     json={"allowed_scopes": ["profile"]},
                                     headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 200, response.text
    assert_oauth_error(refresh_grant(rp_client, tokens["refresh_token"]), "invalid_scope")


# ---------------------------------------------------------------- issue 26: a client registered without PKCE


@pytest.fixture
def pkce_less(application, oidc_client):
    return oidc_client(application, require_pkce=False)


def test_a_code_issued_without_a_challenge_takes_no_verifier(authorize, exchange, user_token, pkce_less):
    code = authorize(user_token, pkce_less, code_challenge=None, code_challenge_method=None).json["code"]
    response = exchange(pkce_less, code, None)
    assert response.status_code == 200, response.text


def test_a_verifier_for_a_code_without_a_challenge_is_refused(authorize, exchange, ctx, user_token, pkce_less):
    """OAuth 2.0 Security BCP 2.1.1: a verifier sent for a code issued without a challenge
    is a downgrade attempt; the code is spent."""
    code = authorize(user_token, pkce_less, code_challenge=None, code_challenge_method=None).json["code"]
    assert_oauth_error(exchange(pkce_less, code, "v" * 43), "invalid_grant")
    assert events_of(ctx, "connection.failed")[0]["data"]["reason"] == "invalid_verifier"
    assert_oauth_error(exchange(pkce_less, code, None), "invalid_grant")


def test_a_pkce_less_client_that_sent_a_challenge_must_send_the_verifier(authorize, exchange, user_token, pkce_less):
    verifier, challenge = pkce_pair()
    code = authorize(user_token, pkce_less, challenge=challenge).json["code"]
    assert_oauth_error(exchange(pkce_less, code, None), "invalid_request")
    assert exchange(pkce_less, code, verifier).status_code == 200
