"""Nothing the console does is missing from the public API: each console action, and the
API operation (its ``operationId`` in ``GET /openapi.json``) that makes the same change
through the same service.  ``tests/console/test_parity.py`` checks that every operation
named here exists, so a renamed or removed API route fails the build before the
console drifts from it."""
from __future__ import annotations

DASHBOARD = "ApiDashboard"
V1 = "ApiV1ApplicationsByApplicationId"

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
    # Roles and permissions, ABAC policies, the check playground (access_rules.py).
    "list roles": ("GET /console/applications/{applicationId}/roles", f"get{V1}Roles"),
    "create role": ("POST /console/applications/{applicationId}/roles", f"post{V1}Roles"),
    "show role": ("GET /console/applications/{applicationId}/roles/{roleId}", f"get{V1}RolesByRole"),
    "update role": ("POST /console/applications/{applicationId}/roles/{roleId}", f"put{V1}RolesByRole"),
    "delete role": ("POST /console/applications/{applicationId}/roles/{roleId}/delete", f"delete{V1}RolesByRole"),
    "list policies": ("GET /console/applications/{applicationId}/policies", f"get{V1}AbacPolicies"),
    "create policy": ("POST /console/applications/{applicationId}/policies", f"post{V1}AbacPolicies"),
    "show policy": ("GET /console/applications/{applicationId}/policies/{policyId}",
                    f"get{V1}AbacPoliciesByPolicyId"),
    "update policy": ("POST /console/applications/{applicationId}/policies/{policyId}",
                      f"put{V1}AbacPoliciesByPolicyId"),
    "activate or deactivate policy": ("POST /console/applications/{applicationId}/policies/{policyId}/active",
                                      f"put{V1}AbacPoliciesByPolicyId"),
    "dry-run a check": ("POST /console/applications/{applicationId}/check", f"post{V1}AbacEvaluate"),
}
