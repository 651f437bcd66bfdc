"""Routes of the dashboard area: accounts, organizations, applications, API keys."""
from __future__ import annotations

from controlplane.dashboard import resources

TAG = "dashboard"
BASE = "/api/dashboard"


def add_routes(routes, services):
    accounts, organizations, config = services.dashboard.accounts, services.dashboard.organizations, services.config
    dashboard_apps, access, mfa = services.dashboard.applications, services.dashboard.access, services.dashboard.mfa
    routes.add(f"{BASE}/register", resources.Register(accounts, config), TAG)
    routes.add(f"{BASE}/login", resources.Login(accounts, config), TAG)
    routes.add(f"{BASE}/login/mfa", resources.LoginMfa(accounts, config), TAG)
    routes.add(f"{BASE}/logout", resources.Logout(accounts, config), TAG)
    routes.add(f"{BASE}/email/verify", resources.VerifyEmail(accounts, config), TAG)
    routes.add(f"{BASE}/email/resend", resources.ResendVerification(accounts, config), TAG)
    routes.add(f"{BASE}/password/forgot", resources.ForgotPassword(accounts, config), TAG)
    routes.add(f"{BASE}/password/reset", resources.ResetPassword(accounts, config), TAG)
    routes.add(f"{BASE}/me", resources.Me(accounts, organizations, mfa), TAG)
    routes.add(f"{BASE}/me/mfa", resources.AccountMfaStatus(mfa, accounts), TAG)
    routes.add(f"{BASE}/me/mfa/totp/setup", resources.AccountTotpSetup(mfa, accounts), TAG)
    routes.add(f"{BASE}/me/mfa/totp/confirm", resources.AccountTotpConfirm(mfa, accounts), TAG)
    routes.add(f"{BASE}/me/mfa/totp", resources.AccountTotp(mfa, accounts), TAG)
    routes.add(f"{BASE}/me/mfa/backup-codes/regenerate", resources.AccountBackupCodes(mfa, accounts), TAG)
    routes.add(f"{BASE}/me/password", resources.Password(accounts, config), TAG)
    routes.add(f"{BASE}/organizations", resources.Organizations(organizations), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}", resources.Organization(organizations), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members", resources.Members(organizations, config), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members/{{accountId}}", resources.Member(organizations), TAG)
    routes.add(f"{BASE}/applications", resources.Applications(dashboard_apps), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}",
               resources.Application(dashboard_apps, services.applications, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/branding",
               resources.Branding(services.applications, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys", resources.ApiKeys(services.api_keys, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys/{{keyId}}",
               resources.ApiKey(services.api_keys, access), TAG)
