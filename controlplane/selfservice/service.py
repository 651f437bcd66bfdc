"""User self-service: the rules of the spec's "User self-service" section.

Every operation of ``SelfService`` acts on the calling user only (the routes are
JWT-owner); a user whose record is gone or soft-deleted is 404 USER_NOT_FOUND.  The area
owns no collection: it reads and writes through the users area's directory and sessions,
the MFA service and the OIDC area's connections.

Soft delete (docs/selfservice.md, "Account deletion"): the record is kept with status
``deleted``, its email stays taken, and the writes are ordered so that whatever a crash
leaves undone is refused or repaired later: the status transition comes first (access
tokens, login and refresh check the status live from then on), then the event that
drops decision caches, the tier slot, the sessions and the OIDC grants; a repeated
deletion does again what a failure may have left, the event included.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.mfa.service import MfaService
from controlplane.oidc.connections import ConnectionService
from controlplane.passkeys.service import PasskeyService
from controlplane.ratelimit import RateLimiter
from controlplane.roles.service import RoleService
from controlplane.selfservice.errors import ExportLimited, SessionNotFound
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import UserNotFound
from controlplane.users.registration import RegistrationService
from controlplane.users.serializers import serialize_user
from controlplane.users.sessions import SessionService
from shared.config import Rate
from shared.ids import is_uuid
from shared.timeutil import Clock, isoformat

log = logging.getLogger("iamgate.selfservice")

# Keys of event data that could hold a credential are left out of the export, whatever
# area emitted the event (defence in depth: events are not supposed to carry any).
_SECRET_KEY = re.compile(r"password|secret|token|digest|hash|backup_code|private_key", re.I)


@dataclass(eq=False)
class SelfService:
    users: UserDirectory
    user_sessions: SessionService
    mfa: MfaService
    passkeys: PasskeyService
    events: EventLog
    clock: Clock
    rate_limiter: RateLimiter
    registration: RegistrationService
    roles: RoleService
    oauth_connections: ConnectionService  # the OIDC area owns consents and OIDC grants
    audit: AuditLog
    _: KW_ONLY
    rate_limit_export: Rate
    # (app_id, user_id) -> the linked identities' export (connections.identities.export_of_user)
    linked_identities: Callable[[str, str], list[dict]]
    # (app_id, user_id) -> None: account deletion's rewrite of the webhook delivery log
    # (webhooks.service.WebhookService.forget_user)
    forget_deliveries: Callable[[str, str], None]

    def _now(self):
        return self.clock()

    def _require_user(self, app_id: str, user_id: str) -> dict:
        user = self.users.profile(app_id, user_id) if is_uuid(user_id) else None
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

    # ------------------------------------------------------------------ profile

    def profile(self, app_id: str, user_id: str) -> dict:
        """The User profile; 404 USER_NOT_FOUND."""
        return serialize_profile(self._require_user(app_id, user_id))

    def update_profile(self, app_id: str, user_id: str, values: dict) -> dict:
        """Change only the fields given (name, avatar_url, metadata; metadata replaced
        whole, None clears).  Emits user.updated {user_id, changed: [field names]} when a
        value really changed; a request that changes nothing writes nothing.  404
        USER_NOT_FOUND."""
        user = self._require_user(app_id, user_id)
        changes = {name: value for name, value in values.items() if not _same(user.get(name), value)}
        if not changes:
            return serialize_profile(user)
        now = self._now()
        before = self.users.update_profile(app_id, user_id, changes, now)
        if before is None:
            raise UserNotFound(user_id)
        # Judged against the document this write replaced, so a racing identical update
        # is not reported twice.
        changed = sorted(name for name, value in changes.items() if not _same(before.get(name), value))
        if changed:
            self.events.emit(app_id, "user.updated", {"user_id": user_id, "changed": changed},
                             subject={"user_id": user_id})
        return serialize_profile({**before, **changes, "updated_at": now})

    # ------------------------------------------------------------------ soft delete

    def delete_account(self, app_id: str, user_id: str) -> None:
        """Soft-delete the user: status ``deleted`` and ``deleted_at`` set, the record and
        its email kept (nobody can register the address again), the tier-limit slot given
        back, every session and OIDC grant revoked, user.deleted emitted (``user_ids`` so
        decision caches drop the user), then the user's email and name in the audit
        records and in the logged webhook delivery bodies of their events replaced with
        the id.  From the status write on, the user's access tokens are refused, login
        answers 401 AUTH_INVALID_CREDENTIALS and refresh 401.

        404 USER_NOT_FOUND for an unknown user; for one already deleted too, after
        finishing whatever an interrupted earlier deletion left undone: the revocations,
        and user.deleted itself when the change log holds none for the user (the attempt
        that deleted failed before its event: no cache was told, no webhook got it). A
        repeat of a deletion that finished emits nothing."""
        if not is_uuid(user_id) or self.users.profile(app_id, user_id) is None:
            raise UserNotFound(user_id)
        now = self._now()
        transitioned = self.users.mark_deleted(app_id, user_id, now)
        # The business event, not grants.invalidated as other repeats emit (docs/architecture.md,
        # "Repeated writes"): a deletion happens once per user, so the log tells an interrupted
        # deletion from a finished one, and the tenant's webhooks must hear of the deletion
        # once (their copy of the person's data is theirs to erase).
        if transitioned or not self.events.logged(app_id, user_id, "user.deleted"):
            self.events.emit(app_id, "user.deleted", {"user_id": user_id}, subject={"user_id": user_id},
                             user_ids=[user_id])
        if transitioned:
            # Exactly once per user: only the request that made the transition releases.
            self.registration.release_user_slot(app_id)
        sessions = self.user_sessions.revoke_user(app_id, user_id, reason="user_deleted")
        consents, oidc_tokens = self.oauth_connections.withdraw_consents(app_id, user_id, reason="user_deleted")
        # The records stay (who did what is the tenant's), but no longer name the person:
        # last, so the revocations' own records are covered, and again on a retry.  The
        # delivery log keeps copies of the events, which a redelivery would send again.
        self.audit.forget_user(app_id, user_id)
        self.forget_deliveries(app_id, user_id)
        if not transitioned:
            raise UserNotFound(user_id)
        log.info("user soft-deleted", extra={"app_id": app_id, "user_id": user_id, "sessions_revoked": sessions,
                                             "consents_withdrawn": consents, "oidc_tokens_revoked": oidc_tokens})

    # ------------------------------------------------------------------ consent

    def withdraw_consent(self, app_id: str, user_id: str) -> int:
        """Withdraw every OIDC consent of the user and revoke the OIDC refresh tokens
        issued under them; returns the number of consents withdrawn (future
        authorization flows ask for consent again).  404 USER_NOT_FOUND."""
        self._require_user(app_id, user_id)
        withdrawn, _ = self.oauth_connections.withdraw_consents(app_id, user_id)
        return withdrawn

    # ------------------------------------------------------------------ sessions

    def sessions(self, app_id: str, user_id: str) -> list[dict]:
        """The user's sessions: non-revoked, non-expired, newest first.  404 USER_NOT_FOUND."""
        self._require_user(app_id, user_id)
        return [serialize_session(s) for s in self.user_sessions.active(app_id, user_id)]

    def revoke_session(self, app_id: str, user_id: str, session_id: str) -> None:
        """Revoke one session of the user: its refresh token stops working at once, access
        tokens issued under it stay valid until they expire (spec); the OIDC grants made
        in it end.  404 SESSION_NOT_FOUND when unknown, another user's, expired or already
        revoked."""
        if not is_uuid(session_id) or not self.user_sessions.revoke_one(
                app_id, user_id, session_id.lower(), reason="revoked_by_user"):
            raise SessionNotFound(session_id)
        self.audit.record("session.revoked", result=success(), target=actor("user", user_id), application_id=app_id,
                          data={"session_id": session_id.lower()})

    def revoke_all_sessions(self, app_id: str, user_id: str) -> int:
        """Revoke every session of the user, the calling one included, and every OIDC
        grant (a relying party's sign-in is a session too); the number of sessions
        revoked.  404 USER_NOT_FOUND."""
        self._require_user(app_id, user_id)
        revoked = self.user_sessions.revoke_user(app_id, user_id, reason="revoked_by_user")
        self.oauth_connections.revoke_user(app_id, user_id, reason="sessions_revoked")
        self.audit.record("user.sessions_revoked", result=success(), target=actor("user", user_id),
                          application_id=app_id, data={"sessions_revoked": revoked})
        return revoked

    # ------------------------------------------------------------------ GDPR export

    def export(self, app_id: str, user_id: str) -> dict:
        """Everything stored about the user, without any secret (password hash, TOTP
        secret, token digests; a passkey's public key and credential id are not listed
        either: they are the authenticator's, and useless to the user).  One export per
        IAMGATE_RATE_LIMIT_EXPORT window (1 per hour) per user: 429 RATE_LIMIT_EXCEEDED
        with the rate-limit headers.  404 USER_NOT_FOUND."""
        user = self._require_user(app_id, user_id)
        self.rate_limiter.hit(f"export:{app_id}:{user_id}", self.rate_limit_export, error=ExportLimited)
        return {
            "exported_at": isoformat(self._now()),
            "user": serialize_export_user(user),
            "sessions": [serialize_export_session(s) for s in self.user_sessions.all_for_user(app_id, user_id)],
            "roles": self.roles.user_roles(app_id, user_id),
            "mfa_methods": [serialize_mfa_method(m) for m in self.mfa.all_methods(app_id, user_id)],
            "passkeys": self.passkeys.list(app_id, user_id),
            "oauth_connections": self.oauth_connections.export(app_id, user_id),
            "linked_identities": self.linked_identities(app_id, user_id),
            "audit_logs": [{**record, "data": _without_secrets(record["data"])}
                           for record in self.audit.of_user(app_id, user_id)],
        }


def _same(stored, value) -> bool:
    """Equal as JSON: Python's ``True == 1`` must not hide a metadata change."""
    if isinstance(stored, (dict, list)) or isinstance(value, (dict, list)):
        return json.dumps(stored, sort_keys=True) == json.dumps(value, sort_keys=True)
    return type(stored) is type(value) and stored == value


# ---------------------------------------------------------------- response shapes


def serialize_profile(user: dict) -> dict:
    """The spec's User profile resource: the User plus avatar_url and updated_at."""
    return {
        **serialize_user(user),
        "avatar_url": user.get("avatar_url"),
        "updated_at": isoformat(user.get("updated_at") or user["created_at"]),
    }


def serialize_session(session: dict) -> dict:
    """The spec's Session resource."""
    device = session.get("device_info") or {}
    return {
        "id": session["_id"],
        "device_info": {"ip": device.get("ip"), "user_agent": device.get("user_agent")},
        "is_remember_me": bool(session.get("is_remember_me")),
        "last_used_at": isoformat(session.get("last_used_at") or session["created_at"]),
        "expires_at": isoformat(session["expires_at"]),
        "created_at": isoformat(session["created_at"]),
    }


def serialize_export_user(user: dict) -> dict:
    attributes = user.get("attributes")
    return {
        "id": user["_id"],
        "email": user["email"],
        "name": user["name"],
        "created_at": isoformat(user["created_at"]),
        "updated_at": isoformat(user.get("updated_at") or user["created_at"]),
        "email_verified": bool(user.get("email_verified")),
        "avatar_url": user.get("avatar_url"),
        "metadata": user.get("metadata"),
        "attributes": attributes if isinstance(attributes, dict) else {},
        "last_login_at": isoformat(user.get("last_login_at")),
    }


def serialize_export_session(session: dict) -> dict:
    return {**serialize_session(session), "revoked_at": isoformat(session.get("revoked_at"))}


def serialize_mfa_method(method: dict) -> dict:
    """The spec's MFA method resource plus its status; never the secret."""
    return {
        "id": method["_id"],
        "type": method.get("type", "totp"),
        "label": method.get("label"),
        "is_primary": bool(method.get("is_primary")),
        "status": method.get("status"),
        "verified_at": isoformat(method.get("verified_at")),
        "last_used_at": isoformat(method.get("last_used_at")),
    }


def _without_secrets(value):
    if isinstance(value, dict):
        return {key: _without_secrets(item) for key, item in value.items() if not _SECRET_KEY.search(str(key))}
    if isinstance(value, list):
        return [_without_secrets(item) for item in value]
    return value
