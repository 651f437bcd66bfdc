"""Upstream tokens: the access, refresh and ID tokens a provider issued at sign-in, kept
for the application's back end when the connection has ``store_tokens``
(docs/connections.md, "Upstream tokens"), as Keycloak's broker token endpoint keeps them.

Stored in the identity's document, encrypted as one JSON object with the SecretBox of
purpose ``iamgate-connections``.  Served by ``GET V1/users/{id}/identities/{identityId}/token``;
an access token that expires within ``REFRESH_MARGIN_SECONDS`` is refreshed first with
the refresh token (RFC 6749 section 6).  Only while the connection still has
``store_tokens``: turning it off drops the tokens (``service``), and any a sign-in
stored meanwhile are not served.  Two requests refreshing at once both send the
refresh token, but only one result is stored (compare-and-set on the ciphertext read);
the other serves what was stored.  Each refresh emits ``connection.refreshed`` or
``connection.failed`` (``data.kind: "upstream"``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from controlplane.connections.errors import ConnectionNotFound, ConnectionProviderError, IdentityTokensNotStored
from controlplane.connections.http import ProviderError
from controlplane.events import EventLog
from shared.crypto import SecretBox
from shared.timeutil import Clock, aware, isoformat, seconds

REFRESH_MARGIN_SECONDS = 60
_KEPT = ("access_token", "refresh_token", "id_token", "token_type", "scope")


@dataclass(eq=False)
class UpstreamTokens:
    identities: object      # IdentityStore
    connections: object     # UpstreamConnectionService
    http: object            # ProviderHttp
    client_auth: object     # flow.client_auth(connection, box) -> (data, auth)
    box: SecretBox          # purpose "iamgate-connections"
    events: EventLog
    clock: Clock

    def seal(self, response: dict, *, previous: dict | None = None) -> dict:
        """The stored form of a token endpoint's answer: the tokens encrypted, the
        access token's expiry in clear.  A refresh answer without a refresh token keeps
        the previous one (RFC 6749 6: the server MAY issue a new one)."""
        kept = {name: response[name] for name in _KEPT if isinstance(response.get(name), str)}
        if "refresh_token" not in kept and previous and previous.get("refresh_token"):
            kept["refresh_token"] = previous["refresh_token"]
        expires_in = response.get("expires_in")
        now = self.clock()
        expires_at = now + seconds(int(expires_in)) if isinstance(expires_in, int | float) and expires_in > 0 \
            else None
        return {"ciphertext": self.box.encrypt(json.dumps(kept)), "expires_at": expires_at, "stored_at": now}

    def serve(self, app_id: str, identity: dict) -> dict:
        """``{access_token, token_type, expires_at, scope, id_token}`` of the identity,
        refreshed first when near expiry.  404 IDENTITY_TOKENS_NOT_STORED when none are
        kept or the connection no longer stores tokens, 502 CONNECTION_PROVIDER_ERROR
        when a needed refresh fails."""
        stored = identity.get("tokens")
        if not stored:
            raise IdentityTokensNotStored(identity["_id"])
        try:
            connection = self.connections.get(app_id, identity["connection_id"])
        except ConnectionNotFound:  # being deleted, with its identities
            raise IdentityTokensNotStored(identity["_id"]) from None
        if not connection.store_tokens:
            raise IdentityTokensNotStored(identity["_id"])
        tokens = json.loads(self.box.decrypt(stored["ciphertext"]))
        expires_at = aware(stored.get("expires_at"))
        if expires_at is not None and expires_at - seconds(REFRESH_MARGIN_SECONDS) <= self.clock() \
                and tokens.get("refresh_token"):
            stored, tokens = self._refresh(connection, identity, stored, tokens)
            expires_at = aware(stored.get("expires_at"))
        return {"access_token": tokens.get("access_token"), "token_type": tokens.get("token_type", "Bearer"),
                "expires_at": isoformat(expires_at), "scope": tokens.get("scope"), "id_token": tokens.get("id_token")}

    def _refresh(self, connection, identity: dict, stored: dict, tokens: dict) -> tuple[dict, dict]:
        app_id = connection.application_id
        data, auth = self.client_auth(connection, self.box)
        subject = {"kind": "upstream", "connection_id": connection.id, "identity_id": identity["_id"],
                   "user_id": identity["user_id"]}
        try:
            response = self.http.post_form(connection.endpoints.token_endpoint,
                                           {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
                                            **data}, auth=auth)
            if not isinstance(response.get("access_token"), str):
                raise ProviderError("the token endpoint's answer has no access_token")
        except ProviderError as exc:
            self.events.emit(app_id, "connection.failed", {**subject, "reason": exc.reason},
                             subject={"user_id": identity["user_id"]})
            raise ConnectionProviderError(exc.reason) from None
        fresh = self.seal(response, previous=tokens)
        if not self.identities.set_tokens(app_id, identity["_id"], fresh, expected=stored["ciphertext"]):
            current = self.identities.of_user(app_id, identity["user_id"], identity["_id"]) or {}
            if not current.get("tokens"):
                raise IdentityTokensNotStored(identity["_id"])
            fresh = current["tokens"]  # a parallel refresh stored its answer first
        else:
            self.events.emit(app_id, "connection.refreshed", subject, subject={"user_id": identity["user_id"]})
        return fresh, json.loads(self.box.decrypt(fresh["ciphertext"]))
