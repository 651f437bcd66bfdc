"""Errors of roles and role assignments (spec "Roles", "Errors")."""
from shared.errors import Conflict, Forbidden, NotFound


class RoleNotFound(NotFound, code="RESOURCE_NOT_FOUND", message="Role not found.", detail_names=("role",)):
    """No role with this id (or name) in the application."""


class RoleAssignmentNotFound(NotFound, code="AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND", message="No matching role assignment.",
                             detail_names=("user_id", "role_id", "scope")):
    """The user holds no assignment of this role at this scope."""


class RoleIsSystem(Forbidden, code="ROLE_IS_SYSTEM", message="System roles cannot be modified or deleted.",
                   detail_names=("role_id", "name")):
    """System roles cannot be modified or deleted."""


class RoleNameTaken(Conflict, code="RESOURCE_ALREADY_EXISTS",
                    message="A role named {name!r} already exists in this application.", detail_names=("name",)):
    """The role name is already used in the application."""


class RoleInUse(Conflict, code="ROLE_IN_USE",
                message="The role is still assigned to users; remove the assignments first.",
                detail_names=("role_id", "name")):
    """The role is still assigned to users."""


class RoleAlreadyAssigned(Conflict, code="AUTHZ_ROLE_ALREADY_ASSIGNED",
                          message="The user already has this role at this scope.",
                          detail_names=("user_id", "role_id", "scope")):
    """The user already holds this role at this scope."""


class RoleChangedConcurrently(Conflict, message="The role was changed concurrently; try again.",
                              detail_names=("role",)):
    """The role changed between read and write too often; the caller may retry."""
