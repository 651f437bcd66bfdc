"""Routes of the MFA area (spec "Multi-factor authentication"), plus the dashboard's
MFA reset for end users."""
from controlplane.mfa import resources

V1 = "/api/v1/applications/{applicationId}/users"
DASHBOARD = "/api/dashboard/applications/{applicationId}/users"


def add_routes(routes, services):
    tag, mfa = "multi-factor authentication", services.mfa
    routes.add(f"{V1}/{{userId}}/mfa/totp/setup", resources.TotpSetup(mfa), tag)
    routes.add(f"{V1}/{{userId}}/mfa/totp/confirm", resources.TotpConfirm(mfa), tag)
    routes.add(f"{V1}/{{userId}}/mfa/totp", resources.Totp(services.passkeys), tag)
    routes.add(f"{V1}/{{userId}}/mfa/status", resources.MfaStatus(services.passkeys), tag)
    routes.add(f"{V1}/{{userId}}/mfa/backup-codes/regenerate", resources.RegenerateBackupCodes(mfa), tag)
    routes.add(f"{V1}/mfa/verify", resources.Verify(mfa), tag)
    routes.add(f"{DASHBOARD}/{{userId}}/mfa", resources.AdminMfa(services.passkeys, services.dashboard.access),
               "dashboard: end users")
