"""Routes of user self-service (spec "User self-service", all JWT-owner): profile,
soft delete, GDPR export, OIDC consent withdrawal and session management."""
from controlplane.selfservice import resources

V1 = "/api/v1/applications/{applicationId}/users/{userId}"


def add_routes(routes, services):
    tag, selfservice = "user self-service", services.selfservice
    routes.add(V1, resources.Account(selfservice), tag)
    routes.add(f"{V1}/profile", resources.Profile(selfservice), tag)
    routes.add(f"{V1}/data-export", resources.DataExport(selfservice), tag)
    routes.add(f"{V1}/consent", resources.Consent(selfservice), tag)
    routes.add(f"{V1}/sessions", resources.Sessions(selfservice), tag)
    routes.add(f"{V1}/sessions/{{sessionId}}", resources.SessionItem(selfservice), tag)
