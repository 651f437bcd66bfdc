"""The change log's event kinds: the one list every emitter and every reader goes by.

``PUBLIC_EVENT_TYPES`` is the spec's "Event kinds" table, in its order: the only values a
webhook's events array accepts. Some are emitted by work still to come (OAuth connections
and consent by the OIDC provider, policy and attribute kinds by ABAC management).
``INTERNAL_EVENT_TYPES`` are kinds the control plane emits for its own readers (decision
caches, the audit log); they are never delivered to webhooks. ``EventLog.emit`` refuses a
kind that is in neither.

``grants.invalidated`` and ``policies.invalidated`` are what a write emits when it finds
its change already made (docs/architecture.md, "Repeated writes"): it cannot tell a
double click from the retry of an attempt that failed between its write and its event,
and in the second case no event ever named what changed. Every cache drops what they
name, and webhooks never see them: a repeat delivers nothing twice.
"""
from __future__ import annotations

from types import MappingProxyType

PUBLIC_EVENT_TYPES = MappingProxyType({
    "user.created": "a new user registers",
    "user.login": "a user logs in successfully",
    "user.updated": "a user profile is updated",
    "user.deleted": "a user account is deleted",
    "role.assigned": "a role is assigned to a user",
    "role.removed": "a role is removed from a user",
    "role.created": "a role is created",
    "role.updated": "a role is updated",
    "role.deleted": "a role is deleted",
    "permission.granted": "a permission is added to a role",
    "permission.revoked": "a permission is removed from a role",
    "connection.created": "an OAuth connection is created",
    "connection.refreshed": "an OAuth connection token is refreshed",
    "connection.failed": "an OAuth connection fails",
    "connection.revoked": "an OAuth connection is revoked",
    "consent.granted": "a user grants OIDC consent",
    "mfa.enabled": "MFA is enabled for a user",
    "mfa.disabled": "MFA is disabled for a user",
    "policy.created": "an ABAC policy is created",
    "policy.updated": "an ABAC policy is updated",
    "policy.deleted": "an ABAC policy is deleted",
    "attribute.set": "a user attribute is set",
    "attribute.deleted": "a user attribute is deleted",
})

INTERNAL_EVENT_TYPES = MappingProxyType({
    "user.suspended": "an administrator suspended a user (no logins, no allowed checks)",
    "user.unsuspended": "an administrator made a suspended user active again",
    "user.password_changed": "a user changed their password; their other sessions were revoked",
    "user.password_reset": "a user set a new password with an emailed reset token",
    "user.claimed": "the owner of an unverified account's mailbox proved it without the account's credentials; "
                    "every earlier way in was removed",
    "consent.withdrawn": "a user withdrew their OIDC consents; those clients' refresh tokens were revoked",
    "mfa.backup_codes_regenerated": "a user replaced their MFA backup codes with a new set",
    "mfa.backup_code_used": "an MFA backup code completed a login",
    "api_keys.changed": "an API key of the application was created or revoked",
    "oidc_clients.changed": "an OIDC client of the application was registered, changed or deleted",
    "application.deleted": "an application and everything in it was deleted",
    "grants.invalidated": "a write found its change already made (a repeat, or the retry of an attempt that failed "
                          "before its event): the users in user_ids lose their cached decisions",
    "policies.invalidated": "a policy update found its change already made (a repeat, or the retry of an attempt "
                            "that failed before its event): caches read the policy again",
})

EVENT_TYPES = MappingProxyType({**PUBLIC_EVENT_TYPES, **INTERNAL_EVENT_TYPES})
