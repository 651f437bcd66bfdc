"""Routes of the console area: server-rendered pages under /console/ (docs/console.md)."""
from __future__ import annotations

from controlplane.console import access_rules, connections, integrations, resources, settings, users
from controlplane.console.resources import DeleteItem
from controlplane.console.web import Console

TAG = "console"
BASE = "/console"


def add_routes(routes, services):
    dashboard, config = services.dashboard, services.config
    console = Console(pages=services.pages, accounts=dashboard.accounts, sudo=dashboard.sudo,
                      public_url=config.public_url)
    organization = resources.Organization(console, dashboard.organizations, config)
    application = resources.Application(console, dashboard.access, services.applications)
    routes.add(BASE, resources.Home(console), TAG)
    routes.add(f"{BASE}/assets/{{filename}}", resources.ConsoleAsset(console), TAG)
    sign_in = (console, config, dashboard.passkeys, dashboard.access)
    routes.add(f"{BASE}/sign-in", resources.SignIn(*sign_in), TAG)
    routes.add(f"{BASE}/sign-in/code", resources.SignInCode(*sign_in), TAG)
    routes.add(f"{BASE}/sign-in/passkey", resources.SignInPasskey(*sign_in), TAG)
    routes.add(f"{BASE}/sign-up", resources.SignUp(console, config), TAG)
    routes.add(f"{BASE}/verify-email", resources.VerifyEmail(console), TAG)
    routes.add(f"{BASE}/forgot-password", resources.ForgotPassword(console), TAG)
    routes.add(f"{BASE}/reset-password", resources.ResetPassword(console), TAG)
    routes.add(f"{BASE}/sign-out", resources.SignOut(console, config), TAG)
    routes.add(f"{BASE}/account", resources.Account(console, config), TAG)
    routes.add(f"{BASE}/account/name", resources.AccountName(console), TAG)
    routes.add(f"{BASE}/account/verification", resources.ResendVerification(console), TAG)
    routes.add(f"{BASE}/account/reauthenticate", resources.Reauthenticate(console), TAG)
    routes.add(f"{BASE}/account/reauthenticate/passkey", resources.ReauthenticatePasskey(console), TAG)
    routes.add(f"{BASE}/organizations", resources.Organizations(console, dashboard.organizations), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}", organization, TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members/{{accountId}}",
               resources.Member(console, dashboard.organizations, organization), TAG)
    routes.add(f"{BASE}/applications", resources.Applications(
        console, dashboard.organizations, dashboard.applications), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}", application, TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/delete",
               resources.DeleteApplication(console, dashboard.access, application, dashboard.applications,
                                            services.applications), TAG)
    # OIDC clients, webhooks and the audit log (controlplane/console/integrations.py)
    access, app_base = dashboard.access, f"{BASE}/applications/{{applicationId}}"
    client_page = integrations.OidcClient(console, access, services.oidc.clients)
    webhook_page = integrations.Webhook(console, access, services.webhooks.management)
    routes.add(f"{app_base}/oidc-clients", integrations.OidcClients(console, access, services.oidc.clients), TAG)
    routes.add(f"{app_base}/oidc-clients/{{clientId}}", client_page, TAG)
    routes.add(f"{app_base}/oidc-clients/{{clientId}}/rotate-secret",
               integrations.OidcClientSecret(console, access, client_page, services.oidc.clients), TAG)
    routes.add(f"{app_base}/oidc-clients/{{clientId}}/delete",
               DeleteItem(console, access, client_page, services.oidc.clients, integrations.CLIENT_DELETION), TAG)
    routes.add(f"{app_base}/webhooks", integrations.Webhooks(console, access, services.webhooks.management), TAG)
    routes.add(f"{app_base}/webhooks/{{webhookId}}", webhook_page, TAG)
    routes.add(f"{app_base}/webhooks/{{webhookId}}/rotate-secret",
               integrations.WebhookSecret(console, access, webhook_page, services.webhooks.management), TAG)
    routes.add(f"{app_base}/webhooks/{{webhookId}}/deliveries/{{deliveryId}}/redeliver",
               integrations.WebhookRedelivery(console, access, webhook_page, services.webhooks.management), TAG)
    routes.add(f"{app_base}/audit", integrations.AuditEvents(console, access, services.audit), TAG)
    routes.add(f"{app_base}/audit/tail", integrations.AuditTail(console, access, services.audit), TAG)
    routes.add(f"{app_base}/audit/export", integrations.AuditExport(console, access, services.audit), TAG)
    # The links mailed to dashboard accounts (controlplane.dashboard.emails) open console pages.
    for page in ("verify-email", "reset-password"):
        routes.add(f"/dashboard/{page}", resources.EmailLink(page), TAG)
    # Roles and permissions, ABAC policies, the check playground (access_rules.py).
    app_base = f"{BASE}/applications/{{applicationId}}"
    role_page = access_rules.Role(console, dashboard.access, services.roles)
    policy_page = access_rules.Policy(console, dashboard.access, services.abac)
    routes.add(f"{app_base}/roles", access_rules.Roles(console, dashboard.access, services.roles), TAG)
    routes.add(f"{app_base}/permission-check", access_rules.PermissionCheck(console, dashboard.access), TAG)
    routes.add(f"{app_base}/roles/{{roleId}}", role_page, TAG)
    routes.add(f"{app_base}/roles/{{roleId}}/delete",
               DeleteItem(console, dashboard.access, role_page, services.roles, access_rules.ROLE_DELETION), TAG)
    routes.add(f"{app_base}/policies", access_rules.Policies(console, dashboard.access, services.abac), TAG)
    routes.add(f"{app_base}/policies/{{policyId}}", policy_page, TAG)
    routes.add(f"{app_base}/policies/{{policyId}}/active",
               access_rules.PolicyActivation(console, dashboard.access, policy_page, services.abac), TAG)
    routes.add(f"{app_base}/check", access_rules.Playground(console, dashboard.access, services.abac), TAG)
    # Settings screens (controlplane/console/settings.py): branding and its preview, API keys, Security.
    branding = settings.Branding(console, dashboard.access, services.applications)
    api_keys = settings.ApiKeys(console, dashboard.access, services.api_keys)
    routes.add(f"{BASE}/applications/{{applicationId}}/branding", branding, TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/branding/preview",
               settings.BrandingPreview(console, dashboard.access, services.pages), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys", api_keys, TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/api-keys/{{keyId}}/revoke",
               settings.RevokeApiKey(console, dashboard.access, api_keys, services.api_keys), TAG)
    routes.add(f"{BASE}/account/security", settings.Security(console, dashboard.mfa, dashboard.passkeys), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/security",
               settings.OrganizationSecurity(console, dashboard.organizations, organization), TAG)
    # Users of an application: the list and search, bulk actions, one user's page.
    finder = users.UserFinder(services.users.admin, services.users.directory)
    app_users = f"{BASE}/applications/{{applicationId}}/users"
    routes.add(app_users, users.Users(console, dashboard.access, finder), TAG)
    routes.add(f"{app_users}/bulk", users.BulkUsers(
        console, dashboard.access, finder, services.users.admin, services.selfservice), TAG)
    areas = users.UserAreas(second_factors=services.passkeys, roles=services.roles, abac=services.abac,
                            audit=services.audit)
    routes.add(f"{app_users}/{{userId}}", users.User(
        console, dashboard.access, services.users.admin, services.users.directory, services.selfservice, areas), TAG)
    # Connections: upstream identity providers (controlplane/console/connections.py).
    app_connections, connection_service = f"{BASE}/applications/{{applicationId}}/connections", services.connections
    connection_page = connections.Connection(console, dashboard.access, connection_service)
    routes.add(app_connections, connections.Connections(console, dashboard.access, connection_service), TAG)
    routes.add(f"{app_connections}/{{connectionId}}", connection_page, TAG)
    routes.add(f"{app_connections}/{{connectionId}}/test",
               connections.TestConnection(console, dashboard.access, connection_page, connection_service), TAG)
    routes.add(f"{app_connections}/{{connectionId}}/delete",
               DeleteItem(console, dashboard.access, connection_page, connection_service,
                          connections.CONNECTION_DELETION), TAG)
