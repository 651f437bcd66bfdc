"""Nothing the console does is missing from the public API: each console action, and the
API operation (its ``operationId`` in ``GET /openapi.json``) that makes the same change
through the same service.  ``tests/console/test_parity.py`` checks that every operation
named here exists, so a renamed or removed API route fails the build before the
console drifts from it."""
from __future__ import annotations

import re

# The placeholders the table below writes for the prefixes its rows share.
PREFIXES = {
    "{APP}": "/console/applications/{applicationId}",
    "{USER}": "/console/applications/{applicationId}/users/{userId}",
    "{ORG}": "/console/organizations/{organizationId}",
    "{DASHBOARD}": "ApiDashboard",
    "{V1}": "ApiV1ApplicationsByApplicationId",
}


def actions(table: str) -> dict[str, tuple[str, str]]:
    """``{action: (console method and path, the API's operationId)}`` from a table of
    ``action | console method and path | operationId`` rows; a long row goes on over an
    indented line, a ``#`` line names the screens that follow."""
    for placeholder, prefix in PREFIXES.items():
        table = table.replace(placeholder, prefix)
    rows = re.sub(r"\n\s+\|", " |", table).splitlines()
    cells = [[cell.strip() for cell in row.split("|")] for row in rows if row.strip() and not row.startswith("#")]
    return {action: (console, operation_id) for action, console, operation_id in cells}


CONSOLE_ACTIONS = actions("""
# Accounts, organizations and applications (controlplane/console/resources.py)
sign up                         | POST /console/sign-up | post{DASHBOARD}Register
verify email                    | POST /console/verify-email | post{DASHBOARD}EmailVerify
sign in                         | POST /console/sign-in | post{DASHBOARD}Login
sign in with a code             | POST /console/sign-in/code | post{DASHBOARD}LoginMfa
sign in with a passkey          | POST /console/sign-in/passkey | post{DASHBOARD}LoginPasskey
forgot password                 | POST /console/forgot-password | post{DASHBOARD}PasswordForgot
reset password                  | POST /console/reset-password | post{DASHBOARD}PasswordReset
sign out                        | POST /console/sign-out | post{DASHBOARD}Logout
resend verification link        | POST /console/account/verification | post{DASHBOARD}EmailResend
show account                    | GET /console/account | get{DASHBOARD}Me
rename account                  | POST /console/account/name | put{DASHBOARD}Me
change password                 | POST /console/account | post{DASHBOARD}MePassword
list organizations              | GET /console/organizations | get{DASHBOARD}Organizations
create organization             | POST /console/organizations | post{DASHBOARD}Organizations
list members                    | GET {ORG} | get{DASHBOARD}OrganizationsByOrganizationIdMembers
add member                      | POST {ORG} | post{DASHBOARD}OrganizationsByOrganizationIdMembers
change member role              | POST {ORG}/members/{accountId} action=role
                                  | put{DASHBOARD}OrganizationsByOrganizationIdMembersByAccountId
remove member                   | POST {ORG}/members/{accountId} action=remove
                                  | delete{DASHBOARD}OrganizationsByOrganizationIdMembersByAccountId
list applications               | GET /console/applications | get{DASHBOARD}Applications
create application              | POST /console/applications | post{DASHBOARD}Applications
show application                | GET {APP} | get{DASHBOARD}ApplicationsByApplicationId
update application settings     | POST {APP} | put{DASHBOARD}ApplicationsByApplicationId
delete application              | POST {APP}/delete | delete{DASHBOARD}ApplicationsByApplicationId

# Roles and permissions, ABAC policies, the check playground (controlplane/console/access_rules.py)
list roles                      | GET {APP}/roles | get{V1}Roles
create role                     | POST {APP}/roles | post{V1}Roles
show role                       | GET {APP}/roles/{roleId} | get{V1}RolesByRole
update role                     | POST {APP}/roles/{roleId} | put{V1}RolesByRole
delete role                     | POST {APP}/roles/{roleId}/delete | delete{V1}RolesByRole
list policies                   | GET {APP}/policies | get{V1}AbacPolicies
create policy                   | POST {APP}/policies | post{V1}AbacPolicies
show policy                     | GET {APP}/policies/{policyId} | get{V1}AbacPoliciesByPolicyId
update policy                   | POST {APP}/policies/{policyId} | put{V1}AbacPoliciesByPolicyId
activate or deactivate policy   | POST {APP}/policies/{policyId}/active | put{V1}AbacPoliciesByPolicyId
dry-run a check                 | POST {APP}/check | post{V1}AbacEvaluate

# OIDC clients, webhooks and the audit log (controlplane/console/integrations.py)
list OIDC clients               | GET {APP}/oidc-clients | get{V1}OidcClients
register OIDC client            | POST {APP}/oidc-clients | post{V1}OidcClients
show OIDC client                | GET {APP}/oidc-clients/{clientId} | get{V1}OidcClientsByClientId
update OIDC client              | POST {APP}/oidc-clients/{clientId} | put{V1}OidcClientsByClientId
delete OIDC client              | POST {APP}/oidc-clients/{clientId}/delete | delete{V1}OidcClientsByClientId
rotate OIDC client secret       | POST {APP}/oidc-clients/{clientId}/rotate-secret
                                  | post{V1}OidcClientsByClientIdRotateSecret
list webhooks                   | GET {APP}/webhooks | get{V1}Webhooks
create webhook                  | POST {APP}/webhooks | post{V1}Webhooks
show webhook and its deliveries | GET {APP}/webhooks/{webhookId} | get{V1}WebhooksByWebhookIdDeliveries
update webhook                  | POST {APP}/webhooks/{webhookId} | put{V1}WebhooksByWebhookId
rotate webhook secret           | POST {APP}/webhooks/{webhookId}/rotate-secret
                                  | post{V1}WebhooksByWebhookIdRotateSecret
redeliver                       | POST {APP}/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver
                                  | post{V1}WebhooksByWebhookIdDeliveriesByDeliveryIdRedeliver
list audit records              | GET {APP}/audit | get{V1}AuditEvents
tail audit records              | GET {APP}/audit/tail | get{V1}AuditEvents
export audit records            | GET {APP}/audit/export | get{V1}AuditEventsExport

# Settings screens (controlplane/console/settings.py)
show branding                   | GET {APP}/branding | get{DASHBOARD}ApplicationsByApplicationId
save branding                   | POST {APP}/branding | put{DASHBOARD}ApplicationsByApplicationIdBranding
list API keys                   | GET {APP}/api-keys | get{DASHBOARD}ApplicationsByApplicationIdApiKeys
create API key                  | POST {APP}/api-keys | post{DASHBOARD}ApplicationsByApplicationIdApiKeys
revoke API key                  | POST {APP}/api-keys/{keyId}/revoke
                                  | delete{DASHBOARD}ApplicationsByApplicationIdApiKeysByKeyId
show two-step verification      | GET /console/account/security | get{DASHBOARD}MeMfa
set up two-step verification    | POST /console/account/security step=setup | post{DASHBOARD}MeMfaTotpSetup
confirm two-step verification   | POST /console/account/security step=confirm | post{DASHBOARD}MeMfaTotpConfirm
regenerate backup codes         | POST /console/account/security step=backup-codes
                                  | post{DASHBOARD}MeMfaBackupCodesRegenerate
turn two-step verification off  | POST /console/account/security step=disable | delete{DASHBOARD}MeMfaTotp
list passkeys                   | GET /console/account/security | get{DASHBOARD}MePasskeys
add a passkey                   | POST /console/account/security step=passkey-add
                                  | post{DASHBOARD}MePasskeysRegistrationVerify
delete a passkey                | POST /console/account/security step=passkey-delete
                                  | delete{DASHBOARD}MePasskeysByPasskeyId
require two-step verification   | POST {ORG}/security | patch{DASHBOARD}OrganizationsByOrganizationId

# Users of an application (controlplane/console/users.py)
list users                      | GET {APP}/users | get{DASHBOARD}ApplicationsByApplicationIdUsers
suspend user                    | POST {USER} action=suspend
                                  | post{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdSuspend
reactivate user                 | POST {USER} action=reactivate
                                  | post{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdUnsuspend
suspend matching users          | POST {APP}/users/bulk action=suspend
                                  | post{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdSuspend
list user sessions              | GET {USER} | get{V1}UsersByUserIdSessions
revoke user session             | POST {USER} action=revoke-session | delete{V1}UsersByUserIdSessionsBySessionId
revoke user sessions            | POST {USER} action=revoke-sessions | delete{V1}UsersByUserIdSessions
revoke matching users' sessions | POST {APP}/users/bulk action=revoke-sessions | delete{V1}UsersByUserIdSessions
delete user                     | POST {USER} action=delete | delete{V1}UsersByUserId
user audit trail                | GET {USER} | get{V1}AuditEvents
show user MFA                   | GET {USER} | get{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdMfa
reset user MFA                  | POST {USER} action=reset-mfa
                                  | delete{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdMfa
list user roles                 | GET {USER} | get{V1}UsersByUserIdRoles
assign role                     | POST {USER} action=assign-role | post{V1}UsersByUserIdRoles
remove role                     | POST {USER} action=remove-role | delete{V1}UsersByUserIdRolesByRoleId
list user attributes            | GET {USER} | get{V1}UsersByUserIdAttributes
set attribute                   | POST {USER} action=set-attribute | put{V1}UsersByUserIdAttributesByKey
delete attribute                | POST {USER} action=delete-attribute | delete{V1}UsersByUserIdAttributesByKey
explain access                  | GET {USER} permission= | post{V1}AbacEvaluate

# Connections: upstream identity providers (controlplane/console/connections.py)
list connections                | GET {APP}/connections | get{V1}Connections
create connection               | POST {APP}/connections | post{V1}Connections
show connection                 | GET {APP}/connections/{connectionId} | get{V1}ConnectionsByConnectionId
update connection               | POST {APP}/connections/{connectionId} | patch{V1}ConnectionsByConnectionId
test connection                 | POST {APP}/connections/{connectionId}/test | post{V1}ConnectionsByConnectionIdTest
delete connection               | POST {APP}/connections/{connectionId}/delete | delete{V1}ConnectionsByConnectionId
""")
