"""Routes of the authz area: the control plane's own checks, and the permission gate
resolver of every V1 route (``ctx.permission_resolver``).

Puts ``ctx.authz`` (``AuthzService``) on the context; needs ``ctx.roles``.
"""
from controlplane.authz import resources
from controlplane.authz.service import AuthzService
from controlplane.authz.store import INDEXES  # noqa: F401  (declared by create_app)

V1 = "/api/v1/applications/{applicationId}"


def register(ctx, routes):
    ctx.authz = AuthzService(roles=ctx.roles, events=ctx.events, tailer=ctx.tailer, store=ctx.store,
                             clock=ctx.clock, cache_ttl=ctx.config.authz_cache_ttl)
    ctx.permission_resolver = ctx.authz.permission_resolver
    routes.add(f"{V1}/authz/check", resources.Check(ctx), "authz")
    routes.add(f"{V1}/authz/check-bulk", resources.CheckBulk(ctx), "authz")
