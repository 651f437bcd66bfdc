"""Token introspection: RFC 7662.

The caller authenticates as a client (2.1); a failure is 401 ``invalid_client`` (2.3).
A token is reported active only to the client it was issued to: any other answer would
let one relying party learn about another's users (4, "the authorization server MAY
respond differently to different protected resources").  Inactive tokens are answered
``{"active": false}`` and nothing else (2.2); an access token is inactive once the grant
it was issued under is revoked, as its refresh token is.  A client credentials token
has no grant: it is active until it expires, for its client while that client exists
and is active.
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.oidc.claims import OidcTokens, TokenRefused, is_client_token
from controlplane.oidc.connections import ConnectionService
from controlplane.oidc.errors import InvalidRequest
from controlplane.oidc.store import GrantStore
from controlplane.users.directory import UserDirectory
from shared.ids import digest
from shared.timeutil import Clock, aware

INACTIVE = {"active": False}


@dataclass(eq=False)
class Introspection:
    tokens: OidcTokens
    connections: ConnectionService
    grants: GrantStore
    users: UserDirectory
    clock: Clock

    def introspect(self, client: dict, params: dict) -> dict:
        """RFC 7662 2.2: {active, scope, client_id, sub, exp, iat, iss, token_type...}."""
        token = params.get("token")
        if not token:
            raise InvalidRequest("token is required.")
        hint = params.get("token_type_hint")
        lookups = (self._refresh_token, self._access_token) if hint == "refresh_token" \
            else (self._access_token, self._refresh_token)
        for lookup in lookups:
            answer = lookup(client, token)
            if answer is not None:
                return answer
        return dict(INACTIVE)

    def _access_token(self, client: dict, token: str) -> dict | None:
        try:
            claims = self.tokens.verify_access_token(token)
        except TokenRefused:
            return None
        if is_client_token(claims):
            return self._client_token(client, claims)
        if (claims["client_id"] != client["client_id"]
                or not self.connections.grant_is_live(claims["app_id"], claims["grant_id"])
                or not self._user_active(claims["app_id"], claims["sub"])):
            return dict(INACTIVE)
        return {"active": True, "token_type": "Bearer", "scope": claims["scope"], "client_id": claims["client_id"],
                "sub": claims["sub"], "aud": claims["aud"], "iss": claims["iss"], "exp": claims["exp"],
                "iat": claims["iat"], "jti": claims.get("jti"), "sid": claims.get("sid")}

    @staticmethod
    def _client_token(client: dict, claims: dict) -> dict:
        """A client credentials token: active for its own client, which authenticated
        this request and so is active; ``sub`` is that client, and ``gty`` says so."""
        if claims["client_id"] != client["client_id"]:
            return dict(INACTIVE)
        return {"active": True, "token_type": "Bearer", "scope": claims["scope"], "client_id": claims["client_id"],
                "sub": claims["sub"], "aud": claims["aud"], "iss": claims["iss"], "exp": claims["exp"],
                "iat": claims["iat"], "jti": claims.get("jti"), "gty": claims["gty"]}

    def _refresh_token(self, client: dict, token: str) -> dict | None:
        grant = self.grants.by_token(digest(token))
        if grant is None:
            return None
        live = (grant["client_id"] == client["client_id"] and grant.get("token_digest") == digest(token)
                and grant.get("revoked_at") is None and aware(grant["expires_at"]) > self.clock()
                and self._user_active(grant["app_id"], grant["user_id"]))
        if not live:
            return dict(INACTIVE)
        return {"active": True, "token_type": "refresh_token", "scope": " ".join(grant["scopes"]),
                "client_id": grant["client_id"], "sub": grant["user_id"],
                "exp": int(aware(grant["expires_at"]).timestamp()), "iat": int(aware(grant["created_at"]).timestamp()),
                "sid": grant.get("session_id")}

    def _user_active(self, app_id: str, user_id: str) -> bool:
        user = self.users.get(app_id, user_id)
        return user is not None and user.get("status") == "active"
