"""Routes of the MFA area (spec "Multi-factor authentication"), plus the dashboard's
MFA reset for end users.

Puts ``MfaService`` on the context as ``ctx.mfa``, makes its ``login_challenge`` the
login's second factor (``ctx.login_second_factor``), and forgets a deleted user's
second factor when the change log says ``user.deleted``.
"""
from controlplane.mfa import resources
from controlplane.mfa.service import MfaService
from controlplane.mfa.store import INDEXES  # noqa: F401  (declared by create_app)

V1 = "/api/v1/applications/{applicationId}/users"
DASHBOARD = "/api/dashboard/applications/{applicationId}/users"


def register(ctx, routes):
    ctx.mfa = MfaService(ctx)
    ctx.login_second_factor = ctx.mfa.login_challenge
    ctx.events.listen(ctx.mfa.on_event)
    tag = "multi-factor authentication"
    routes.add(f"{V1}/{{userId}}/mfa/totp/setup", resources.TotpSetup(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/totp/confirm", resources.TotpConfirm(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/totp", resources.Totp(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/status", resources.MfaStatus(ctx), tag)
    routes.add(f"{V1}/{{userId}}/mfa/backup-codes/regenerate", resources.RegenerateBackupCodes(ctx), tag)
    routes.add(f"{V1}/mfa/verify", resources.Verify(ctx), tag)
    routes.add(f"{DASHBOARD}/{{userId}}/mfa", resources.AdminMfa(ctx), "dashboard: end users")
