"""MongoDB access of user self-service.

This area owns no collection; it reads and writes those of other areas, always filtered
by ``app_id`` and ``user_id``, and projects only what it may show:

- ``users`` (users area): profile fields and the soft-delete transition;
- ``sessions`` (users area): the user's refresh-token families; the token digests are
  never read;
- ``mfa_methods`` (MFA area): ``{_id, app_id, user_id, type, label, status, is_primary,
  verified_at, last_used_at, secret}``; the encrypted ``secret`` is never read.

OIDC consents and grants are the OIDC area's (``controlplane.oidc.connections``).

Stores only read and write; the rules and every HTTP error live in ``service.py``.
"""
from __future__ import annotations

from pymongo import DESCENDING, ReturnDocument

_PROFILE_FIELDS = ("email", "name", "avatar_url", "email_verified", "metadata", "attributes", "status",
                   "created_at", "updated_at", "last_login_at", "deleted_at")
_SESSION_FIELDS = ("device_info", "is_remember_me", "last_used_at", "expires_at", "created_at", "revoked_at")
_MFA_FIELDS = ("type", "label", "is_primary", "status", "verified_at", "last_used_at", "created_at")


def _projection(fields) -> dict:
    return {name: 1 for name in fields}


class SelfServiceStore:
    def __init__(self, store):
        self._users = store["users"]
        self._sessions = store["sessions"]
        self._mfa_methods = store["mfa_methods"]

    # -- the user

    def user(self, app_id: str, user_id: str) -> dict | None:
        """The user's profile fields (never the password hash), whatever its status."""
        return self._users.find_one({"_id": user_id, "app_id": app_id}, _projection(_PROFILE_FIELDS))

    def update_profile(self, app_id: str, user_id: str, changes: dict, now) -> dict | None:
        """Set ``changes`` on a user that is not deleted; the user as it was *before*, or
        None when there is no such user (the caller derives what really changed)."""
        return self._users.find_one_and_update(
            {"_id": user_id, "app_id": app_id, "status": {"$ne": "deleted"}},
            {"$set": {**changes, "updated_at": now}},
            projection=_projection(_PROFILE_FIELDS),
            return_document=ReturnDocument.BEFORE,
        )

    def mark_deleted(self, app_id: str, user_id: str, now) -> bool:
        """The soft-delete transition, at most once per user (conditional on the status)."""
        result = self._users.update_one(
            {"_id": user_id, "app_id": app_id, "status": {"$ne": "deleted"}},
            {"$set": {"status": "deleted", "deleted_at": now, "updated_at": now}},
        )
        return result.modified_count == 1

    # -- sessions (refresh-token families)

    def live_sessions(self, app_id: str, user_id: str, now) -> list[dict]:
        """Non-revoked, non-expired sessions, newest first."""
        cursor = self._sessions.find(
            {"app_id": app_id, "user_id": user_id, "revoked_at": None, "expires_at": {"$gt": now}},
            _projection(_SESSION_FIELDS),
        ).sort([("created_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)

    def all_sessions(self, app_id: str, user_id: str) -> list[dict]:
        """Every stored session of the user (live, revoked, expired), newest first."""
        cursor = self._sessions.find({"app_id": app_id, "user_id": user_id}, _projection(_SESSION_FIELDS)) \
            .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)

    def revoke_session(self, app_id: str, user_id: str, session_id: str, now, reason: str) -> bool:
        """Revoke one live session of this user (one conditional write: a session of
        another user, a revoked or an expired one is left alone and False returned)."""
        result = self._sessions.update_one(
            {"_id": session_id, "app_id": app_id, "user_id": user_id, "revoked_at": None,
             "expires_at": {"$gt": now}},
            {"$set": {"revoked_at": now, "revoked_reason": reason}},
        )
        return result.modified_count == 1

    # -- MFA methods

    def mfa_methods(self, app_id: str, user_id: str) -> list[dict]:
        cursor = self._mfa_methods.find({"app_id": app_id, "user_id": user_id}, _projection(_MFA_FIELDS)) \
            .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)
