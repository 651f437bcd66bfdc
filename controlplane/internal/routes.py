"""Routes of the internal API for decision services (the contract's items 1 to 4, plus
``/internal/v1/whoami`` so an API-key sidecar can learn its application)."""
from controlplane.internal import resources

BASE = "/internal/v1"
APP = BASE + "/applications/{applicationId}"
TAG = "internal"


def add_routes(routes, services):
    data, feed = services.internal.decision_data, services.internal.change_feed
    routes.add(f"{APP}/users/{{userId}}/grants", resources.Grants(data), TAG)
    routes.add(f"{APP}/policies", resources.Policies(data), TAG)
    routes.add(f"{APP}/api-keys", resources.ApiKeys(data), TAG)
    streams = services.internal.stream_access
    routes.add(f"{APP}/changes", resources.ApplicationChanges(feed, streams), TAG)
    routes.add(f"{BASE}/changes", resources.AllChanges(feed, streams), TAG)
    routes.add(f"{BASE}/whoami", resources.WhoAmI(services.authenticator), TAG)
