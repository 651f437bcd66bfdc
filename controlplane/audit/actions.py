"""The audit catalogue: every action a record may name (docs/audit.md lists them).

Names are dotted, ``<thing>.<what happened>``.  A change-log event is its own audit
record, and its action is its kind (``shared.event_types``), except where
``CHANGE_ACTIONS`` names it better: the spec's kinds keep their names.  An attempt
names what was tried (``user.login``) and its ``result`` says whether it succeeded,
with a reason code when it did not: a failed login is ``user.login`` with
``{"status": "failure", "reason": "invalid_credentials"}``.

``target_of`` derives a change-log event's target from the ids the event already
carries, so emitters need not say it twice.
"""
from __future__ import annotations

from types import MappingProxyType

from shared.event_types import EVENT_TYPES

# Change-log kinds whose audit action is more precise than the kind (the kind stays the
# change log's; the ``data.action`` it carries picks the action).
CHANGE_ACTIONS = MappingProxyType({
    ("api_keys.changed", "created"): "api_key.created",
    ("api_keys.changed", "revoked"): "api_key.revoked",
    ("oidc_clients.changed", "created"): "oidc_client.created",
    ("oidc_clients.changed", "updated"): "oidc_client.updated",
    ("oidc_clients.changed", "deleted"): "oidc_client.deleted",
    ("oidc_clients.changed", "secret_rotated"): "oidc_client.secret_rotated",
})

# Records that are not change-log events: attempts that change nothing, changes outside
# any application's change log (the dashboard's), and changes whose change-log kind is
# refined above.  Each is recorded with ``AuditLog.record``.
RECORDED_ACTIONS = MappingProxyType({
    "api_key.created": "an API key of the application was created",
    "api_key.revoked": "an API key of the application was revoked",
    "user.login": "a login attempt (the change-log kind when it succeeds; failures are recorded with a reason)",
    "user.locked": "repeated failed logins locked an account for a while",
    "user.password_reset_requested": "a password reset email was asked for",
    "user.password_reset": "a password reset token was used (failures: an invalid or expired token)",
    "mfa.challenge": "an MFA challenge was answered (success or failure)",
    "passkey.registered": "a user registered a passkey",
    "passkey.deleted": "a passkey was deleted: by its user, or by an administrator's MFA reset",
    "passkey.sign_in": "a passkey assertion was presented (success or failure, a sign count that went backwards "
                       "included)",
    "token.reuse_detected": "a refresh token was presented again after rotation; its family was revoked",
    "oidc.code_replayed": "an authorization code was presented twice; its tokens were revoked",
    "token.revoked": "a token was revoked",
    "session.revoked": "a session was revoked",
    "user.sessions_revoked": "every session and OIDC grant of a user was revoked at once",
    "organization.created": "a dashboard organization was created",
    "organization.updated": "an organization's name or require_mfa setting changed",
    "dashboard_account.mfa_enabled": "a dashboard account turned two-step verification on, or added a passkey",
    "dashboard_account.mfa_disabled": "a dashboard account turned two-step verification off, or deleted a passkey",
    "dashboard_account.mfa_challenge": "a dashboard sign-in's second step was answered (success or failure)",
    "dashboard_account.passkey_sign_in": "a dashboard account's passkey was presented to sign in, alone or as the "
                                         "second step (success or failure)",
    "dashboard_account.reauthenticated": "a dashboard account confirmed its password or a passkey for sensitive "
                                         "actions (success or failure)",
    "organization.member_added": "an account was added to an organization",
    "organization.member_removed": "an account was removed from an organization",
    "organization.member_role_changed": "an organization member's role changed",
    "application.created": "an application was created",
    "application.updated": "an application's settings, branding or limits changed",
    "oidc_client.created": "an OIDC client was registered",
    "oidc_client.updated": "an OIDC client was changed",
    "oidc_client.deleted": "an OIDC client was deleted",
    "oidc_client.secret_rotated": "an OIDC client's secret was replaced (the one replaced may work for a grace "
                                  "period)",
    "webhook.created": "a webhook was created",
    "webhook.updated": "a webhook was changed",
    "webhook.deleted": "a webhook was deleted",
    "webhook.secret_rotated": "a webhook's signing secret was replaced",
    "webhook.redelivered": "a logged delivery's event was queued again as a new delivery",
    "upstream_connection.created": "a connection to an upstream identity provider was created",
    "upstream_connection.updated": "a connection to an upstream identity provider was changed",
    "upstream_connection.deleted": "a connection to an upstream identity provider was deleted",
})

ACTIONS = MappingProxyType({**EVENT_TYPES, **RECORDED_ACTIONS})


def change_action(type_: str, data: dict) -> str:
    """The audit action of a change-log event of kind ``type_``."""
    return CHANGE_ACTIONS.get((type_, data.get("action")), type_)


def target_of(type_: str, app_id: str | None, subject: dict, data: dict) -> dict:
    """``{type, id, display}`` of what a change-log event changed, from its ids."""
    if subject.get("policy_id"):
        return {"type": "policy", "id": subject["policy_id"], "display": data.get("name")}
    if type_.startswith(("role.created", "role.updated", "role.deleted", "permission.")):
        return {"type": "role", "id": data.get("role_id"), "display": data.get("name") or data.get("role_name")}
    user_id = subject.get("user_id") or data.get("user_id")
    if user_id:
        return {"type": "user", "id": user_id, "display": data.get("email")}
    if data.get("key_id"):
        return {"type": "api_key", "id": data["key_id"], "display": None}
    if data.get("client_id"):
        return {"type": "client", "id": data["client_id"], "display": None}
    return {"type": "application", "id": app_id, "display": None}
