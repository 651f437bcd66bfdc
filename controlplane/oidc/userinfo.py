"""The UserInfo endpoint: OIDC Core 5.3, with bearer tokens as RFC 6750 says.

The access token comes in the Authorization header (RFC 6750 2.1) or, on POST, as the
form parameter ``access_token`` (2.2).  Claims by scope (spec): sub (openid), email and
email_verified (email), name and picture (profile).  A missing, expired or foreign
token, one whose grant was revoked (RFC 7009 2.1: the access tokens of a revoked grant
should stop too), one of an application being deleted, or a user no longer active, is
401 ``invalid_token`` with ``WWW-Authenticate``.
"""
from __future__ import annotations

from controlplane.oidc.claims import TokenRefused, is_client_token, user_claims
from controlplane.oidc.errors import InvalidRequest, InvalidToken


class UserInfo:
    def __init__(self, tokens, connections, users, live_application):
        """``live_application(app_id)``: the live application, or None once its deletion
        began (``ApplicationService.live``, a per-worker copy): its purge may run late,
        or be cut short, and the documents it has not reached yet must not answer."""
        self._tokens = tokens
        self._connections = connections
        self._users = users
        self._live_application = live_application

    def claims(self, header_token: str | None, body_token: str | None = None) -> dict:
        """OIDC Core 5.3.2: the user's claims the token's scope allows."""
        if header_token and body_token:
            raise InvalidRequest("Send the access token in one place only (RFC 6750 2).")
        token = header_token or body_token
        if not token:
            raise InvalidToken("An access token is required.", missing=True)
        try:
            claims = self._tokens.verify_access_token(token)
        except TokenRefused:
            raise InvalidToken() from None
        if is_client_token(claims):
            raise InvalidToken("The token was issued to a client (client_credentials); it has no user.")
        if not self._connections.grant_is_live(claims["app_id"], claims["grant_id"]):
            raise InvalidToken("The grant of this token was revoked.")
        if self._live_application(claims["app_id"]) is None:
            raise InvalidToken("The application of this token was deleted.")
        user = self._users.get(claims["app_id"], claims["sub"])
        if user is None or user.get("status") != "active":
            raise InvalidToken("The user of this token is no longer active.")
        scopes = claims["scope"].split()
        return {"sub": user["_id"], **user_claims(user, scopes)}
