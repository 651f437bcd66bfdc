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
    # Users of an application (controlplane/console/users.py)
    "list users": ("GET /console/applications/{applicationId}/users",
                   f"get{DASHBOARD}ApplicationsByApplicationIdUsers"),
    "suspend user": ("POST /console/applications/{applicationId}/users/{userId} action=suspend",
                     f"post{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdSuspend"),
    "reactivate user": ("POST /console/applications/{applicationId}/users/{userId} action=reactivate",
                        f"post{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdUnsuspend"),
    "suspend matching users": ("POST /console/applications/{applicationId}/users/bulk action=suspend",
                               f"post{DASHBOARD}ApplicationsByApplicationIdUsersByUserIdSuspend"),
    "list user sessions": ("GET /console/applications/{applicationId}/users/{userId}",
                           "getApiV1ApplicationsByApplicationIdUsersByUserIdSessions"),
    "revoke user session": ("POST /console/applications/{applicationId}/users/{userId} action=revoke-session",
                            "deleteApiV1ApplicationsByApplicationIdUsersByUserIdSessionsBySessionId"),
    "revoke user sessions": ("POST /console/applications/{applicationId}/users/{userId} action=revoke-sessions",
                             "deleteApiV1ApplicationsByApplicationIdUsersByUserIdSessions"),
    "revoke matching users' sessions": ("POST /console/applications/{applicationId}/users/bulk "
                                        "action=revoke-sessions",
                                        "deleteApiV1ApplicationsByApplicationIdUsersByUserIdSessions"),
    "delete user": ("POST /console/applications/{applicationId}/users/{userId} action=delete",
                    "deleteApiV1ApplicationsByApplicationIdUsersByUserId"),
    "user audit trail": ("GET /console/applications/{applicationId}/users/{userId}",
                         "getApiV1ApplicationsByApplicationIdAuditEvents"),
}
