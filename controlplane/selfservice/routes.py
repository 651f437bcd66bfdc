"""Routes of user self-service (spec "User self-service", all JWT-owner): profile,
soft delete, GDPR export, OIDC consent withdrawal and session management."""
from controlplane.selfservice import resources

V1 = "/api/v1/applications/{applicationId}/users/{userId}"


def add_routes(routes, services):
    ctx = services  # TRANSITION (issue "one shape"): resources still take the container
    tag = "user self-service"
    routes.add(V1, resources.Account(ctx), tag)
    routes.add(f"{V1}/profile", resources.Profile(ctx), tag)
    routes.add(f"{V1}/data-export", resources.DataExport(ctx), tag)
    routes.add(f"{V1}/consent", resources.Consent(ctx), tag)
    routes.add(f"{V1}/sessions", resources.Sessions(ctx), tag)
    routes.add(f"{V1}/sessions/{{sessionId}}", resources.SessionItem(ctx), tag)
