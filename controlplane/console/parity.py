"""Nothing the console does is missing from the public API: each console action, and the
API operation (its ``operationId`` in ``GET /openapi.json``) that makes the same change
through the same service.  ``tests/console/test_parity.py`` checks that every operation
named here exists, so a renamed or removed API route fails the build before the
console drifts from it."""
from __future__ import annotations

DASHBOARD = "ApiDashboard"

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
    # Settings screens (controlplane/console/settings.py).
    "show branding": ("GET /console/applications/{applicationId}/branding",
                      f"get{DASHBOARD}ApplicationsByApplicationId"),
    "save branding": ("POST /console/applications/{applicationId}/branding",
                      f"put{DASHBOARD}ApplicationsByApplicationIdBranding"),
    "list API keys": ("GET /console/applications/{applicationId}/api-keys",
                      f"get{DASHBOARD}ApplicationsByApplicationIdApiKeys"),
    "create API key": ("POST /console/applications/{applicationId}/api-keys",
                       f"post{DASHBOARD}ApplicationsByApplicationIdApiKeys"),
    "revoke API key": ("POST /console/applications/{applicationId}/api-keys/{keyId}/revoke",
                       f"delete{DASHBOARD}ApplicationsByApplicationIdApiKeysByKeyId"),
    "show two-step verification": ("GET /console/account/security", f"get{DASHBOARD}MeMfa"),
    "set up two-step verification": ("POST /console/account/security step=setup",
                                     f"post{DASHBOARD}MeMfaTotpSetup"),
    "confirm two-step verification": ("POST /console/account/security step=confirm",
                                      f"post{DASHBOARD}MeMfaTotpConfirm"),
    "regenerate backup codes": ("POST /console/account/security step=backup-codes",
                                f"post{DASHBOARD}MeMfaBackupCodesRegenerate"),
    "turn two-step verification off": ("POST /console/account/security step=disable",
                                       f"delete{DASHBOARD}MeMfaTotp"),
    "require two-step verification": ("POST /console/organizations/{organizationId}/security",
                                      f"patch{DASHBOARD}OrganizationsByOrganizationId"),
}
