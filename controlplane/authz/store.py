"""MongoDB access for the authz area: the application's active ABAC policies.

``abac_policies`` documents are written by the ABAC policy area:
{_id, app_id, name, description, effect: "allow"|"deny", permissions: [patterns],
condition (JSON or None), is_active}.  This area only reads the active ones.
"""
from __future__ import annotations

import logging

from pymongo import ASCENDING, IndexModel

from shared.abac import Policy

log = logging.getLogger("iamgate.authz")

INDEXES = {
    "abac_policies": [
        IndexModel([("app_id", ASCENDING), ("is_active", ASCENDING)]),
    ],
}


class PolicyStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._policies = store["abac_policies"]

    def active(self, app_id: str) -> list[Policy]:
        """The application's active policies in creation order; a malformed document is
        left out (and logged) rather than failing every check of the application."""
        out = []
        cursor = self._policies.find({"app_id": app_id, "is_active": True}).sort(
            [("created_at", ASCENDING), ("_id", ASCENDING)])
        for doc in cursor:
            try:
                out.append(Policy(id=doc["_id"], name=doc.get("name") or doc["_id"], effect=doc["effect"],
                                  permissions=tuple(doc.get("permissions") or ()), condition=doc.get("condition"),
                                  is_active=True))
            except (KeyError, TypeError, ValueError):
                log.warning("skipping malformed ABAC policy", extra={"app_id": app_id, "policy_id": doc.get("_id")})
        return out
