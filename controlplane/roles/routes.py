"""Routes of the roles area: roles, permissions (created on first use) and role assignments."""
from controlplane.roles import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "roles"


def add_routes(routes, services):
    roles = services.roles
    routes.add(f"{V1}/roles", resources.RoleCollection(roles), TAG)
    routes.add(f"{V1}/roles/{{role}}", resources.RoleItem(roles), TAG)
    routes.add(f"{V1}/users/{{userId}}/roles", resources.UserRoleCollection(roles), TAG)
    routes.add(f"{V1}/users/{{userId}}/roles/{{roleId}}", resources.UserRoleItem(roles), TAG)
    routes.add(f"{V1}/users/{{userId}}/permissions", resources.UserPermissions(roles), TAG)
