"""Signing keys, the JWKS and access-token verification, including attempts to forge."""
import base64
import json
from datetime import timedelta

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controlplane.keys import SigningKeys
from controlplane.tokens import TokenService
from shared.crypto import DecryptionError, SecretBox
from shared.errors import Unauthorized


def test_jwks_shape(client):
    response = client.simulate_get("/.well-known/jwks.json")
    assert response.status_code == 200
    (key,) = response.json["keys"]
    assert set(key) == {"kty", "use", "alg", "kid", "n", "e"}
    assert (key["kty"], key["use"], key["alg"], key["e"]) == ("RSA", "sig", "RS256", "AQAB")
    modulus = base64.urlsafe_b64decode(key["n"] + "==")
    assert len(modulus) * 8 == 2048


def test_private_key_is_stored_encrypted(ctx):
    (doc,) = list(ctx.store["signing_keys"].find())
    assert "PRIVATE KEY" not in doc["private_key"]
    with pytest.raises(DecryptionError):
        SecretBox("another-secret-key-000000").decrypt(doc["private_key"])


def test_token_round_trip_and_claims(ctx, application):
    token, expires_in = ctx.tokens.issue_access_token(application["_id"], "user-1", "session-1")
    assert expires_in == 900
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "RS256" and header["kid"] == ctx.keys.signing_key()[0]
    claims = ctx.tokens.verify(token, audience=application["_id"])
    assert set(claims) == {"iss", "sub", "aud", "iat", "exp", "jti", "sid"}
    assert claims["iss"] == ctx.config.public_url and claims["sub"] == "user-1" and claims["sid"] == "session-1"
    assert claims["exp"] - claims["iat"] == 900


def test_token_of_another_application_is_refused(ctx, application, make_application):
    other = make_application()
    token, _ = ctx.tokens.issue_access_token(other["_id"], "user-1", None)
    with pytest.raises(Unauthorized) as info:
        ctx.tokens.verify(token, audience=application["_id"])
    assert info.value.details["reason"] == "audience"


def test_expired_token_is_refused(ctx, clock, application):
    token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    clock.advance(899)
    ctx.tokens.verify(token, audience=application["_id"])
    clock.advance(1)
    with pytest.raises(Unauthorized) as info:
        ctx.tokens.verify(token, audience=application["_id"])
    assert info.value.details["reason"] == "expired"


def _claims(ctx, application):
    now = int(ctx.clock().timestamp())
    return {"iss": ctx.config.public_url, "sub": "u", "aud": application["_id"], "iat": now, "exp": now + 60,
            "jti": "j"}


def test_alg_none_is_refused(ctx, application):
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(_claims(ctx, application)).encode()).rstrip(b"=")
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(f"{header.decode()}.{body.decode()}.", audience=application["_id"])


def test_hs256_signed_with_the_public_key_is_refused(ctx, application):
    kid, private = ctx.keys.signing_key()
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    forged = jwt.api_jws.PyJWS().encode(json.dumps(_claims(ctx, application)).encode(),
                                        key=public_pem.decode()[:64] * 2, algorithm="HS256", headers={"kid": kid})
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(forged, audience=application["_id"])


def test_token_signed_by_a_foreign_key_with_our_kid_is_refused(ctx, application):
    kid, _ = ctx.keys.signing_key()
    foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(_claims(ctx, application), foreign, algorithm="RS256", headers={"kid": kid})
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(forged, audience=application["_id"])


def test_tampered_payload_is_refused(ctx, application):
    token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "admin"
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(f"{header}.{payload}.{signature}", audience=application["_id"])


def test_missing_claim_and_unknown_kid_are_refused(ctx, application):
    kid, private = ctx.keys.signing_key()
    claims = _claims(ctx, application)
    del claims["jti"]
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(jwt.encode(claims, private, algorithm="RS256", headers={"kid": kid}),
                          audience=application["_id"])
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(jwt.encode(_claims(ctx, application), private, algorithm="RS256", headers={"kid": "nope"}),
                          audience=application["_id"])
    with pytest.raises(Unauthorized):
        ctx.tokens.verify("not-a-jwt", audience=application["_id"])


def test_rotation_keeps_the_old_key_until_its_tokens_expire(ctx, clock, client, application):
    old_token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    old_kid = ctx.keys.signing_key()[0]
    new_kid, retire_at = ctx.keys.rotate()
    assert new_kid != old_kid
    assert retire_at == clock.now + timedelta(seconds=3600 + 60)  # the longest lifetime after the key cache
    kids = {k["kid"] for k in client.simulate_get("/.well-known/jwks.json").json["keys"]}
    assert kids == {old_kid, new_kid}
    new_token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    ctx.tokens.verify(old_token, audience=application["_id"])  # still verifiable
    clock.advance(3600)
    ctx.keys._reload()
    assert old_kid in {k["kid"] for k in client.simulate_get("/.well-known/jwks.json").json["keys"]}
    clock.advance(61)
    ctx.keys._reload()
    kids = {k["kid"] for k in client.simulate_get("/.well-known/jwks.json").json["keys"]}
    assert kids == {new_kid}


def test_replicas_starting_together_agree_on_one_active_key(ctx):
    other = SigningKeys(ctx.store, ctx.box, ctx.clock, max_token_lifetime=3600)
    assert other.ensure_active() == ctx.keys.signing_key()[0]
    assert ctx.store["signing_keys"].count_documents({}) == 1
    # The replica that generated the key signs with the key it stored (the other decrypts it).
    assert other.signing_key()[1].private_numbers() == ctx.keys.signing_key()[1].private_numbers()


def test_an_unknown_kid_never_delays_a_rotated_keys_tokens_on_another_replica(ctx, application):
    """Replica B has just seen a kid it does not know (garbage, another environment's);
    replica A rotates and signs with the new key. Before, B's one reload per five seconds
    was spent and it refused the new key's tokens; now an unknown kid is looked up by its
    id, and a live one reloads the keys."""
    replica_b = SigningKeys(ctx.store, ctx.box, ctx.clock, max_token_lifetime=3600)
    replica_b.ensure_active()
    tokens_b = TokenService(replica_b, ctx.clock, issuer=ctx.config.public_url, access_ttl=900)
    assert replica_b.verification_key("kid-of-another-environment") is None

    ctx.keys.rotate()  # on replica A
    token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    assert tokens_b.verify(token, audience=application["_id"])["sub"] == "user-1"


def test_a_garbage_kid_is_looked_up_once_in_a_while_not_at_every_token(ctx, monkeypatch):
    reads = []
    find_one = ctx.keys._keys.find_one
    monkeypatch.setattr(ctx.keys._keys, "find_one", lambda *a, **k: reads.append(a) or find_one(*a, **k))
    for _ in range(20):
        assert ctx.keys.verification_key("garbage") is None
    assert len(reads) == 1
