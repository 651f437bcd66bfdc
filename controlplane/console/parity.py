"""Nothing the console does is missing from the public API: each console action, and the
API operation (its ``operationId`` in ``GET /openapi.json``) that makes the same change
through the same service.  ``tests/console/test_parity.py`` checks that every operation
named here exists, so a renamed or removed API route fails the build before the
console drifts from it."""
from __future__ import annotations

DASHBOARD = "ApiDashboard"
V1_APP = "ApiV1ApplicationsByApplicationId"

CONSOLE_ACTIONS = {
    # action: (console method and path, the API's operationId)
    "sign up": ("POST /console/sign-up", f"post{DASHBOARD}Register"),
    "verify email": ("POST /console/verify-email", f"post{DASHBOARD}EmailVerify"),
    "sign in": ("POST /console/sign-in", f"post{DASHBOARD}Login"),
    "sign in with a code": ("POST /console/sign-in/code", f"post{DASHBOARD}LoginMfa"),
    "forgot password": ("POST /console/forgot-password", f"post{DASHBOARD}PasswordForgot"),
    "reset password": ("POST /console/reset-password", f"post{DASHBOARD}PasswordReset"),
    "sign out": ("POST /console/sign-out", f"post{DASHBOARD}Logout"),
    "resend verification link": ("POST /console/account/verification", f"post{DASHBOARD}EmailResend"),
    "show account": ("GET /console/account", f"get{DASHBOARD}Me"),
    "rename account": ("POST /console/account/name", f"put{DASHBOARD}Me"),
    "change password": ("POST /console/account", f"post{DASHBOARD}MePassword"),
    "list organizations": ("GET /console/organizations", f"get{DASHBOARD}Organizations"),
    "create organization": ("POST /console/organizations", f"post{DASHBOARD}Organizations"),
    "list members": ("GET /console/organizations/{organizationId}",
                     f"get{DASHBOARD}OrganizationsByOrganizationIdMembers"),
    "add member": ("POST /console/organizations/{organizationId}",
                   f"post{DASHBOARD}OrganizationsByOrganizationIdMembers"),
    "change member role": ("POST /console/organizations/{organizationId}/members/{accountId} action=role",
                           f"put{DASHBOARD}OrganizationsByOrganizationIdMembersByAccountId"),
    "remove member": ("POST /console/organizations/{organizationId}/members/{accountId} action=remove",
                      f"delete{DASHBOARD}OrganizationsByOrganizationIdMembersByAccountId"),
    "list applications": ("GET /console/applications", f"get{DASHBOARD}Applications"),
    "create application": ("POST /console/applications", f"post{DASHBOARD}Applications"),
    "show application": ("GET /console/applications/{applicationId}",
                         f"get{DASHBOARD}ApplicationsByApplicationId"),
    "update application settings": ("POST /console/applications/{applicationId}",
                                    f"put{DASHBOARD}ApplicationsByApplicationId"),
    "delete application": ("POST /console/applications/{applicationId}/delete",
                           f"delete{DASHBOARD}ApplicationsByApplicationId"),
    # OIDC clients, webhooks and the audit log (controlplane/console/integrations.py)
    "list OIDC clients": ("GET /console/applications/{applicationId}/oidc-clients", f"get{V1_APP}OidcClients"),
    "register OIDC client": ("POST /console/applications/{applicationId}/oidc-clients",
                             f"post{V1_APP}OidcClients"),
    "show OIDC client": ("GET /console/applications/{applicationId}/oidc-clients/{clientId}",
                         f"get{V1_APP}OidcClientsByClientId"),
    "update OIDC client": ("POST /console/applications/{applicationId}/oidc-clients/{clientId}",
                           f"put{V1_APP}OidcClientsByClientId"),
    "delete OIDC client": ("POST /console/applications/{applicationId}/oidc-clients/{clientId}/delete",
                           f"delete{V1_APP}OidcClientsByClientId"),
    "list webhooks": ("GET /console/applications/{applicationId}/webhooks", f"get{V1_APP}Webhooks"),
    "create webhook": ("POST /console/applications/{applicationId}/webhooks", f"post{V1_APP}Webhooks"),
    "show webhook and its deliveries": ("GET /console/applications/{applicationId}/webhooks/{webhookId}",
                                        f"get{V1_APP}WebhooksByWebhookIdDeliveries"),
    "update webhook": ("POST /console/applications/{applicationId}/webhooks/{webhookId}",
                       f"put{V1_APP}WebhooksByWebhookId"),
    "rotate webhook secret": ("POST /console/applications/{applicationId}/webhooks/{webhookId}/rotate-secret",
                              f"post{V1_APP}WebhooksByWebhookIdRotateSecret"),
    "redeliver": ("POST /console/applications/{applicationId}/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver",
                  f"post{V1_APP}WebhooksByWebhookIdDeliveriesByDeliveryIdRedeliver"),
    "list audit records": ("GET /console/applications/{applicationId}/audit", f"get{V1_APP}AuditEvents"),
    "tail audit records": ("GET /console/applications/{applicationId}/audit/tail", f"get{V1_APP}AuditEvents"),
    "export audit records": ("GET /console/applications/{applicationId}/audit/export",
                             f"get{V1_APP}AuditEventsExport"),
}
