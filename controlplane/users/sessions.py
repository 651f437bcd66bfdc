"""End-user sessions and their tokens: the spec's "User authentication" token pair,
refresh (rotation) and logout.

Token model (docs/authentication.md, "Tokens and sessions"):
- the access token is an RS256 JWT from ``TokenService`` (claims iss, sub, aud, iat, exp,
  jti, sid; header kid), valid ``IAMGATE_ACCESS_TOKEN_TTL`` seconds;
- the refresh token is opaque and stored only as its SHA-256 digest, one ``sessions``
  document per token family.  Refreshing swaps the family's live digest in one atomic
  update.  The successor of a token is derived from it with an HMAC under the server
  secret, so the token rotated last can be presented again within
  IAMGATE_REFRESH_REUSE_GRACE seconds and yields the *same* successor (two tabs
  refreshing at once both stay signed in) without any plaintext token being stored.
  Any later or older reuse revokes the family and the OIDC grants made in its session
  (an audit record ``token.reuse_detected``).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from dataclasses import KW_ONLY, InitVar, dataclass

from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.oidc.connections import ConnectionService
from controlplane.tokens import TokenService
from controlplane.users.errors import AccountSuspended, InvalidCredentials, RefreshTokenRejected
from controlplane.users.serializers import serialize_user
from controlplane.users.store import SessionStore, UserStore
from shared.ids import digest, new_id, random_token
from shared.stamps import stamp_of, stamped_since
from shared.timeutil import Clock, aware, millis, seconds

log = logging.getLogger("iamgate.users")


def password_changed_since(read: dict, current: dict | None) -> bool:
    """Whether the account's password was changed or reset (``password_changed_at``) after
    ``read`` was read (``current`` is the account now)."""
    return _password_changed_at(read) != _password_changed_at(current or {})


def _password_changed_at(user: dict) -> int | None:
    """In milliseconds: a stored datetime may read back naive or aware, the number is one."""
    changed = user.get("password_changed_at")
    return None if changed is None else millis(changed)


@dataclass(eq=False)
class SessionService:
    users: UserStore
    sessions: SessionStore
    events: EventLog
    clock: Clock
    tokens: TokenService
    # A relying party's sign-in made in a session ends with it (its OIDC grants carry the session id).
    oauth_connections: ConnectionService
    audit: AuditLog
    _: KW_ONLY
    secret_key: InitVar[str]
    refresh_token_ttl: int
    remember_me_ttl: int
    reuse_grace: int

    def __post_init__(self, secret_key: str):
        self._rotation_key = hashlib.sha256(
            b"iamgate refresh-token rotation\0" + secret_key.encode("utf-8")).digest()

    def issue(self, app: dict, user: dict, *, remember_me: bool, device_info: dict,
              login_data: dict | None = None, auth_time: int | None = None, auth_proven: bool = True) -> dict:
        """Start a session for a user whose credentials (and second factor) were checked.

        Creates the refresh-token family, revokes the oldest sessions beyond the
        application's ``max_concurrent_sessions`` (0 = unlimited) and the OIDC grants
        made in them, emits user.login (with ``login_data``: how the user signed in,
        when not by password: ``{"method": "connection", "connection_id": ...}``) and
        returns the spec's Token pair {access_token, refresh_token, token_type,
        expires_in, user}.  ``user`` is the account as read before its credentials were
        checked: one stamped anew since (a password reset, a hand-over: ``claim.py``), or
        whose password changed since, gets no session (401).

        ``auth_time``: when the user authenticated, when that was before this sign-in
        (a connection's provider said so, in POSIX seconds); ``auth_proven`` False: the
        sign-in proved no time at all (a connection whose provider did not say when, with
        no factor checked here), so no ``max_age`` is met by it (``sign_in_time``)."""
        now = self.clock()
        app_id, user_id = app["_id"], user["_id"]
        ttl = self.remember_me_ttl if remember_me else self.refresh_token_ttl
        refresh_token = random_token()
        session = {
            "_id": new_id(), "app_id": app_id, "user_id": user_id,
            "refresh_digest": digest(refresh_token), "previous_digest": None, "rotated_at": None,
            "device_info": {"ip": device_info.get("ip"), "user_agent": device_info.get("user_agent")},
            "is_remember_me": bool(remember_me), "created_at": now, "last_used_at": now,
            "expires_at": now + seconds(ttl), "revoked_at": None,
            # The account's stamp (claim.py) the session began under: it refreshes under no other.
            "tokens_not_before": user.get("tokens_not_before"),
            "auth_time": auth_time, "auth_proven": auth_proven,
        }
        self.sessions.insert(session)
        current = self.users.update(app_id, user_id, {"last_login_at": now})
        if current is None or current.get("status") != "active" or stamped_since(user, current) \
                or password_changed_since(user, current):
            # The credential was checked against the account before it was suspended,
            # deleted, taken back, or before its password changed (each of which revoked
            # the sessions stored by then).
            self.sessions.revoke(app_id, session["_id"], now, "stale_sign_in")
            if current is not None and current.get("status") == "suspended":
                raise AccountSuspended()
            raise InvalidCredentials("The account's password was changed or reset, or the account suspended, deleted "
                                     "or handed over to its email's owner, during this sign-in.")
        self._enforce_session_limit(app, user_id, now)
        self.events.emit(app_id, "user.login", {**(login_data or {}), "user_id": user_id, "session_id": session["_id"]},
                         subject={"user_id": user_id})
        return self._token_pair(app_id, user, session["_id"], refresh_token)

    def _enforce_session_limit(self, app: dict, user_id: str, now) -> None:
        # Keep the N newest: every racing login computes the same survivors, so two
        # parallel logins can never revoke each other's sessions both.
        limit = app.get("max_concurrent_sessions") or 0
        if limit <= 0:
            return
        for session in self.sessions.active(app["_id"], user_id, now)[limit:]:
            self.sessions.revoke(app["_id"], session["_id"], now, "session_limit")
            self._end_oidc_grants(app["_id"], user_id, session["_id"], reason="session_limit")

    def _token_pair(self, app_id: str, user: dict, session_id: str, refresh_token: str) -> dict:
        access_token, expires_in = self.tokens.issue_access_token(
            app_id, user["_id"], session_id, token_stamp=stamp_of(user))
        return {"access_token": access_token, "refresh_token": refresh_token, "token_type": "Bearer",
                "expires_in": expires_in, "user": serialize_user(user)}

    def _successor(self, refresh_token: str) -> str:
        mac = hmac.new(self._rotation_key, refresh_token.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def refresh(self, app: dict, refresh_token: str) -> dict:
        """Exchange a refresh token for a new pair, rotating it.

        401 UNAUTHORIZED (``details.reason``: unknown, expired, revoked, reused) when it
        cannot be used; presenting a rotated token outside the grace window revokes its
        session and the OIDC grants made in it."""
        app_id, now = app["_id"], self.clock()
        presented = digest(refresh_token)
        successor = self._successor(refresh_token)
        session = self.sessions.rotate(app_id, presented, digest(successor), now)
        if session is not None:
            self.sessions.record_rotated(session, presented, now)
        else:
            session = self._reuse_within_grace(app_id, presented, digest(successor), now)
        user = self.users.get(app_id, session["user_id"])
        if user is None or user.get("status") != "active":
            self.sessions.revoke(app_id, session["_id"], now, "user_inactive")
            raise RefreshTokenRejected("The user of this refresh token is no longer active.",
                                       details={"reason": "revoked"})
        if stamped_since(session, user):
            # Begun before a reset or a hand-over took the account back; a refresh racing
            # it may have rotated before its revocation came.
            self.sessions.revoke(app_id, session["_id"], now, "stale_sign_in")
            raise RefreshTokenRejected("The session of this refresh token has been revoked.",
                                       details={"reason": "revoked"})
        return self._token_pair(app_id, user, session["_id"], successor)

    def _reuse_within_grace(self, app_id: str, presented: str, successor_digest: str, now) -> dict:
        """The session a non-live token may still refresh (the token rotated last, within
        the grace window); otherwise raise 401, revoking the family on reuse."""
        live = self.sessions.by_current(app_id, presented)
        if live is not None:
            raise self._refresh_refused(live)
        session = self.sessions.by_previous(app_id, presented)
        if session is not None:
            self._raise_if_unusable(session, now)
            grace_ends = aware(session["rotated_at"]) + seconds(self.reuse_grace)
            if now < grace_ends and session["refresh_digest"] == successor_digest:
                self.sessions.touch(app_id, session["_id"], now)
                return session
        else:
            session = self.sessions.by_rotated(app_id, presented)
            if session is None:
                raise RefreshTokenRejected("The refresh token is not valid.", details={"reason": "unknown"})
            self._raise_if_unusable(session, now)
        self.sessions.revoke(app_id, session["_id"], now, "refresh_token_reused")
        # A theft signal: whoever holds the session's tokens may hold its relying parties' too.
        self._end_oidc_grants(app_id, session["user_id"], session["_id"], reason="session_token_reused")
        user = actor("user", session["user_id"])
        self.audit.record("token.reuse_detected", result=success(), actor=user, target=user, application_id=app_id,
                          data={"session_id": session["_id"], "token": "refresh_token"})
        log.warning("refresh token reused; session revoked",
                    extra={"app_id": app_id, "user_id": session["user_id"], "session_id": session["_id"]})
        raise RefreshTokenRejected("The refresh token was already used; the session has been revoked.",
                                   details={"reason": "reused"})

    def _raise_if_unusable(self, session: dict, now) -> None:
        if session.get("revoked_at") is not None or aware(session["expires_at"]) <= now:
            raise self._refresh_refused(session)

    @staticmethod
    def _refresh_refused(session: dict) -> RefreshTokenRejected:
        if session.get("revoked_at") is not None:
            return RefreshTokenRejected("The session of this refresh token has been revoked.",
                                        details={"reason": "revoked"})
        return RefreshTokenRejected("The refresh token has expired; log in again.", details={"reason": "expired"})

    def is_active(self, app_id: str, session_id: str) -> bool:
        """True while the session is neither revoked nor expired (the OIDC hosted
        login's browser session lasts no longer than the session it started)."""
        return self.sessions.is_live(app_id, session_id, self.clock())

    def sign_in_time(self, app_id: str, session_id: str) -> tuple[int, bool] | None:
        """(when the user authenticated, in POSIX seconds, whether the sign-in proved it)
        for a live session: its sign-in's start (a refresh renews the tokens, not the
        sign-in), or the earlier time a connection's provider gave (``issue``); None when
        the session is revoked or expired."""
        doc = self.sessions.sign_in_of(app_id, session_id, self.clock())
        if doc is None:
            return None
        started = int(aware(doc["created_at"]).timestamp())
        given = doc.get("auth_time")
        return (started if given is None else min(int(given), started)), doc.get("auth_proven", True) is not False

    def logout(self, app_id: str, refresh_token: str, *, user_id: str | None) -> bool:
        """Revoke the session of ``refresh_token`` and the OIDC grants made in it.  A user
        may only revoke their own sessions (``user_id``); an API key (``user_id`` None)
        any of its application.  Unknown, foreign or already revoked tokens change
        nothing, and the caller is not told which (no oracle)."""
        presented = digest(refresh_token)
        session = (self.sessions.by_current(app_id, presented) or self.sessions.by_previous(app_id, presented)
                   or self.sessions.by_rotated(app_id, presented))
        if session is None or (user_id is not None and session["user_id"] != user_id):
            return False
        revoked = self.sessions.revoke(app_id, session["_id"], self.clock(), "logout")
        self._end_oidc_grants(app_id, session["user_id"], session["_id"], reason="logout")
        if revoked:
            self.audit.record("token.revoked", result=success(), target=actor("user", session["user_id"]),
                              application_id=app_id, data={"session_id": session["_id"], "token": "refresh_token"})
        return revoked

    def active(self, app_id: str, user_id: str) -> list[dict]:
        """The user's live sessions, newest first, without their token digests."""
        return self.sessions.active(app_id, user_id, self.clock())

    def all_for_user(self, app_id: str, user_id: str) -> list[dict]:
        """Every stored session of the user (live, revoked, expired), newest first."""
        return self.sessions.all_for_user(app_id, user_id)

    def revoke_one(self, app_id: str, user_id: str, session_id: str, *, reason: str) -> bool:
        """Revoke one live session of this user and the OIDC grants made in it; False for
        a session of another user, a revoked or an expired one (left alone)."""
        revoked = self.sessions.revoke_live(app_id, user_id, session_id, self.clock(), reason)
        self._end_oidc_grants(app_id, user_id, session_id, reason="session_revoked")
        return revoked

    def _end_oidc_grants(self, app_id: str, user_id: str, session_id: str, *, reason: str) -> None:
        # After the session's own revocation, and even when it was revoked already: a
        # crash between the two writes is finished by the next request.  Matching on the
        # user too keeps another user's session id from reaching anyone else's grants.
        self.oauth_connections.revoke_session(app_id, user_id, session_id, reason=reason)

    def revoke_user(self, app_id: str, user_id: str, *, reason: str = "revoked", keep: str | None = None,
                    now=None) -> int:
        """Revoke every live session (refresh-token family) of the user except ``keep``;
        returns how many were revoked.  Access tokens already issued stay valid until
        they expire (spec, Authentication 2).  ``now``: the caller's time of the change
        that revokes them."""
        return self.sessions.revoke_user(app_id, user_id, now or self.clock(), reason, keep=keep)

