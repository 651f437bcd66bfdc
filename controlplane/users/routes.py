"""Routes of the users area: end-user authentication (spec "User authentication"),
suspension in the dashboard, and the hosted pages the emails link to."""
from controlplane.users import pages, resources

V1 = "/api/v1/applications/{applicationId}/users"
DASHBOARD = "/api/dashboard/applications/{applicationId}/users"


def add_routes(routes, services):
    tag = "user authentication"
    trusted_proxies = services.config.trusted_proxies
    routes.add(f"{V1}/register", resources.Register(services.users.registration, trusted_proxies=trusted_proxies), tag)
    routes.add(f"{V1}/login", resources.Login(services.users.login, trusted_proxies=trusted_proxies), tag)
    routes.add(f"{V1}/logout", resources.Logout(services.users.sessions), tag)
    routes.add(f"{V1}/token/refresh", resources.Refresh(services.users.sessions), tag)
    routes.add(f"{V1}/{{userId}}/change-password", resources.ChangePassword(services.users.passwords), tag)
    routes.add(f"{V1}/password/forgot", resources.ForgotPassword(services.users.passwords), tag)
    routes.add(f"{V1}/password/reset", resources.ResetPassword(services.users.passwords), tag)
    routes.add(f"{V1}/email/verify", resources.VerifyEmail(services.users.email_verification), tag)
    routes.add(f"{V1}/email/resend", resources.ResendVerification(services.users.email_verification), tag)

    admin, access = "dashboard: end users", services.dashboard.access
    routes.add(DASHBOARD, resources.AdminUsers(services.users.admin, access), admin)
    routes.add(f"{DASHBOARD}/{{userId}}/suspend", resources.SuspendUser(services.users.admin, access), admin)
    routes.add(f"{DASHBOARD}/{{userId}}/unsuspend", resources.UnsuspendUser(services.users.admin, access), admin)

    hosted = "hosted pages"
    routes.add("/pages/{applicationId}/verify-email", pages.VerifyEmailPage(services.pages), hosted)
    routes.add("/pages/{applicationId}/reset-password", pages.ResetPasswordPage(services.pages), hosted)
