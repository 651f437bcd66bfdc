"""MongoDB access of the MFA area.

Collections (every document carries ``app_id``; every query filters on it):

- ``mfa_methods``: ``{_id, app_id, user_id, type: "totp", label, secret (encrypted),
  status: pending|active, is_primary, created_at, verified_at, last_used_at,
  last_used_step, expires_at, backup_set_id, active_key}``.  ``expires_at`` is set only
  while pending (an abandoned setup is reclaimed by TTL); ``active_key``
  (``app:user:type``) exists only on an active method and is unique, so a user can
  never end up with two active TOTP methods, whatever races.  ``last_used_step`` is the
  last accepted TOTP time step (the replay guard).  ``backup_set_id`` names the
  user's current set of backup codes.
- ``mfa_backup_codes``: ``{_id, app_id, user_id, set_id, code_digest, used_at,
  created_at}``.  Only codes of the set the active method names are valid, so a new set
  becomes current in one single-document write and a crash between writes leaves, at
  worst, ignored codes.
- ``mfa_challenges``: ``{_id (SHA-256 of the challenge token), app_id, user_id,
  remember_me, device_info, attempts, created_at, expires_at, consumed_at, methods,
  login_data, tokens_not_before, password_changed_at}`` (``methods``: what may answer
  it, ``totp`` and/or ``webauthn``; the last two: the account as the login read it, which
  the session is started under).

Stores only read and write; the rules (and every HTTP error) live in ``service.py``.
"""
from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane.collection import Collection

# Challenges are kept a while after they expire only to help diagnosis; an expired and
# an unknown challenge answer the same, so reclaiming them changes nothing.
CHALLENGE_RETENTION_SECONDS = 3600

INDEXES = {
    "mfa_methods": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING), ("status", ASCENDING)]),
        IndexModel([("active_key", ASCENDING)], unique=True, sparse=True),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
    "mfa_backup_codes": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING), ("set_id", ASCENDING),
                    ("code_digest", ASCENDING)]),
    ],
    "mfa_challenges": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=CHALLENGE_RETENTION_SECONDS),
    ],
}


def active_key(app_id: str, user_id: str, type_: str) -> str:
    return f"{app_id}:{user_id}:{type_}"


class MethodStore(Collection):
    name, indexes = "mfa_methods", INDEXES

    def get(self, app_id: str, user_id: str, method_id: str) -> dict | None:
        return self._docs.find_one({"_id": method_id, "app_id": app_id, "user_id": user_id})

    def active(self, app_id: str, user_id: str, type_: str = "totp") -> dict | None:
        return self._docs.find_one({"app_id": app_id, "user_id": user_id, "type": type_, "status": "active"})

    def all_active(self, app_id: str, user_id: str) -> list[dict]:
        cursor = self._docs.find({"app_id": app_id, "user_id": user_id, "status": "active"})
        return list(cursor.sort([("verified_at", ASCENDING), ("_id", ASCENDING)]))

    def for_user(self, app_id: str, user_id: str) -> list[dict]:
        """Every method of the user, pending ones too, newest first, without the secret."""
        cursor = self._docs.find({"app_id": app_id, "user_id": user_id}, {"secret": 0})
        return list(cursor.sort([("created_at", DESCENDING), ("_id", DESCENDING)]))

    def delete_pending(self, app_id: str, user_id: str, *, keep: str | None = None, created_by=None) -> None:
        """Delete the user's pending setups; with ``keep``, all but that one that were
        created by ``created_by`` (a setup started later by a racing request survives)."""
        query: dict = {"app_id": app_id, "user_id": user_id, "status": "pending"}
        if keep is not None:
            query.update({"_id": {"$ne": keep}, "created_at": {"$lte": created_by}})
        self._docs.delete_many(query)

    def activate(self, app_id: str, user_id: str, method_id: str, *, now, step: int, backup_set_id: str) -> dict | None:
        """Make the pending, unexpired method active (one winner under races); None when
        it is no longer pending, has expired, or the user already has an active method
        of its type (the unique ``active_key``)."""
        try:
            return self._docs.find_one_and_update(
                {"_id": method_id, "app_id": app_id, "user_id": user_id, "status": "pending",
                 "expires_at": {"$gt": now}},
                {"$set": {"status": "active", "verified_at": now, "last_used_at": now, "last_used_step": step,
                          "expires_at": None,
                          "backup_set_id": backup_set_id, "active_key": active_key(app_id, user_id, "totp")}},
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:
            return None

    def record_use(self, app_id: str, method_id: str, step: int, now) -> bool:
        """Accept time step ``step`` only if it is later than every step accepted
        before: the replay guard, atomic, so one code also wins only once in parallel."""
        result = self._docs.update_one(
            {"_id": method_id, "app_id": app_id, "status": "active",
             "$or": [{"last_used_step": None}, {"last_used_step": {"$lt": step}}]},
            {"$set": {"last_used_step": step, "last_used_at": now}},
        )
        return result.modified_count == 1

    def swap_backup_set(self, app_id: str, method_id: str, set_id: str) -> dict | None:
        """Make ``set_id`` the current backup set of the active method; the method as it
        was before (its old ``backup_set_id``), or None when it is no longer active."""
        return self._docs.find_one_and_update(
            {"_id": method_id, "app_id": app_id, "status": "active"},
            {"$set": {"backup_set_id": set_id}},
            return_document=ReturnDocument.BEFORE,
        )

    def delete_active(self, app_id: str, method_id: str) -> bool:
        result = self._docs.delete_one({"_id": method_id, "app_id": app_id, "status": "active"})
        return result.deleted_count == 1

    def delete_for_user(self, app_id: str, user_id: str) -> int:
        return self._docs.delete_many({"app_id": app_id, "user_id": user_id}).deleted_count


class BackupCodeStore(Collection):
    name, indexes = "mfa_backup_codes", INDEXES

    def insert_set(self, docs: list[dict]) -> None:
        self._docs.insert_many(docs, ordered=False)

    def consume(self, app_id: str, user_id: str, set_id: str, code_digest: str, now) -> bool:
        """Mark an unused code of the set used (one winner under races)."""
        doc = self._docs.find_one_and_update(
            {"app_id": app_id, "user_id": user_id, "set_id": set_id, "code_digest": code_digest, "used_at": None},
            {"$set": {"used_at": now}},
        )
        return doc is not None

    def remaining(self, app_id: str, user_id: str, set_id: str | None) -> int:
        if set_id is None:
            return 0
        return self._docs.count_documents({"app_id": app_id, "user_id": user_id, "set_id": set_id, "used_at": None})

    def delete_set(self, app_id: str, user_id: str, set_id: str) -> None:
        self._docs.delete_many({"app_id": app_id, "user_id": user_id, "set_id": set_id})

    def delete_for_user(self, app_id: str, user_id: str) -> None:
        self._docs.delete_many({"app_id": app_id, "user_id": user_id})


class ChallengeStore(Collection):
    name, indexes = "mfa_challenges", INDEXES

    def count_attempt(self, app_id: str, token_digest: str, now) -> dict | None:
        """Count one code attempt (atomic ``$inc``, before the code is checked) on a
        live challenge; the challenge after it, or None when it is consumed or expired."""
        return self._docs.find_one_and_update(
            {"_id": token_digest, "app_id": app_id, "consumed_at": None, "expires_at": {"$gt": now}},
            {"$inc": {"attempts": 1}},
            return_document=ReturnDocument.AFTER,
        )

    def live(self, app_id: str, token_digest: str, now) -> dict | None:
        return self._docs.find_one(
            {"_id": token_digest, "app_id": app_id, "consumed_at": None, "expires_at": {"$gt": now}})

    def consume(self, app_id: str, token_digest: str, now) -> dict | None:
        """Use the challenge up (one winner under races); None when it already was, or
        has expired."""
        return self._docs.find_one_and_update(
            {"_id": token_digest, "app_id": app_id, "consumed_at": None, "expires_at": {"$gt": now}},
            {"$set": {"consumed_at": now}},
            return_document=ReturnDocument.AFTER,
        )

    def delete_for_user(self, app_id: str, user_id: str) -> None:
        self._docs.delete_many({"app_id": app_id, "user_id": user_id})
