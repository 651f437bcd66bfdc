"""Errors of roles and role assignments (spec "Roles", "Errors")."""
from shared.errors import Conflict, Forbidden, NotFound


class RoleNotFound(NotFound):
    """No role with this id (or name) in the application."""

    code, message = "RESOURCE_NOT_FOUND", "Role not found."
    detail_names = ("role",)


class RoleAssignmentNotFound(NotFound):
    """The user holds no assignment of this role at this scope."""

    code, message = "AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND", "No matching role assignment."
    detail_names = ("user_id", "role_id", "scope")


class RoleIsSystem(Forbidden):
    """System roles cannot be modified or deleted."""

    code, message = "ROLE_IS_SYSTEM", "System roles cannot be modified or deleted."
    detail_names = ("role_id", "name")


class RoleNameTaken(Conflict):
    """The role name is already used in the application."""

    code, message = "RESOURCE_ALREADY_EXISTS", "A role named {name!r} already exists in this application."
    detail_names = ("name",)


class RoleInUse(Conflict):
    """The role is still assigned to users."""

    code, message = "ROLE_IN_USE", "The role is still assigned to users; remove the assignments first."
    detail_names = ("role_id", "name")


class RoleAlreadyAssigned(Conflict):
    """The user already holds this role at this scope."""

    code, message = "AUTHZ_ROLE_ALREADY_ASSIGNED", "The user already has this role at this scope."
    detail_names = ("user_id", "role_id", "scope")


class RoleChangedConcurrently(Conflict):
    """The role changed between read and write too often; the caller may retry."""

    message = "The role was changed concurrently; try again."
    detail_names = ("role",)
