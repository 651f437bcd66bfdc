"""MongoDB access of passkeys.

Collections (every document carries ``app_id``; every query filters on it):

- ``passkeys``: ``{_id, app_id, user_id, credential_id (base64url), public_key (COSE,
  base64url), sign_count, transports, aaguid, name, backed_up, backup_eligible,
  discoverable (true/false/null: unknown), user_verified, created_at, last_used_at}``.
  (``app_id``, ``credential_id``) is unique: one authenticator is registered once per
  application, and a credential of application A is never looked up in B.
- ``passkey_challenges``: ``{_id (SHA-256 of the challenge_id), app_id, kind:
  registration|authentication, user_id (registration: the caller; second factor: the
  login's user; sign-in alone: null), mfa_challenge (the MFA challenge token's digest,
  second factor only), challenge (base64url), created_at, expires_at}``.  Taken with one
  ``find_one_and_delete``, so a challenge is used once whatever the races; the TTL index
  reclaims abandoned ones and expiry itself is decided in the query.
"""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel, ReturnDocument

from controlplane.collection import AppCollection, Collection

INDEXES = {
    "passkeys": [
        IndexModel([("app_id", ASCENDING), ("credential_id", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING)]),
    ],
    "passkey_challenges": [
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
}


class PasskeyStore(AppCollection):
    name, indexes = "passkeys", INDEXES

    def for_user(self, app_id: str, user_id: str) -> list[dict]:
        cursor = self._docs.find({"app_id": app_id, "user_id": user_id})
        return list(cursor.sort([("created_at", ASCENDING), ("_id", ASCENDING)]))

    def count_for_user(self, app_id: str, user_id: str) -> int:
        return self._docs.count_documents({"app_id": app_id, "user_id": user_id})

    def by_credential(self, app_id: str, credential_id: str) -> dict | None:
        return self._docs.find_one({"app_id": app_id, "credential_id": credential_id})

    def of_user(self, app_id: str, user_id: str, passkey_id: str) -> dict | None:
        return self._docs.find_one({"_id": passkey_id, "app_id": app_id, "user_id": user_id})

    def rename(self, app_id: str, user_id: str, passkey_id: str, name: str) -> dict | None:
        return self._docs.find_one_and_update({"_id": passkey_id, "app_id": app_id, "user_id": user_id},
                                              {"$set": {"name": name}}, return_document=ReturnDocument.AFTER)

    def delete_of_user(self, app_id: str, user_id: str, passkey_id: str) -> bool:
        result = self._docs.delete_one({"_id": passkey_id, "app_id": app_id, "user_id": user_id})
        return result.deleted_count == 1

    def record_use(self, app_id: str, passkey_id: str, sign_count: int, backed_up: bool, now) -> bool:
        """Store the new sign count only if it moves forward (or both stay 0, as synced
        passkeys report): compare-and-set, so two racing assertions with the same count
        cannot both pass."""
        moved = {"sign_count": {"$lt": sign_count}} if sign_count > 0 else {"sign_count": 0}
        result = self._docs.update_one({"_id": passkey_id, "app_id": app_id, **moved},
                                       {"$set": {"sign_count": sign_count, "backed_up": backed_up,
                                                 "last_used_at": now}})
        return result.matched_count == 1  # matched: 0 -> 0 at the same instant changes nothing

    def delete_for_user(self, app_id: str, user_id: str) -> int:
        return self._docs.delete_many({"app_id": app_id, "user_id": user_id}).deleted_count


class PasskeyChallengeStore(Collection):
    name, indexes = "passkey_challenges", INDEXES

    def take(self, app_id: str, challenge_digest: str, kind: str, now) -> dict | None:
        """Remove and return the live challenge (single use); None when it is unknown,
        of another kind or application, used, or expired."""
        return self._docs.find_one_and_delete(
            {"_id": challenge_digest, "app_id": app_id, "kind": kind, "expires_at": {"$gt": now}})

    def delete_for_user(self, app_id: str, user_id: str) -> int:
        """Every pending challenge bound to the user (registrations, second steps)."""
        return self._docs.delete_many({"app_id": app_id, "user_id": user_id}).deleted_count
