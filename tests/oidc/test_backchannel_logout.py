"""OIDC Back-Channel Logout 1.0: logout (RP-initiated and V1), DELETE sessions (all, or
one), suspension, deletion, a password change (for the other sessions), the reuse of a
session's refresh token and an eviction by the session limit POST a signed logout_token
to the client's backchannel_logout_uri, as deliveries of the webhook queue in MongoDB (target rules,
retries logged, a restart loses none).  The token is verified with joserfc, a JOSE
library independent of the one that signs it (PyJWT)."""
import logging
from urllib.parse import parse_qs

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from controlplane.app import create_app
from tests.conftest import make_config
from tests.oidc.conftest import clients_url
from tests.plugins.users import fresh_address, users_url
from tests.selfservice.conftest import self_url

EVENT = "http://schemas.openid.net/event/backchannel-logout"


@pytest.fixture
def config_overrides():
    # The receiver listens on 127.0.0.1: the target rules allow it only with this switch.
    return {"webhook_allow_private_targets": True, "webhook_timeout": 2}


@pytest.fixture
def rp(application, oidc_client, receiver):
    return oidc_client(application, backchannel_logout_uri=receiver.url)


def deliver(ctx) -> int:
    """Run the due deliveries, as the webhook worker does (tests start no background work)."""
    sent = 0
    while ctx.webhooks.worker.run_once():
        sent += 1
        assert sent < 100
    return sent


def pending(ctx) -> list[dict]:
    return list(ctx.store["webhook_deliveries"].find({"kind": "back-channel", "status": "pending"}))


def verified_logout_token(client, ctx, request, rp) -> tuple[dict, dict]:
    """(header, claims) of the POSTed logout token, checked as section 2.6 says."""
    assert request["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    [token] = parse_qs(request["body"].decode())["logout_token"]
    keys = KeySet.import_key_set(client.simulate_get("/.well-known/jwks.json").json)
    decoded = jwt.decode(token, keys, algorithms=["RS256"])
    jwt.JWTClaimsRegistry(now=int(ctx.clock().timestamp()), iss={"essential": True, "value": ctx.config.public_url},
                          aud={"essential": True, "value": rp["client_id"]},
                          iat={"essential": True}, jti={"essential": True}).validate(decoded.claims)
    claims = decoded.claims
    assert decoded.header["typ"] == "logout+jwt"
    assert claims["events"] == {EVENT: {}} and "nonce" not in claims
    assert 0 < claims["exp"] - claims["iat"] <= 120
    return decoded.header, claims


def test_logout_sends_a_logout_token(client, ctx, issue_tokens, user_token, rp, receiver):
    tokens = issue_tokens(user_token, rp)
    id_claims = jwt.decode(tokens["id_token"], KeySet.import_key_set(
        client.simulate_get("/.well-known/jwks.json").json)).claims
    response = client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
    assert response.status_code == 200
    assert deliver(ctx) == 1
    [request] = receiver.requests
    _, claims = verified_logout_token(client, ctx, request, rp)
    assert claims["sub"] == user_token.user["id"] and claims["sid"] == id_claims["sid"]
    assert request["path"] == "/hooks/iamgate"


def revoke_all(client, ctx, application, user_token):
    response = client.simulate_delete(self_url(application, user_token.user["id"], "/sessions"),
                                      headers=user_token.headers)
    assert response.status_code == 200, response.text


def suspend(client, ctx, application, user_token):
    ctx.users.admin.suspend(application["_id"], user_token.user["id"])


def delete(client, ctx, application, user_token):
    ctx.selfservice.delete_account(application["_id"], user_token.user["id"])


def log_out(client, ctx, application, user_token):
    response = client.simulate_post(users_url(application, "/logout"), json={"refresh_token": user_token.refresh_token},
                                    headers=user_token.headers)
    assert response.status_code == 204, response.text


def session_of(client, user_token) -> str:
    return jwt.decode(user_token.access_token, KeySet.import_key_set(
        client.simulate_get("/.well-known/jwks.json").json)).claims["sid"]


def revoke_the_session(client, ctx, application, user_token):
    sid = session_of(client, user_token)
    response = client.simulate_delete(self_url(application, user_token.user["id"], f"/sessions/{sid}"),
                                      headers=user_token.headers)
    assert response.status_code == 204, response.text


def sign_in_again(client, application, user_token) -> dict:
    """Another session of the user (another device): its token pair."""
    response = client.simulate_post(users_url(application, "/login"), remote_addr=fresh_address(), json={
        "email": user_token.user["email"], "password": user_token.password})
    assert response.status_code == 200, response.text
    return response.json["data"]


def change_password_elsewhere(client, ctx, application, user_token):
    other = sign_in_again(client, application, user_token)
    new = "Another-Horse-77"
    response = client.simulate_post(users_url(application, f"/{user_token.user['id']}/change-password"),
                                    headers={"Authorization": f"Bearer {other['access_token']}"},
                                    json={"current_password": user_token.password, "new_password": new,
                                          "new_password_confirmation": new})
    assert response.status_code == 200, response.text


def reuse_the_refresh_token(client, ctx, application, user_token):
    def refresh(token):
        return client.simulate_post(users_url(application, "/token/refresh"), json={"refresh_token": token})

    second = refresh(user_token.refresh_token).json["data"]["refresh_token"]
    refresh(second)
    assert refresh(user_token.refresh_token).json["error"]["details"]["reason"] == "reused"


def evict_by_the_session_limit(client, ctx, application, user_token):
    ctx.applications.update(application["_id"], {"max_concurrent_sessions": 1})
    ctx.clock.advance(1)
    sign_in_again(client, application, user_token)


@pytest.mark.parametrize("end", [revoke_all, suspend, delete, log_out, revoke_the_session, change_password_elsewhere,
                                 reuse_the_refresh_token, evict_by_the_session_limit])
def test_every_end_of_the_users_sign_ins_sends_one(client, ctx, application, issue_tokens, user_token, rp,
                                                   oidc_client, receiver, end):
    issue_tokens(user_token, rp)
    issue_tokens(user_token, oidc_client(application))  # no backchannel_logout_uri: nothing sent to it
    end(client, ctx, application, user_token)
    deliver(ctx)
    [request] = receiver.requests
    _, claims = verified_logout_token(client, ctx, request, rp)
    assert claims["sub"] == user_token.user["id"] and claims["sid"] == session_of(client, user_token)


def test_an_expired_grant_is_neither_revoked_nor_told(ctx, clock, application, issue_tokens, user_token, rp):
    """A grant past its expiry ended already (the TTL index only reclaims the space, a
    minute or so later): a suspension then neither revokes it (no connection.revoked)
    nor sends its relying party a logout token."""
    issue_tokens(user_token, rp)
    clock.advance(ctx.config.refresh_token_ttl + 60)
    head = ctx.events.head()
    ctx.users.admin.suspend(application["_id"], user_token.user["id"])
    assert ctx.store["events"].count_documents({"type": "connection.revoked", "seq": {"$gt": head}}) == 0
    assert pending(ctx) == []
    assert ctx.store["oidc_refresh_tokens"].find_one({})["revoked_at"] is None


def test_a_failed_attempt_is_logged_and_retried(client, ctx, clock, issue_tokens, user_token, rp, receiver,
                                                caplog):
    receiver.statuses = [503, 500, 204]
    tokens = issue_tokens(user_token, rp)
    with caplog.at_level(logging.INFO, logger="iamgate.oidc.backchannel"):
        client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
        assert deliver(ctx) == 1
        assert deliver(ctx) == 0  # the retry waits its delay
        clock.advance(1)
        deliver(ctx)
        clock.advance(5)
        deliver(ctx)
    failed = [r for r in caplog.records if r.getMessage() == "back-channel logout failed; will retry"]
    assert [(r.status, r.attempt, r.retry_in, r.client_id) for r in failed] == [
        (503, 1, 1, rp["client_id"]), (500, 2, 5, rp["client_id"])]
    assert "back-channel logout sent" in caplog.messages
    assert len(receiver.requests) == 3
    first, _, third = (verified_logout_token(client, ctx, r, rp)[1] for r in receiver.requests)
    assert first["jti"] != third["jti"]  # each attempt carries a token signed for it
    [logged] = ctx.store["webhook_deliveries"].find({"kind": "back-channel"})
    assert logged["status"] == "delivered" and logged["attempts"] == 3 and logged["response_status"] == 204
    assert ctx.store["webhook_queue"].count_documents({}) == 0


def test_a_relying_party_that_keeps_failing_is_given_up(client, ctx, clock, issue_tokens, user_token, rp, receiver,
                                                        caplog):
    receiver.statuses = [202]  # 2.8: only 200 and 204 are success
    tokens = issue_tokens(user_token, rp)
    with caplog.at_level(logging.INFO, logger="iamgate.oidc.backchannel"):
        client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
        for delay in (0, 1, 5, 30):
            clock.advance(delay)
            deliver(ctx)
    assert len(receiver.requests) == 4
    assert "back-channel logout failed; giving up" in caplog.messages
    [logged] = ctx.store["webhook_deliveries"].find({"kind": "back-channel"})
    assert logged["status"] == "failed" and logged["last_error"] is None and logged["response_status"] == 202


def test_a_restart_still_delivers_a_pending_logout(config, clock, client, ctx, issue_tokens, user_token, rp,
                                                   receiver):
    """The notice is in MongoDB, not in the process that queued it: a new set of services
    on the same store (a restarted worker, another replica) sends it."""
    tokens = issue_tokens(user_token, rp)
    client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
    assert len(pending(ctx)) == 1 and receiver.requests == []
    restarted = create_app(config, store=ctx.store, clock=clock, start_background=False).services
    assert deliver(restarted) == 1
    [request] = receiver.requests
    verified_logout_token(client, ctx, request, rp)
    assert pending(ctx) == []


def change_the_client(client, application, manager_key, rp, **changes):
    response = client.simulate_put(clients_url(application, f"/{rp['client_id']}"), json=changes,
                                   headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 200, response.text


def delete_the_client(client, application, manager_key, rp):
    response = client.simulate_delete(clients_url(application, f"/{rp['client_id']}"),
                                      headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 204, response.text


@pytest.mark.parametrize("change, reason", [
    ("replaced", "backchannel_logout_uri changed"), ("removed", "backchannel_logout_uri changed"),
    ("deactivated", "client deleted or inactive"), ("deleted", "client deleted or inactive")])
def test_a_pending_notice_goes_only_to_the_clients_current_uri(client, ctx, clock, application, manager_key,
                                                               issue_tokens, user_token, rp, receiver, change,
                                                               reason):
    """Each attempt reads the client again: once the tenant replaced or removed the URI,
    deactivated or deleted the client, the retries of a notice queued before are
    cancelled unsent, and the logout token (sub, sid) goes to no URI the tenant gave up."""
    from tests.webhooks.conftest import Receiver

    receiver.statuses = [500]
    tokens = issue_tokens(user_token, rp)
    client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
    assert deliver(ctx) == 1
    fresh = Receiver()
    try:
        if change == "deleted":
            delete_the_client(client, application, manager_key, rp)
        else:
            changes = {"replaced": {"backchannel_logout_uri": fresh.url}, "removed": {"backchannel_logout_uri": None},
                       "deactivated": {"is_active": False}}[change]
            change_the_client(client, application, manager_key, rp, **changes)
        for delay in (1, 5, 30):
            clock.advance(delay)
            deliver(ctx)
    finally:
        fresh.close()
    assert len(receiver.requests) == 1 and fresh.requests == []
    [logged] = ctx.store["webhook_deliveries"].find({"kind": "back-channel"})
    assert logged["status"] == "cancelled" and logged["last_error"] == reason and logged["attempts"] == 1
    assert ctx.store["webhook_queue"].count_documents({}) == 0


@pytest.mark.parametrize("scheme, refusal", [("http", "invalid target"), ("https", "target forbidden")])
def test_the_webhook_target_rules_apply(config, clock, client, ctx, application, manager_key, issue_tokens,
                                        user_token, rp, receiver, caplog, scheme, refusal):
    """A worker without the private-targets switch refuses a loopback URI (http: not
    https; https: a private address) at every attempt, before any connection: the
    receiver is never called, the refusal is logged on the delivery and retried."""
    if scheme == "https":
        change_the_client(client, application, manager_key, rp, backchannel_logout_uri=receiver.url.replace(
            "http", "https", 1))
    tokens = issue_tokens(user_token, rp)
    client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
    strict = create_app(make_config(**{"mongodb_uri": config.mongodb_uri, "webhook_timeout": 2}), store=ctx.store,
                        clock=clock, start_background=False).services
    with caplog.at_level(logging.INFO, logger="iamgate.oidc.backchannel"):
        assert deliver(strict) == 1
    assert receiver.requests == []
    [logged] = pending(ctx)
    assert logged["attempts"] == 1 and logged["last_error"].startswith(refusal)
    [failed] = [r for r in caplog.records if r.getMessage() == "back-channel logout failed; will retry"]
    assert failed.status is None and failed.error == logged["last_error"]


def test_the_client_field_and_discovery(client, rp, receiver):
    assert rp["backchannel_logout_uri"] == receiver.url
    metadata = client.simulate_get("/.well-known/openid-configuration").json
    assert metadata["backchannel_logout_supported"] is True
    assert metadata["backchannel_logout_session_supported"] is True
