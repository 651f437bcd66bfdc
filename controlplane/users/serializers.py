"""Response shapes of end users that several areas send: the spec's User resource
(registration, login, token pairs) and its administrator view (dashboard)."""
from __future__ import annotations

from shared.timeutil import isoformat


def serialize_user(user: dict) -> dict:
    """The spec's User resource (registration and login result)."""
    return {
        "id": user["_id"],
        "email": user["email"],
        "name": user["name"],
        "email_verified": bool(user.get("email_verified")),
        "created_at": isoformat(user["created_at"]),
        "metadata": user.get("metadata"),
    }


def serialize_admin_user(user: dict) -> dict:
    """The User plus what an administrator needs: status and its timestamps."""
    return {
        **serialize_user(user),
        "avatar_url": user.get("avatar_url"),
        "status": user.get("status", "active"),
        "updated_at": isoformat(user.get("updated_at")),
        "suspended_at": isoformat(user.get("suspended_at")),
        "deleted_at": isoformat(user.get("deleted_at")),
        "last_login_at": isoformat(user.get("last_login_at")),
    }
