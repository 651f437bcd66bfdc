"""End-user access tokens, verified by the decision service itself.

The same rules as the control plane (controlplane/tokens.py): RS256 only (so ``alg: none``
and HS256-keyed-with-the-public-key are refused), a ``kid`` from the control plane's JWKS,
``aud`` = the application id, ``iss`` = IAMGATE_PUBLIC_URL, every claim present, ``exp``
against the service clock. A verified token is remembered by its SHA-256 digest until it
expires, so the RSA verification runs once per token, not once per check; it is
remembered with its ``kid``, and answered from memory only while that key is still in
the JWKS, read again every minute as the control plane reads its keys: a compromised key
whose document is deleted (docs/oidc.md) stops its tokens here within a minute too,
those already remembered included.

PyJWT and the cryptography package it verifies RS256 with (about 10 MB of a worker's
RSS, benchmarks/NOTES.md) are imported on the first end-user token: a sidecar whose
callers use the application's API key never loads them.
"""
from __future__ import annotations

import hashlib
import logging
import time

from cachetools import TTLCache

from decision.client import ControlPlaneError
from shared.concurrency import native_lock
from shared.errors import Unauthorized

log = logging.getLogger("iamgate.decision.tokens")

REQUIRED_CLAIMS = ("iss", "sub", "aud", "iat", "exp", "jti")
# Tokens remembered per worker; the longest-lived V1 token is an hour (OIDC access tokens).
VERIFIED_TOKENS = 50000
VERIFIED_TTL = 3600
# The JWKS is re-read this often (the control plane's own key cache lives as long), and
# on an unknown kid at most this often.
JWKS_MAX_AGE = 60.0
UNKNOWN_KID_RELOAD = 5.0


def _jwt():
    import jwt
    import jwt.algorithms  # noqa: F401  (RSAAlgorithm)

    return jwt


class JwksUnavailable(Exception):
    """The signing keys could not be read from the control plane."""


class TokenVerifier:
    def __init__(self, client, clock, *, issuer: str, timer, monotonic=time.monotonic):
        self._client = client
        self._clock = clock
        self._issuer = issuer
        self._monotonic = monotonic
        self._verified: TTLCache = TTLCache(VERIFIED_TOKENS, VERIFIED_TTL, timer)
        self._lock = native_lock()
        self._keys: dict[str, object] = {}
        self._loaded_at: float | None = None
        self._forced_at = float("-inf")

    def verify(self, token: str, app_id: str) -> tuple[str, int | None]:
        """(the user id ``sub``, the ``tnb`` stamp or None) of a valid access token of
        ``app_id``; else 401 Unauthorized. Raises JwksUnavailable when the keys cannot be
        read. The caller compares the stamp with the user's grants (``Grants.token_stamp``)."""
        key = (app_id, hashlib.sha256(token.encode("utf-8")).digest())
        now = self._clock().timestamp()
        with self._lock:
            known = self._verified.get(key)
        if known is not None:
            user_id, exp, stamp, kid = known
            if exp <= now:
                raise Unauthorized("The bearer token has expired.", details={"reason": "expired"})
            if self._still_published(kid):
                return user_id, stamp
            with self._lock:  # its key left the JWKS: verified again, which refuses it
                self._verified.pop(key, None)
        claims, kid = self._verify(token, app_id, now)
        stamp = claims.get("tnb")
        stamp = stamp if isinstance(stamp, int) else None
        with self._lock:
            self._verified[key] = (claims["sub"], claims["exp"], stamp, kid)
        return claims["sub"], stamp

    def _still_published(self, kid: str) -> bool:
        """Whether ``kid`` is in the JWKS as last read, read again once it is
        JWKS_MAX_AGE old (a remembered token's key may have been withdrawn since)."""
        if self._loaded_at is None or self._monotonic() - self._loaded_at > JWKS_MAX_AGE:
            self._reload(required=self._loaded_at is None)
        return kid in self._keys

    def _verify(self, token: str, app_id: str, now: float) -> tuple[dict, str]:
        """(the claims, the ``kid`` it was verified with)."""
        # PyJWT and cryptography load on the first end-user token (start-up time, memory).
        from shared.jwts import TokenInvalid, unauthorized, verify_rs256

        try:
            claims, header = verify_rs256(token, self._public_key, audience=app_id, issuer=self._issuer,
                                          required=REQUIRED_CLAIMS, now=now)
        except TokenInvalid as refused:
            raise unauthorized(refused) from None
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise Unauthorized("The bearer token is invalid.", details={"reason": "sub must be a user id"})
        return claims, header["kid"]

    def _public_key(self, kid: str):
        """The key for ``kid``: the JWKS is re-read when old, and on an unknown kid at most
        every few seconds (a rotation is picked up; garbage kids cannot hammer the
        control plane)."""
        moment = self._monotonic()
        if self._loaded_at is None or moment - self._loaded_at > JWKS_MAX_AGE:
            self._reload(required=self._loaded_at is None)
        key = self._keys.get(kid)
        if key is None and moment - self._forced_at > UNKNOWN_KID_RELOAD:
            self._forced_at = moment
            self._reload(required=False)
            key = self._keys.get(kid)
        return key

    def _reload(self, *, required: bool) -> None:
        try:
            jwks = self._client.jwks()
        except ControlPlaneError as exc:
            if required or not self._keys:
                raise JwksUnavailable(str(exc)) from None
            log.warning("could not refresh the JWKS; keeping the known keys", extra={"error": str(exc)})
            return
        jwt = _jwt()
        keys = {}
        for jwk in jwks["keys"]:
            if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or not isinstance(jwk.get("kid"), str):
                continue
            try:
                keys[jwk["kid"]] = jwt.algorithms.RSAAlgorithm.from_jwk(jwk)
            except (jwt.PyJWTError, ValueError, KeyError, TypeError):
                log.warning("ignoring an unreadable key of the JWKS", extra={"kid": jwk.get("kid")})
        self._keys = keys
        self._loaded_at = self._monotonic()
