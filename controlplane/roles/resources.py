"""HTTP resources of roles (V1/roles) and role assignments (V1/users/{userId}/roles,
V1/users/{userId}/permissions).  Reads need roles:read, writes roles:manage, for end-user
tokens (their current roles) and API keys (their permissions) alike."""
from __future__ import annotations

from controlplane.auth import permission
from controlplane.openapi import op
from controlplane.resource import ServiceResource, query_param
from controlplane.roles import schemas
from controlplane.roles.errors import (
    RoleAlreadyAssigned,
    RoleAssignmentNotFound,
    RoleChangedConcurrently,
    RoleInUse,
    RoleIsSystem,
    RoleNameTaken,
    RoleNotFound,
)
from controlplane.roles.service import RoleService, serialize_role
from controlplane.users.errors import UserNotFound
from shared.errors import PermissionMissing, ValidationFailed
from shared.http import PAGE_QUERY, bool_param, page_params, paginated, read_json, respond

READ = permission("roles:read")
MANAGE = permission("roles:manage")

_ROLE_ERRORS = [PermissionMissing, RoleNotFound]
_USER_ERRORS = [ValidationFailed, PermissionMissing, UserNotFound]
_SCOPE_QUERY = ({"type": "string"}, "exactly this scope")


def scope_param(req) -> str | None:
    """``?scope=``: absent or empty means no scope."""
    return query_param(req, "scope", schemas.Scope())


class RoleCollection(ServiceResource[RoleService]):
    access = {"GET": READ, "POST": MANAGE}
    docs = {
        "GET": op(query={
            "search": ({"type": "string", "maxLength": schemas.SEARCH_MAX}, "substring of name or display_name"),
            "include_permissions": ({"type": "boolean"}, "add each role's permission names"),
            **PAGE_QUERY,
        }, response=schemas.ROLE_PAGE, wrapped=False, errors=[ValidationFailed, PermissionMissing]),
        "POST": op(body=schemas.CREATE_ROLE, ok=201, response=schemas.ROLE_WITH_NAMES,
                   errors=[ValidationFailed, PermissionMissing, RoleNameTaken]),
    }

    def on_get(self, req, resp, applicationId):
        """List roles"""
        page, per_page = page_params(req)
        include = bool_param(req, "include_permissions")
        search = (req.get_param("search") or "").strip() or None
        if search is not None and len(search) > schemas.SEARCH_MAX:
            raise ValidationFailed({"search": f"must be at most {schemas.SEARCH_MAX} characters"})
        roles, total = self.service.list(applicationId, search=search, page=page, per_page=per_page)
        items = [serialize_role(r, permissions="names" if include else None, updated_at=False) for r in roles]
        resp.media = paginated(items, total, page, per_page)

    def on_post(self, req, resp, applicationId):
        """Create a role

        Permissions are created on first use."""
        values = schemas.CREATE_ROLE.validate(read_json(req))
        role = self.service.create(applicationId, values)
        respond(resp, serialize_role(role, permissions="names"), status=201)


class RoleItem(ServiceResource[RoleService]):
    access = {"GET": READ, "PUT": MANAGE, "PATCH": MANAGE, "DELETE": MANAGE}
    _update_doc = op("Update a role", body=schemas.UPDATE_ROLE, response=schemas.ROLE_WITH_NAMES,
                     description="{role} is the role id, or its name. The name cannot change.",
                     errors=[ValidationFailed, RoleIsSystem, *_ROLE_ERRORS, RoleChangedConcurrently])
    docs = {
        "GET": op(response=schemas.ROLE_DETAIL, errors=_ROLE_ERRORS),
        "PUT": _update_doc,
        "PATCH": _update_doc,
        "DELETE": op(ok=204, errors=[RoleIsSystem, *_ROLE_ERRORS, RoleInUse]),
    }

    def on_get(self, req, resp, applicationId, role):
        """Get a role with its permissions and users_count

        {role} is the role id, or its name."""
        respond(resp, self.service.detail(applicationId, self.service.resolve(applicationId, role)))

    def on_put(self, req, resp, applicationId, role):
        values = schemas.UPDATE_ROLE.validate(read_json(req), partial=True)
        updated = self.service.update(applicationId, role, values)
        respond(resp, serialize_role(updated, permissions="names"))

    on_patch = on_put

    def on_delete(self, req, resp, applicationId, role):
        """Delete a role nobody holds

        {role} is the role id, or its name."""
        self.service.delete(applicationId, role)
        resp.status = 204


class UserRoleCollection(ServiceResource[RoleService]):
    access = {"GET": READ, "POST": MANAGE}
    docs = {
        "GET": op(query={"scope": _SCOPE_QUERY}, response=schemas.ASSIGNMENT_LIST, wrapped=False, errors=_USER_ERRORS),
        "POST": op(body=schemas.ASSIGN_ROLE, ok=201, response=schemas.ASSIGNMENT,
                   errors=[*_USER_ERRORS, RoleNotFound, RoleAlreadyAssigned]),
    }

    def on_get(self, req, resp, applicationId, userId):
        """List a user's role assignments

        Without scope: every unexpired assignment; with scope: those of exactly that scope."""
        scope = scope_param(req)
        items = self.service.user_roles(applicationId, userId, scope=scope, any_scope=scope is None)
        resp.media = {"data": items, "user_id": userId, "scope": scope}

    def on_post(self, req, resp, applicationId, userId):
        """Assign a role to a user"""
        values = schemas.ASSIGN_ROLE.validate(read_json(req))
        respond(resp, self.service.assign(applicationId, userId, values), status=201)


class UserRoleItem(ServiceResource[RoleService]):
    access = {"DELETE": MANAGE}
    docs = {
        "DELETE": op(ok=204, query={
            "scope": ({"type": "string"}, "required when the role was assigned with a scope")},
            errors=[*_USER_ERRORS, RoleAssignmentNotFound]),
    }

    def on_delete(self, req, resp, applicationId, userId, roleId):
        """Remove a role assignment

        {roleId} is the role id (or its name)."""
        self.service.unassign(applicationId, userId, roleId, scope_param(req))
        resp.status = 204


class UserPermissions(ServiceResource[RoleService]):
    access = {"GET": READ}
    docs = {
        "GET": op(query={"scope": ({"type": "string"},
                  "effective at this scope (unscoped assignments included)")},
                  response=schemas.USER_PERMISSIONS, errors=_USER_ERRORS),
    }

    def on_get(self, req, resp, applicationId, userId):
        """A user's effective permissions"""
        respond(resp, self.service.user_permissions(applicationId, userId, scope_param(req)))
