"""Routes of the authz area: the control plane's own permission checks."""
from controlplane.authz import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "authz"
CHECK = f"{V1}/authz/check"  # also answered by controlplane.hotpath in its plain form


def add_routes(routes, services):
    routes.add(CHECK, resources.Check(services.authz), TAG)
    routes.add(f"{V1}/authz/check-bulk", resources.CheckBulk(services.authz), TAG)
