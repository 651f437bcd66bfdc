"""Administration of end users from the dashboard: search, suspend and unsuspend (the
spec's dashboard "end users" operations and the suspended state of its states table).

A suspension takes effect at once: the auth middleware reads the user's status on every
request, the user's sessions and OIDC grants are revoked (an unsuspended user signs in
anew, and so do the relying parties), and login answers 403 AUTH_ACCOUNT_SUSPENDED.

Both operations are idempotent, and a repeat still tells the caches: it cannot know
whether the earlier attempt failed between its write and its event (the administrator
got an error and tried again), so it emits ``grants.invalidated`` naming the user
(docs/architecture.md, "Repeated writes"), not user.suspended a second time: the audit
log shows one suspension, and what the repeat did.
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
        before it, a sign-in whose password check it raced (``SessionService.issue``).

        A user already suspended: the revocations run again and ``grants.invalidated`` is
        emitted, which finishes a suspension that failed after its write (its sessions
        would come back with an unsuspend, and no event told the caches)."""
        for _ in range(STAMP_ATTEMPTS):
            now = self.clock()
            read = self.users.get(app_id, user_id)
            if read is None or read.get("status") != "active":
                user = self._unchanged(read, user_id)
                if user.get("status") == "suspended":
                    self._end_sign_ins(app_id, user_id, now)
                    self._repeated(app_id, user_id, "user.suspended")
                return user
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
        # grants whose refresh is refused (and revoked) because the user is not active, and
        # a retry (the already-suspended path above) revokes them.
        self._end_sign_ins(app_id, user_id, now)
        self.events.emit(app_id, "user.suspended", {"user_id": user_id}, subject={"user_id": user_id},
                         user_ids=[user_id])
        return user

    def unsuspend(self, app_id: str, user_id: str) -> dict:
        """Make a suspended user active again (they log in anew).  Idempotent; a user
        already active gets ``grants.invalidated``, as a repeated suspension does."""
        now = self.clock()
        user = self.users.update(app_id, user_id, {"status": "active", "suspended_at": None, "updated_at": now},
                                 when={"status": "suspended"})
        if user is None:
            user = self._unchanged(self.users.get(app_id, user_id), user_id)
            if user.get("status") == "active":
                self._repeated(app_id, user_id, "user.unsuspended")
            return user
        self.events.emit(app_id, "user.unsuspended", {"user_id": user_id}, subject={"user_id": user_id},
                         user_ids=[user_id])
        return user

    def _end_sign_ins(self, app_id: str, user_id: str, now) -> None:
        """Revoke the user's sessions and OIDC grants (both revoke only what is live, so
        running them again revokes what an interrupted suspension left)."""
        self.sessions.revoke_user(app_id, user_id, reason="suspended", now=now)
        self.oauth_connections.revoke_user(app_id, user_id, reason="suspended")

    def _repeated(self, app_id: str, user_id: str, kind: str) -> None:
        """The user's status was already what ``kind`` makes it: a double click, or the
        retry of an attempt that wrote the status and failed before emitting ``kind``,
        which then never told the caches. Both get ``grants.invalidated``, so once the
        retry answers, checks follow the stored status; ``kind`` itself is not emitted
        again (its audit record would tell of a second change)."""
        self.events.emit(app_id, "grants.invalidated", {"user_id": user_id, "repeat_of": kind},
                         subject={"user_id": user_id}, user_ids=[user_id])

    @staticmethod
    def _unchanged(user: dict | None, user_id: str) -> dict:
        """The user as read, which the operation leaves as it is; 404 USER_NOT_FOUND for
        none or a deleted one."""
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user
