"""What other areas may know and change of an application's end users, so none of them
reads the users area's store: OIDC and MFA read a user's record and status, self-service
reads the profile and writes its fields and the soft-delete transition, roles reads the
status and attributes a decision needs and counts a role's live holders, ABAC reads and
writes the attributes.  The rules of those writes stay with the caller (``selfservice``,
``abac``); this is only the way in."""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.users.errors import UserNotFound
from controlplane.users.store import AttributeWrite, UserStore


@dataclass(eq=False)
class UserDirectory:
    users: UserStore

    def get(self, app_id: str, user_id: str) -> dict | None:
        """The user's record, None when unknown."""
        return self.users.get(app_id, user_id)

    def live(self, app_id: str, user_id: str) -> dict:
        """The record of a user that is not deleted; 404 USER_NOT_FOUND otherwise."""
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

    def by_email(self, app_id: str, email: str) -> dict | None:
        """The user's record of this (normalised) email, whatever its status; None when none."""
        return self.users.by_email(app_id, email)

    def status(self, app_id: str, user_id: str) -> str | None:
        """active, suspended or deleted; None when unknown."""
        return self.users.status(app_id, user_id)

    def status_and_attributes(self, app_id: str, user_id: str) -> dict | None:
        """``{_id, status, attributes}`` of the user, whatever its status; None when unknown."""
        return self.users.status_and_attributes(app_id, user_id)

    def count_live(self, app_id: str, user_ids, *, stop_at: int | None = None) -> int:
        """How many of ``user_ids`` exist and are not deleted (counting stops at ``stop_at``)."""
        return self.users.count_live(app_id, user_ids, stop_at=stop_at)

    def profile(self, app_id: str, user_id: str) -> dict | None:
        """The profile fields (never the password hash), whatever the user's status."""
        return self.users.profile(app_id, user_id)

    def update_profile(self, app_id: str, user_id: str, changes: dict, now) -> dict | None:
        """Set ``changes`` unless the user is deleted; the profile as it was before, or None."""
        return self.users.update_profile(app_id, user_id, changes, now)

    def mark_deleted(self, app_id: str, user_id: str, now) -> bool:
        """The soft-delete transition; True for the one call that made it."""
        return self.users.mark_deleted(app_id, user_id, now)

    def attributes(self, app_id: str, user_id: str) -> dict | None:
        """``{key: value}`` (dotted keys) of a user that is not deleted; None otherwise."""
        return self.users.attributes(app_id, user_id)

    def set_attribute(self, app_id: str, user_id: str, key: str, value, *, max_keys: int) -> AttributeWrite:
        """Set one attribute in one atomic write (at most ``max_keys`` keys, no key a dotted
        prefix of another); ``outcome`` says what stopped it, if anything."""
        return self.users.set_attribute(app_id, user_id, key, value, max_keys=max_keys)

    def unset_attribute(self, app_id: str, user_id: str, key: str) -> AttributeWrite:
        """Remove one attribute; ``outcome`` is "unset", "no_user" or "no_key"."""
        return self.users.unset_attribute(app_id, user_id, key)
