"""RS256 JWT verification, the one rule the control plane (V1 and OIDC tokens) and the
decision service apply to every token they accept.

RFC 7519 section 7.2 and RFC 8725 (JWT best current practices) section 3.1: the
algorithm is pinned to RS256, so ``alg: none`` and HS256 keyed with the public key are
refused before any key is used; the key comes from the ``kid`` header; the issuer,
audience and every required claim are checked; ``exp`` is compared with the caller's
clock (passed in as ``now``: tests move it), not the library's.
"""
from __future__ import annotations

from collections.abc import Callable

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from shared.errors import Unauthorized

ALGORITHM = "RS256"


class TokenInvalid(Exception):
    """Why a token was refused: ``reason`` is a short tag (malformed, algorithm,
    unknown_key, audience, invalid, expired) and the message says it for people."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def verify_rs256(token: str, key_for: Callable[[str], RSAPublicKey | None], *, audience: str, issuer: str,
                 required, now: float | None, leeway: int = 0) -> tuple[dict, dict]:
    """(claims, header) of a token signed with the key ``key_for(kid)`` returns; raise
    ``TokenInvalid`` otherwise.  ``now`` None skips the expiry check (an expired
    ``id_token_hint`` is acceptable, OIDC RP-Initiated Logout section 2)."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenInvalid("malformed", "The bearer token is malformed.") from None
    if header.get("alg") != ALGORITHM:
        raise TokenInvalid("algorithm", "The bearer token must be signed with RS256.")
    kid = header.get("kid")
    key = key_for(kid) if isinstance(kid, str) and kid else None
    if key is None:
        raise TokenInvalid("unknown_key", "The bearer token was signed by an unknown key.")
    try:
        claims = jwt.decode(token, key, algorithms=[ALGORITHM], audience=audience, issuer=issuer,
                            options={"require": list(required), "verify_exp": False, "verify_iat": False})
    except jwt.InvalidAudienceError:
        raise TokenInvalid("audience", "The bearer token belongs to another application.") from None
    except jwt.PyJWTError as exc:
        raise TokenInvalid(str(exc), "The bearer token is invalid.") from None
    if now is not None:
        exp = claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)) or exp + leeway <= now:
            raise TokenInvalid("expired", "The bearer token has expired.")
    return claims, header


def unauthorized(refused: TokenInvalid) -> Unauthorized:
    """The 401 for a refused bearer token (``details.reason`` once the token parsed)."""
    if refused.reason in ("malformed", "algorithm", "unknown_key"):
        return Unauthorized(refused.message)
    return Unauthorized(refused.message, details={"reason": refused.reason})
