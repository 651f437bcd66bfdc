"""RP-initiated logout: OpenID Connect RP-Initiated Logout 1.0, section 2-3, by GET or
POST (section 2: the OP must support both).

- ``id_token_hint`` must be an ID token we issued: RS256 with a published key, our
  issuer, and an ``aud`` naming one of our clients.  An expired hint is accepted
  (section 4: the hint may be presented after expiry); ``alg: none``, HS256 or a
  foreign signature are refused with 400 invalid_request, before anything changes.
  A ``client_id`` sent beside the hint must be the hint's ``aud`` (section 2: the OP
  MUST verify it), else 400 invalid_request, before anything changes.
- ``post_logout_redirect_uri`` is honoured only when it is registered on the hinted
  client (exact string) and passes the registration rules (one stored before them may
  not); otherwise the logged-out page is shown.  Registered means in the client's
  ``post_logout_redirect_uris`` or, when that list is empty, in its ``redirect_uris``:
  a client registered as the spec shows it has only that list.  ``state`` is passed
  back on the redirect.  Without a hint there is no redirect: nothing proves which
  client (if any) sent the user.
- The OIDC refresh tokens of the session named by the hint's ``sid`` are revoked
  (``connection.revoked`` with reason logout).
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.oidc.claims import TokenRefused
from controlplane.oidc.errors import InvalidRequest
from controlplane.oidc.schemas import redirect_uri_problem


@dataclass(frozen=True)
class LogoutResult:
    """Where the user agent goes next: ``redirect_uri`` (with ``state``) or, when None,
    the logged-out page of ``app_id`` (None when no hint named an application)."""

    redirect_uri: str | None
    state: str | None
    app_id: str | None
    client: dict | None = None


class Logout:
    def __init__(self, tokens, clients, connections):
        self._tokens = tokens
        self._clients = clients
        self._connections = connections

    def end_session(self, params: dict) -> LogoutResult:
        hint = params.get("id_token_hint")
        post_logout_uri = params.get("post_logout_redirect_uri")
        state = params.get("state") or None
        if not hint:
            return LogoutResult(None, None, None)
        try:
            claims = self._tokens.verify_id_token_hint(hint)
        except TokenRefused as exc:
            raise InvalidRequest(f"id_token_hint is not an ID token of this provider ({exc}).") from None
        if (params.get("client_id") or claims["aud"]) != claims["aud"]:
            raise InvalidRequest("client_id is not the client the id_token_hint was issued to.")
        client = self._clients.by_client_id(claims["aud"])
        if client is None:
            raise InvalidRequest("id_token_hint names an unknown client.")
        if claims.get("sid"):
            self._connections.revoke_session(client["app_id"], claims["sub"], claims["sid"])
        allowed = client.get("post_logout_redirect_uris") or client.get("redirect_uris") or ()
        registered = (post_logout_uri is not None and post_logout_uri in allowed
                      and redirect_uri_problem(post_logout_uri) is None)
        return LogoutResult(post_logout_uri if registered else None, state if registered else None,
                            client["app_id"], client)
