"""Routes of the dashboard area: accounts, organizations, applications, API keys."""
from __future__ import annotations

from controlplane.dashboard import resources

TAG = "dashboard"
BASE = "/api/dashboard"


def add_routes(routes, services):
    dashboard, config, access = services.dashboard, services.config, services.dashboard_access
    routes.add(f"{BASE}/register", resources.Register(dashboard, config), TAG)
    routes.add(f"{BASE}/login", resources.Login(dashboard, config), TAG)
    routes.add(f"{BASE}/logout", resources.Logout(dashboard, config), TAG)
    routes.add(f"{BASE}/email/verify", resources.VerifyEmail(dashboard), TAG)
    routes.add(f"{BASE}/email/resend", resources.ResendVerification(dashboard), TAG)
    routes.add(f"{BASE}/password/forgot", resources.ForgotPassword(dashboard), TAG)
    routes.add(f"{BASE}/password/reset", resources.ResetPassword(dashboard), TAG)
    routes.add(f"{BASE}/me", resources.Me(dashboard), TAG)
    routes.add(f"{BASE}/me/password", resources.Password(dashboard, config), TAG)
    routes.add(f"{BASE}/organizations", resources.Organizations(dashboard), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members", resources.Members(dashboard, config), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members/{{accountId}}", resources.Member(dashboard), TAG)
    routes.add(f"{BASE}/applications", resources.Applications(dashboard), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}",
               resources.Application(dashboard, services.applications, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/branding",
               resources.Branding(services.applications, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys", resources.ApiKeys(services.api_keys, access), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys/{{keyId}}",
               resources.ApiKey(services.api_keys, access), TAG)
