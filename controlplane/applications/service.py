"""Applications (tenants): create, read, update, branding, delete with cascade.

Creating and changing one are audit records (``application.created``/``.updated``, with
the fields changed and their values: none is secret); the deletion is the change log's.

Organizations, their membership, roles and application limit are the dashboard's
concern; this service takes an already authorized caller.  Every tenant document carries ``app_id``; deleting an
application removes all of them (users, roles, permissions, API keys, webhooks...).
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.applications.schemas import sanitize_css
from controlplane.applications.store import ApplicationStore
from controlplane.audit.changes import changes as changed_fields
from controlplane.audit.changes import created
from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.lookup_cache import LookupCache
from shared.errors import ApplicationNotFound
from shared.ids import new_id
from shared.timeutil import Clock, isoformat, seconds_of

# How long a worker may answer from its copy of an application (controlplane.lookup_cache):
# deletions reach every worker through the change log well before that; settings changed
# on another worker or replica (no event) are seen within it.
LIVE_CACHE_TTL = 2.0
LIVE_CACHE_SIZE = 10_000

DEFAULT_BRANDING_OPTIONS = {
    "secondary_color": None,
    "font_family": None,
    "favicon_url": None,
    "button_border_radius": None,
    "custom_css": None,
    "dark_mode": {"enabled": False, "background": None, "color": None},
}


@dataclass(eq=False)
class ApplicationService:
    store: ApplicationStore
    events: EventLog
    clock: Clock
    audit: AuditLog

    def __post_init__(self):
        self._live = LookupCache(ttl=LIVE_CACHE_TTL, maxsize=LIVE_CACHE_SIZE, timer=seconds_of(self.clock))

    def get(self, app_id: str) -> dict | None:
        return self.store.get(app_id)

    def live(self, app_id: str) -> dict | None:
        """``get`` through the per-worker cache the authentication of every request uses
        (controlplane.lookup_cache: a deletion anywhere is seen within the change-log
        tailer's poll interval, and every copy within ``LIVE_CACHE_TTL``).  Read-only."""
        return self._live.get(app_id, lambda: self.store.get(app_id))

    def apply_event(self, event) -> None:
        """Change-log consumer (this process's events and the tailer's): a deleted
        application leaves the cache."""
        if event.type == "application.deleted" and event.app_id is not None:
            self._live.drop(event.app_id)

    def require(self, app_id: str) -> dict:
        app = self.store.get(app_id)
        if app is None:
            raise ApplicationNotFound(details={"application_id": app_id})
        return app

    def list_for_organizations(self, organization_ids) -> list[dict]:
        """Live applications of these organizations, oldest first."""
        return self.store.list_for_organizations(organization_ids)

    def create(self, values: dict, *, organization_id: str | None, owner_account_id: str | None) -> dict:
        """Create an application; ``values`` is cleaned ``schemas.CREATE`` output."""
        now = self.clock()
        doc = {
            "_id": new_id(),
            "status": "active",
            "organization_id": organization_id,
            "owner_account_id": owner_account_id,
            "name": values["name"],
            "environment": values.get("environment", "development"),
            "is_test_mode": values.get("is_test_mode", False),
            "description": values.get("description"),
            "brand_name": None,
            "brand_logo_url": None,
            "brand_color": None,
            "brand_background": None,
            "branding_options": _deep_copy(DEFAULT_BRANDING_OPTIONS),
            "oauth_redirect_uris": [],
            "oauth_hosted_login_enabled": False,
            "oauth_hosted_registration_enabled": False,
            "max_concurrent_sessions": 0,
            "registration_rate_limit": None,
            "passkeys": "off",
            "passkeys_allow_password": True,
            "passkey_aaguids": [],
            "created_at": now,
            "updated_at": now,
        }
        self.store.insert(doc)
        self._record("application.created", doc, created(doc, values))
        return doc

    def update(self, app_id: str, values: dict) -> dict:
        """Apply cleaned ``schemas.UPDATE`` values (only the fields sent)."""
        if not values:
            return self.require(app_id)
        changes = {**values, "updated_at": self.clock()}
        before = self.store.update(app_id, changes)
        self._live.drop(app_id)
        if before is None:
            raise ApplicationNotFound(details={"application_id": app_id})
        updated = {**before, **changes}
        self._record("application.updated", updated, changed_fields(before, updated, values))
        return updated

    def _record(self, action: str, app: dict, data: dict) -> None:
        self.audit.record(action, result=success(), target=actor("application", app["_id"], app["name"]),
                          application_id=app["_id"], organization_id=app.get("organization_id"), data=data)

    def update_branding(self, app_id: str, values: dict) -> dict:
        """Apply cleaned ``schemas.BRANDING`` values; nested options merge field by field."""
        return self.update(app_id, branding_changes(self.require(app_id), values))

    def delete(self, app_id: str) -> dict:
        """Delete the application and every tenant document it owns; returns the
        application as it was.  Marked ``deleting`` first, so it is invisible to every
        route at once and an interrupted purge is finished by ``finish_deletions``."""
        app = self.store.mark_deleting(app_id)
        self._live.drop(app_id)
        if app is None:
            raise ApplicationNotFound(details={"application_id": app_id})
        self.events.emit(app_id, "application.deleted", {"application_id": app_id})
        self.store.purge(app_id)
        return app

    def count_for_organization(self, organization_id: str) -> int:
        """The organization's applications, those being deleted included (their
        document goes last, with the purge)."""
        return self.store.count_for_organization(organization_id)

    def finish_deletions(self) -> None:
        """Complete deletions interrupted by a crash or a store failure (called at
        start-up): the ``application.deleted`` event first when the change log has none
        for the application (the attempt may have failed before writing it, and every
        decision service and per-worker cache is told only through it), then the purge."""
        for app_id in self.store.unfinished_deletions():
            if not self.events.logged_for_application(app_id, "application.deleted"):
                self.events.emit(app_id, "application.deleted", {"application_id": app_id})
            self.store.purge(app_id)


def serialize(app: dict, role: str | None = None) -> dict:
    """The spec's Application resource, with the flat brand fields and a ``branding`` object."""
    return {
        "id": app["_id"],
        "name": app["name"],
        "environment": app["environment"],
        "is_test_mode": app["is_test_mode"],
        "description": app.get("description"),
        "organization_id": app.get("organization_id"),
        "role": role,
        "brand_name": app.get("brand_name"),
        "brand_logo_url": app.get("brand_logo_url"),
        "brand_color": app.get("brand_color"),
        "brand_background": app.get("brand_background"),
        "branding_options": app.get("branding_options") or _deep_copy(DEFAULT_BRANDING_OPTIONS),
        "branding": branding(app),
        "oauth_redirect_uris": app.get("oauth_redirect_uris", []),
        "oauth_hosted_login_enabled": app.get("oauth_hosted_login_enabled", False),
        "oauth_hosted_registration_enabled": app.get("oauth_hosted_registration_enabled", False),
        "max_concurrent_sessions": app.get("max_concurrent_sessions", 0),
        "registration_rate_limit": app.get("registration_rate_limit"),
        "passkeys": app.get("passkeys", "off"),
        "passkeys_allow_password": app.get("passkeys_allow_password", True),
        "passkey_aaguids": app.get("passkey_aaguids", []),
        "created_at": isoformat(app["created_at"]),
        "updated_at": isoformat(app["updated_at"]),
    }


def branding(app: dict) -> dict:
    """The short branding object (login pages, OIDC authorize, emails)."""
    return {
        "name": app.get("brand_name") or app["name"],
        "logo_url": app.get("brand_logo_url"),
        "color": app.get("brand_color"),
        "background": app.get("brand_background"),
    }


def branding_changes(app: dict, values: dict) -> dict:
    """The fields cleaned ``schemas.BRANDING`` values change on ``app``, nothing saved:
    ``branding_options`` merge field by field (``dark_mode`` too) and ``custom_css`` is
    sanitized.  What ``update_branding`` stores, and what the console's preview of
    unsaved branding shows."""
    changes = {k: v for k, v in values.items() if k != "branding_options"}
    if "branding_options" in values:
        options = _deep_copy(app.get("branding_options") or DEFAULT_BRANDING_OPTIONS)
        for key, value in (values["branding_options"] or {}).items():
            if key == "dark_mode":
                options["dark_mode"] = {**options.get("dark_mode", {}), **(value or {})}
            elif key == "custom_css" and value is not None:
                options["custom_css"] = sanitize_css(value)
            else:
                options[key] = value
        changes["branding_options"] = options
    return changes


def _deep_copy(value):
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    return value
