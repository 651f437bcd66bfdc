"""Roles, permissions and role assignments: the rules of the spec's Role and Role
assignment resources, and the events that tell webhooks and decision caches about them.

Events and their ``user_ids`` (whose authorization answers may have changed; the
decision-service contract, item 5):

- role.created and the permission.granted of its initial permissions -> none;
- role.updated, permission.granted, permission.revoked -> every user holding the role
  when its permission set changed (none for a display change);
- role.deleted -> users whose (unexpired) assignment went with the role;
- role.assigned, role.removed -> the user;
- an update that changes nothing but names the permissions (a repeat) -> the holders, in
  the internal ``grants.invalidated``: the attempt it repeats may have stored the new set
  and failed before its events (docs/architecture.md, "Repeated writes").
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.audit.changes import changes as field_changes
from controlplane.events import EventLog
from controlplane.roles.errors import (
    RoleAssignmentNotFound,
    RoleChangedConcurrently,
    RoleInUse,
    RoleIsSystem,
    RoleNameTaken,
    RoleNotFound,
)
from controlplane.roles.store import RoleStore
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import UserNotFound
from shared.errors import ValidationFailed
from shared.ids import is_uuid, new_id
from shared.rbac import Assignment, Grants, applicable_assignments, effective_permissions
from shared.stamps import stamp_of
from shared.timeutil import Clock, aware, isoformat

_UPDATE_ATTEMPTS = 5


@dataclass(eq=False)
class RoleService:
    store: RoleStore
    users: UserDirectory
    events: EventLog
    clock: Clock

    # --- roles ---------------------------------------------------------------------------

    def resolve(self, app_id: str, ref: str) -> dict:
        """The role named by ``{role}`` in a path: its id, or its name when not a UUID."""
        role = (self.store.role_by_id(app_id, ref.lower()) if is_uuid(ref)
                else self.store.role_by_name(app_id, ref))
        if role is None:
            raise RoleNotFound(ref)
        return role

    def list(self, app_id: str, *, search: str | None, page: int, per_page: int) -> tuple[list[dict], int]:
        """Roles of the application by name; ``search`` matches name or display_name
        (case-insensitive substring)."""
        return self.store.search_roles(app_id, search, (page - 1) * per_page, per_page)

    def create(self, app_id: str, values: dict) -> dict:
        now = self.clock()
        permissions = values["permissions"]
        doc = {
            "_id": new_id(),
            "app_id": app_id,
            "name": values["name"],
            "display_name": values["display_name"],
            "description": values.get("description"),
            "is_system_role": values.get("is_system_role", False),
            "permissions": permissions,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        if self.store.role_by_name(app_id, doc["name"]) is not None:
            raise RoleNameTaken(doc["name"])
        # Permissions first: a crash before the role insert leaves only unused permission names.
        self.store.ensure_permissions(app_id, permissions, now)
        self.store.insert_role(doc)
        self.events.emit(app_id, "role.created", {
            "role_id": doc["_id"], "name": doc["name"], "display_name": doc["display_name"],
            "permissions": permissions, "is_system_role": doc["is_system_role"],
        }, subject={"role_id": doc["_id"]})
        for name in permissions:  # nobody holds the new role yet: no user_ids
            self.events.emit(app_id, "permission.granted",
                             {"role_id": doc["_id"], "role_name": doc["name"], "permission": name},
                             subject={"role_id": doc["_id"]})
        return doc

    def update(self, app_id: str, ref: str, values: dict) -> dict:
        """PUT and PATCH: change display_name, description and/or the whole permission set.

        The name and is_system_role never change (sending the current value is accepted);
        a system role answers 403 ROLE_IS_SYSTEM.

        An update that changes nothing answers 200 without the spec's events; one that
        names the permissions emits ``grants.invalidated`` for the role's holders, which a
        retry needs: the attempt that stored the set may have failed before its events.
        """
        for _ in range(_UPDATE_ATTEMPTS):
            role = self.resolve(app_id, ref)
            if role.get("is_system_role"):
                raise RoleIsSystem(role["_id"], role["name"])
            self._check_immutable(role, values)
            changes = {field: values[field] for field in ("display_name", "description", "permissions")
                       if field in values and values[field] != role.get(field)}
            if not changes:
                if "permissions" in values:
                    self._repeated(app_id, role)
                return role
            now = self.clock()
            old = set(role["permissions"])
            new = set(changes.get("permissions", role["permissions"]))
            if new - old:
                self.store.ensure_permissions(app_id, [p for p in changes["permissions"] if p not in old], now)
            updated = self.store.update_role(app_id, role["_id"], role.get("version", 1),
                                             {**changes, "updated_at": now})
            if updated is not None:
                break
        else:
            raise RoleChangedConcurrently(ref)
        self._emit_update(app_id, role, updated, sorted(changes),
                          granted=[p for p in updated["permissions"] if p not in old],
                          revoked=[p for p in role["permissions"] if p not in new])
        return updated

    def delete(self, app_id: str, ref: str) -> None:
        """Delete a role nobody holds (409 ROLE_IN_USE otherwise; expired assignments and
        deleted users do not count); 403 ROLE_IS_SYSTEM for a system role."""
        role = self.resolve(app_id, ref)
        if role.get("is_system_role"):
            raise RoleIsSystem(role["_id"], role["name"])
        now = self.clock()
        holders = self.store.holders(app_id, role["_id"], now)
        if self.users.count_live(app_id, holders, stop_at=1):
            raise RoleInUse(role["_id"], role["name"])
        if not self.store.delete_role(app_id, role["_id"]):
            raise RoleNotFound(ref)
        # After the role is gone: sweeps expired assignments, those of deleted users, and one
        # a concurrent assign slipped in (that request re-checks the role and undoes itself).
        affected = self.store.purge_role_assignments(app_id, role["_id"], now)
        self.events.emit(app_id, "role.deleted", {"role_id": role["_id"], "name": role["name"]},
                         subject={"role_id": role["_id"]}, user_ids=affected)

    def detail(self, app_id: str, role: dict) -> dict:
        """The single-role response: permissions as {id, name} objects, users_count."""
        ids = self.store.permission_ids(app_id, role["permissions"])
        out = serialize_role(role, permissions="names")
        out["permissions"] = [{"id": ids.get(name), "name": name} for name in role["permissions"]]
        holders = self.store.holders(app_id, role["_id"], self.clock())
        out["users_count"] = self.users.count_live(app_id, holders)
        return out

    def _check_immutable(self, role: dict, values: dict) -> None:
        errors = {}
        if "name" in values and values["name"] != role["name"]:
            errors["name"] = "cannot be changed after creation"
        if "is_system_role" in values and values["is_system_role"] != bool(role.get("is_system_role")):
            errors["is_system_role"] = "cannot be changed after creation"
        if errors:
            raise ValidationFailed(errors)

    def _emit_update(self, app_id, before, role, changed_fields, *, granted, revoked) -> None:
        holders = self.store.holders(app_id, role["_id"], self.clock()) if granted or revoked else []
        subject = {"role_id": role["_id"]}
        for kind, names in (("permission.granted", granted), ("permission.revoked", revoked)):
            for name in names:
                self.events.emit(app_id, kind, {"role_id": role["_id"], "role_name": role["name"], "permission": name},
                                 subject=subject, user_ids=holders)
        diff = field_changes(before, role, changed_fields)  # the audit record's values: none is secret
        self.events.emit(app_id, "role.updated", {
            "role_id": role["_id"], "name": role["name"], "changes": changed_fields,
            "permissions": role["permissions"], "granted": granted, "revoked": revoked,
            "before": diff["before"], "after": diff["after"],
        }, subject=subject, user_ids=holders)

    def _repeated(self, app_id: str, role: dict) -> None:
        """The permission set sent is the stored one: a repeat (a PUT sent again), or the
        retry of an update that stored the set and failed before permission.revoked and
        role.updated, so that no event ever named the holders and their cached grants
        keep the old set for the cache TTL. Which one cannot be told; both drop the
        holders' grants through ``grants.invalidated``, and the webhooks get no second
        role.updated. Only for a request naming the permissions (a display change cannot
        have left a decision stale), and only when someone holds the role."""
        holders = self.store.holders(app_id, role["_id"], self.clock())
        if holders:
            self.events.emit(app_id, "grants.invalidated",
                             {"role_id": role["_id"], "name": role["name"], "repeat_of": "role.updated"},
                             subject={"role_id": role["_id"]}, user_ids=holders,
                             target={"type": "role", "id": role["_id"], "display": role["name"]})

    # --- assignments ---------------------------------------------------------------------

    def require_user(self, app_id: str, user_id: str) -> dict:
        """The user of the application; 404 USER_NOT_FOUND when unknown or deleted."""
        user = self.users.status_and_attributes(app_id, user_id) if is_uuid(user_id) else None
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

    def assign(self, app_id: str, user_id: str, values: dict) -> dict:
        """Assign a role at a scope (None: every scope) until ``expires_at`` (None: forever).
        409 AUTHZ_ROLE_ALREADY_ASSIGNED for the same role and scope (an expired one is replaced)."""
        now = self.clock()
        expires_at = values.get("expires_at")
        if expires_at is not None and expires_at <= now:
            raise ValidationFailed({"expires_at": "must be in the future"})
        self.require_user(app_id, user_id)
        role_id = values["role_id"]
        role = self.store.role_by_id(app_id, role_id)
        if role is None:
            raise RoleNotFound(role_id)
        scope = values.get("scope")
        doc = {
            "_id": new_id(),
            "app_id": app_id,
            "user_id": user_id,
            "role_id": role_id,
            "scope": scope,
            "expires_at": expires_at,
            "assigned_at": now,
        }
        saved = self.store.insert_assignment(doc, now)
        if self.store.role_by_id(app_id, role_id) is None:
            # The role was deleted while we assigned it: undo, as if the delete came first.
            self.store.delete_assignment_doc(app_id, saved["_id"])
            raise RoleNotFound(role_id)
        self.events.emit(app_id, "role.assigned", {
            "user_id": user_id, "role_id": role_id, "role_name": role["name"], "scope": scope,
            "expires_at": isoformat(expires_at),
        }, subject={"user_id": user_id, "role_id": role_id}, user_ids=[user_id])
        return serialize_assignment(saved)

    def unassign(self, app_id: str, user_id: str, role_ref: str, scope: str | None) -> None:
        """Remove the assignment of exactly this scope (None: the unscoped one)."""
        self.require_user(app_id, user_id)
        if is_uuid(role_ref):
            role_id = role_ref.lower()
        else:
            role = self.store.role_by_name(app_id, role_ref)
            if role is None:
                raise RoleAssignmentNotFound(user_id, role_ref, scope)
            role_id = role["_id"]
        removed = self.store.remove_assignment(app_id, user_id, role_id, scope, self.clock())
        if removed is None:
            raise RoleAssignmentNotFound(user_id, role_ref, scope)
        role = self.store.role_by_id(app_id, role_id)
        self.events.emit(app_id, "role.removed", {
            "user_id": user_id, "role_id": role_id, "role_name": role["name"] if role else None, "scope": scope,
        }, subject={"user_id": user_id, "role_id": role_id}, user_ids=[user_id])

    def user_roles(self, app_id: str, user_id: str, *, scope: str | None = None, any_scope: bool = True) -> list[dict]:
        """The user's unexpired assignments (all scopes, or exactly ``scope``) as list items
        {role_id, name, display_name, scope, expires_at, assigned_at}."""
        self.require_user(app_id, user_id)
        docs = self.store.assignments_of_user(app_id, user_id, self.clock(), scope=scope, any_scope=any_scope)
        roles = self.store.roles_by_ids(app_id, {d["role_id"] for d in docs})
        items = [serialize_assignment_item(d, roles[d["role_id"]]) for d in docs if d["role_id"] in roles]
        return sorted(items, key=lambda i: (i["assigned_at"], i["name"], i["scope"] or ""))

    def user_permissions(self, app_id: str, user_id: str, scope: str | None) -> dict:
        """Effective permissions at ``scope`` (unscoped assignments included), as checks see
        them: none while the user is suspended.  Permissions and roles sorted by name."""
        self.require_user(app_id, user_id)
        grants = self.grants(app_id, user_id)
        now = self.clock()
        roles, seen = [], set()
        for assignment in applicable_assignments(grants, scope, now):
            if assignment.role_id not in seen:
                seen.add(assignment.role_id)
                roles.append({"id": assignment.role_id, "name": assignment.role_name})
        return {
            "user_id": user_id,
            "scope": scope,
            "permissions": sorted(effective_permissions(grants, scope, now)),
            "roles": sorted(roles, key=lambda r: r["name"]),
        }

    # --- grants (the engine's input) -----------------------------------------------------

    def grants(self, app_id: str, user_id: str) -> Grants:
        """Everything a decision needs about the user, read at change-log seq S.

        S is the log head read BEFORE the data: every write emits after it changed the data,
        so data read now is at least as fresh as S (the no-stale-re-fill rule relies on it).
        Expired assignments, and assignments of roles that no longer exist, are left out.
        """
        seq = self.events.head()
        user = self.users.status_and_attributes(app_id, user_id) if is_uuid(user_id) else None
        if user is None:
            return Grants.unknown(user_id, seq)
        docs = self.store.assignments_of_user(app_id, user_id, self.clock())
        roles = self.store.roles_by_ids(app_id, {d["role_id"] for d in docs}) if docs else {}
        assignments = [
            Assignment(role_id=d["role_id"], role_name=roles[d["role_id"]]["name"],
                       permissions=roles[d["role_id"]]["permissions"], scope=d.get("scope"),
                       expires_at=aware(d.get("expires_at")))
            for d in docs if d["role_id"] in roles
        ]
        attributes = user.get("attributes")
        return Grants(user_id=user_id, status=user.get("status", "active"), assignments=assignments,
                      attributes=attributes if isinstance(attributes, dict) else {}, seq=seq,
                      token_stamp=stamp_of(user))


# --- response shapes -----------------------------------------------------------------------


def serialize_role(role: dict, *, permissions: str | None = None, updated_at: bool = True) -> dict:
    """The Role resource. ``permissions``: None (left out) or "names"."""
    out = {
        "id": role["_id"],
        "name": role["name"],
        "display_name": role["display_name"],
        "description": role.get("description"),
        "is_system_role": bool(role.get("is_system_role")),
    }
    if permissions == "names":
        out["permissions"] = list(role["permissions"])
    out["permissions_count"] = len(role["permissions"])
    out["created_at"] = isoformat(role["created_at"])
    if updated_at:
        out["updated_at"] = isoformat(role["updated_at"])
    return out


def serialize_assignment(doc: dict) -> dict:
    """The Role assignment resource (create response)."""
    return {
        "user_id": doc["user_id"],
        "role_id": doc["role_id"],
        "scope": doc.get("scope"),
        "expires_at": isoformat(doc.get("expires_at")),
        "assigned_at": isoformat(doc["assigned_at"]),
    }


def serialize_assignment_item(doc: dict, role: dict) -> dict:
    """An item of a user's role list."""
    return {
        "role_id": doc["role_id"],
        "name": role["name"],
        "display_name": role["display_name"],
        "scope": doc.get("scope"),
        "expires_at": isoformat(doc.get("expires_at")),
        "assigned_at": isoformat(doc["assigned_at"]),
    }
