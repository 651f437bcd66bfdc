"""What the OIDC tokens carry and how they are checked.

- The access token (RFC 9068, JWT profile for OAuth 2.0 access tokens) is an RS256 JWT
  with header ``typ: at+jwt`` and claims iss, sub, aud, iat, exp
  (IAMGATE_OIDC_ACCESS_TOKEN_TTL), jti, client_id, scope, sid, auth_time, app_id (the
  user's application, so the token keeps working after its client is deleted) and
  grant_id (the refresh-token family it was issued under: userinfo and introspection
  refuse it once that grant is revoked).  Its ``aud`` is the issuer (the resource it
  opens is this provider's userinfo), never an application id: the V1 API requires
  ``aud`` = application id, so a token handed to a relying party cannot act on the
  tenant API as the user.
- The access token of the client credentials grant (RFC 6749 4.4) has no user: its
  ``sub`` is the client_id (RFC 9068 2.2), ``gty`` is ``client_credentials``, and it
  carries iss, aud, iat, exp, jti, client_id, scope and app_id, but no sid, auth_time or
  grant_id.  Userinfo refuses it; introspection describes it while its client is active.
- The ID token (OIDC Core 2, 3.1.3.6), header ``typ: JWT``, carries iss, sub (the user
  id), aud (the client_id), exp, iat, auth_time, nonce (when the request had one),
  at_hash, sid, amr (how the user signed in at the hosted login, RFC 8176 values:
  ``controlplane.oidc.hosted``), and by scope email/email_verified (email) and
  name/picture (profile).

Both are signed with the active key of ``SigningKeys`` through ``TokenService.sign`` and
verified with the algorithm pinned to RS256, so ``alg: none`` and HS256 tokens (HMAC
keyed with the public key) are refused.
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import KW_ONLY, dataclass

import jwt

from controlplane.keys import SigningKeys
from controlplane.tokens import TokenService
from shared.ids import new_id
from shared.jwts import TokenInvalid, verify_rs256
from shared.timeutil import Clock

ACCESS_TOKEN_TYPE = "at+jwt"
ID_TOKEN_TYPE = "JWT"
CLIENT_CREDENTIALS = "client_credentials"


def is_client_token(claims: dict) -> bool:
    """The access token was issued by the client credentials grant: it has no user."""
    return claims.get("gty") == CLIENT_CREDENTIALS


class TokenRefused(Exception):
    """A token is not one of ours, not for this audience, or expired."""


def at_hash(access_token: str) -> str:
    """OIDC Core 3.1.3.6: base64url of the left-most half of the SHA-256 of the ASCII
    access token (SHA-256 because the ID token is signed with RS256)."""
    raw = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(raw[:len(raw) // 2]).rstrip(b"=").decode("ascii")


def user_claims(user: dict, scopes) -> dict:
    """OIDC Core 5.4: the standard claims each scope asks for (spec: email and
    email_verified by email, name and picture by profile)."""
    claims = {}
    if "email" in scopes:
        claims["email"] = user["email"]
        claims["email_verified"] = bool(user.get("email_verified"))
    if "profile" in scopes:
        claims["name"] = user["name"]
        if user.get("avatar_url"):
            claims["picture"] = user["avatar_url"]
    return claims


@dataclass(eq=False)
class OidcTokens:
    tokens: TokenService
    keys: SigningKeys
    clock: Clock
    _: KW_ONLY
    issuer: str
    access_ttl: int

    def _now(self) -> int:
        return int(self.clock().timestamp())

    def access_token(self, *, app_id: str, user_id: str, client_id: str, scopes, session_id: str | None,
                     auth_time: int, grant_id: str) -> str:
        now = self._now()
        return self.tokens.sign({
            "iss": self.issuer, "sub": user_id, "aud": self.issuer, "iat": now, "exp": now + self.access_ttl,
            "jti": new_id(), "client_id": client_id, "scope": " ".join(scopes), "sid": session_id,
            "auth_time": auth_time, "app_id": app_id, "grant_id": grant_id,
        }, headers={"typ": ACCESS_TOKEN_TYPE})

    def client_access_token(self, *, app_id: str, client_id: str, scopes) -> str:
        """RFC 6749 4.4.3 with RFC 9068: the machine client's own token."""
        now = self._now()
        return self.tokens.sign({
            "iss": self.issuer, "sub": client_id, "aud": self.issuer, "iat": now, "exp": now + self.access_ttl,
            "jti": new_id(), "client_id": client_id, "scope": " ".join(scopes), "app_id": app_id,
            "gty": CLIENT_CREDENTIALS,
        }, headers={"typ": ACCESS_TOKEN_TYPE})

    def id_token(self, user: dict, *, client_id: str, scopes, auth_time: int, nonce: str | None, access_token: str,
                 session_id: str | None, amr: list[str] | None = None) -> str:
        now = self._now()
        claims = {
            "iss": self.issuer, "sub": user["_id"], "aud": client_id, "iat": now, "exp": now + self.access_ttl,
            "auth_time": auth_time, "at_hash": at_hash(access_token), "sid": session_id,
            **user_claims(user, scopes),
        }
        if nonce is not None:
            claims["nonce"] = nonce
        if amr:
            claims["amr"] = amr
        return self.tokens.sign(claims, headers={"typ": ID_TOKEN_TYPE})

    def verify_access_token(self, token: str) -> dict:
        """The claims of a live access token of ours; TokenRefused otherwise (an ID token
        or a V1 token has another ``aud`` and ``typ``)."""
        claims, header = self._decode(token, audience=self.issuer, verify_exp=True,
                                      required=("iss", "sub", "aud", "iat", "exp", "client_id", "scope", "app_id"))
        if header.get("typ") != ACCESS_TOKEN_TYPE:
            raise TokenRefused("not an access token")
        if not is_client_token(claims) and not claims.get("grant_id"):
            raise TokenRefused("a user's access token names its grant")
        return claims

    def verify_id_token_hint(self, token: str) -> dict:
        """OIDC RP-Initiated Logout 2: the ID token we issued, signature and issuer
        checked; an expired one is accepted.  The audience is the client it names, which
        the caller looks up.

        Our other JWTs share its key and issuer, and a back-channel logout token its aud,
        sub and sid too, so the type decides (JWT BCP, RFC 8725 3.11): a header ``typ``
        other than ``JWT`` (``logout+jwt``, ``at+jwt``), or an ``events`` claim (a
        security event token, RFC 8417, such as a logout token), is not an ID token."""
        try:
            audience = jwt.decode(token, options={"verify_signature": False}).get("aud")
        except jwt.PyJWTError:
            raise TokenRefused("malformed") from None
        if not isinstance(audience, str):
            raise TokenRefused("no single audience")
        claims, header = self._decode(token, audience=audience, verify_exp=False,
                                      required=("iss", "sub", "aud", "iat"))
        typ = header.get("typ", ID_TOKEN_TYPE)
        if not isinstance(typ, str) or typ.upper() != ID_TOKEN_TYPE or "events" in claims:
            raise TokenRefused("not an ID token")
        return claims

    def _decode(self, token: str, *, audience: str, verify_exp: bool, required) -> tuple[dict, dict]:
        try:
            return verify_rs256(token, self.keys.verification_key, audience=audience, issuer=self.issuer,
                                required=required, now=self.clock().timestamp() if verify_exp else None)
        except TokenInvalid as refused:
            raise TokenRefused(refused.reason) from None
