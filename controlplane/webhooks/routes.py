"""Routes of the webhooks area: management, secret rotation, the delivery log and redelivery."""
from controlplane.webhooks import resources

V1 = "/api/v1/applications/{applicationId}"
TAG = "webhooks"


def add_routes(routes, services):
    routes.add_each(TAG, services.webhooks.management, {
        f"{V1}/webhooks": resources.WebhookCollection,
        f"{V1}/webhooks/{{webhookId}}": resources.WebhookItem,
        f"{V1}/webhooks/{{webhookId}}/rotate-secret": resources.WebhookSecret,
        f"{V1}/webhooks/{{webhookId}}/deliveries": resources.WebhookDeliveries,
        f"{V1}/webhooks/{{webhookId}}/deliveries/{{deliveryId}}/redeliver": resources.WebhookRedelivery,
    })
