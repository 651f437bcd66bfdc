"""Routes of the webhooks area: management, secret rotation, the delivery log and redelivery."""
from controlplane.webhooks import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "webhooks"


def add_routes(routes, services):
    webhooks = services.webhooks.management
    routes.add(f"{V1}/webhooks", resources.WebhookCollection(webhooks), TAG)
    routes.add(f"{V1}/webhooks/{{webhookId}}", resources.WebhookItem(webhooks), TAG)
    routes.add(f"{V1}/webhooks/{{webhookId}}/rotate-secret", resources.WebhookSecret(webhooks), TAG)
    routes.add(f"{V1}/webhooks/{{webhookId}}/deliveries", resources.WebhookDeliveries(webhooks), TAG)
    routes.add(f"{V1}/webhooks/{{webhookId}}/deliveries/{{deliveryId}}/redeliver",
               resources.WebhookRedelivery(webhooks), TAG)
