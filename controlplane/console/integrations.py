"""Console screens of an application's integrations: OIDC clients, webhooks (with the
delivery log and redelivery) and the audit log (with a live tail and the NDJSON export).

Each page calls the same service the V1 route does (``ClientService``,
``WebhookService``, ``AuditLog``), validated by the same schema, behind the dashboard
gate of the application (``DashboardAccess.application``): owners and admins write,
members and viewers read and are refused 403 on a write.  Registering or changing a
client, creating or changing a webhook and rotating either's secret are sensitive
(``dashboard.sudo``): they decide where codes, tokens and events go.  A secret (a confidential
client's, a webhook's) appears only in the answer that created or rotated it.
"""
from __future__ import annotations

from urllib.parse import urlencode

from controlplane.audit import resources as audit_api
from controlplane.audit import schemas as audit_schemas
from controlplane.audit.resources import NDJSON
from controlplane.audit.service import APPLICATION, AuditLog
from controlplane.console.resources import HTML, ApplicationScreen, Deletion, PageAction, page_doc, stands_for
from controlplane.console.web import failed, listing
from controlplane.oidc import schemas as oidc_schemas
from controlplane.oidc.clients import ClientService, is_public, serialize_client
from controlplane.oidc.resources import clients as oidc_api
from controlplane.openapi import op
from controlplane.webhooks import resources as webhook_api
from controlplane.webhooks import schemas as webhook_schemas
from controlplane.webhooks.service import WebhookService, serialize_delivery, serialize_webhook
from shared.errors import DomainError, ValidationFailed
from shared.event_types import PUBLIC_EVENT_TYPES
from shared.timeutil import parse_iso

# Lists typed one per line in a textarea.
CLIENT_LISTS = ("redirect_uris", "post_logout_redirect_uris", "allowed_origins")
# Lists picked with checkboxes named "<prefix><choice>" (a form field may not repeat).
CLIENT_CHOICES = {"allowed_scopes": ("scope_", oidc_schemas.SUPPORTED_SCOPES),
                  "grant_types": ("grant_", oidc_schemas.GRANT_TYPES)}
EVENT_PREFIX = "event_"
# The grace periods the rotate-secret form offers (the API takes any number of seconds up
# to oidc_schemas.MAX_SECRET_GRACE).
SECRET_GRACES = (("at once", 0), ("1 hour", 3600), ("1 day", 86400), ("7 days", oidc_schemas.MAX_SECRET_GRACE))
TAIL_LIMIT = audit_schemas.MAX_LIMIT


# ---------------------------------------------------------------- OIDC clients


class OidcClients(ApplicationScreen):
    sensitive = ("POST",)  # a client and its secret outlive the session
    gates, docs = stands_for(oidc_api.Clients, "POST", "Register an OIDC client (its secret shown once)",
                             page="An application's OIDC clients, and a form to register one")

    clients: ClientService

    template = "integrations_clients.html"
    defaults = {"scopes": oidc_schemas.SUPPORTED_SCOPES, "grants": oidc_schemas.GRANT_TYPES,
                "auth_methods": oidc_schemas.AUTH_METHODS, "created": None}

    def contents(self, req, applicationId):
        clients, paging = listing(req, self.clients.list(applicationId), serialize_client)
        return {"clients": clients, **paging}

    def change(self, form, applicationId):
        values = oidc_schemas.CREATE_CLIENT.validate(client_values(form, create=True))
        client, secret = self.clients.create(applicationId, values)
        return {"status": 201, "created": serialize_client(client, secret)}


class OidcClient(ApplicationScreen):
    sensitive = ("POST",)  # its redirect URIs decide where codes and tokens go
    gates, docs = stands_for(oidc_api.ClientItem, "PUT", "Update an OIDC client (is_active off deactivates it)",
                             page="One OIDC client's settings (never its secret)")

    clients: ClientService

    template = "integrations_client.html"
    defaults = {"scopes": oidc_schemas.SUPPORTED_SCOPES, "grants": oidc_schemas.GRANT_TYPES,
                "secret_graces": SECRET_GRACES, "saved": False, "secret": None}

    def contents(self, req, applicationId, clientId):
        client = self.clients.get(applicationId, clientId)
        return {"client": serialize_client(client), "public": is_public(client)}

    def change(self, form, applicationId, clientId):
        values = oidc_schemas.UPDATE_CLIENT.validate(client_values(form, create=False), partial=True)
        self.clients.update(applicationId, clientId, values)
        return {"saved": True}


class OidcClientSecret(PageAction):
    sensitive = ("POST",)
    gates, docs = stands_for(oidc_api.ClientSecret, "POST",
                             "Rotate an OIDC client's secret (the new one shown once; the old one may work a while)",
                             read=oidc_api.ClientItem)

    clients: ClientService

    def change(self, form, applicationId, clientId):
        grace = form.get("previous_secret_valid_for", "").strip()
        body = {} if grace == "" else {"previous_secret_valid_for": whole_number(grace)}
        values = oidc_schemas.ROTATE_SECRET.validate(body)
        return {"secret": self.clients.rotate_secret(applicationId, clientId, values["previous_secret_valid_for"])[1]}


CLIENT_DELETION = Deletion(oidc_api.ClientItem, "Delete an OIDC client; the form must repeat its name", "client",
                           "oidc-clients", lambda clients, app_id, client_id: clients.get(app_id, client_id)["name"])


# ---------------------------------------------------------------- webhooks


class Webhooks(ApplicationScreen):
    sensitive = ("POST",)  # every event of the application, signed with a secret shown once
    gates, docs = stands_for(webhook_api.WebhookCollection, "POST", "Create a webhook (its secret shown once)",
                             page="An application's webhooks, and a form to create one")

    webhooks: WebhookService

    template = "integrations_webhooks.html"
    defaults = {"catalogue": PUBLIC_EVENT_TYPES, "created": None}

    def contents(self, req, applicationId):
        hooks, paging = listing(req, self.webhooks.list(applicationId), serialize_webhook)
        return {"webhooks": hooks, **paging}

    def change(self, form, applicationId):
        values = webhook_schemas.CREATE_WEBHOOK.validate({"url": form.get("url", ""), "events": picked_events(form)})
        webhook, secret = self.webhooks.create(applicationId, values)
        return {"status": 201, "created": serialize_webhook(webhook, secret)}


class Webhook(ApplicationScreen):
    sensitive = ("POST",)  # its URL decides where the events go
    gates, docs = stands_for(webhook_api.WebhookItem, "PUT", "Update a webhook's URL, events or active switch",
                             page="One webhook (never its secret) and its delivery log",
                             read=webhook_api.WebhookDeliveries)

    webhooks: WebhookService

    template = "integrations_webhook.html"
    defaults = {"catalogue": PUBLIC_EVENT_TYPES, "saved": False, "secret": None, "redelivered": None}

    def contents(self, req, applicationId, webhookId):
        webhook = serialize_webhook(self.webhooks.get(applicationId, webhookId))
        return {"webhook": webhook,
                "deliveries": [serialize_delivery(d) for d in self.webhooks.deliveries(applicationId, webhookId)]}

    def change(self, form, applicationId, webhookId):
        values = webhook_schemas.UPDATE_WEBHOOK.validate({
            "url": form.get("url", ""), "events": picked_events(form),
            "is_active": form.get("is_active") == "on"}, partial=True)
        self.webhooks.update(applicationId, webhookId, values)
        return {"saved": True}


class WebhookSecret(PageAction):
    sensitive = ("POST",)
    gates, docs = stands_for(webhook_api.WebhookSecret, "POST", "Rotate a webhook's secret (the new one shown once)",
                             read=webhook_api.WebhookItem)

    webhooks: WebhookService

    def change(self, _form, applicationId, webhookId):
        return {"secret": self.webhooks.rotate_secret(applicationId, webhookId)[1]}


class WebhookRedelivery(PageAction):
    action_segments = 3  # deliveries/{deliveryId}/redeliver
    gates, docs = stands_for(webhook_api.WebhookRedelivery, "POST",
                             "Send a logged delivery's event again, as a new delivery", read=webhook_api.WebhookItem)

    webhooks: WebhookService

    def on_post(self, req, resp, applicationId, webhookId, deliveryId):
        """The delivery's id is not the webhook page's: the answer is that page's."""
        def redeliver(_form):
            return {"status": 202, "redelivered": self.webhooks.redeliver(applicationId, webhookId, deliveryId)["_id"]}
        self.write_form(req, resp, applicationId, webhookId, change=redeliver)


# ---------------------------------------------------------------- audit log


class AuditEvents(ApplicationScreen):
    gates = audit_api.ApplicationAuditEvents.access
    docs = {"GET": page_doc("The application's audit log: filters in the URL, cursor pages, a live tail",
                            not_found=True, errors=(ValidationFailed,))}

    audit: AuditLog

    def on_get(self, req, resp, applicationId):
        if (viewed := self.viewed(req, resp, applicationId)) is None:
            return
        viewer, app, role = viewed
        query = filter_query(req)
        try:
            filters = audit_schemas.filters(req)
            records, cursor = self.audit.page(APPLICATION, applicationId, filters,
                                              req.get_param("cursor") or None, audit_schemas.DEFAULT_LIMIT)
            extra = {}
        except DomainError as error:
            records, cursor, extra = [], None, failed(error)
        self.console.render(req, resp, "integrations_audit.html", viewer=viewer, app=app, role=role,
                            records=records, query=query, next_cursor=cursor, request_args=filter_args(req),
                            first_page=not req.get_param("cursor"), **{"status": 200, **extra})


class AuditTail(ApplicationScreen):
    gates = audit_api.ApplicationAuditEvents.access
    docs = {"GET": page_doc("The audit records newer than newest_id (the live tail's rows; htmx polls it)",
                            not_found=True)}

    audit: AuditLog

    def on_get(self, req, resp, applicationId):
        if (viewed := self.viewed(req, resp, applicationId)) is None:
            return
        viewer, app, _role = viewed
        newest_id, newest_at = req.get_param("newest_id"), req.get_param("newest_at")
        try:
            filters = audit_schemas.filters(req)
            if newest_at:
                shown = parse_iso(newest_at)
                filters["since"] = max(filters.get("since", shown), shown)
            records, _cursor = self.audit.page(APPLICATION, applicationId, filters, None, TAIL_LIMIT)
        except (DomainError, ValueError):
            records = []
        # Newest first: those before the newest shown are the new ones (same instant included).
        fresh = []
        for record in records:
            if record["id"] == newest_id:
                break
            fresh.append(record)
        newest = fresh[0] if fresh else {"id": newest_id or "", "at": newest_at or ""}
        self.console.render(req, resp, "integrations_audit_tail.html", viewer=viewer, app=app,
                            records=fresh, query=filter_query(req), newest=newest)


class AuditExport(ApplicationScreen):
    gates = audit_api.ApplicationAuditExport.access
    docs = {"GET": op(errors=[ValidationFailed], wrapped=False,
                      also={200: ({"type": "string"}, "one record per line", NDJSON),
                            **{status: (HTML, "an HTML page", "text/html") for status in (303, 404)}})}

    audit: AuditLog

    def on_get(self, req, resp, applicationId):
        """Download the application's audit records with the page's filters (NDJSON)

        Console download (not an API): the V1 export's stream for the signed-in account; signed-out visitors
        are redirected (303) to /console/sign-in."""
        if self.viewed(req, resp, applicationId) is None:
            return
        filters = audit_schemas.filters(req)
        resp.content_type = NDJSON
        resp.cache_control = ["no-store"]
        resp.set_header("Content-Disposition", f'attachment; filename="audit-{applicationId}.ndjson"')
        resp.stream = self.audit.export(APPLICATION, applicationId, filters)


# ---------------------------------------------------------------- form values


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def client_values(form: dict, *, create: bool) -> dict:
    """The client form as the API's body: each textarea a list (one entry a line), each
    group of checkboxes a list, empty optional text as null."""
    values = {"name": form.get("name", "")}
    for name in ("description", "backchannel_logout_uri"):
        values[name] = form.get(name, "").strip() or None
    for name in CLIENT_LISTS:
        values[name] = lines(form.get(name, ""))
    for name, (prefix, choices) in CLIENT_CHOICES.items():
        values[name] = [choice for choice in choices if form.get(prefix + choice) == "on"]
    values["require_pkce"] = form.get("require_pkce") == "on"
    if create:
        values["token_endpoint_auth_method"] = form.get("token_endpoint_auth_method", "")
        if values["token_endpoint_auth_method"] == oidc_schemas.NO_CLIENT_AUTH:
            values["require_pkce"] = True  # a public client always uses PKCE; its form has no switch
    else:
        values["is_active"] = form.get("is_active") == "on"
    return values


def whole_number(text: str) -> int | str:
    """A form's number as the API's integer, or as typed for the schema to refuse."""
    return int(text) if text.isascii() and text.isdigit() else text


def picked_events(form: dict) -> list[str]:
    return [kind for kind in PUBLIC_EVENT_TYPES if form.get(EVENT_PREFIX + kind) == "on"]


def filter_args(req) -> dict[str, str]:
    """The audit filters of the request, each as typed ("" when absent)."""
    return {name: req.get_param(name) or "" for name in (*audit_schemas.FILTER_QUERY,)}


def filter_query(req) -> str:
    """The audit filters of the request as a query string, for the next page, the tail
    and the export links."""
    return urlencode({name: value for name, value in filter_args(req).items() if value})
