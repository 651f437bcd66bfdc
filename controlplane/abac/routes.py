"""Routes of the abac area: ABAC policies, the dry run, and user attributes."""
from controlplane.abac import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "abac"


def add_routes(routes, services):
    routes.add_each(TAG, services.abac, {
        f"{V1}/abac/policies": resources.PolicyCollection,
        f"{V1}/abac/policies/{{policyId}}": resources.PolicyItem,
        f"{V1}/abac/evaluate": resources.Evaluate,
        f"{V1}/users/{{userId}}/attributes": resources.UserAttributes,
        f"{V1}/users/{{userId}}/attributes/{{key}}": resources.UserAttribute,
    })
