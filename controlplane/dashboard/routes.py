"""Routes of the dashboard area: accounts, organizations, applications, API keys."""
from __future__ import annotations

from controlplane.dashboard import resources

TAG = "dashboard"
BASE = "/api/dashboard"
# The account's own resources that take the same services, by path under BASE.
SIGN_IN_RESOURCES = {
    "register": resources.Register, "login": resources.Login, "login/mfa": resources.LoginMfa,
    "logout": resources.Logout, "email/verify": resources.VerifyEmail, "email/resend": resources.ResendVerification,
    "password/forgot": resources.ForgotPassword, "password/reset": resources.ResetPassword,
    "login/passkey/options": resources.LoginPasskeyOptions, "login/passkey": resources.LoginPasskey}
ACCOUNT_MFA_RESOURCES = {
    "me/mfa": resources.AccountMfaStatus, "me/mfa/totp/setup": resources.AccountTotpSetup,
    "me/mfa/totp/confirm": resources.AccountTotpConfirm, "me/mfa/totp": resources.AccountTotp,
    "me/mfa/backup-codes/regenerate": resources.AccountBackupCodes}
ACCOUNT_PASSKEY_RESOURCES = {
    "me/passkeys": resources.AccountPasskeys, "me/passkeys/registration/options": resources.AccountPasskeyOptions,
    "me/passkeys/registration/verify": resources.AccountPasskeyRegistration,
    "me/passkeys/{passkeyId}": resources.AccountPasskey}


def add_routes(routes, services):
    accounts, organizations, config = services.dashboard.accounts, services.dashboard.organizations, services.config
    dashboard_apps, access, mfa = services.dashboard.applications, services.dashboard.access, services.dashboard.mfa
    for path, resource in SIGN_IN_RESOURCES.items():
        routes.add(f"{BASE}/{path}", resource(accounts, config), TAG)
    routes.add(f"{BASE}/me", resources.Me(accounts, organizations, mfa), TAG)
    for path, resource in ACCOUNT_MFA_RESOURCES.items():
        routes.add(f"{BASE}/{path}", resource(mfa, accounts), TAG)
    for path, resource in ACCOUNT_PASSKEY_RESOURCES.items():
        routes.add(f"{BASE}/{path}", resource(services.dashboard.passkeys, accounts), TAG)
    routes.add(f"{BASE}/me/password", resources.Password(accounts, config), TAG)
    for path, resource in {"me/reauthenticate": resources.Reauthenticate,
                           "me/reauthenticate/passkey/options": resources.ReauthenticatePasskeyOptions,
                           "me/reauthenticate/passkey": resources.ReauthenticatePasskey}.items():
        routes.add(f"{BASE}/{path}", resource(services.dashboard.sudo, accounts), TAG)
    routes.add(f"{BASE}/organizations", resources.Organizations(organizations), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}", resources.Organization(organizations), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members", resources.Members(organizations, config), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members/{{accountId}}", resources.Member(organizations), TAG)
    routes.add(f"{BASE}/applications", resources.Applications(dashboard_apps), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}",
               resources.Application(dashboard_apps, services.applications, access, services.dashboard.sudo), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/branding",
               resources.Branding(services.applications, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys", resources.ApiKeys(services.api_keys, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys/{{keyId}}",
               resources.ApiKey(services.api_keys, access), TAG)
