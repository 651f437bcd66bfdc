"""Routes of the console area: server-rendered pages under /console/ (docs/console.md)."""
from __future__ import annotations

from controlplane.console import resources, users
from controlplane.console.web import Console

TAG = "console"
BASE = "/console"


def add_routes(routes, services):
    dashboard, config = services.dashboard, services.config
    console = Console(pages=services.pages, accounts=dashboard.accounts, public_url=config.public_url)
    organization = resources.Organization(console, dashboard.organizations, config)
    application = resources.Application(console, dashboard.access, services.applications)
    routes.add(BASE, resources.Home(console), TAG)
    routes.add(f"{BASE}/assets/{{filename}}", resources.ConsoleAsset(console), TAG)
    routes.add(f"{BASE}/sign-in", resources.SignIn(console, config), TAG)
    routes.add(f"{BASE}/sign-in/code", resources.SignInCode(console, config), TAG)
    routes.add(f"{BASE}/sign-up", resources.SignUp(console, config), TAG)
    routes.add(f"{BASE}/verify-email", resources.VerifyEmail(console), TAG)
    routes.add(f"{BASE}/forgot-password", resources.ForgotPassword(console), TAG)
    routes.add(f"{BASE}/reset-password", resources.ResetPassword(console), TAG)
    routes.add(f"{BASE}/sign-out", resources.SignOut(console, config), TAG)
    routes.add(f"{BASE}/account", resources.Account(console, config), TAG)
    routes.add(f"{BASE}/account/name", resources.AccountName(console), TAG)
    routes.add(f"{BASE}/account/verification", resources.ResendVerification(console), TAG)
    routes.add(f"{BASE}/organizations", resources.Organizations(console, dashboard.organizations), TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}", organization, TAG)
    routes.add(f"{BASE}/organizations/{{organizationId}}/members/{{accountId}}",
               resources.Member(console, dashboard.organizations, organization), TAG)
    routes.add(f"{BASE}/applications", resources.Applications(
        console, dashboard.organizations, dashboard.applications), TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}", application, TAG)
    routes.add(f"{BASE}/applications/{{applicationId}}/delete",
               resources.DeleteApplication(console, dashboard.access, dashboard.applications, application), TAG)
    # The links mailed to dashboard accounts (controlplane.dashboard.emails) open console pages.
    for page in ("verify-email", "reset-password"):
        routes.add(f"/dashboard/{page}", resources.EmailLink(page), TAG)
    # Users of an application: the list and search, bulk actions, one user's page.
    finder = users.UserFinder(services.users.admin, services.users.directory)
    app_users = f"{BASE}/applications/{{applicationId}}/users"
    routes.add(app_users, users.Users(console, dashboard.access, finder), TAG)
    routes.add(f"{app_users}/bulk", users.BulkUsers(
        console, dashboard.access, finder, services.users.admin, services.selfservice), TAG)
    areas = users.UserAreas(mfa=services.mfa, roles=services.roles, abac=services.abac, audit=services.audit)
    routes.add(f"{app_users}/{{userId}}", users.User(
        console, dashboard.access, services.users.admin, services.users.directory, services.selfservice, areas), TAG)
