"""Routes of the MFA area (spec "Multi-factor authentication"), plus the dashboard's
MFA reset for end users."""
from controlplane.mfa import resources

V1 = "/api/v1/applications/{applicationId}/users"
DASHBOARD = "/api/dashboard/applications/{applicationId}/users"


def add_routes(routes, services):
    ctx = services  # TRANSITION (issue "one shape"): resources still take the container
    tag = "multi-factor authentication"
    routes.add(f"{V1}/{{userId}}/mfa/totp/setup", resources.TotpSetup(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/totp/confirm", resources.TotpConfirm(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/totp", resources.Totp(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/status", resources.MfaStatus(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/backup-codes/regenerate", resources.RegenerateBackupCodes(ctx), tag)
    routes.add(f"{V1}/mfa/verify", resources.Verify(ctx), tag)
    routes.add(f"{DASHBOARD}/{{userId}}/mfa", resources.AdminMfa(ctx), "dashboard: end users")
