"""V1 access tokens: RS256 JWTs signed with the active key.

Claims (ARCHITECTURE.md): iss = IAMGATE_PUBLIC_URL, sub = user id, aud = application
id, iat, exp, jti, sid = session id; header kid.  Verification pins the algorithm to
RS256 (so ``alg: none`` and HS256-with-the-public-key are refused), requires every
claim, and checks audience and issuer.
"""
from __future__ import annotations

import jwt

from shared.errors import Unauthorized
from shared.ids import new_id

ALGORITHM = "RS256"
REQUIRED_CLAIMS = ("iss", "sub", "aud", "iat", "exp", "jti")


class TokenService:
    def __init__(self, keys, clock, *, issuer: str, access_ttl: int):
        self._keys = keys
        self._clock = clock
        self.issuer = issuer
        self.access_ttl = access_ttl

    def sign(self, claims: dict, headers: dict | None = None) -> str:
        kid, private = self._keys.signing_key()
        return jwt.encode(claims, private, algorithm=ALGORITHM, headers={"kid": kid, **(headers or {})})

    def issue_access_token(self, app_id: str, user_id: str, session_id: str | None) -> tuple[str, int]:
        """Return (token, expires_in seconds)."""
        now = int(self._clock().timestamp())
        claims = {
            "iss": self.issuer,
            "sub": user_id,
            "aud": app_id,
            "iat": now,
            "exp": now + self.access_ttl,
            "jti": new_id(),
            "sid": session_id,
        }
        return self.sign(claims), self.access_ttl

    def verify(self, token: str, *, audience: str, required=REQUIRED_CLAIMS, leeway: int = 0) -> dict:
        """Verify signature, kid, exp, aud and iss; return the claims or raise Unauthorized."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthorized("The bearer token is malformed.") from None
        if header.get("alg") != ALGORITHM:
            raise Unauthorized("The bearer token must be signed with RS256.")
        key = self._keys.verification_key(header.get("kid") or "")
        if key is None:
            raise Unauthorized("The bearer token was signed by an unknown key.")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=audience,
                issuer=self.issuer,
                # Expiry is checked below against the service clock (tests move it).
                options={"require": list(required), "verify_exp": False, "verify_iat": False},
            )
        except jwt.InvalidAudienceError:
            raise Unauthorized("The bearer token belongs to another application.", details={"reason": "audience"}) from None
        except jwt.PyJWTError as exc:
            raise Unauthorized("The bearer token is invalid.", details={"reason": str(exc)}) from None
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or exp + leeway <= self._clock().timestamp():
            raise Unauthorized("The bearer token has expired.", details={"reason": "expired"})
        return claims
