"""Organizations of the dashboard and their members (owner, admin, member, viewer:
``access.py``), and the claim's undoing of what an unconfirmed account granted.

docs/dashboard.md ("Organizations and roles").  Creating an organization, changing its
settings (``require_mfa`` among them) and changing its members are audit records of the
organization (docs/audit.md).
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from controlplane.apikeys.service import ApiKeyService
from controlplane.applications.service import ApplicationService
from controlplane.audit.changes import changes
from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.dashboard.access import WRITE_ROLES, DashboardAccess
from controlplane.dashboard.errors import (
    AccountEmailUnverified,
    AccountNotFound,
    LastOwner,
    MemberNotFound,
    MembershipChanged,
    OrganizationNotFound,
    OwnerMfaMissing,
    OwnerRequired,
    RoleCannotWrite,
)
from controlplane.dashboard.store import DashboardStore
from controlplane.ratelimit import RateLimiter
from shared.config import Rate
from shared.ids import is_uuid, new_id
from shared.timeutil import Clock, isoformat

OWNER = "owner"
# The settings an owner may change (PATCH); an absent require_mfa is false.
UPDATABLE = ("name", "require_mfa")


@dataclass(eq=False)
class OrganizationService:
    """``member_add_rate`` (IAMGATE_RATE_LIMIT_MEMBER_ADD) holds per client IP and per
    calling account."""

    store: DashboardStore
    access: DashboardAccess
    applications: ApplicationService
    api_keys: ApiKeyService
    rate_limiter: RateLimiter
    clock: Clock
    audit: AuditLog
    _: KW_ONLY
    member_add_rate: Rate

    def organizations(self, account_id: str) -> list[tuple[dict, str]]:
        """Every organization the account belongs to, with its role there."""
        roles = self.access.memberships(account_id)
        return [(org, roles[org["_id"]]) for org in self.store.organizations(roles)]

    def create_organization(self, account_id: str, name: str) -> tuple[dict, str]:
        """403 DASHBOARD_EMAIL_UNVERIFIED for an account that has not confirmed its address."""
        self.access.require_verified(account_id)
        return self.create_owned(account_id, name), OWNER

    def create_owned(self, account_id: str, name: str) -> dict:
        """A new organization with ``account_id`` its one owner (the registration's
        personal organization too); nothing is left behind when the membership fails."""
        now = self.clock()
        org = {"_id": new_id(), "name": name, "created_by": account_id, "created_at": now,
               "applications_count": 0, "owners_count": 1}
        self.store.insert_organization(org)
        try:
            self.store.insert_member({"organization_id": org["_id"], "account_id": account_id,
                                      "role": OWNER, "created_at": now, "added_by": account_id})
        except Exception:
            self.store.delete_organization(org["_id"])
            raise
        # The registration creates one too, before anyone is signed in: the account is named.
        self.audit.record("organization.created", result=success(), actor=actor("dashboard_account", account_id),
                          target=actor("organization", org["_id"], name), organization_id=org["_id"],
                          data={"name": name})
        return org

    def update_organization(self, account_id: str, organization_id: str, values: dict) -> tuple[dict, str]:
        """PATCH an organization's ``name`` and ``require_mfa``: owners only (403
        FORBIDDEN for the other roles, 404 for a non-member), with a confirmed address.
        An owner turns ``require_mfa`` on only with a second factor of their own (409
        ORGANIZATION_OWNER_MFA_REQUIRED), so the switch never shuts out the one who
        flips it; once it is on, no member without one reaches the organization
        (``DashboardAccess.require_second_factor``), its owners included."""
        role = self._role(account_id, organization_id)
        if role != OWNER:
            raise OwnerRequired(role, message="Only an owner can change the organization's settings.")
        self.access.require_verified(account_id)
        if values.get("require_mfa") and not self.access.second_factors.has_second_factor(account_id):
            raise OwnerMfaMissing()
        if not values:
            return self.store.organization(organization_id), role
        before = self.store.update_organization(organization_id, {**values, "updated_at": self.clock()})
        if before is None:
            raise OrganizationNotFound(organization_id)
        after = {**before, **values}
        data = changes(_settings(before), _settings(after), UPDATABLE)
        if data["fields"]:
            self.audit.record("organization.updated", result=success(), organization_id=organization_id, data=data,
                              target=actor("organization", organization_id, after["name"]))
        return after, role

    def members(self, account_id: str, organization_id: str) -> list[dict]:
        """The organization's members; any member may read them."""
        self._role(account_id, organization_id)
        members = self.store.members(organization_id)
        accounts = self.store.accounts(m["account_id"] for m in members)
        return [serialize_member(m, accounts[m["account_id"]]) for m in members if m["account_id"] in accounts]

    def add_member(self, account_id: str, organization_id: str, email: str, role: str, *, ip: str) -> dict:
        """Add an existing dashboard account: owners and admins only (403 FORBIDDEN),
        only owners may make owners; 404 USER_NOT_FOUND without such an account,
        409 ACCOUNT_EMAIL_UNVERIFIED when it never confirmed its address (anyone can
        register any address), 409 RESOURCE_ALREADY_EXISTS when it is a member already.
        Counted first, per client IP and per calling account
        (IAMGATE_RATE_LIMIT_MEMBER_ADD, 429 RATE_LIMIT_EXCEEDED), so the answers cannot
        be used to probe which addresses have accounts at speed."""
        self.rate_limiter.hit(f"dashboard-member-add:ip:{ip}", self.member_add_rate)
        self.rate_limiter.hit(f"dashboard-member-add:account:{account_id}", self.member_add_rate)
        caller_role = self._role(account_id, organization_id, write=True)
        if role == OWNER and caller_role != OWNER:
            raise OwnerRequired(caller_role, message="Only an owner can add another owner.")
        target = self.store.account_by_email(email)
        if target is None:
            raise AccountNotFound(email)
        if not target.get("email_verified"):
            raise AccountEmailUnverified(email)
        member = {"organization_id": organization_id, "account_id": target["_id"], "role": role,
                  "created_at": self.clock(), "added_by": account_id}
        self.store.insert_member(member)
        if role == OWNER:
            self.store.add_owner_slot(organization_id)
        self._record("organization.member_added", organization_id, target, {"role": role})
        return serialize_member(member, target)

    def change_member_role(self, account_id: str, organization_id: str, member_id: str, role: str) -> dict:
        """Owners and admins change roles; only owners touch owners; the last owner
        cannot be demoted (409 ORGANIZATION_LAST_OWNER)."""
        caller_role = self._role(account_id, organization_id, write=True)
        member = self._member(organization_id, member_id)
        current = member["role"]
        if role == current:
            return serialize_member(member, self.store.account(member_id) or {})
        if OWNER in (role, current) and caller_role != OWNER:
            raise OwnerRequired(caller_role, message="Only an owner can grant or take away the owner role.")
        if current == OWNER and not self.store.take_owner_slot(organization_id):
            raise LastOwner()
        updated = self.store.set_member_role(organization_id, member_id, expected=current, role=role)
        if updated is None:
            if current == OWNER:
                self.store.add_owner_slot(organization_id)
            raise MembershipChanged()
        if role == OWNER:
            self.store.add_owner_slot(organization_id)
        account = self.store.account(member_id) or {"_id": member_id}
        self._record("organization.member_role_changed", organization_id, account,
                     changes({"role": current}, {"role": role}, ("role",)))
        return serialize_member(updated, account)

    def remove_member(self, account_id: str, organization_id: str, member_id: str) -> None:
        """Owners and admins remove members (only owners remove owners); anyone may
        leave; the last owner cannot (409 ORGANIZATION_LAST_OWNER)."""
        leaving = member_id == account_id
        # Leaving needs no second factor of an organization requiring one: it only takes
        # access away, and a member who will not enrol must still be able to go.
        caller_role = self._role(account_id, organization_id, write=not leaving, second_factor=not leaving)
        member = self._member(organization_id, member_id)
        if member["role"] == OWNER and caller_role != OWNER:
            raise OwnerRequired(caller_role, message="Only an owner can remove an owner.")
        if member["role"] == OWNER and not self.store.take_owner_slot(organization_id):
            raise LastOwner()
        if not self.store.delete_member(organization_id, member_id, expected=member["role"]):
            if member["role"] == OWNER:
                self.store.add_owner_slot(organization_id)
            raise MembershipChanged()
        account = self.store.account(member_id) or {"_id": member_id}
        self._record("organization.member_removed", organization_id, account, {"role": member["role"], "left": leaving})

    def _record(self, action: str, organization_id: str, account: dict, data: dict) -> None:
        """A change of a member (``account``) of the organization, by the request's account."""
        self.audit.record(action, result=success(), organization_id=organization_id, data=data,
                          target=actor("dashboard_account", account["_id"], account.get("email")))

    def _role(self, account_id: str, organization_id: str, *, write: bool = False, second_factor: bool = True) -> str:
        """The caller's role (404 for a non-member), its second factor required by the
        organization (``DashboardAccess.role_in``) unless ``second_factor`` is False."""
        role = None
        if is_uuid(organization_id):
            role = self.access.role_in(organization_id, account_id) if second_factor else \
                (self.store.member(organization_id, account_id) or {}).get("role")
        if role is None:  # 404, not 403: do not confirm that someone else's organization exists
            raise OrganizationNotFound(organization_id)
        if write:
            if role not in WRITE_ROLES:
                raise RoleCannotWrite(role, "manage members", WRITE_ROLES)
            self.access.require_verified(account_id)
        return role

    def _member(self, organization_id: str, member_id: str) -> dict:
        member = self.store.member(organization_id, member_id) if is_uuid(member_id) else None
        if member is None:
            raise MemberNotFound(member_id)
        return member

    def undo_grants(self, account_id: str) -> None:
        """Undo what an unconfirmed account granted: every API key it minted, every
        membership it added and, within each of those organizations, whatever the
        members it added granted in turn (their keys and the members they added),
        however deep: the claim of an address (``AccountService``).  An unconfirmed
        account can no longer grant anything (``DashboardAccess.require_verified``):
        these are grants made before that rule, or past it.  The account's own
        memberships stay: they are the mailbox owner's now.

        Keys go before memberships, and memberships deepest first, so a claim
        interrupted anywhere leaves every remaining grant reachable for the next one;
        what a member did while it was being removed is caught by the next round."""
        self.api_keys.revoke_created_by([account_id])
        grants = self._grants(account_id, [(None, account_id)])
        while grants:
            self._revoke_keys(grants)
            for organization_id, member_id in reversed(grants):
                removed = self.store.remove_member(organization_id, member_id)
                if removed is not None and removed["role"] == OWNER:
                    self.store.drop_owner_slot(organization_id)
            self._revoke_keys(grants)
            grants = self._grants(account_id, grants)
        # A planted owner may have demoted or removed the holder in an organization it
        # created: the mailbox owner gets it back rather than no one.
        for org in self.store.ownerless_organizations(created_by=account_id):
            self.store.restore_owner(org["_id"], account_id, self.clock())

    def _grants(self, account_id: str, granters: list[tuple[str | None, str]]) -> list[tuple[str, str]]:
        """(organization, member) pairs added by ``granters`` (each an (organization or
        None for any, account) pair) and, in the same organization, by those members
        in turn; parents before children.  ``account_id`` itself is never one."""
        found, queue = [], list(granters)
        while queue:
            organization_id, granter = queue.pop(0)
            for member in self.store.members_added_by(granter, organization_id):
                pair = (member["organization_id"], member["account_id"])
                if member["account_id"] != account_id and pair not in found:
                    found.append(pair)
                    queue.append(pair)
        return found

    def _revoke_keys(self, grants: list[tuple[str, str]]) -> None:
        """Revoke the keys each member minted on its organization's applications."""
        by_organization: dict[str, list[str]] = {}
        for organization_id, member_id in grants:
            by_organization.setdefault(organization_id, []).append(member_id)
        for organization_id, members in by_organization.items():
            apps = [app["_id"] for app in self.applications.list_for_organizations([organization_id])]
            self.api_keys.revoke_created_by(members, apps)


def _settings(org: dict) -> dict:
    return {"name": org["name"], "require_mfa": bool(org.get("require_mfa"))}


def serialize_organization(org: dict, role: str) -> dict:
    return {"id": org["_id"], "name": org["name"], "role": role, "require_mfa": bool(org.get("require_mfa")),
            "created_at": isoformat(org["created_at"])}


def serialize_member(member: dict, account: dict) -> dict:
    return {
        "organization_id": member["organization_id"],
        "account_id": member["account_id"],
        "email": account.get("email"),
        "name": account.get("name"),
        "role": member["role"],
        "created_at": isoformat(member["created_at"]),
    }

