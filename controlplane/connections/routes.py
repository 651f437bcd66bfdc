"""Routes of the connections area: management of an application's upstream identity
providers and the "test connection" action."""
from controlplane.connections import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "connections"


def add_routes(routes, services):
    connections = services.connections
    routes.add(f"{V1}/connections", resources.ConnectionCollection(connections), TAG)
    routes.add(f"{V1}/connections/{{connectionId}}", resources.ConnectionItem(connections), TAG)
    routes.add(f"{V1}/connections/{{connectionId}}/test", resources.ConnectionTest(connections), TAG)
