"""Who may do what with an application in the dashboard.

An application belongs to an organization; an account's role in that organization
(owner, admin, member, viewer) is its role on the application.  Owners and admins may
write; members and viewers only read.  An application of an organization the account
is not in is reported as not found (403 would confirm it exists).  An account that has
not confirmed its email address writes nothing at all (``require_verified``).  A member
of an organization that requires a second factor (``require_mfa``) reaches nothing of
it, nor of its applications, until the account has one (``require_second_factor``);
its own account routes (two-step verification among them) and signing out stay open.

Dashboard resources on ``{applicationId}`` paths gate their methods with the
``member_of_application`` hook rather than checking in each responder.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from controlplane.applications.service import ApplicationService
from controlplane.dashboard.errors import (
    ApplicationNotAccessible,
    DashboardEmailUnverified,
    DashboardMfaRequired,
    OrganizationNotFound,
    RoleCannotWrite,
)
from controlplane.dashboard.store import DashboardStore
from shared.ids import is_uuid

ORG_ROLES = ("owner", "admin", "member", "viewer")
WRITE_ROLES = ("owner", "admin")


class SecondFactors(Protocol):
    """Whether a dashboard account has a second factor, TOTP or a passkey
    (``dashboard.mfa.DashboardMfa``)."""

    def has_second_factor(self, account_id: str) -> bool: ...


@dataclass(eq=False)
class DashboardAccess:
    store: DashboardStore
    applications: ApplicationService
    second_factors: SecondFactors

    def require_verified(self, account_id: str) -> None:
        """403 DASHBOARD_EMAIL_UNVERIFIED unless the account confirmed its address.  A
        claim by the mailbox owner removes what an unconfirmed holder granted
        (``AccountService``), so nothing it could build may outlive the claim: it
        builds nothing."""
        account = self.store.account(account_id)
        if account is not None and not account.get("email_verified"):
            raise DashboardEmailUnverified()

    def require_second_factor(self, account_id: str, organization_ids) -> None:
        """403 DASHBOARD_MFA_REQUIRED when one of ``organization_ids`` requires a second
        factor of its members and the account has none.  API keys never come here: they
        are no person and act on one application only."""
        required = self.store.organizations_requiring_mfa(organization_ids)
        if required and not self.second_factors.has_second_factor(account_id):
            raise DashboardMfaRequired(required[0])

    def must_enrol(self, account_id: str) -> bool:
        """Whether one of the account's organizations requires a second factor it does
        not have yet (the console sends it to enrol before anything else)."""
        return bool(self.store.organizations_requiring_mfa(self.memberships(account_id))) and \
            not self.second_factors.has_second_factor(account_id)

    def role_in(self, organization_id: str, account_id: str) -> str | None:
        """The account's role in the organization, None for a non-member; 403
        DASHBOARD_MFA_REQUIRED for a member the organization requires a second factor of
        (every route acting on an organization or its applications asks this first)."""
        member = self.store.member(organization_id, account_id)
        if member is None:
            return None
        self.require_second_factor(account_id, [organization_id])
        return member["role"]

    def require_admin(self, organization_id: str, account_id: str, action: str) -> str:
        """``organization_id`` when ``account_id`` is one of its owners or admins; 404 for
        a non-member (403 would confirm the organization exists), 403 for members and
        viewers, who may not ``action``."""
        role = self.role_in(organization_id, account_id) if is_uuid(organization_id) else None
        if role is None:
            raise OrganizationNotFound(organization_id)
        if role not in WRITE_ROLES:
            raise RoleCannotWrite(role, action, WRITE_ROLES)
        return organization_id

    def memberships(self, account_id: str) -> dict[str, str]:
        """organization_id -> role for every organization the account belongs to."""
        return {d["organization_id"]: d["role"] for d in self.store.memberships(account_id)}

    def application(self, account_id: str, app_id: str, *, write: bool = False) -> tuple[dict, str]:
        """The application and the caller's role on it; 404 NOT_FOUND when the caller
        has no access (also for ids that are not UUIDs), 403 DASHBOARD_MFA_REQUIRED
        (``role_in``), 403 FORBIDDEN when a member or
        viewer tries to write, 403 DASHBOARD_EMAIL_UNVERIFIED when an unconfirmed account
        does."""
        app = self.applications.get(app_id) if is_uuid(app_id) else None
        role = self.role_in(app["organization_id"], account_id) if app and app.get("organization_id") else None
        if app is None or role is None:
            raise ApplicationNotAccessible(app_id)
        if write:
            if role not in WRITE_ROLES:
                raise RoleCannotWrite(role, "change this application", WRITE_ROLES)
            self.require_verified(account_id)
        return app, role


def member_of_application(*, write: bool = False):
    """A ``@falcon.before`` hook for dashboard routes with ``{applicationId}``: the
    signed-in account must be a member of the application's organization (404
    NOT_FOUND otherwise) and, with ``write``, an owner or admin (403 FORBIDDEN) whose
    email address is confirmed (403 DASHBOARD_EMAIL_UNVERIFIED).
    The responder finds the application in ``req.context.application`` and the
    caller's role in ``req.context.org_role``.

    The hook reads the resource's ``dashboard_access`` attribute (a ``DashboardAccess``
    given to its ``__init__``), so any area's dashboard resource can use it::

        class AdminUsers(Resource):
            access = {"GET": DASHBOARD}

            def __init__(self, users, dashboard_access):
                self.users, self.dashboard_access = users, dashboard_access

            @falcon.before(member_of_application())
            def on_get(self, req, resp, applicationId): ...
    """

    def hook(req, _resp, resource, params):
        app, role = resource.dashboard_access.application(
            req.context.principal.account_id, params["applicationId"], write=write)
        req.context.application = app
        req.context.org_role = role

    return hook
