"""MongoDB access for roles, permissions and role assignments.

Collections (every document carries ``app_id``; every query filters by it):

- ``roles``: {_id, app_id, name, display_name, description, is_system_role,
  permissions: [names], version, created_at, updated_at}; name unique per application.
- ``permissions``: {_id, app_id, name, created_at}; unique per application, created the
  first time a role names them, never deleted by role changes.
- ``role_assignments``: {_id, app_id, user_id, role_id, scope (None or str), expires_at
  (None or datetime), assigned_at}; one per (application, user, role, scope).

Expiry is decided in code against the caller's ``now``; the TTL index only reclaims space.
"""
from __future__ import annotations

import re

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane.collection import insert_unique
from controlplane.roles.errors import RoleAlreadyAssigned, RoleNameTaken
from shared.ids import new_id

INDEXES = {
    "roles": [
        IndexModel([("app_id", ASCENDING), ("name", ASCENDING)], unique=True),
    ],
    "permissions": [
        IndexModel([("app_id", ASCENDING), ("name", ASCENDING)], unique=True),
    ],
    "role_assignments": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING), ("role_id", ASCENDING), ("scope", ASCENDING)],
                   unique=True),
        IndexModel([("app_id", ASCENDING), ("role_id", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
}



def _unexpired(now) -> dict:
    return {"$or": [{"expires_at": None}, {"expires_at": {"$gt": now}}]}


class RoleStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._roles = store["roles"]
        self._permissions = store["permissions"]
        self._assignments = store["role_assignments"]

    # --- roles

    def insert_role(self, doc: dict) -> None:
        insert_unique(self._roles, doc, lambda: RoleNameTaken(doc["name"]))

    def role_by_id(self, app_id: str, role_id: str) -> dict | None:
        return self._roles.find_one({"_id": role_id, "app_id": app_id})

    def role_by_name(self, app_id: str, name: str) -> dict | None:
        return self._roles.find_one({"app_id": app_id, "name": name})

    def roles_by_ids(self, app_id: str, role_ids) -> dict[str, dict]:
        cursor = self._roles.find({"app_id": app_id, "_id": {"$in": list(role_ids)}})
        return {doc["_id"]: doc for doc in cursor}

    def search_roles(self, app_id: str, search: str | None, skip: int, limit: int) -> tuple[list[dict], int]:
        query: dict = {"app_id": app_id}
        if search:
            pattern = {"$regex": re.escape(search), "$options": "i"}
            query["$or"] = [{"name": pattern}, {"display_name": pattern}]
        total = self._roles.count_documents(query)
        docs = list(self._roles.find(query).sort([("name", ASCENDING)]).skip(skip).limit(limit))
        return docs, total

    def update_role(self, app_id: str, role_id: str, version: int, changes: dict) -> dict | None:
        """Compare-and-set on ``version`` so concurrent updates cannot lose each other's
        permission changes (nor report the wrong granted/revoked sets); None on a race or
        when the role is gone or is a system role."""
        return self._roles.find_one_and_update(
            {"_id": role_id, "app_id": app_id, "version": version, "is_system_role": False},
            {"$set": changes, "$inc": {"version": 1}},
            return_document=ReturnDocument.AFTER,
        )

    def delete_role(self, app_id: str, role_id: str) -> bool:
        result = self._roles.delete_one({"_id": role_id, "app_id": app_id, "is_system_role": False})
        return result.deleted_count == 1

    # --- permissions

    def ensure_permissions(self, app_id: str, names, now) -> None:
        """Create the permissions not seen before in this application (first use)."""
        known = set(self.permission_ids(app_id, names))
        for name in (n for n in names if n not in known):
            try:
                self._permissions.update_one(
                    {"app_id": app_id, "name": name},
                    {"$setOnInsert": {"_id": new_id(), "app_id": app_id, "name": name, "created_at": now}},
                    upsert=True,
                )
            except DuplicateKeyError:
                pass  # two requests created it at once: it exists, which is all we need

    def permission_ids(self, app_id: str, names) -> dict[str, str]:
        cursor = self._permissions.find({"app_id": app_id, "name": {"$in": list(names)}}, {"name": 1})
        return {doc["name"]: doc["_id"] for doc in cursor}

    # --- assignments

    def insert_assignment(self, doc: dict, now) -> dict:
        """Insert, or take the place of an expired assignment of the same role and scope."""
        try:
            self._assignments.insert_one(doc)
            return doc
        except DuplicateKeyError:
            pass
        key = {k: doc[k] for k in ("app_id", "user_id", "role_id", "scope")}
        replaced = self._assignments.find_one_and_update(
            {**key, "expires_at": {"$ne": None, "$lte": now}},
            {"$set": {"expires_at": doc["expires_at"], "assigned_at": doc["assigned_at"]}},
            return_document=ReturnDocument.AFTER,
        )
        if replaced is None:
            raise RoleAlreadyAssigned(doc["user_id"], doc["role_id"], doc["scope"])
        return replaced

    def delete_assignment_doc(self, app_id: str, assignment_id: str) -> None:
        self._assignments.delete_one({"_id": assignment_id, "app_id": app_id})

    def assignments_of_user(self, app_id: str, user_id: str, now, scope=None, any_scope=True) -> list[dict]:
        query = {"app_id": app_id, "user_id": user_id, **_unexpired(now)}
        if not any_scope:
            query["scope"] = scope
        return list(self._assignments.find(query).sort([("assigned_at", ASCENDING), ("_id", ASCENDING)]))

    def remove_assignment(self, app_id: str, user_id: str, role_id: str, scope, now) -> dict | None:
        """Delete the unexpired assignment; an expired one is only swept (it was already gone)."""
        key = {"app_id": app_id, "user_id": user_id, "role_id": role_id, "scope": scope}
        removed = self._assignments.find_one_and_delete({**key, **_unexpired(now)})
        if removed is None:
            self._assignments.delete_one(key)
        return removed

    def holders(self, app_id: str, role_id: str, now) -> list[str]:
        """Users with an unexpired assignment of the role (whatever their status)."""
        return sorted(self._assignments.distinct("user_id", {"app_id": app_id, "role_id": role_id, **_unexpired(now)}))

    def purge_role_assignments(self, app_id: str, role_id: str, now) -> list[str]:
        """Delete every assignment of a deleted role; returns the users whose unexpired
        assignment went with it (their answers may change)."""
        affected = self.holders(app_id, role_id, now)
        self._assignments.delete_many({"app_id": app_id, "role_id": role_id})
        return affected

