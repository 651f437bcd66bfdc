"""``idtoken.verify_id_token`` on its own (OIDC Core 3.1.3.7): the edges the sign-in
tests do not reach (a single key without kid, the leeway, the key's own alg, one JWKS
refresh per token)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from controlplane.connections.idtoken import LEEWAY_SECONDS, IdTokenRejected, verify_id_token

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ISSUER, CLIENT = "https://idp.example.com", "client-1"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwks(kid: str | None = "k1", **extra) -> dict:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    return {"keys": [{**public, **({"kid": kid} if kid else {}), **extra}]}


def token(kid: str | None = "k1", **claims) -> str:
    now = int(NOW.timestamp())
    body = {"iss": ISSUER, "aud": CLIENT, "sub": "s", "nonce": "n", "iat": now, "exp": now + 300, **claims}
    return jwt.encode(body, KEY, algorithm="RS256", headers={"kid": kid} if kid else None)


def verify(raw: str, keys: dict | None = None, refresh=None) -> dict:
    return verify_id_token(raw, keys=keys if keys is not None else jwks(),
                           refresh_keys=refresh or (lambda: {"keys": []}), issuer=ISSUER, client_id=CLIENT,
                           nonce="n", now=NOW, max_age=600)


def test_a_single_key_serves_a_token_without_kid():
    assert verify(token(kid=None), jwks(kid=None))["sub"] == "s"


def test_expiry_has_a_bounded_leeway():
    now = int(NOW.timestamp())
    assert verify(token(exp=now - LEEWAY_SECONDS + 5))
    with pytest.raises(IdTokenRejected, match="expired"):
        verify(token(exp=now - LEEWAY_SECONDS - 1))


def test_a_token_not_valid_yet_is_refused_beyond_the_leeway():
    """RFC 7519 4.1.5: not accepted before ``nbf``, with the leeway ``iat`` has."""
    now = int(NOW.timestamp())
    assert verify(token(nbf=now + LEEWAY_SECONDS))
    with pytest.raises(IdTokenRejected, match="not valid before"):
        verify(token(nbf=now + LEEWAY_SECONDS + 1))
    with pytest.raises(IdTokenRejected, match="nbf"):
        verify(token(nbf="soon"))


def test_an_iat_older_than_the_sign_in_is_refused():
    with pytest.raises(IdTokenRejected, match="iat"):
        verify(token(iat=int(NOW.timestamp()) - 600 - LEEWAY_SECONDS - 1))


def test_a_key_for_another_algorithm_is_not_used():
    with pytest.raises(IdTokenRejected, match="kid"):
        verify(token(), jwks(alg="RS512"))


def test_the_jwks_is_refreshed_once_per_token():
    calls = []

    def refresh():
        calls.append(1)
        return jwks(kid="k2")

    with pytest.raises(IdTokenRejected, match="kid"):
        verify(token(kid="k3"), jwks(kid="k1"), refresh)
    assert calls == [1]
    assert verify(token(kid="k2"), jwks(kid="k1"), refresh)["sub"] == "s"
    assert calls == [1, 1]


@pytest.mark.parametrize("nonce", ["ñ", "n\u00e9", "🙂", "", 7, None])
def test_a_nonce_that_is_not_the_one_sent_is_refused_whatever_it_holds(nonce):
    """Any value a provider puts there, non-ASCII text included, is a refusal, never a
    crash (``hmac.compare_digest`` refuses non-ASCII ``str``)."""
    with pytest.raises(IdTokenRejected, match="nonce"):
        verify(token(nonce=nonce))
