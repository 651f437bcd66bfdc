"""Routes of operations: health, readiness, metrics and OpenAPI."""
from controlplane.ops import resources

TAG = "operations"


def add_routes(routes, services):
    routes.add("/healthz", resources.Health(), TAG)
    routes.add("/readyz", resources.Ready(services.store, services.startup), TAG)
    routes.add("/metrics", resources.Metrics(services.metrics, services.config.metrics_token), TAG)
    routes.add("/openapi.json", resources.OpenApi(routes, services.config.public_url), TAG)
