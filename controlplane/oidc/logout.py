"""RP-initiated logout: OpenID Connect RP-Initiated Logout 1.0, section 2-3, by GET or
POST (section 2: the OP must support both).

- ``id_token_hint`` must be an ID token we issued: RS256 with a published key, our
  issuer, an ``aud`` naming one of our clients, and typed as one (header ``typ`` absent
  or ``JWT``, no ``events`` claim: a back-channel logout token shares the rest and is
  refused).  An expired hint is accepted (section 4: the hint may be presented after
  expiry); ``alg: none``, HS256, a foreign signature or another type of token are
  refused with 400 invalid_request, before anything changes.
  A ``client_id`` sent beside the hint must be the hint's ``aud`` (section 2: the OP
  MUST verify it), else 400 invalid_request, before anything changes.
- ``post_logout_redirect_uri`` is honoured only when it is registered on the hinted
  client (exact string), the client is active, and the URI passes the registration rules
  (one stored before them may not); otherwise the logged-out page is shown.  A
  deactivated client's hint still signs the user out.  Registered means in the client's
  ``post_logout_redirect_uris`` or, when that list is empty, in its ``redirect_uris``:
  a client registered as the spec shows it has only that list.  ``state`` is passed
  back on the redirect.
- Without a hint nothing proves who sent the user, so a browser is asked first (section
  2: the OP SHOULD ask the End-User whether to log out when it cannot verify the
  request; the page is the resource's).  Once the person confirms (``end_confirmed``),
  ``client_id`` may identify an active client, and then only a
  ``post_logout_redirect_uri`` registered on it is followed, with ``state``; without a
  client_id there is no redirect.  A program (no ``Accept: text/html``) is not asked:
  ``end_session`` answers at once, without a redirect.
- The OIDC refresh tokens of the session named by the hint's ``sid`` are revoked
  (``connection.revoked`` with reason logout), and so are the hosted login's browser
  sessions signed in with it, wherever the browser is: the request need not carry their
  cookie (a cross-site form POST, which RP-Initiated Logout 2 lets an RP send, carries no
  ``SameSite=Lax`` cookie; nor does a back-end or another device).  Without a hint nothing
  is revoked, and the resource ends the browser sessions whose cookies came along.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

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
    user_id: str | None = None  # the hint's sub: only that user's browser session ends


class Logout:
    def __init__(self, tokens, clients, connections, browser_sessions, codes):
        self._tokens = tokens
        self._clients = clients
        self._connections = connections
        self._browser_sessions = browser_sessions
        self._codes = codes

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
            # The sign-in ends at the provider: no browser session of it gives a new code,
            # a code it gave is not exchanged, and its grants are revoked.
            self._browser_sessions.delete_for_session(client["app_id"], claims["sub"], claims["sid"])
            self._codes.delete_unused_for_session(client["app_id"], claims["sub"], claims["sid"])
            self._connections.revoke_session(client["app_id"], claims["sub"], claims["sid"])
        if self._clients.active(client["client_id"]) is None:
            # Signed out all the same; but a deactivated client (or one of an application
            # being deleted) is sent no one.
            return replace(LogoutResult(None, None, client["app_id"], client), user_id=claims["sub"])
        return replace(self._result(client, post_logout_uri, state), user_id=claims["sub"])

    def client(self, client_id) -> dict | None:
        """The active client a request without a hint names by ``client_id``, or None."""
        return self._clients.active(client_id) if isinstance(client_id, str) else None

    def end_confirmed(self, params: dict) -> LogoutResult:
        """Section 2, a request without a hint that the person confirmed: a redirect
        only to a post_logout_redirect_uri registered on the client ``client_id``
        identifies (unverified, hence the confirmation; the redirect rule keeps it from
        going anywhere the client did not register)."""
        client = self.client(params.get("client_id"))
        if client is None:
            return LogoutResult(None, None, None)
        return self._result(client, params.get("post_logout_redirect_uri"), params.get("state") or None)

    @staticmethod
    def _result(client: dict, post_logout_uri: str | None, state: str | None) -> LogoutResult:
        allowed = client.get("post_logout_redirect_uris") or client.get("redirect_uris") or ()
        registered = (post_logout_uri is not None and post_logout_uri in allowed
                      and redirect_uri_problem(post_logout_uri) is None)
        return LogoutResult(post_logout_uri if registered else None, state if registered else None,
                            client["app_id"], client)
