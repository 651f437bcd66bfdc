"""Administration of end users from the dashboard: search, suspend and unsuspend (the
spec's dashboard "end users" operations and the suspended state of its states table).

A suspension takes effect at once: the auth middleware reads the user's status on every
request, the user's sessions and OIDC grants are revoked (an unsuspended user signs in
anew, and so do the relying parties), and login answers 403 AUTH_ACCOUNT_SUSPENDED.
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.events import EventLog
from controlplane.oidc.connections import ConnectionService
from controlplane.users.errors import UserNotFound
from controlplane.users.sessions import SessionService
from controlplane.users.store import UserStore
from shared.errors import Conflict
from shared.stamps import next_stamp
from shared.timeutil import Clock

STAMP_ATTEMPTS = 5  # tries of the suspension's conditional write against racing stamps


@dataclass(eq=False)
class UserAdminService:
    users: UserStore
    sessions: SessionService
    oauth_connections: ConnectionService
    events: EventLog
    clock: Clock

    def search(self, app_id: str, *, search: str | None, status: str | None, page: int,
               per_page: int) -> tuple[list[dict], int]:
        """Users of the application, newest first; ``search`` matches email or name
        (case-insensitive substring); soft-deleted users only when ``status`` asks."""
        statuses = (status,) if status else ("active", "suspended")
        return self.users.search(app_id, text=search, statuses=statuses, skip=(page - 1) * per_page, limit=per_page)

    def suspend(self, app_id: str, user_id: str) -> dict:
        """Suspend: the user's tokens stop at once (status is checked live), its sessions
        and OIDC grants are revoked, login answers 403 AUTH_ACCOUNT_SUSPENDED.  Idempotent.

        The account is stamped anew too (``tokens_not_before``) in the write that
        suspends it, so what was proven before the suspension proves nothing after an
        unsuspend: an access token issued before it, an MFA challenge a login opened
        before it, a sign-in whose password check it raced (``SessionService.issue``)."""
        for _ in range(STAMP_ATTEMPTS):
            now = self.clock()
            read = self.users.get(app_id, user_id)
            if read is None or read.get("status") != "active":
                return self._unchanged(app_id, user_id)
            previous = read.get("tokens_not_before")
            user = self.users.update(app_id, user_id, {
                "status": "suspended", "suspended_at": now, "updated_at": now,
                "tokens_not_before": next_stamp(previous, now),
            }, when={"status": "active", "tokens_not_before": previous})
            if user is not None:
                break
        else:  # the account was stamped by another change at every attempt
            raise Conflict("The user changed during the suspension; try again.")
        # Status first, then sessions and grants: a crash in between leaves sessions and
        # grants whose refresh is refused (and revoked) because the user is not active.
        self.sessions.revoke_user(app_id, user_id, reason="suspended", now=now)
        self.oauth_connections.revoke_user(app_id, user_id, reason="suspended")
        self.events.emit(app_id, "user.suspended", {"user_id": user_id}, subject={"user_id": user_id},
                         user_ids=[user_id])
        return user

    def unsuspend(self, app_id: str, user_id: str) -> dict:
        """Make a suspended user active again (they log in anew).  Idempotent."""
        now = self.clock()
        user = self.users.update(app_id, user_id, {"status": "active", "suspended_at": None, "updated_at": now},
                                 when={"status": "suspended"})
        if user is None:
            return self._unchanged(app_id, user_id)
        self.events.emit(app_id, "user.unsuspended", {"user_id": user_id}, subject={"user_id": user_id},
                         user_ids=[user_id])
        return user

    def _unchanged(self, app_id: str, user_id: str) -> dict:
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user
