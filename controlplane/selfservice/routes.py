"""Routes of user self-service (spec "User self-service", all JWT-owner): profile,
soft delete, GDPR export, OIDC consent withdrawal and session management."""
from controlplane.selfservice import resources

V1 = "/api/v1/applications/{applicationId}/users/{userId}"


def add_routes(routes, services):
    routes.add_each("user self-service", services.selfservice, {
        V1: resources.Account,
        f"{V1}/profile": resources.Profile,
        f"{V1}/data-export": resources.DataExport,
        f"{V1}/consent": resources.Consent,
        f"{V1}/sessions": resources.Sessions,
        f"{V1}/sessions/{{sessionId}}": resources.SessionItem,
    })
