"""MongoDB access of user self-service.

This area owns no collection; it reads and writes those of other areas, always filtered
by ``app_id`` and ``user_id``, and projects only what it may show:

- ``users`` (users area): profile fields and the soft-delete transition;
- ``sessions`` (users area): the user's refresh-token families; the token digests are
  never read;
- ``mfa_methods`` (MFA area): ``{_id, app_id, user_id, type, label, status, is_primary,
  verified_at, last_used_at, secret}``; the encrypted ``secret`` is never read;
- ``oidc_consents`` (OIDC area): ``{app_id, user_id, client_id, scopes, granted_at,
  withdrawn_at}``, one per (user, client) the user consented to;
- ``oidc_refresh_tokens`` (OIDC area): ``{app_id, user_id, client_id, revoked_at, ...}``.

Stores only read and write; the rules and every HTTP error live in ``service.py``.
"""
from __future__ import annotations

from pymongo import DESCENDING, ReturnDocument

_PROFILE_FIELDS = ("email", "name", "avatar_url", "email_verified", "metadata", "attributes", "status",
                   "created_at", "updated_at", "last_login_at", "deleted_at")
_SESSION_FIELDS = ("device_info", "is_remember_me", "last_used_at", "expires_at", "created_at", "revoked_at")
_MFA_FIELDS = ("type", "label", "is_primary", "status", "verified_at", "last_used_at", "created_at")
_CONSENT_FIELDS = ("client_id", "scopes", "granted_at", "withdrawn_at")


def _projection(fields) -> dict:
    return {name: 1 for name in fields}


class SelfServiceStore:
    def __init__(self, store):
        self._users = store["users"]
        self._sessions = store["sessions"]
        self._mfa_methods = store["mfa_methods"]
        self._consents = store["oidc_consents"]
        self._oidc_tokens = store["oidc_refresh_tokens"]

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

    # -- OIDC consents and the refresh tokens issued under them

    def consents(self, app_id: str, user_id: str) -> list[dict]:
        cursor = self._consents.find({"app_id": app_id, "user_id": user_id}, _projection(_CONSENT_FIELDS)) \
            .sort([("granted_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)

    def live_consent_clients(self, app_id: str, user_id: str) -> list[str]:
        cursor = self._consents.find({"app_id": app_id, "user_id": user_id, "withdrawn_at": None}, {"client_id": 1})
        return sorted({doc["client_id"] for doc in cursor if doc.get("client_id")})

    def withdraw_consents(self, app_id: str, user_id: str, now) -> int:
        """Withdraw every consent still in force; how many were withdrawn by this call."""
        result = self._consents.update_many(
            {"app_id": app_id, "user_id": user_id, "withdrawn_at": None}, {"$set": {"withdrawn_at": now}})
        return result.modified_count

    def revoke_oidc_tokens(self, app_id: str, user_id: str, now, reason: str) -> int:
        result = self._oidc_tokens.update_many(
            {"app_id": app_id, "user_id": user_id, "revoked_at": None},
            {"$set": {"revoked_at": now, "revoked_reason": reason}})
        return result.modified_count
