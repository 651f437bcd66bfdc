"""OIDC Back-Channel Logout 1.0: logout, DELETE sessions, suspension and deletion POST a
signed logout_token to the client's backchannel_logout_uri, through the webhook sender
(target rules, retries logged).  The token is verified with joserfc, a JOSE library
independent of the one that signs it (PyJWT)."""
import logging
import time
from urllib.parse import parse_qs

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from controlplane.oidc.backchannel import BackchannelLogout, LogoutNotice
from controlplane.webhooks.delivery import Sender
from controlplane.webhooks.targets import TargetPolicy
from tests.selfservice.conftest import self_url
from tests.webhooks.conftest import Receiver

EVENT = "http://schemas.openid.net/event/backchannel-logout"


@pytest.fixture
def config_overrides():
    # The receiver listens on 127.0.0.1: the target rules allow it only with this switch.
    return {"webhook_allow_private_targets": True, "webhook_timeout": 2}


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def rp(application, oidc_client, receiver):
    return oidc_client(application, backchannel_logout_uri=receiver.url)


def received(receiver, count=1, timeout=5.0) -> list[dict]:
    """The first ``count`` requests the receiver got (polled: sending is in the background)."""
    deadline = time.monotonic() + timeout
    while len(receiver.requests) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(receiver.requests) >= count, receiver.requests
    return receiver.requests[:count]


def verified_logout_token(client, ctx, request, rp) -> tuple[dict, dict]:
    """(header, claims) of the POSTed logout token, checked as section 2.6 says."""
    assert request["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    [token] = parse_qs(request["body"].decode())["logout_token"]
    keys = KeySet.import_key_set(client.simulate_get("/.well-known/jwks.json").json)
    decoded = jwt.decode(token, keys, algorithms=["RS256"])
    jwt.JWTClaimsRegistry(iss={"essential": True, "value": ctx.config.public_url},
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
    [request] = received(receiver)
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


@pytest.mark.parametrize("end", [revoke_all, suspend, delete])
def test_every_end_of_the_users_sign_ins_sends_one(client, ctx, application, issue_tokens, user_token, rp,
                                                   oidc_client, receiver, end):
    issue_tokens(user_token, rp)
    issue_tokens(user_token, oidc_client(application))  # no backchannel_logout_uri: nothing sent to it
    end(client, ctx, application, user_token)
    [request] = received(receiver)
    _, claims = verified_logout_token(client, ctx, request, rp)
    assert claims["sub"] == user_token.user["id"] and claims["sid"]
    time.sleep(0.2)
    assert len(receiver.requests) == 1


def test_a_failed_attempt_is_logged_and_retried(client, ctx, issue_tokens, user_token, rp, receiver, caplog):
    receiver.statuses = [503, 200]
    tokens = issue_tokens(user_token, rp)
    with caplog.at_level(logging.INFO, logger="iamgate.oidc.backchannel"):
        client.simulate_get("/oidc/logout", params={"id_token_hint": tokens["id_token"]})
        first, second = received(receiver, 2)  # the first retry comes a second later
        deadline = time.monotonic() + 2
        while "back-channel logout sent" not in caplog.messages and time.monotonic() < deadline:
            time.sleep(0.02)
    failed = [r for r in caplog.records if r.getMessage() == "back-channel logout failed; will retry"]
    assert failed and failed[0].status == 503 and failed[0].attempt == 1 and failed[0].client_id == rp["client_id"]
    assert "back-channel logout sent" in caplog.messages
    verified_logout_token(client, ctx, second, rp)


def test_the_webhook_target_rules_apply(ctx, rp, receiver):
    """Without the private-targets switch, a loopback URI is refused at send time."""
    strict = BackchannelLogout(ctx.oidc.clients, ctx.tokens, TargetPolicy(), Sender(1), ctx.clock,
                               issuer=ctx.config.public_url)
    outcome = strict.send(LogoutNotice("app", rp["client_id"], receiver.url, "user", None))
    assert not outcome.ok and "target refused" in outcome.error
    assert receiver.requests == []


def test_the_client_field_and_discovery(client, rp, receiver):
    assert rp["backchannel_logout_uri"] == receiver.url
    metadata = client.simulate_get("/.well-known/openid-configuration").json
    assert metadata["backchannel_logout_supported"] is True
    assert metadata["backchannel_logout_session_supported"] is True
