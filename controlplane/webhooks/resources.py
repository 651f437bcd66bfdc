"""HTTP resources of webhooks (spec "Webhooks (JWT with permission webhooks:manage)").
Every method needs webhooks:manage, for end-user tokens and API keys alike."""
from __future__ import annotations

from controlplane.auth import permission
from controlplane.openapi import list_op, op
from controlplane.resource import ManagedCollection, ManagedItem, ServiceResource
from controlplane.webhooks import schemas
from controlplane.webhooks.errors import (
    WebhookDeliveryNotFound,
    WebhookEventNotSubscribed,
    WebhookEventUnsupported,
    WebhookInactive,
    WebhookLimitReached,
    WebhookNotFound,
    WebhookTargetForbidden,
)
from controlplane.webhooks.service import WebhookService, serialize_delivery, serialize_webhook
from shared.errors import Conflict, PermissionMissing, ValidationFailed
from shared.http import no_store, respond

MANAGE = permission("webhooks:manage")

_WRITE_ERRORS = [ValidationFailed, WebhookTargetForbidden, WebhookEventUnsupported, PermissionMissing]
_ITEM_ERRORS = [PermissionMissing, WebhookNotFound]


class WebhookCollection(ManagedCollection):
    every_method = MANAGE
    docs = {
        "GET": list_op(schemas.WEBHOOK, summary="List webhooks (without their secrets), oldest first",
                       errors=[PermissionMissing]),
        "POST": op("Create a webhook", body=schemas.CREATE_WEBHOOK, ok=201, response=schemas.WEBHOOK_WITH_SECRET,
                   description="The secret is returned once (Cache-Control: no-store). An application holds at "
                               "most IAMGATE_MAX_WEBHOOKS_PER_APPLICATION webhooks, active or not.",
                   errors=[*_WRITE_ERRORS, WebhookLimitReached, Conflict]),
    }

    serialize = staticmethod(serialize_webhook)


class WebhookItem(ManagedItem):
    every_method = MANAGE
    docs = {
        "GET": op("Get a webhook (without its secret)", response=schemas.WEBHOOK, errors=_ITEM_ERRORS),
        "PUT": op("Update a webhook", body=schemas.UPDATE_WEBHOOK, response=schemas.WEBHOOK,
                  errors=[*_WRITE_ERRORS, WebhookNotFound]),
        "DELETE": op("Delete a webhook; pending deliveries are not retried", ok=204, errors=_ITEM_ERRORS),
    }

    serialize = staticmethod(serialize_webhook)


class WebhookSecret(ServiceResource[WebhookService]):
    access = {"POST": MANAGE}
    docs = {
        "POST": op(response=schemas.WEBHOOK_WITH_SECRET, errors=_ITEM_ERRORS),
    }

    def on_post(self, req, resp, applicationId, webhookId):
        """Rotate a webhook's secret

        The new secret is returned once and signs every attempt from now on, retries of earlier events
        included."""
        webhook, secret = self.service.rotate_secret(applicationId, webhookId)
        no_store(resp)
        respond(resp, serialize_webhook(webhook, secret))


class WebhookDeliveries(ServiceResource[WebhookService]):
    access = {"GET": MANAGE}
    docs = {
        "GET": op(response=schemas.DELIVERY_LIST, errors=_ITEM_ERRORS),
    }

    def on_get(self, req, resp, applicationId, webhookId):
        """The 50 most recent deliveries of a webhook, newest first"""
        respond(resp, [serialize_delivery(d) for d in self.service.deliveries(applicationId, webhookId)])


class WebhookRedelivery(ServiceResource[WebhookService]):
    access = {"POST": MANAGE}
    docs = {
        "POST": op(ok=202, response=schemas.DELIVERY, errors=[*_ITEM_ERRORS, WebhookDeliveryNotFound, WebhookInactive,
                                                              WebhookEventNotSubscribed]),
    }

    def on_post(self, req, resp, applicationId, webhookId, deliveryId):
        """Send a logged delivery's event again, as a new delivery

        Queues the same event with the same body under a new delivery id (the X-Service-Delivery-Id and
        webhook-id), signed afresh at each attempt with the webhook's current secret; redelivery_of names the
        delivery it repeats."""
        respond(resp, serialize_delivery(self.service.redeliver(applicationId, webhookId, deliveryId)), status=202)
