"""MongoDB access for applications (tenants)."""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel, ReturnDocument

INDEXES = {
    "applications": [
        IndexModel([("organization_id", ASCENDING), ("created_at", ASCENDING)]),
    ],
}

# Collections that hold no tenant data: kept when an application is deleted.  The
# cascade (``purge``) is the one place that writes other areas' collections: deleting
# every tenant document of the application is this area's documented job.
GLOBAL_COLLECTIONS = frozenset({
    "applications", "counters", "signing_keys", "signing_keys_state", "events", "rate_limits",
    "dashboard_accounts", "dashboard_sessions", "organizations", "organization_members",
})


class ApplicationStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._store = store
        self._apps = store["applications"]

    def insert(self, doc: dict) -> None:
        self._apps.insert_one(doc)

    def get(self, app_id: str) -> dict | None:
        return self._apps.find_one({"_id": app_id, "status": "active"})

    def organization_of(self, app_id: str) -> str | None:
        """The organization of an application, live or not (None: none, or no such application)."""
        doc = self._apps.find_one({"_id": app_id}, {"organization_id": 1})
        return doc.get("organization_id") if doc else None

    def list_for_organizations(self, organization_ids) -> list[dict]:
        cursor = self._apps.find({"organization_id": {"$in": list(organization_ids)}, "status": "active"})
        return list(cursor.sort("created_at", ASCENDING))

    def update(self, app_id: str, changes: dict) -> dict | None:
        """Set top-level fields; the application as it was before (None: not live)."""
        return self._apps.find_one_and_update({"_id": app_id, "status": "active"}, {"$set": changes},
                                              return_document=ReturnDocument.BEFORE)

    def mark_deleting(self, app_id: str) -> dict | None:
        return self._apps.find_one_and_update({"_id": app_id, "status": "active"}, {"$set": {"status": "deleting"}})

    def purge(self, app_id: str) -> None:
        """Delete every tenant document of the application, then the application.

        Ordered so a crash part-way leaves the application marked ``deleting`` (already
        invisible to every route) and a second purge finishes the job."""
        for name in self._store.db.list_collection_names():
            if name not in GLOBAL_COLLECTIONS:
                self._store[name].delete_many({"app_id": app_id})
        self._apps.delete_one({"_id": app_id})

    def count_for_organization(self, organization_id: str) -> int:
        return self._apps.count_documents({"organization_id": organization_id})

    def unfinished_deletions(self) -> list[str]:
        return [d["_id"] for d in self._apps.find({"status": "deleting"}, {"_id": 1})]
