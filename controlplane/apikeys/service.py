"""Application API keys: server-to-server credentials of one application.

The secret is shown once at creation; only its SHA-256 digest is stored.  The key
carries a permission list (default: every V1 permission) and is accepted as
``Authorization: Bearer <key>`` on its own application's V1 routes, never on
JWT-owner routes.  The prefix (``sk_test_``/``sk_live_``) follows the application's
``is_test_mode``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from controlplane.apikeys.errors import ApiKeyNotFound
from controlplane.apikeys.store import ApiKeyStore
from controlplane.events import EventLog
from controlplane.lookup_cache import LookupCache
from shared.errors import ValidationFailed
from shared.ids import digest, is_uuid, new_id, random_token
from shared.rbac import is_valid_permission
from shared.timeutil import Clock, aware, isoformat, seconds_of

V1_PERMISSIONS = (
    "roles:read", "roles:manage", "authz:check", "webhooks:manage", "oidc:manage",
    "policies:read", "policies:manage", "users:read", "users:manage", "audit:read",
    "connections:manage", "connections:tokens",
    # What a tenant's decision service needs: read grants, policies and API key digests
    # and follow the change stream (controlplane/internal), nothing else.
    "decision:sync",
)

_TOUCH_EVERY = 60.0  # seconds

# How long a worker may authenticate a key from its copy (controlplane.lookup_cache): a
# revocation reaches every worker through the change log (api_keys.changed) well before.
AUTH_CACHE_TTL = 2.0
AUTH_CACHE_SIZE = 10_000


@dataclass(eq=False)
class ApiKeyService:
    store: ApiKeyStore
    events: EventLog
    clock: Clock

    def __post_init__(self):
        self._seconds = seconds_of(self.clock)
        self._by_digest = LookupCache(ttl=AUTH_CACHE_TTL, maxsize=AUTH_CACHE_SIZE, timer=self._seconds)

    def apply_event(self, event) -> None:
        """Change-log consumer (this process's events and the tailer's): keys of an
        application whose keys changed, or that was deleted, leave the cache."""
        if event.type in ("api_keys.changed", "application.deleted") and event.app_id is not None:
            self._by_digest.drop_where(lambda found: found[0]["app_id"] == event.app_id)

    def create(self, app: dict, values: dict, *, created_by: str | None = None) -> tuple[dict, str]:
        """A new key for ``app`` from cleaned ``schemas.CREATE`` values; returns the
        stored document and the secret, which is shown this once.  ``created_by`` is the
        dashboard account that minted it, so that a claim of that account's address can
        find it (``revoke_created_by``)."""
        permissions = values.get("permissions") or list(V1_PERMISSIONS)
        bad = [p for p in permissions if not is_valid_permission(p)]
        if bad:
            raise ValidationFailed({"permissions": f"not in resource:action form: {', '.join(bad)}"})
        prefix = "sk_test_" if app.get("is_test_mode") else "sk_live_"
        secret = prefix + random_token(32)
        doc = {
            "_id": new_id(),
            "app_id": app["_id"],
            "name": values["name"],
            "key_prefix": secret[:12],
            "key_digest": digest(secret),
            "permissions": permissions,
            "created_at": self.clock(),
            "last_used_at": None,
            "revoked_at": None,
            "created_by": created_by,
        }
        self.store.insert(doc)
        self.events.emit(app["_id"], "api_keys.changed", {"key_id": doc["_id"], "action": "created"})
        return doc, secret

    def list(self, app_id: str) -> list[dict]:
        return self.store.active(app_id)

    def revoke(self, app_id: str, key_id: str) -> None:
        if not is_uuid(key_id) or not self._revoke(app_id, key_id):
            raise ApiKeyNotFound(key_id)

    def revoke_created_by(self, account_ids, app_ids=None) -> None:
        """Revoke every live key minted by these dashboard accounts (only on these
        applications, when given), each as ``revoke`` does, so every cache drops it."""
        for key in self.store.active_created_by(list(account_ids), app_ids):
            self._revoke(key["app_id"], key["_id"])

    def _revoke(self, app_id: str, key_id: str) -> bool:
        """False when the key is unknown or revoked already; api_keys.changed tells
        this worker's cache at once and the others through the change log."""
        if not self.store.revoke(app_id, key_id, self.clock()):
            return False
        self.events.emit(app_id, "api_keys.changed", {"key_id": key_id, "action": "revoked"})
        return True

    def authenticate(self, secret: str) -> dict | None:
        """The key document for ``secret`` if it exists and is not revoked (through the
        per-worker cache: a revocation anywhere is seen within the change-log tailer's
        poll interval, and every copy within ``AUTH_CACHE_TTL``).  Read-only."""
        key_digest = digest(secret)
        found = self._by_digest.get(key_digest, lambda: self._load(key_digest))
        if found is None:
            return None
        doc, touch_after = found
        if self._seconds() > touch_after:  # at most one write a minute per key
            self.store.touch(doc["_id"], self.clock())
            self._by_digest.drop(key_digest)  # the next read carries the new last_used_at
        return doc

    def _load(self, key_digest: str) -> tuple[dict, float] | None:
        """(the key's document, when its ``last_used_at`` is next due in POSIX seconds),
        so a request compares two floats rather than datetimes of the store's tzinfo
        (bson's ``FixedOffset``, two Python ``utcoffset`` calls a comparison)."""
        doc = self.store.by_digest(key_digest)
        if doc is None:
            return None
        last = aware(doc.get("last_used_at"))
        return doc, -math.inf if last is None else last.timestamp() + _TOUCH_EVERY

    def digests(self, app_id: str) -> list[dict]:
        """Active keys as {key_digest, permissions}: what a decision service caches."""
        return [{"key_digest": d["key_digest"], "permissions": d["permissions"], "id": d["_id"]}
                for d in self.store.active(app_id)]


def serialize(doc: dict, secret: str | None = None) -> dict:
    """``schemas.API_KEY_RESPONSE``: never the digest; the secret only when just created."""
    out = {
        "id": doc["_id"],
        "name": doc["name"],
        "key_prefix": doc["key_prefix"],
        "permissions": doc["permissions"],
        "created_at": isoformat(doc["created_at"]),
        "last_used_at": isoformat(doc.get("last_used_at")),
    }
    if secret is not None:
        out["key"] = secret
    return out
