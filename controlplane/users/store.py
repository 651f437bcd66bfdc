"""MongoDB access of the users area.

Collections (every document carries ``app_id``; every query filters on it):

- ``users``: the end users; unique (app_id, email), a soft-deleted user keeps its email.
  ``attributes`` holds the user's ABAC attributes (a key ``a.b`` is stored as ``b``
  inside ``a``, which is how conditions read ``user.attributes.a.b``) and
  ``attribute_keys`` the keys set, which the count limit is checked against.
- ``user_counters``: one document per application holding how many users count against
  IAMGATE_MAX_USERS_PER_APPLICATION, plus the reservations in flight.
- ``sessions``: one per refresh-token family (the current token's digest, the digest of
  the token rotated last, device, lifetime, revocation).
- ``refresh_token_history``: digests of every rotated refresh token, so reuse of any
  older token of a family is recognised (and revokes the family).
- ``user_tokens``: single-use email verification and password reset tokens (digests).

The login lock's ``login_attempts`` belong to ``controlplane/lockout.py``, which the
dashboard shares.

Stores only read and write; the rules live in the services (``registration.py``,
``sessions.py``, ``login.py``, ``passwords.py``, ``verification.py``, ``admin.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError, WriteError

from controlplane.collection import AppCollection, Collection
from shared import dotted
from shared.timeutil import aware

# Expired sessions and one-time tokens are kept this long after they expire (an expired
# token still answers "expired" rather than "unknown"), then MongoDB reclaims them.
RETENTION_SECONDS = 7 * 24 * 3600

INDEXES = {
    "users": [
        IndexModel([("app_id", ASCENDING), ("email", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("created_at", DESCENDING)]),
    ],
    "sessions": [
        IndexModel([("refresh_digest", ASCENDING)], unique=True),
        IndexModel([("previous_digest", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING), ("created_at", DESCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=RETENTION_SECONDS),
    ],
    "refresh_token_history": [
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=RETENTION_SECONDS),
    ],
    "user_tokens": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING), ("purpose", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=RETENTION_SECONDS),
    ],
}


_CHUNK = 1000  # ids per $in list
_PROFILE_PROJECTION = {name: 1 for name in (
    "email", "name", "avatar_url", "email_verified", "metadata", "attributes", "status",
    "created_at", "updated_at", "last_login_at", "deleted_at")}
_SESSION_PROJECTION = {name: 1 for name in (
    "user_id", "device_info", "is_remember_me", "last_used_at", "expires_at", "created_at", "revoked_at")}


class UserStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._users = store["users"]
        self._counters = store["user_counters"]

    # -- users

    def insert(self, doc: dict) -> None:
        """Raises ``DuplicateKeyError`` when the email is taken in the application."""
        self._users.insert_one(doc)

    def get(self, app_id: str, user_id: str) -> dict | None:
        return self._users.find_one({"_id": user_id, "app_id": app_id})

    def status(self, app_id: str, user_id: str) -> str | None:
        """The user's account status (active, suspended, deleted), None when unknown."""
        doc = self._users.find_one({"_id": user_id, "app_id": app_id}, {"status": 1})
        return doc.get("status", "active") if doc else None

    def token_gate(self, app_id: str, user_id: str) -> dict | None:
        """``{status, tokens_not_before}`` of the user, what an access token is checked
        against; None when unknown."""
        return self._users.find_one({"_id": user_id, "app_id": app_id}, {"status": 1, "tokens_not_before": 1})

    def status_and_attributes(self, app_id: str, user_id: str) -> dict | None:
        """``{_id, status, attributes, tokens_not_before}`` of the user, whatever its status;
        None when unknown."""
        return self._users.find_one({"_id": user_id, "app_id": app_id},
                                    {"status": 1, "attributes": 1, "tokens_not_before": 1})

    def count_live(self, app_id: str, user_ids, *, stop_at: int | None = None) -> int:
        """How many of ``user_ids`` exist and are not deleted (counting stops at ``stop_at``)."""
        user_ids = list(user_ids)
        total = 0
        for start in range(0, len(user_ids), _CHUNK):  # bounded $in lists
            total += self._users.count_documents(
                {"app_id": app_id, "_id": {"$in": user_ids[start:start + _CHUNK]}, "status": {"$ne": "deleted"}})
            if stop_at is not None and total >= stop_at:
                break
        return total

    def profile(self, app_id: str, user_id: str) -> dict | None:
        """The user's profile fields (never the password hash), whatever its status."""
        return self._users.find_one({"_id": user_id, "app_id": app_id}, _PROFILE_PROJECTION)

    def update_profile(self, app_id: str, user_id: str, changes: dict, now) -> dict | None:
        """Set ``changes`` on a user that is not deleted; the profile as it was *before*,
        or None when there is no such user (the caller derives what really changed)."""
        return self._users.find_one_and_update(
            {"_id": user_id, "app_id": app_id, "status": {"$ne": "deleted"}},
            {"$set": {**changes, "updated_at": now}},
            projection=_PROFILE_PROJECTION,
            return_document=ReturnDocument.BEFORE,
        )

    def mark_deleted(self, app_id: str, user_id: str, now) -> bool:
        """The soft-delete transition, at most once per user (conditional on the status)."""
        result = self._users.update_one(
            {"_id": user_id, "app_id": app_id, "status": {"$ne": "deleted"}},
            {"$set": {"status": "deleted", "deleted_at": now, "updated_at": now}},
        )
        return result.modified_count == 1

    def by_email(self, app_id: str, email: str) -> dict | None:
        return self._users.find_one({"app_id": app_id, "email": email})

    def update(self, app_id: str, user_id: str, changes: dict, *, when: dict | None = None) -> dict | None:
        """Apply ``changes`` if the user matches ``when``; the updated user or None."""
        return self._users.find_one_and_update(
            {"_id": user_id, "app_id": app_id, **(when or {})}, {"$set": changes},
            return_document=ReturnDocument.AFTER,
        )

    def search(self, app_id: str, *, text: str | None, statuses: tuple, skip: int, limit: int) -> tuple[list, int]:
        query: dict = {"app_id": app_id, "status": {"$in": list(statuses)}}
        if text:
            pattern = {"$regex": re.escape(text), "$options": "i"}
            query["$or"] = [{"email": pattern}, {"name": pattern}]
        total = self._users.count_documents(query)
        cursor = self._users.find(query).sort([("created_at", DESCENDING), ("_id", ASCENDING)]).skip(skip).limit(limit)
        return list(cursor), total

    # -- ABAC attributes (written for the abac area)

    def attributes(self, app_id: str, user_id: str) -> dict | None:
        """The ABAC attributes of a user that is not deleted, as ``{key: value}`` with
        dotted keys; None when the user is unknown or deleted."""
        doc = self._users.find_one({"_id": user_id, "app_id": app_id}, {"status": 1, "attributes": 1})
        if doc is None or doc.get("status") == "deleted":
            return None
        return flatten_attributes(doc.get("attributes"))

    def set_attribute(self, app_id: str, user_id: str, key: str, value, *, max_keys: int) -> AttributeWrite:
        """Set ``attributes.<key>`` of a user that is not deleted, in one atomic write that
        also enforces the count limit (``max_keys``) and refuses a key that is a dotted
        prefix (or extension) of a key already set.  ``outcome`` says which of those
        stopped it, if any; ``previous`` is the value the key had (``MISSING`` if none)."""
        prefixes = [key[:i] for i, char in enumerate(key) if char == "."]
        query = {
            "_id": user_id, "app_id": app_id, "status": {"$ne": "deleted"},
            "attribute_keys": {"$nin": prefixes, "$not": re.compile("^" + re.escape(key) + r"\.")},
            "$or": [{"attribute_keys": key}, {f"attribute_keys.{max_keys - 1}": {"$exists": False}}],
        }
        try:
            before = self._users.find_one_and_update(
                query, {"$set": {f"attributes.{key}": value}, "$addToSet": {"attribute_keys": key}},
                projection={"attributes": 1}, return_document=ReturnDocument.BEFORE)
        except WriteError:  # a conflicting key set before attribute_keys existed
            return AttributeWrite("conflict", MISSING, self._conflicting_key(app_id, user_id, key))
        if before is not None:
            return AttributeWrite("set", dotted.lookup(before.get("attributes"), key, MISSING))
        doc = self._users.find_one({"_id": user_id, "app_id": app_id}, {"status": 1, "attribute_keys": 1})
        if doc is None or doc.get("status") == "deleted":
            return AttributeWrite("no_user")
        conflict = self._conflicting_key(app_id, user_id, key, doc.get("attribute_keys") or [])
        if conflict is not None:
            return AttributeWrite("conflict", MISSING, conflict)
        return AttributeWrite("limit")

    def unset_attribute(self, app_id: str, user_id: str, key: str) -> AttributeWrite:
        """Remove ``attributes.<key>`` of a user that is not deleted; ``outcome`` is
        "unset", "no_user" or "no_key"."""
        before = self._users.find_one_and_update(
            {"_id": user_id, "app_id": app_id, "status": {"$ne": "deleted"},
             "$or": [{"attribute_keys": key}, {f"attributes.{key}": {"$exists": True, "$not": {"$type": "object"}}}]},
            {"$unset": {f"attributes.{key}": ""}, "$pull": {"attribute_keys": key}},
            projection={"attributes": 1}, return_document=ReturnDocument.BEFORE)
        if before is None:
            status = self.status(app_id, user_id)
            return AttributeWrite("no_user" if status in (None, "deleted") else "no_key")
        # ``a.b`` removed may leave ``a`` as {}: drop emptied parents, innermost first (a
        # crash in between leaves an empty object, which the listing skips).
        parts = key.split(".")
        for end in range(len(parts) - 1, 0, -1):
            parent = "attributes." + ".".join(parts[:end])
            self._users.update_one({"_id": user_id, "app_id": app_id, parent: {}}, {"$unset": {parent: ""}})
        return AttributeWrite("unset", dotted.lookup(before.get("attributes"), key, MISSING))

    def _conflicting_key(self, app_id, user_id, key, keys=None) -> str | None:
        if keys is None:
            doc = self._users.find_one({"_id": user_id, "app_id": app_id}, {"attributes": 1}) or {}
            keys = list(flatten_attributes(doc.get("attributes")))
        for existing in keys:
            if key.startswith(existing + ".") or existing.startswith(key + "."):
                return existing
        return None

    # -- the per-application user counter (tier limit)

    def reserve_slot(self, app_id: str, user_id: str, limit: int, now) -> bool:
        """Atomically take one user slot for ``user_id`` if fewer than ``limit`` are taken.

        The reservation is recorded in ``pending`` until the user document exists
        (``confirm_slot``), so a crash in between can be told from a registration still
        in flight (``stale_reservations``)."""
        try:
            self._counters.update_one(
                {"_id": app_id}, {"$setOnInsert": {"app_id": app_id, "users": 0, "pending": []}}, upsert=True)
        except DuplicateKeyError:
            pass  # created by a racing registration
        result = self._counters.update_one(
            {"_id": app_id, "users": {"$lt": limit}},
            {"$inc": {"users": 1}, "$push": {"pending": {"user_id": user_id, "at": now}}},
        )
        return result.modified_count == 1

    def confirm_slot(self, app_id: str, user_id: str) -> None:
        self._counters.update_one({"_id": app_id}, {"$pull": {"pending": {"user_id": user_id}}})

    def cancel_reservation(self, app_id: str, user_id: str) -> bool:
        """Give back a slot reserved for a user that was never created (idempotent)."""
        result = self._counters.update_one(
            {"_id": app_id, "pending.user_id": user_id},
            {"$inc": {"users": -1}, "$pull": {"pending": {"user_id": user_id}}},
        )
        return result.modified_count == 1

    def stale_reservations(self, app_id: str, before) -> list[str]:
        doc = self._counters.find_one({"_id": app_id}, {"pending": 1}) or {}
        return [p["user_id"] for p in doc.get("pending", []) if aware(p["at"]) < before]

    def release_slot(self, app_id: str) -> None:
        self._counters.update_one({"_id": app_id, "users": {"$gt": 0}}, {"$inc": {"users": -1}})

    def reconcile_slots(self, app_id: str) -> bool:
        """Correct the counter from the users that really count (not deleted, plus
        reservations still in flight); True when slots were given back.

        A crash between a soft delete and its ``release_slot`` leaves the counter one
        too high; this repairs it.  Compare-and-set on the value read, so a registration
        racing the recount makes the correction a no-op rather than wrong."""
        doc = self._counters.find_one({"_id": app_id})
        if doc is None:
            return False
        in_flight = [p["user_id"] for p in doc.get("pending", [])]
        # In-flight users inserted first, live users second: a reservation whose user is
        # inserted between the two counts is then counted twice (harmless: too high is a
        # no-op), never zero times (too low would hand out its slot again).
        inserted = self._users.count_documents({"app_id": app_id, "_id": {"$in": in_flight}}) if in_flight else 0
        live = self._users.count_documents({"app_id": app_id, "status": {"$ne": "deleted"}})
        actual = live + len(in_flight) - inserted
        if actual >= doc["users"]:
            return False
        result = self._counters.update_one({"_id": app_id, "users": doc["users"]}, {"$set": {"users": actual}})
        return result.modified_count == 1


MISSING = object()


@dataclass(frozen=True)
class AttributeWrite:
    """What :meth:`UserStore.set_attribute` / ``unset_attribute`` did: ``outcome`` is
    "set"/"unset", or why nothing was written ("no_user", "no_key", "limit", "conflict")."""

    outcome: str
    previous: object = MISSING
    conflicts_with: str | None = None


def flatten_attributes(attributes) -> dict:
    """``users.attributes`` as ``{key: value}`` with dotted keys (values are never objects,
    so every object met is a level of a dotted key; emptied levels are skipped)."""
    out: dict = {}

    def walk(node, prefix):
        for name, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{name}.")
            else:
                out[prefix + name] = value

    if isinstance(attributes, dict):
        walk(attributes, "")
    return out


class SessionStore(AppCollection):
    name, indexes = "sessions", INDEXES

    def __init__(self, store):
        super().__init__(store)
        self._history = store["refresh_token_history"]

    def rotate(self, app_id: str, presented: str, successor: str, now) -> dict | None:
        """The atomic swap: if ``presented`` is the live token of a live session, make
        ``successor`` the live token and remember ``presented`` as rotated last."""
        return self._docs.find_one_and_update(
            {"app_id": app_id, "refresh_digest": presented, "revoked_at": None, "expires_at": {"$gt": now}},
            {"$set": {"refresh_digest": successor, "previous_digest": presented, "rotated_at": now,
                      "last_used_at": now}},
            return_document=ReturnDocument.AFTER,
        )

    def record_rotated(self, session: dict, rotated_digest: str, now) -> None:
        try:
            self._history.insert_one({
                "_id": rotated_digest, "app_id": session["app_id"], "session_id": session["_id"],
                "user_id": session["user_id"], "rotated_at": now, "expires_at": session["expires_at"],
            })
        except DuplicateKeyError:
            pass  # already recorded

    def is_live(self, app_id: str, session_id: str, now) -> bool:
        """Whether the session is neither revoked nor expired."""
        return self._docs.find_one({"_id": session_id, "app_id": app_id, "revoked_at": None,
                                    "expires_at": {"$gt": now}}, {"_id": 1}) is not None

    def sign_in_of(self, app_id: str, session_id: str, now) -> dict | None:
        """``{created_at, auth_time, auth_proven}`` of a live session (what its sign-in
        proved), or None when it is revoked or expired."""
        return self._docs.find_one({"_id": session_id, "app_id": app_id, "revoked_at": None,
                                    "expires_at": {"$gt": now}}, {"created_at": 1, "auth_time": 1, "auth_proven": 1})

    def by_current(self, app_id: str, token_digest: str) -> dict | None:
        return self._docs.find_one({"app_id": app_id, "refresh_digest": token_digest})

    def by_previous(self, app_id: str, token_digest: str) -> dict | None:
        return self._docs.find_one({"app_id": app_id, "previous_digest": token_digest})

    def by_rotated(self, app_id: str, token_digest: str) -> dict | None:
        """The session an older (already rotated) token belonged to."""
        entry = self._history.find_one({"_id": token_digest, "app_id": app_id})
        return self.get(app_id, entry["session_id"]) if entry else None

    def touch(self, app_id: str, session_id: str, now) -> None:
        self._docs.update_one({"_id": session_id, "app_id": app_id}, {"$set": {"last_used_at": now}})

    def revoke(self, app_id: str, session_id: str, now, reason: str) -> bool:
        result = self._docs.update_one(
            {"_id": session_id, "app_id": app_id, "revoked_at": None},
            {"$set": {"revoked_at": now, "revoked_reason": reason}},
        )
        return result.modified_count == 1

    def revoke_user(self, app_id: str, user_id: str, now, reason: str, *, keep: str | None = None) -> int:
        """Revoke every live session of the user (except ``keep``); the number revoked."""
        query: dict = {"app_id": app_id, "user_id": user_id, "revoked_at": None, "expires_at": {"$gt": now}}
        if keep is not None:
            query["_id"] = {"$ne": keep}
        result = self._docs.update_many(query, {"$set": {"revoked_at": now, "revoked_reason": reason}})
        return result.modified_count

    def active(self, app_id: str, user_id: str, now) -> list[dict]:
        """Live sessions of the user, newest first, without their token digests."""
        cursor = self._docs.find(
            {"app_id": app_id, "user_id": user_id, "revoked_at": None, "expires_at": {"$gt": now}},
            _SESSION_PROJECTION,
        ).sort([("created_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)

    def all_for_user(self, app_id: str, user_id: str) -> list[dict]:
        """Every stored session of the user (live, revoked, expired), newest first,
        without their token digests."""
        cursor = self._docs.find({"app_id": app_id, "user_id": user_id}, _SESSION_PROJECTION) \
            .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)

    def revoke_live(self, app_id: str, user_id: str, session_id: str, now, reason: str) -> bool:
        """Revoke one live session of this user (one conditional write: a session of
        another user, a revoked or an expired one is left alone and False returned)."""
        result = self._docs.update_one(
            {"_id": session_id, "app_id": app_id, "user_id": user_id, "revoked_at": None,
             "expires_at": {"$gt": now}},
            {"$set": {"revoked_at": now, "revoked_reason": reason}},
        )
        return result.modified_count == 1


class OneTimeTokenStore(Collection):
    """Email verification and password reset tokens: stored by digest, single use."""

    name, indexes = "user_tokens", INDEXES

    def get(self, app_id: str, token_digest: str, purpose: str) -> dict | None:
        return self._docs.find_one({"_id": token_digest, "app_id": app_id, "purpose": purpose})

    def consume(self, app_id: str, token_digest: str, purpose: str, now) -> dict | None:
        """Mark the token used if it is unused and unexpired (one winner under races)."""
        return self._docs.find_one_and_update(
            {"_id": token_digest, "app_id": app_id, "purpose": purpose, "used_at": None, "expires_at": {"$gt": now}},
            {"$set": {"used_at": now}},
            return_document=ReturnDocument.AFTER,
        )

    def invalidate_for_user(self, app_id: str, user_id: str, purpose: str, now) -> None:
        self._docs.update_many({"app_id": app_id, "user_id": user_id, "purpose": purpose, "used_at": None},
                               {"$set": {"used_at": now}})
