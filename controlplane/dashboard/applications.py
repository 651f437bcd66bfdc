"""Applications managed from the dashboard on behalf of an organization member: the
caller's role decides (``access.py``) and the organization's application limit is
counted on the organization.  The application itself is the applications area's
(``ApplicationService``)."""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from controlplane.applications.service import ApplicationService
from controlplane.dashboard.access import WRITE_ROLES, DashboardAccess
from controlplane.dashboard.errors import (
    ApplicationLimitReached,
    NotAMember,
    OrganizationIdInvalid,
    OrganizationRequired,
    RoleCannotWrite,
)
from controlplane.dashboard.store import DashboardStore
from shared.ids import is_uuid


@dataclass(eq=False)
class OrganizationApplications:
    """``max_applications`` is IAMGATE_MAX_APPLICATIONS_PER_ORGANIZATION."""

    store: DashboardStore
    access: DashboardAccess
    applications: ApplicationService
    _: KW_ONLY
    max_applications: int

    def for_account(self, account_id: str, organization_id: str | None = None) -> list[tuple[dict, str]]:
        """Applications of every organization the caller belongs to (or of one of them),
        each with the caller's role there; 403 DASHBOARD_MFA_REQUIRED when one of those
        organizations requires a second factor the caller lacks."""
        roles = self.access.memberships(account_id)
        if organization_id is not None:
            if not is_uuid(organization_id):
                raise OrganizationIdInvalid()
            if organization_id not in roles:
                raise NotAMember(organization_id)
            roles = {organization_id: roles[organization_id]}
        self.access.require_second_factor(account_id, roles)
        apps = self.applications.list_for_organizations(roles)
        return [(app, roles[app["organization_id"]]) for app in apps]

    def create_application(self, account_id: str, values: dict) -> tuple[dict, str]:
        """POST /api/dashboard/applications: 422 VALIDATION_ERROR when organization_id
        is needed but missing, 403 FORBIDDEN for an organization the caller is not in or
        cannot write to, 403 DASHBOARD_EMAIL_UNVERIFIED for an unconfirmed caller, 403
        DASHBOARD_MFA_REQUIRED for a caller without the second factor it requires, 403
        resource_limit_exceeded past the organization's limit."""
        values = dict(values)
        organization_id = values.pop("organization_id", None)
        roles = self.access.memberships(account_id)
        if organization_id is None:
            if len(roles) != 1:
                raise OrganizationRequired(len(roles))
            organization_id = next(iter(roles))
        role = roles.get(organization_id)
        if role is None:
            raise NotAMember(organization_id)
        self.access.require_second_factor(account_id, [organization_id])
        if role not in WRITE_ROLES:
            raise RoleCannotWrite(role, "create applications", WRITE_ROLES)
        self.access.require_verified(account_id)
        # The organization's limit is counted on the organization, atomically, before
        # the application exists; a failed insert gives the slot back.
        if not self.store.reserve_application_slot(organization_id, self.max_applications) and not (
                self._reconcile_slots(organization_id)
                and self.store.reserve_application_slot(organization_id, self.max_applications)):
            raise ApplicationLimitReached(self.max_applications)
        try:
            app = self.applications.create(values, organization_id=organization_id, owner_account_id=account_id)
        except Exception:
            self.store.release_application_slot(organization_id)
            raise
        return app, role

    def _reconcile_slots(self, organization_id: str) -> bool:
        """At the limit, correct the organization's counter from its applications'
        documents (one goes last in its deletion's purge); True when slots were given
        back.  A deletion interrupted after its purge and before it gave its slot back
        (finished by ``ApplicationService.finish_deletions`` at a start) left the
        counter one too high for good.  The counter is read before the documents are
        counted and set only if unchanged, so a reservation after the read makes the
        correction a no-op; one made before it whose document is not inserted yet is not
        counted, and the organization may then get one application over its limit, once
        (never fewer than its limit: the trade the users' counter makes too)."""
        counted = self.store.applications_count(organization_id)
        actual = self.applications.count_for_organization(organization_id)
        return self.store.correct_application_slots(organization_id, counted, actual)

    def delete_application(self, app_id: str) -> None:
        """Irreversible: every user, role, permission, API key and webhook of the
        application goes with it (``ApplicationService.delete``); then its
        organization's slot is given back.  The caller's right to write is checked
        first (``access.member_of_application(write=True)``)."""
        app = self.applications.delete(app_id)
        if app.get("organization_id"):
            self.store.release_application_slot(app["organization_id"])
