"""MongoDB access for ABAC policies; this area owns the ``abac_policies`` collection.

``abac_policies``: {_id, app_id, name, description, effect: "allow"|"deny",
permissions: [patterns], condition (JSON or None), is_active, created_at, updated_at};
name unique per application.  The authz area's checks and the decision services'
internal API read the active ones through ``service.PolicyReader``, never this store.

``abac_policy_writers``: {_id: app_id, app_id, holder, expires_at}; the guard that makes an
application's policy writes that are counted against its caps one at a time (held for a
few seconds at most, reclaimed once expired, removed by the TTL index after that).

User attributes live on the user document (``users.attributes``) and are written through
the users area's ``UserDirectory``.
"""
from __future__ import annotations

import logging

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane.abac.errors import PolicyNameTaken
from controlplane.collection import AppCollection, WriteGuard, insert_unique, write_guard_indexes
from shared.abac import Policy
from shared.concurrency import yield_to_others

log = logging.getLogger("iamgate.abac")

INDEXES = {
    "abac_policies": [
        IndexModel([("app_id", ASCENDING), ("name", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("is_active", ASCENDING), ("created_at", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("permissions", ASCENDING)]),
    ],
    "abac_policy_writers": write_guard_indexes(),
}

_ORDER = [("created_at", ASCENDING), ("_id", ASCENDING)]
# Active policies read (and built) per batch before yielding: 100 at the cap of 4 KB a
# condition is about 400 KB of BSON.
ACTIVE_BATCH = 100


class PolicyStore(AppCollection):
    name, indexes = "abac_policies", INDEXES

    def __init__(self, store):
        super().__init__(store)
        self._writers = store["abac_policy_writers"]

    def write_guard(self, clock) -> WriteGuard:
        """The guard of the policy writes counted against the caps (``abac_policy_writers``)."""
        return WriteGuard(self._writers, clock)

    # --- what checks read

    def active(self, app_id: str) -> list[Policy]:
        """The application's active policies in creation order; a malformed document is
        left out (and logged) rather than failing every check of the application.

        Read ACTIVE_BATCH documents at a time, yielding to the other greenlets between
        batches: a cold read of an application at every cap (megabytes) is then never
        one piece of work that other tenants' requests wait behind. (A MongoDB cursor's
        socket reads yield already; mongomock's cursor copies every document at its first
        read, so under ``memory://`` the building of the policies is what is split.)"""
        out = []
        cursor = self._docs.find({"app_id": app_id, "is_active": True}).sort(_ORDER).batch_size(ACTIVE_BATCH)
        for count, doc in enumerate(cursor, 1):
            policy = _policy(app_id, doc)
            if policy is not None:
                out.append(policy)
            if count % ACTIVE_BATCH == 0:
                yield_to_others()
        return out

    def active_by_ids(self, app_id: str, policy_ids: list[str]) -> list[Policy]:
        """Those of ``policy_ids`` that are active policies of the application (a cache
        patching the changed policies into the set it holds: one absent was deleted or
        deactivated)."""
        found = self._docs.find({"app_id": app_id, "_id": {"$in": list(policy_ids)}, "is_active": True})
        return [policy for policy in (_policy(app_id, doc) for doc in found.sort(_ORDER)) if policy is not None]

    # --- management

    def count(self, app_id: str) -> int:
        return self._docs.count_documents({"app_id": app_id})

    def count_by_pattern(self, app_id: str, patterns: list[str]) -> dict[str, int]:
        """How many of the application's policies (active or not) name each of
        ``patterns``; a pattern none names is left out."""
        found = self._docs.aggregate([
            {"$match": {"app_id": app_id, "permissions": {"$in": patterns}}},
            {"$unwind": "$permissions"},
            {"$match": {"permissions": {"$in": patterns}}},
            {"$group": {"_id": "$permissions", "policies": {"$sum": 1}}},
        ])
        return {row["_id"]: row["policies"] for row in found}

    def insert(self, doc: dict) -> None:
        insert_unique(self._docs, doc, lambda: PolicyNameTaken(doc["name"]))

    def search(self, app_id: str, *, is_active: bool | None, patterns: list[str] | None,
               skip: int, limit: int, denies_matching: str | None = None) -> tuple[list[dict], int]:
        """A page of policies sorted by name; ``patterns``: only those holding one of them,
        and the denies holding a pattern that matches the regular expression
        ``denies_matching``."""
        query: dict = {"app_id": app_id}
        if is_active is not None:
            query["is_active"] = is_active
        if patterns is not None and denies_matching is not None:
            query["$or"] = [{"permissions": {"$in": patterns}},
                            {"effect": "deny", "permissions": {"$regex": denies_matching}}]
        elif patterns is not None:
            query["permissions"] = {"$in": patterns}
        total = self._docs.count_documents(query)
        return list(self._docs.find(query).sort([("name", ASCENDING)]).skip(skip).limit(limit)), total

    def update(self, app_id: str, policy_id: str, changes: dict) -> dict | None:
        """Apply ``changes`` in one atomic write; the policy as it was BEFORE, or None when
        it does not exist (the caller derives what changed from the two)."""
        try:
            return self._docs.find_one_and_update({"_id": policy_id, "app_id": app_id}, {"$set": changes},
                                                  return_document=ReturnDocument.BEFORE)
        except DuplicateKeyError:
            raise PolicyNameTaken(changes["name"]) from None

    def delete(self, app_id: str, policy_id: str) -> dict | None:
        return self._docs.find_one_and_delete({"_id": policy_id, "app_id": app_id})


def _policy(app_id: str, doc: dict) -> Policy | None:
    """The policy a document holds, or None (logged) when it is malformed."""
    try:
        return Policy(id=doc["_id"], name=doc.get("name") or doc["_id"], effect=doc["effect"],
                      permissions=tuple(doc.get("permissions") or ()), condition=doc.get("condition"),
                      is_active=True)
    except (KeyError, TypeError, ValueError):
        log.warning("skipping malformed ABAC policy", extra={"app_id": app_id, "policy_id": doc.get("_id")})
        return None
