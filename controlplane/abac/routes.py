"""Routes of the abac area: ABAC policies, the dry run, and user attributes."""
from controlplane.abac import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "abac"


def add_routes(routes, services):
    abac = services.abac
    routes.add(f"{V1}/abac/policies", resources.PolicyCollection(abac), TAG)
    routes.add(f"{V1}/abac/policies/{{policyId}}", resources.PolicyItem(abac), TAG)
    routes.add(f"{V1}/abac/evaluate", resources.Evaluate(abac), TAG)
    routes.add(f"{V1}/users/{{userId}}/attributes", resources.UserAttributes(abac), TAG)
    routes.add(f"{V1}/users/{{userId}}/attributes/{{key}}", resources.UserAttribute(abac), TAG)
