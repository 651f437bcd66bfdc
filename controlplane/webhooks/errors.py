"""Errors of webhooks (spec "Webhooks", "Errors"; docs/webhooks.md, docs/errors.md)."""
from shared.errors import BadRequest, NotFound


class WebhookNotFound(NotFound):
    """No webhook with this id in the application."""

    code, message = "WEBHOOK_NOT_FOUND", "Webhook not found."
    detail_names = ("webhook_id",)


class WebhookTargetForbidden(BadRequest):
    """The URL's host is, or resolves to, an address the service must not call
    (loopback, private, link-local, CGNAT, multicast, unspecified...), or is a
    ``localhost`` name."""

    code, message = "WEBHOOK_TARGET_FORBIDDEN", "The webhook URL targets a private or local address."
    detail_names = ("host", "reason")


class WebhookEventUnsupported(BadRequest):
    """An entry of ``events`` is not one of the spec's event kinds."""

    code, message = "WEBHOOK_EVENT_UNSUPPORTED", "Unsupported webhook event."

    def __init__(self, events: list[str], supported):
        super().__init__(f"Unsupported webhook event(s): {', '.join(events)}.",
                         details={"events": list(events), "supported": list(supported)})
