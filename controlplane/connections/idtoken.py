"""ID Token validation by the relying party (OpenID Connect Core 1.0, 3.1.3.7).

The steps of 3.1.3.7 this module follows, in its order:

2. ``iss`` MUST exactly match the issuer pinned from discovery;
3. ``aud`` MUST contain the ``client_id``; a token whose audiences include others is
   accepted only with the ``azp`` check below;
4./5. with several audiences ``azp`` MUST be present, and when present it MUST equal the
   ``client_id``;
6./7./8. the signature is checked with a key of the provider's pinned JWKS, by the
   ``alg`` of the header, from an allow-list of asymmetric algorithms: ``none`` and the
   HMAC family are refused (a client secret is not how we check upstream tokens, and an
   RSA public key must never be taken for an HMAC secret);
9. ``exp`` MUST be in the future (``leeway`` seconds of clock skew);
10. ``iat`` is bounded: not in the future beyond the leeway, and not older than the
    pending request it answers;
11. ``nonce`` MUST equal the value sent in the authentication request.

And RFC 7519 4.1.5: a token MUST NOT be accepted before its ``nbf``, when it has one
(with the same leeway).

Step 13, ``auth_time``, is ``check_auth_time``, apart: only a sign-in whose authorization
request demanded a fresh authentication (``prompt=login``, ``max_age``) must have one
that meets the demand.

The JWKS is pinned; a ``kid`` it does not hold may mean the provider rotated its keys,
so the set is fetched again ONCE (``refresh_keys``) and the token refused if the key is
still missing.  Pure apart from that callback: ``now`` is passed in.
"""
from __future__ import annotations

import hmac
import math
from collections.abc import Callable, Mapping
from datetime import datetime

import jwt

from controlplane.connections.discovery import signing_keys

# The asymmetric JWS algorithms accepted (RFC 7518 3.1): RSA PKCS#1, RSA-PSS and ECDSA.
ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"})
LEEWAY_SECONDS = 60


class IdTokenRejected(Exception):
    """The ID Token fails a check of OIDC Core 3.1.3.7; ``reason`` says which, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def verify_id_token(token: str, *, keys: Mapping, refresh_keys: Callable[[], Mapping], issuer: str,
                    client_id: str, nonce: str, now: datetime, max_age: int,
                    leeway: int = LEEWAY_SECONDS) -> dict:
    """The claims of ``token`` once every check of OIDC Core 3.1.3.7 passed; raises
    ``IdTokenRejected`` otherwise.  ``keys`` is the pinned JWKS; ``max_age`` bounds how
    old ``iat`` may be (the pending request's lifetime)."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise IdTokenRejected("the id_token is not a signed JWT") from None
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise IdTokenRejected(f"the id_token's algorithm {alg!r} is not accepted (asymmetric signatures only)")
    jwk = _key_for(header.get("kid"), alg, keys)
    if jwk is None:
        jwk = _key_for(header.get("kid"), alg, refresh_keys())
        if jwk is None:
            raise IdTokenRejected(f"no key of the provider's JWKS matches the id_token's kid {header.get('kid')!r}")
    try:
        key = jwt.PyJWK(dict(jwk), algorithm=alg).key
        # The claims, times included, are checked by check_claims: one leeway, reasons in words.
        claims = jwt.decode(token, key, algorithms=[alg], options={
            "verify_aud": False, "verify_iss": False, "verify_exp": False, "verify_iat": False,
            "verify_nbf": False})
    except jwt.InvalidSignatureError:
        raise IdTokenRejected("the id_token's signature does not verify with the provider's key") from None
    except jwt.PyJWTError as exc:
        raise IdTokenRejected(f"the id_token cannot be verified: {exc}") from None
    check_claims(claims, issuer=issuer, client_id=client_id, nonce=nonce, now=now, max_age=max_age, leeway=leeway)
    return claims


def check_claims(claims: Mapping, *, issuer: str, client_id: str, nonce: str, now: datetime, max_age: int,
                 leeway: int = LEEWAY_SECONDS) -> None:
    """Steps 2 to 5 and 9 to 11 of OIDC Core 3.1.3.7, and ``nbf`` (RFC 7519 4.1.5), on
    verified claims."""
    if claims.get("iss") != issuer:
        raise IdTokenRejected(f"the id_token's issuer {claims.get('iss')!r} is not the connection's {issuer!r}")
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else audiences
    if not isinstance(audiences, list) or client_id not in audiences:
        raise IdTokenRejected("the id_token is not meant for this client (aud does not contain the client_id)")
    azp = claims.get("azp")
    if len(audiences) > 1 and azp is None:
        raise IdTokenRejected("the id_token has several audiences but no azp")
    if azp is not None and azp != client_id:
        raise IdTokenRejected("the id_token was issued to another party (azp is not the client_id)")
    instant = now.timestamp()
    exp, iat = claims.get("exp"), claims.get("iat")
    if not _is_number(exp) or exp + leeway <= instant:
        raise IdTokenRejected("the id_token has expired" if _is_number(exp) else "the id_token has no exp")
    if not _is_number(iat):
        raise IdTokenRejected("the id_token has no iat")
    if iat > instant + leeway or iat < instant - max_age - leeway:
        raise IdTokenRejected("the id_token's iat is outside the time of this sign-in")
    nbf = claims.get("nbf")
    if nbf is not None and not _is_number(nbf):
        raise IdTokenRejected("the id_token's nbf is not a number")
    if nbf is not None and nbf > instant + leeway:
        raise IdTokenRejected("the id_token is not valid before its nbf, which is still ahead")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise IdTokenRejected("the id_token has no sub")
    # Bytes: compare_digest refuses a non-ASCII str, and the provider chooses this one.
    if not isinstance(claims.get("nonce"), str) \
            or not hmac.compare_digest(claims["nonce"].encode("utf-8"), nonce.encode("utf-8")):
        raise IdTokenRejected("the id_token's nonce is not the one this sign-in sent")


def check_auth_time(claims: Mapping, *, now: datetime, not_before: datetime | None = None,
                    max_age: int | None = None, leeway: int = LEEWAY_SECONDS) -> int | None:
    """Step 13 of OIDC Core 3.1.3.7 on verified claims: when the sign-in sent the
    provider ``prompt=login`` (``not_before``: when it started) or ``max_age`` (seconds),
    the provider says in ``auth_time`` when the user authenticated (REQUIRED whenever
    ``max_age`` was sent, 3.1.2.1), and that must meet the demand: no earlier than the
    sign-in's start, no older than ``max_age``, and not in the future (``leeway``
    seconds of clock skew each).  Without a demand an ``auth_time`` is only read.

    The ``auth_time`` in whole seconds, never later than ``now``; None when the token
    has none (or not a finite number) and nothing was demanded."""
    auth_time = claims.get("auth_time")
    demanded = not_before is not None or max_age is not None
    if not _is_number(auth_time) or not math.isfinite(auth_time):
        if demanded:
            raise IdTokenRejected("the id_token has no auth_time" if auth_time is None
                                  else "the id_token's auth_time is not a number")
        return None
    instant = now.timestamp()
    if demanded and auth_time > instant + leeway:
        raise IdTokenRejected("the id_token's auth_time is in the future")
    if not_before is not None and auth_time < not_before.timestamp() - leeway:
        raise IdTokenRejected("the id_token's auth_time is before this sign-in started: the provider did not "
                              "sign the user in again")
    if max_age is not None and instant - auth_time > max_age + leeway:
        raise IdTokenRejected(f"the id_token's auth_time is more than max_age ({max_age} s) ago")
    return int(min(auth_time, instant))


def _key_for(kid: str | None, alg: str, jwks: Mapping) -> Mapping | None:
    """The signing key of ``jwks`` for ``kid`` and ``alg``: by kid when the token names
    one, else the one key of the right type (OIDC Core 10.1 lets a single key go without)."""
    candidates = signing_keys(jwks, alg)
    if kid is not None:
        return next((k for k in candidates if k.get("kid") == kid), None)
    return candidates[0] if len(candidates) == 1 else None


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
