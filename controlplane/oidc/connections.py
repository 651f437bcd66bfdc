"""OAuth connections: a user's grant to a client -- the consent plus the refresh tokens
issued under it (docs/oidc.md, "Events (OAuth connections)").

This service owns ``oidc_consents`` and ``oidc_refresh_tokens`` for everything that is
not a token-endpoint step: recording consent, withdrawing it (self-service), revoking a
user's or a session's grants, and the GDPR export.  It emits the connection events, each
with ``data.kind: "grant"`` (the same kinds with ``"upstream"`` are a user's links to
upstream identity providers, ``controlplane/connections/identities.py``):

- ``consent.granted`` {user_id, client_id, scopes} when a consent is recorded, widened
  or renewed after a withdrawal;
- ``connection.created`` {user_id, client_id, grant_id, scopes} at the first
  successful code exchange under a consent;
- ``connection.refreshed`` {user_id, client_id, grant_id} on each refresh grant;
- ``connection.failed`` {user_id, client_id, reason} when a token request of a known
  client and user fails (reason: invalid_verifier, redirect_uri_mismatch, code_reused,
  refresh_token_reused, consent_withdrawn, user_inactive, session_ended);
- ``connection.revoked`` {user_id, client_id, reason, grants_revoked} when grants of the
  connection are revoked (reason: revoked, consent_withdrawn, logout, code_reused,
  refresh_token_reused, user_inactive, session_ended (a code exchanged after the V1
  session it was issued in ended); for the grants of one session: session_revoked,
  session_token_reused (the V1 session's refresh token was reused), session_limit (evicted
  by the concurrent-session limit); for every grant of the user: password_reset,
  sessions_revoked, suspended, user_deleted; and password_changed for every grant not
  made in the session that changed the password).

A machine client (the client credentials grant) has one connection: the client's own,
with no user.  The first token issued to the client creates it (``connection.created``
{user_id: null, client_id, grant_id: null, scopes, grant_type: client_credentials}),
each later token is a ``connection.refreshed`` {user_id: null, client_id, grant_id:
null}, and a refused request of the authenticated client is ``connection.failed``
{user_id: null, client_id, reason: unauthorized_client or invalid_scope}.  These events
have ``subject.client_id`` instead of ``subject.user_id``.

An access token names its grant (``grant_id``); ``grant_is_live`` answers whether that
grant still stands from a per-worker copy of its state (``controlplane.lookup_cache``),
so userinfo and introspection refuse a revoked grant's tokens without a store read per
request.  ``connection.revoked`` drops the copies of the connection's grants: in this
process before the revoking request answers, in the others through the change-log
tailer; every copy expires after ``GRANT_CACHE_TTL`` whatever happens.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from controlplane.events import EventLog
from controlplane.lookup_cache import LookupCache
from controlplane.oidc.backchannel import BackchannelLogout
from controlplane.oidc.store import ConsentStore, GrantStore
from shared.ids import new_id
from shared.timeutil import Clock, aware, isoformat, seconds_of

# How long a worker may answer from its copy of a grant's state: a revocation reaches
# every worker through the change log (connection.revoked) well before.
GRANT_CACHE_TTL = 2.0
GRANT_CACHE_SIZE = 10_000


@dataclass(frozen=True)
class GrantState:
    """A grant as an access token's check sees it; ``expires`` in POSIX seconds."""

    app_id: str
    user_id: str
    client_id: str
    revoked: bool
    expires: float


@dataclass(eq=False)
class ConnectionService:
    consents: ConsentStore
    grants: GrantStore
    events: EventLog
    clock: Clock
    # Tells relying parties whose grants revoke_user and revoke_session revoked
    # (controlplane.oidc.backchannel); None sends nothing.
    backchannel: BackchannelLogout | None = None

    def __post_init__(self):
        self._seconds = seconds_of(self.clock)
        self._states = LookupCache(ttl=GRANT_CACHE_TTL, maxsize=GRANT_CACHE_SIZE, timer=self._seconds)

    # ------------------------------------------------------------------ consent

    def consent_covers(self, app_id: str, user_id: str, client_id: str, scopes) -> bool:
        """The user's consent to the client is in force and covers ``scopes``."""
        consent = self.consents.get(app_id, user_id, client_id)
        return (consent is not None and consent.get("withdrawn_at") is None
                and set(scopes) <= set(consent.get("scopes") or ()))

    def grant_consent(self, app_id: str, user_id: str, client_id: str, scopes) -> None:
        """Record the consent (the union with what was granted before, unless withdrawn)
        and emit consent.granted."""
        before = self.consents.get(app_id, user_id, client_id)
        kept = set(before.get("scopes") or ()) if before and before.get("withdrawn_at") is None else set()
        granted = sorted(kept | set(scopes))
        self.consents.grant(app_id, user_id, client_id, granted, new_id(), self.clock())
        self.events.emit(app_id, "consent.granted", {"user_id": user_id, "client_id": client_id, "scopes": granted},
                         subject={"user_id": user_id})

    def withdraw_consents(self, app_id: str, user_id: str, *, reason: str = "consent_withdrawn") -> tuple[int, int]:
        """Withdraw every consent of the user and revoke every OIDC refresh token of the
        user; (consents withdrawn, refresh tokens revoked).  Emits consent.withdrawn (when
        something was withdrawn by a user's request) and connection.revoked per client.

        Consents first: a code exchange racing this call either finds the consent gone
        (invalid_grant) or mints a token the sweep after it revokes."""
        client_ids = self.consents.live_clients(app_id, user_id)
        withdrawn = self.consents.withdraw_all(app_id, user_id, self.clock())
        revoked = self.revoke_user(app_id, user_id, reason=reason)
        if withdrawn and reason == "consent_withdrawn":
            self.events.emit(app_id, "consent.withdrawn", {
                "user_id": user_id, "client_ids": client_ids, "revoked_count": withdrawn,
                "grants_revoked": revoked,
            }, subject={"user_id": user_id})
        return withdrawn, revoked

    def revoke_user(self, app_id: str, user_id: str, *, reason: str, keep_session: str | None = None) -> int:
        """Revoke every OIDC grant of the user (their refresh tokens stop at once, and
        their access tokens at userinfo and introspection) except those made in the V1
        session ``keep_session``; how many were live.  What ends a user's sign-ins calls
        it: a password reset, ``DELETE sessions``, a suspension, a deletion, and a
        password change (keeping the calling session's).  Emits connection.revoked per
        client, and sends the clients a back-channel logout token.  Consents stay:
        the user signs in again without being asked."""
        match: dict = {"user_id": user_id}
        if keep_session is not None:
            match["session_id"] = {"$ne": keep_session}
        return sum(self._revoke(app_id, self.clock(), reason, **match).values())

    # ------------------------------------------------------------------ the connection's life

    def connected(self, app_id: str, user_id: str, client_id: str, grant_id: str, scopes) -> None:
        """A successful code exchange: the first under the consent creates the connection."""
        if self.consents.mark_connected(app_id, user_id, client_id, self.clock()):
            self.events.emit(app_id, "connection.created", {
                "kind": "grant", "user_id": user_id, "client_id": client_id, "grant_id": grant_id,
                "scopes": list(scopes),
            }, subject={"user_id": user_id})

    def refreshed(self, grant: dict) -> None:
        self.events.emit(grant["app_id"], "connection.refreshed", {
            "kind": "grant", "user_id": grant["user_id"], "client_id": grant["client_id"], "grant_id": grant["_id"],
        }, subject={"user_id": grant["user_id"]})

    def failed(self, app_id: str, user_id: str, client_id: str, reason: str) -> None:
        self.events.emit(app_id, "connection.failed", {"kind": "grant", "user_id": user_id, "client_id": client_id,
                                                       "reason": reason},
                         subject={"user_id": user_id})

    def client_connected(self, app_id: str, client_id: str, scopes, *, first: bool) -> None:
        """A client credentials token: ``first`` (the client's first) creates its connection."""
        if first:
            self.events.emit(app_id, "connection.created", {
                "kind": "grant", "user_id": None, "client_id": client_id, "grant_id": None, "scopes": list(scopes),
                "grant_type": "client_credentials",
            }, subject={"client_id": client_id})
        else:
            self.events.emit(app_id, "connection.refreshed", {"kind": "grant", "user_id": None, "client_id": client_id,
                                                              "grant_id": None}, subject={"client_id": client_id})

    def client_failed(self, app_id: str, client_id: str, reason: str) -> None:
        self.events.emit(app_id, "connection.failed", {"kind": "grant", "user_id": None, "client_id": client_id,
                                                       "reason": reason}, subject={"client_id": client_id})

    def revoke_grant(self, grant_id: str, reason: str) -> bool:
        """Revoke one grant (refresh-token family); emits connection.revoked when it was live."""
        grant = self.grants.revoke(grant_id, self.clock(), reason)
        if grant is None:
            return False
        self._revoked_event(grant["app_id"], grant["user_id"], grant["client_id"], reason, 1)
        return True

    def revoke_session(self, app_id: str, user_id: str, session_id: str, *, reason: str = "logout") -> int:
        """Revoke the OIDC grants made in one login session (its refresh tokens, and its
        access tokens at userinfo and introspection): RP-initiated logout, V1 logout,
        ``DELETE V1/users/{userId}/sessions/{sessionId}``, reuse of the session's refresh
        token and the session's eviction by the concurrent-session limit."""
        return sum(self._revoke(app_id, self.clock(), reason, user_id=user_id, session_id=session_id).values())

    def _revoke(self, app_id: str, now, reason: str, **match) -> Counter:
        """Revoke the matching grants; what ends sign-ins, so back-channel logout follows."""
        grants = self.grants.live(app_id, now, **match)
        self.grants.revoke_many(app_id, now, reason, **match)
        per_connection = Counter((g["user_id"], g["client_id"]) for g in grants)
        for (user_id, client_id), count in sorted(per_connection.items()):
            self._revoked_event(app_id, user_id, client_id, reason, count)
        if self.backchannel is not None and grants:
            self.backchannel.notify(app_id, grants)
        return per_connection

    def _revoked_event(self, app_id, user_id, client_id, reason, count) -> None:
        self.events.emit(app_id, "connection.revoked", {
            "kind": "grant", "user_id": user_id, "client_id": client_id, "reason": reason, "grants_revoked": count,
        }, subject={"user_id": user_id})

    # ------------------------------------------------------------------ access tokens

    def grant_is_live(self, app_id: str, grant_id: str) -> bool:
        """The grant an access token names is of ``app_id``, unrevoked and unexpired
        (through the per-worker copy; a grant the store no longer holds is not)."""
        state = self._states.get(grant_id, lambda: self._load_state(grant_id))
        return state is not None and state.app_id == app_id and not state.revoked and self._seconds() < state.expires

    def _load_state(self, grant_id: str) -> GrantState | None:
        grant = self.grants.state(grant_id)
        if grant is None:
            return None
        return GrantState(grant["app_id"], grant["user_id"], grant["client_id"], grant.get("revoked_at") is not None,
                          aware(grant["expires_at"]).timestamp())

    def apply_event(self, event) -> None:
        """Change-log consumer (this process's events and the tailer's): the copies of a
        revoked connection's grants, or of a deleted application's, leave the cache."""
        if event.type == "connection.revoked":
            user_id, client_id = event.data.get("user_id"), event.data.get("client_id")
            self._states.drop_where(lambda state: (state.app_id, state.user_id, state.client_id)
                                    == (event.app_id, user_id, client_id))
        elif event.type == "application.deleted":
            self._states.drop_where(lambda state: state.app_id == event.app_id)

    # ------------------------------------------------------------------ GDPR export

    def export(self, app_id: str, user_id: str) -> list[dict]:
        """The user's OAuth connections (withdrawn ones too), newest first: the export's
        ``oauth_connections`` items {client_id, scopes, granted_at, withdrawn_at}."""
        return [{
            "client_id": consent.get("client_id"),
            "scopes": list(consent.get("scopes") or []),
            "granted_at": isoformat(consent.get("granted_at")),
            "withdrawn_at": isoformat(consent.get("withdrawn_at")),
        } for consent in self.consents.of_user(app_id, user_id)]
