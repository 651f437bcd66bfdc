"""V1 access tokens: RS256 JWTs signed with the active key.

Claims (docs/authentication.md, "Tokens and sessions"): iss = IAMGATE_PUBLIC_URL, sub = user id, aud = application
id, iat, exp, jti, sid = session id; header kid; and ``tnb`` for an account a password reset or a hand-over
to its email's owner (``controlplane.users.claim``) took back: the account's stamp, which
a token must carry to be accepted.  Verification pins the algorithm to
RS256 (so ``alg: none`` and HS256-with-the-public-key are refused), requires every
claim, and checks audience and issuer.
"""
from __future__ import annotations

import jwt

from shared.ids import new_id
from shared.jwts import ALGORITHM, TokenInvalid, unauthorized, verify_rs256

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

    def issue_access_token(self, app_id: str, user_id: str, session_id: str | None, *,
                           token_stamp: int | None = None) -> tuple[str, int]:
        """Return (token, expires_in seconds).  ``token_stamp``: the account's stamp
        (``shared.stamps``), if a reset or a hand-over set one."""
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
        if token_stamp is not None:
            claims["tnb"] = token_stamp
        return self.sign(claims), self.access_ttl

    def verify(self, token: str, *, audience: str, required=REQUIRED_CLAIMS, leeway: int = 0) -> dict:
        """Verify signature, kid, exp, aud and iss (``shared.jwts``); return the claims or
        raise Unauthorized."""
        try:
            claims, _ = verify_rs256(token, self._keys.verification_key, audience=audience, issuer=self.issuer,
                                     required=required, now=self._clock().timestamp(), leeway=leeway)
        except TokenInvalid as refused:
            raise unauthorized(refused) from None
        return claims

