"""Routes of the roles area: roles, permissions (created on first use) and role assignments."""
from controlplane.roles import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "roles"


def add_routes(routes, services):
    routes.add_each(TAG, services.roles, {
        f"{V1}/roles": resources.RoleCollection,
        f"{V1}/roles/{{role}}": resources.RoleItem,
        f"{V1}/users/{{userId}}/roles": resources.UserRoleCollection,
        f"{V1}/users/{{userId}}/roles/{{roleId}}": resources.UserRoleItem,
        f"{V1}/users/{{userId}}/permissions": resources.UserPermissions,
    })
