"""Webhook management: the spec's Webhook resource under V1/webhooks, the secret
rotation (``rotate-secret`` returns the new secret once: docs/webhooks.md), the
delivery log (the 50 newest Webhook deliveries, newest first) and redelivery (a logged
delivery's event queued again, docs/webhooks.md "Redelivery").

The secret (``signing.new_secret``, the Standard Webhooks form) is generated here, shown
once, and stored encrypted with ``SecretBox``: the delivery worker needs it back to sign.

Each change is an audit record ``webhook.*`` (docs/audit.md) naming the fields changed;
it never holds the secret, nor the URL's value (a URL may carry a token): its host is
the target's display.

Cap (docs/webhooks.md, "Limits"): an event is sent once per webhook subscribed to it, so
an application holds at most IAMGATE_MAX_WEBHOOKS_PER_APPLICATION webhooks.  A create is
counted while it holds the application's write guard (``controlplane.collection.WriteGuard``), so
parallel creates, on any number of replicas, cannot pass the cap.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from controlplane.audit.chain import PERSONAL_DATA
from controlplane.audit.changes import changes as changed_fields
from controlplane.audit.changes import created
from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.events import EventLog
from controlplane.webhooks.dispatcher import pseudonymized
from controlplane.webhooks.errors import (
    WebhookDeliveryNotFound,
    WebhookEventNotSubscribed,
    WebhookEventUnsupported,
    WebhookInactive,
    WebhookLimitReached,
    WebhookNotFound,
)
from controlplane.webhooks.signing import new_secret
from controlplane.webhooks.store import INACTIVE, WebhookStore, new_event_delivery
from controlplane.webhooks.targets import TargetPolicy
from shared.crypto import SecretBox
from shared.ids import is_uuid, new_id
from shared.timeutil import Clock, isoformat

log = logging.getLogger("iamgate.webhooks")

DELIVERY_LOG_SIZE = 50
_HIDDEN = ("url",)  # named in audit records, not shown: a URL may carry a token



@dataclass(eq=False)
class WebhookService:
    store: WebhookStore
    box: SecretBox
    policy: TargetPolicy
    events: EventLog
    clock: Clock
    audit: AuditLog
    event_kinds: InitVar[tuple[str, ...]]
    _: KW_ONLY
    retention_seconds: int  # IAMGATE_WEBHOOK_DELIVERY_RETENTION, for the deliveries queued here
    max_per_application: int  # IAMGATE_MAX_WEBHOOKS_PER_APPLICATION
    on_queued: Callable[[], None] = lambda: None  # wakes this process's delivery worker

    def __post_init__(self, event_kinds):
        self._kinds = tuple(event_kinds)

    def get(self, app_id: str, webhook_id: str) -> dict:
        webhook = self.store.get(app_id, webhook_id.lower()) if is_uuid(webhook_id) else None
        if webhook is None:
            raise WebhookNotFound(webhook_id)
        return webhook

    def list(self, app_id: str) -> list[dict]:
        return self.store.list(app_id)

    def create(self, app_id: str, values: dict) -> tuple[dict, str]:
        """A new active webhook and its secret (the plaintext, to show once).  409
        WEBHOOK_LIMIT_EXCEEDED when the application holds ``max_per_application``
        webhooks, active or not; nothing is written then."""
        target = self.policy.check(values["url"])
        events = self._check_events(values["events"])
        secret = new_secret()
        with self.store.write_guard(self.clock).held(app_id):
            if self.store.count(app_id) >= self.max_per_application:
                raise WebhookLimitReached(self.max_per_application)
            now = self.clock()
            doc = {
                "_id": new_id(),
                "app_id": app_id,
                "url": target.url,
                "events": events,
                "secret": self.box.encrypt(secret),
                "created_seq": self.events.head(),
                "is_active": True,
                "consecutive_failures": 0,
                "disabled_at": None,
                "created_at": now,
                "updated_at": now,
            }
            self.store.insert(doc)
        self._record("webhook.created", doc, created(doc, ("url", "events", "is_active"), hidden=_HIDDEN))
        return doc, secret

    def update(self, app_id: str, webhook_id: str, values: dict) -> dict:
        """PUT: any of url, events (replaces), is_active.  Re-enabling resets the
        failure streak that auto-disabling counts.  Deactivating cancels the pending
        deliveries (``WebhookStore.cancel_queued``), after the webhook is written inactive
        so that a worker claiming one meanwhile finds it inactive: switched on again, the
        webhook gets none of what was queued before."""
        webhook = self.get(app_id, webhook_id)
        changes = {}
        if "url" in values:
            changes["url"] = self.policy.check(values["url"]).url
        if "events" in values:
            changes["events"] = self._check_events(values["events"])
        if "is_active" in values:
            changes["is_active"] = values["is_active"]
            if values["is_active"] and not webhook["is_active"]:
                changes.update(consecutive_failures=0, disabled_at=None)
        if not changes:
            return webhook
        updated = self.store.update(app_id, webhook["_id"], {**changes, "updated_at": self.clock()})
        if updated is None:
            raise WebhookNotFound(webhook_id)
        if changes.get("is_active") is False:
            self.store.cancel_queued(app_id, updated["_id"], self.clock(), INACTIVE)
        self._record("webhook.updated", updated, changed_fields(webhook, updated, changes, hidden=_HIDDEN))
        return updated

    def delete(self, app_id: str, webhook_id: str) -> None:
        """Delete the webhook, then its deliveries: pending retries are not sent (a worker
        holding one finds the webhook gone and drops it)."""
        webhook = self.get(app_id, webhook_id)
        if not self.store.delete(app_id, webhook["_id"]):
            raise WebhookNotFound(webhook_id)
        self.store.delete_deliveries(app_id, webhook["_id"])
        self._record("webhook.deleted", webhook, {})

    def rotate_secret(self, app_id: str, webhook_id: str) -> tuple[dict, str]:
        """A new secret, effective for every attempt from now on (retries included)."""
        webhook = self.get(app_id, webhook_id)
        secret = new_secret()
        updated = self.store.update(app_id, webhook["_id"],
                                    {"secret": self.box.encrypt(secret), "updated_at": self.clock()})
        if updated is None:
            raise WebhookNotFound(webhook_id)
        self._record("webhook.secret_rotated", updated, {"fields": ["secret"]})
        return updated, secret

    def _record(self, action: str, webhook: dict, data: dict) -> None:
        self.audit.record(action, result=success(),
                          target=actor("webhook", webhook["_id"], urlsplit(webhook["url"]).hostname),
                          application_id=webhook["app_id"], data=data)

    def deliveries(self, app_id: str, webhook_id: str) -> list[dict]:
        webhook = self.get(app_id, webhook_id)
        return self.store.recent_deliveries(app_id, webhook["_id"], DELIVERY_LOG_SIZE)

    def redeliver(self, app_id: str, webhook_id: str, delivery_id: str) -> dict:
        """Queue the event of a logged delivery again, as a new delivery: the same event and
        body, a new id (so a receiver that drops ids it has seen takes it), signed afresh
        at each attempt like any delivery, and ``redelivery_of`` naming the delivery it
        repeats.  404 WEBHOOK_NOT_FOUND, 404 WEBHOOK_DELIVERY_NOT_FOUND, 409
        WEBHOOK_INACTIVE and 409 WEBHOOK_EVENT_NOT_SUBSCRIBED (the event's kind is no
        longer among the webhook's events): the worker would cancel it unsent, so it is
        refused rather than queued to end ``cancelled``."""
        webhook = self.get(app_id, webhook_id)
        original = (self.store.find_event_delivery(app_id, webhook["_id"], delivery_id.lower())
                    if is_uuid(delivery_id) else None)
        if original is None:
            raise WebhookDeliveryNotFound(webhook_id, delivery_id)
        if not webhook["is_active"]:
            raise WebhookInactive(webhook_id)
        if original["event"] not in webhook["events"]:
            raise WebhookEventNotSubscribed(webhook_id, original["event"])
        now = self.clock()
        delivery = new_event_delivery(new_id(), app_id, webhook["_id"], original["event_seq"], original["event"],
                                      original["body"], now=now, redelivery_of=original["_id"],
                                      expires_at=now + timedelta(seconds=self.retention_seconds))
        self.store.insert_delivery(delivery)
        self._record("webhook.redelivered", webhook, {"delivery_id": delivery["_id"],
                                                      "redelivery_of": original["_id"], "event": original["event"]})
        log.info("webhook redelivery queued", extra={"app_id": app_id, "webhook_id": webhook["_id"],
                                                     "delivery_id": delivery["_id"], "redelivery_of": original["_id"],
                                                     "event": original["event"]})
        self.on_queued()
        return delivery

    def forget_user(self, app_id: str, user_id: str) -> None:
        """Account deletion: in the logged body of every delivery of the user's own events
        (``AuditLog.personal_events``), redeliveries and pending ones included, the email
        and name become the user's id, as in the audit records, so that no later attempt
        or redelivery sends them.  Every other byte of a body stays as it was."""
        seqs = self.audit.personal_events(app_id, user_id)
        if not seqs:
            return
        for delivery in self.store.deliveries_of_events(app_id, seqs):
            body = pseudonymized(delivery["body"], user_id, PERSONAL_DATA)
            if body != delivery["body"]:
                self.store.replace_body(delivery["_id"], delivery["body"], body)

    def _check_events(self, events: list[str]) -> list[str]:
        unsupported = [e for e in events if e not in self._kinds]
        if unsupported:
            raise WebhookEventUnsupported(unsupported, self._kinds)
        return events


def serialize_webhook(doc: dict, secret: str | None = None) -> dict:
    """The spec's Webhook; ``secret`` only in the create and rotate responses."""
    out = {"id": doc["_id"], "url": doc["url"], "events": list(doc["events"])}
    if secret is not None:
        out["secret"] = secret
    out.update(is_active=bool(doc["is_active"]), created_at=isoformat(doc["created_at"]),
               updated_at=isoformat(doc["updated_at"]))
    return out


def serialize_delivery(doc: dict) -> dict:
    """The spec's Webhook delivery, plus ``status``, ``webhook_id`` and ``redelivery_of``."""
    return {
        "id": doc["_id"],
        "webhook_id": doc["webhook_id"],
        "event": doc["event"],
        "status": doc["status"],
        "response_status": doc.get("response_status"),
        "delivered_at": isoformat(doc.get("delivered_at")),
        "retry_count": doc.get("retry_count", 0),
        "created_at": isoformat(doc["created_at"]),
        "redelivery_of": doc.get("redelivery_of"),
    }
