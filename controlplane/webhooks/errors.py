"""Errors of webhooks (spec "Webhooks", "Errors"; docs/webhooks.md, docs/errors.md)."""
from shared.errors import BadRequest, Conflict, NotFound


class WebhookNotFound(NotFound, code="WEBHOOK_NOT_FOUND", message="Webhook not found.", detail_names=("webhook_id",)):
    """No webhook with this id in the application."""


class WebhookDeliveryNotFound(NotFound, code="WEBHOOK_DELIVERY_NOT_FOUND", message="Webhook delivery not found.",
                              detail_names=("webhook_id", "delivery_id")):
    """No delivery of an event with this id to this webhook (another webhook's, another
    application's, one of another kind, or one past its retention)."""


class WebhookInactive(Conflict, code="WEBHOOK_INACTIVE",
                      message="The webhook is disabled; enable it (PUT is_active: true) before redelivering.",
                      detail_names=("webhook_id",)):
    """A redelivery to a webhook that is not active: the worker would cancel it unsent."""


class WebhookEventNotSubscribed(Conflict, code="WEBHOOK_EVENT_NOT_SUBSCRIBED",
                                message="The webhook no longer subscribes to {event}; add it to its events "
                                        "(PUT events) before redelivering.",
                                detail_names=("webhook_id", "event")):
    """A redelivery of an event of a kind the webhook's ``events`` no longer name: the
    receiver opted out of it, and the worker would cancel it unsent."""


class WebhookLimitReached(Conflict, code="WEBHOOK_LIMIT_EXCEEDED",
                          message="An application may hold at most {limit} webhooks; delete one first.",
                          detail_names=("limit",)):
    """The application already holds IAMGATE_MAX_WEBHOOKS_PER_APPLICATION webhooks."""


class WebhookTargetForbidden(BadRequest, code="WEBHOOK_TARGET_FORBIDDEN",
                             message="The webhook URL targets a private or local address.",
                             detail_names=("host", "reason")):
    """The URL's host is, or resolves to, an address the service must not call
    (loopback, private, link-local, CGNAT, multicast, unspecified...), or is a
    ``localhost`` name."""


class WebhookEventUnsupported(BadRequest, code="WEBHOOK_EVENT_UNSUPPORTED", message="Unsupported webhook event."):
    """An entry of ``events`` is not one of the spec's event kinds."""

    def __init__(self, events: list[str], supported):
        super().__init__(f"Unsupported webhook event(s): {', '.join(events)}.",
                         details={"events": list(events), "supported": list(supported)})
