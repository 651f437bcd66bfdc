"""Routes of the users area: end-user authentication (spec "User authentication"),
suspension in the dashboard, and the hosted pages the emails link to."""
from controlplane.users import pages, resources

V1 = "/api/v1/applications/{applicationId}/users"
DASHBOARD = "/api/dashboard/applications/{applicationId}/users"


def add_routes(routes, services):
    tag = "user authentication"
    users, trusted_proxies = services.users, services.config.trusted_proxies
    routes.add(f"{V1}/register", resources.Register(users.registration, trusted_proxies=trusted_proxies), tag)
    routes.add(f"{V1}/login", resources.Login(users.login, trusted_proxies=trusted_proxies), tag)
    routes.add(f"{V1}/logout", resources.Logout(users.sessions), tag)
    routes.add(f"{V1}/token/refresh", resources.Refresh(users.sessions), tag)
    routes.add(f"{V1}/{{userId}}/change-password", resources.ChangePassword(users.passwords), tag)
    routes.add(f"{V1}/password/forgot", resources.ForgotPassword(users.passwords.forgot), tag)
    routes.add(f"{V1}/password/reset", resources.ResetPassword(users.passwords), tag)
    routes.add(f"{V1}/email/verify", resources.VerifyEmail(users.email_verification), tag)
    routes.add(f"{V1}/email/resend", resources.ResendVerification(users.email_verification.resend), tag)

    admin, access = "dashboard: end users", services.dashboard.access
    routes.add(DASHBOARD, resources.AdminUsers(users.admin, access), admin)
    routes.add(f"{DASHBOARD}/{{userId}}/suspend", resources.SuspendUser(users.admin.suspend, access), admin)
    routes.add(f"{DASHBOARD}/{{userId}}/unsuspend", resources.UnsuspendUser(users.admin.unsuspend, access), admin)

    hosted = "hosted pages"
    routes.add("/pages/{applicationId}/verify-email", pages.VerifyEmailPage(services.pages), hosted)
    routes.add("/pages/{applicationId}/reset-password", pages.ResetPasswordPage(services.pages), hosted)
