"""Routes of the roles area: roles, permissions (created on first use) and role assignments.

Puts ``ctx.roles`` (``RoleService``) on the context: the authz area builds its checks on
``ctx.roles.grants``, and other areas may list a user's roles with ``ctx.roles.user_roles``.
"""
from controlplane.roles import resources
from controlplane.roles.service import RoleService
from controlplane.roles.store import INDEXES  # noqa: F401  (declared by create_app)

V1 = "/api/v1/applications/{applicationId}"


def register(ctx, routes):
    ctx.roles = RoleService(ctx.store, ctx.events, ctx.clock)
    routes.add(f"{V1}/roles", resources.RoleCollection(ctx), "roles")
    routes.add(f"{V1}/roles/{{role}}", resources.RoleItem(ctx), "roles")
    routes.add(f"{V1}/users/{{userId}}/roles", resources.UserRoleCollection(ctx), "roles")
    routes.add(f"{V1}/users/{{userId}}/roles/{{roleId}}", resources.UserRoleItem(ctx), "roles")
    routes.add(f"{V1}/users/{{userId}}/permissions", resources.UserPermissions(ctx), "roles")
