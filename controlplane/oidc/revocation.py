"""Token revocation: RFC 7009.

The client authenticates (2.1) as at the token endpoint; a failure is 401
``invalid_client`` (2.2.1 and RFC 6749 5.2).  A refresh token of the calling client
revokes its whole grant (2.1: "the authorization server SHOULD also invalidate all
access tokens based on the same authorization grant": userinfo and introspection refuse
the access tokens naming the grant from then on).  Unknown tokens, other clients'
tokens and access tokens are answered 200 and change nothing (2.2: "invalid tokens do
not cause an error response", and the client learns nothing about other clients).
"""
from __future__ import annotations

from controlplane.oidc.errors import InvalidRequest
from shared.ids import digest


class Revocation:
    def __init__(self, grants, connections):
        self._grants = grants
        self._connections = connections

    def revoke(self, client: dict, params: dict) -> None:
        """RFC 7009 2.1: ``token`` (required) and ``token_type_hint`` (ignored when it is
        wrong, as 2.1 allows: the server searches every kind)."""
        token = params.get("token")
        if not token:
            raise InvalidRequest("token is required.")
        grant = self._grants.by_token(digest(token))
        if grant is None or grant["client_id"] != client["client_id"]:
            return
        self._connections.revoke_grant(grant["_id"], "revoked")
