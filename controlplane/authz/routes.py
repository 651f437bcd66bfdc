"""Routes of the authz area: the control plane's own permission checks (their paths are
``shared.checks``', the decision service's too)."""
from controlplane.authz import resources
from shared import checks

TAG = "authz"


def add_routes(routes, services):
    # GET CHECK_ROUTE in its plain form is answered by controlplane.hotpath first.
    routes.add(checks.CHECK_ROUTE, resources.Check(services.authz), TAG)
    routes.add(checks.CHECK_BULK_ROUTE, resources.CheckBulk(services.authz), TAG)
