"""Routes of the authz area: the control plane's own permission checks."""
from controlplane.authz import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "authz"


def add_routes(routes, services):
    routes.add(f"{V1}/authz/check", resources.Check(services.authz), TAG)
    routes.add(f"{V1}/authz/check-bulk", resources.CheckBulk(services.authz), TAG)
