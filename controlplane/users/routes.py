"""Routes of the users area: end-user authentication (spec "User authentication"),
suspension in the dashboard, and the hosted pages the emails link to."""
from controlplane.users import pages, resources

V1 = "/api/v1/applications/{applicationId}/users"
DASHBOARD = "/api/dashboard/applications/{applicationId}/users"


def add_routes(routes, services):
    ctx = services  # TRANSITION (issue "one shape"): resources still take the container
    tag = "user authentication"
    routes.add(f"{V1}/register", resources.Register(ctx), tag)
    routes.add(f"{V1}/login", resources.Login(ctx), tag)
    routes.add(f"{V1}/logout", resources.Logout(ctx), tag)
    routes.add(f"{V1}/token/refresh", resources.Refresh(ctx), tag)
    routes.add(f"{V1}/{{userId}}/change-password", resources.ChangePassword(ctx), tag)
    routes.add(f"{V1}/password/forgot", resources.ForgotPassword(ctx), tag)
    routes.add(f"{V1}/password/reset", resources.ResetPassword(ctx), tag)
    routes.add(f"{V1}/email/verify", resources.VerifyEmail(ctx), tag)
    routes.add(f"{V1}/email/resend", resources.ResendVerification(ctx), tag)

    admin = "dashboard: end users"
    routes.add(DASHBOARD, resources.AdminUsers(ctx), admin)
    routes.add(f"{DASHBOARD}/{{userId}}/suspend", resources.SuspendUser(ctx), admin)
    routes.add(f"{DASHBOARD}/{{userId}}/unsuspend", resources.UnsuspendUser(ctx), admin)

    hosted = "hosted pages"
    routes.add("/pages/{applicationId}/verify-email", pages.VerifyEmailPage(services.pages), hosted)
    routes.add("/pages/{applicationId}/reset-password", pages.ResetPasswordPage(services.pages), hosted)
