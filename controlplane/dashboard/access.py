"""Who may do what with an application in the dashboard.

An application belongs to an organization; an account's role in that organization
(owner, admin, member, viewer) is its role on the application.  Owners and admins may
write; members and viewers only read.  An application of an organization the account
is not in is reported as not found (403 would confirm it exists).
"""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel

from shared.errors import Forbidden, NotFound

ORG_ROLES = ("owner", "admin", "member", "viewer")
WRITE_ROLES = ("owner", "admin")

INDEXES = {
    "organization_members": [
        IndexModel([("organization_id", ASCENDING), ("account_id", ASCENDING)], unique=True),
        IndexModel([("account_id", ASCENDING)]),
    ]
}


class DashboardAccess:
    def __init__(self, store, applications):
        store.declare_indexes(INDEXES)
        self._members = store["organization_members"]
        self._applications = applications

    def role_in(self, organization_id: str, account_id: str) -> str | None:
        doc = self._members.find_one({"organization_id": organization_id, "account_id": account_id})
        return doc["role"] if doc else None

    def memberships(self, account_id: str) -> dict[str, str]:
        """organization_id -> role for every organization the account belongs to."""
        return {d["organization_id"]: d["role"] for d in self._members.find({"account_id": account_id})}

    def application(self, account_id: str, app_id: str, *, write: bool = False) -> tuple[dict, str]:
        """The application and the caller's role on it; 404 when the caller has no
        access, 403 FORBIDDEN when a member or viewer tries to write."""
        app = self._applications.get(app_id)
        role = self.role_in(app["organization_id"], account_id) if app and app.get("organization_id") else None
        if app is None or role is None:
            raise NotFound("Application not found.", details={"application_id": app_id})
        if write and role not in WRITE_ROLES:
            raise Forbidden(f"Your organization role ({role}) cannot change this application.",
                            details={"role": role, "required_role": list(WRITE_ROLES)})
        return app, role
