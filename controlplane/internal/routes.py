"""Routes of the internal API for decision services (the contract's items 1 to 4, plus
``/internal/v1/whoami`` so an API-key sidecar can learn its application)."""
from controlplane.internal import resources
from controlplane.internal.service import ChangeFeed

INDEXES = {}

BASE = "/internal/v1"
APP = BASE + "/applications/{applicationId}"


def register(ctx, routes):
    feed = ChangeFeed(ctx.events, ctx.tailer, heartbeat=ctx.config.stream_heartbeat, registry=ctx.metrics.registry)
    routes.add(f"{APP}/users/{{userId}}/grants", resources.Grants(ctx), "internal")
    routes.add(f"{APP}/policies", resources.Policies(ctx), "internal")
    routes.add(f"{APP}/api-keys", resources.ApiKeys(ctx), "internal")
    routes.add(f"{APP}/changes", resources.ApplicationChanges(feed), "internal")
    routes.add(f"{BASE}/changes", resources.AllChanges(feed), "internal")
    routes.add(f"{BASE}/whoami", resources.WhoAmI(ctx), "internal")
