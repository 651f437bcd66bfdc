"""The console's principal: a dashboard account acting on one application of its
organization, with V1 permissions derived from its organization role.

- ``owner`` and ``admin`` hold every permission of the application (``V1_PERMISSIONS``,
  what an API key may be given);
- ``member`` and ``viewer`` hold the ``:read`` ones only.

A console screen standing for a V1 operation is gated by that operation's own ``Access``
(the ``access`` table of its V1 resource, e.g. ``roles_api.RoleCollection.access["POST"]``
is ``roles:manage``), checked by the rule an API key's permissions are checked by
(``controlplane.auth.holds``). So one table decides both doors, and a refusal is the
API's: 403 ``FORBIDDEN`` with ``details.required_permission``.  Screens standing for a
dashboard operation (settings, branding, API keys, members) keep the dashboard's role
gate, as that API does.
"""
from __future__ import annotations

from controlplane.apikeys.service import V1_PERMISSIONS
from controlplane.auth import Access, Principal, holds
from controlplane.dashboard.access import WRITE_ROLES
from shared.errors import PermissionMissing

READ_PERMISSIONS = frozenset(name for name in V1_PERMISSIONS if name.endswith(":read"))
ALL_PERMISSIONS = frozenset(V1_PERMISSIONS)


def permissions_of(role: str) -> frozenset:
    """The V1 permissions an organization role acts with on the organization's applications."""
    return ALL_PERMISSIONS if role in WRITE_ROLES else READ_PERMISSIONS


def console_principal(account_id: str, app_id: str, role: str) -> Principal:
    return Principal(kind="account", app_id=app_id, account_id=account_id, permissions=permissions_of(role))


def require(principal: Principal, access: Access | None) -> None:
    """403 ``PermissionMissing`` (the V1 gate's refusal) unless ``principal`` holds the
    permission ``access`` names; an access that names none (a dashboard operation) is
    left to the role gate."""
    if access is not None and access.kind == "permission" and not holds(principal.permissions, access.permission):
        raise PermissionMissing(access.permission)
