"""Errors of roles and role assignments (spec "Roles", "Errors")."""
from shared.errors import Conflict, Forbidden, NotFound


class RoleNotFound(NotFound):
    """No role with this id (or name) in the application."""

    code, message = "RESOURCE_NOT_FOUND", "Role not found."

    def __init__(self, ref: str):
        super().__init__(details={"role": ref})


class RoleAssignmentNotFound(NotFound):
    """The user holds no assignment of this role at this scope."""

    code, message = "AUTHZ_ROLE_ASSIGNMENT_NOT_FOUND", "No matching role assignment."

    def __init__(self, user_id: str, role_ref: str, scope: str | None):
        super().__init__(details={"user_id": user_id, "role_id": role_ref, "scope": scope})


class RoleIsSystem(Forbidden):
    """System roles cannot be modified or deleted."""

    code, message = "ROLE_IS_SYSTEM", "System roles cannot be modified or deleted."

    def __init__(self, role: dict):
        super().__init__(details={"role_id": role["_id"], "name": role["name"]})


class RoleNameTaken(Conflict):
    """The role name is already used in the application."""

    code = "RESOURCE_ALREADY_EXISTS"

    def __init__(self, name: str):
        super().__init__(f"A role named {name!r} already exists in this application.", details={"name": name})


class RoleInUse(Conflict):
    """The role is still assigned to users."""

    code, message = "ROLE_IN_USE", "The role is still assigned to users; remove the assignments first."

    def __init__(self, role: dict):
        super().__init__(details={"role_id": role["_id"], "name": role["name"]})


class RoleAlreadyAssigned(Conflict):
    """The user already holds this role at this scope."""

    code, message = "AUTHZ_ROLE_ALREADY_ASSIGNED", "The user already has this role at this scope."

    def __init__(self, user_id: str, role_id: str, scope: str | None):
        super().__init__(details={"user_id": user_id, "role_id": role_id, "scope": scope})


class RoleChangedConcurrently(Conflict):
    """The role changed between read and write too often; the caller may retry."""

    message = "The role was changed concurrently; try again."

    def __init__(self, ref: str):
        super().__init__(details={"role": ref})
