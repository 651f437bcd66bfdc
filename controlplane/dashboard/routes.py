"""Routes of the dashboard area: accounts, organizations, applications, API keys."""
from __future__ import annotations

from controlplane.dashboard import resources

TAG = "dashboard"
BASE = "/api/dashboard"


def add_routes(routes, services):
    for path, resource in (
        ("/register", resources.Register),
        ("/login", resources.Login),
        ("/logout", resources.Logout),
        ("/me", resources.Me),
        ("/me/password", resources.Password),
        ("/organizations", resources.Organizations),
        ("/organizations/{organizationId}/members", resources.Members),
        ("/organizations/{organizationId}/members/{accountId}", resources.Member),
        ("/applications", resources.Applications),
        ("/applications/{applicationId}", resources.Application),
        ("/applications/{applicationId}/branding", resources.Branding),
        ("/applications/{applicationId}/api-keys", resources.ApiKeys),
        ("/applications/{applicationId}/api-keys/{keyId}", resources.ApiKey),
    ):
        routes.add(BASE + path, resource(services), TAG)
