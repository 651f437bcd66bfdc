"""Console screens of an application's connections (upstream identity providers,
docs/connections.md): the list and the create form (a preset or a custom OIDC issuer),
one connection's settings, "Test connection", and delete.

Each page calls the service the V1 route calls (``UpstreamConnectionService``), its form
validated by the same schema, behind the V1 gates (``connections:manage``, even to read,
as the API's): owners and admins act, members and viewers are refused 403.  The client
secret is write-only here as there: a password field, never filled in or shown back; on
the settings page, left blank it stays as it is.
"""
from __future__ import annotations

from controlplane.connections import resources as connections_api
from controlplane.connections import schemas as connection_schemas
from controlplane.connections.model import LINKING_MODES
from controlplane.connections.presets import PRESETS
from controlplane.connections.service import UpstreamConnectionService, serialize
from controlplane.console.integrations import lines
from controlplane.console.resources import ApplicationScreen, Deletion, PageAction, stands_for
from controlplane.console.web import listing
from controlplane.oidc.upstream import redirect_uri
from shared.errors import ValidationFailed

SWITCHES = ("trusted", "jit", "auto_update", "store_tokens", "is_active")
CLAIMS = ("email", "email_verified", "name", "picture")
CLAIM_PREFIX = "claim_"
# What each linking mode risks when a first sign-in's email is already a user's
# (docs/connections.md, "Linking modes and their risks").
LINKING_RISKS = {
    "none": "Refused (409): nothing is linked; the person signs in to the account another way. No risk.",
    "verify": "The person proves the existing account (its password, or a code mailed to it) before the "
              "identity is linked. No risk beyond the account's own credentials.",
    "trusted_email": "Linked at once when the connection is trusted, the provider says the email is verified "
                     "and the local email is verified; otherwise as verify. Risk: an account takeover if the "
                     "provider's \"verified\" emails are not really verified.",
}
PAGE_DEFAULTS = {"presets": PRESETS, "linking_modes": LINKING_MODES, "risks": LINKING_RISKS, "claims": CLAIMS}


class ConnectionScreen(ApplicationScreen):
    """A page of an application's connections: the service, and what their forms offer."""

    connections: UpstreamConnectionService

    defaults = PAGE_DEFAULTS


class Connections(ConnectionScreen):
    sensitive = ("POST",)  # a connection decides whose word signs users in
    gates, docs = stands_for(connections_api.ConnectionCollection, "POST",
                             "Create a connection from a preset or a custom OIDC issuer",
                             page="An application's connections (upstream identity providers), and a form to add one")

    template = "connections_list.html"

    def contents(self, req, applicationId):
        connections, paging = listing(req, self.connections.list(applicationId), serialize)
        return {"connections": connections, **paging}

    def change(self, form, applicationId):
        values = connection_schemas.CREATE_CONNECTION.validate(connection_values(form, current=None))
        connection = self.connections.create(applicationId, values)
        return f"/console/applications/{applicationId}/connections/{connection.id}?notice=created"


class Connection(ConnectionScreen):
    sensitive = ("POST",)
    gates, docs = stands_for(connections_api.ConnectionItem, "PATCH",
                             "Update a connection (a blank client secret keeps the stored one)",
                             page="One connection's settings (never its client secret)")

    template = "connections_detail.html"
    defaults = {**PAGE_DEFAULTS, "saved": False, "report": None}

    def contents(self, req, applicationId, connectionId):
        connection = self.connections.get(applicationId, connectionId)
        return {"connection": serialize(connection), "created": req.get_param("notice") == "created",
                "redirect_uri": redirect_uri(self.console.public_url, applicationId, connection)}

    def change(self, form, applicationId, connectionId):
        current = serialize(self.connections.get(applicationId, connectionId))
        values = connection_schemas.UPDATE_CONNECTION.validate(connection_values(form, current=current),
                                                               partial=True)
        self.connections.update(applicationId, connectionId, values)
        return {"saved": True}


class TestConnection(PageAction):
    gates, docs = stands_for(connections_api.ConnectionTest, "POST",
                             "Test a connection: discovery and the JWKS fetched now, each check's finding shown",
                             read=connections_api.ConnectionItem)

    connections: UpstreamConnectionService

    def change(self, _form, applicationId, connectionId):
        return {"report": self.connections.test(applicationId, connectionId)}


CONNECTION_DELETION = Deletion(connections_api.ConnectionItem, "Delete a connection; the form must repeat its name",
                               "connection", "connections",
                               lambda connections, app_id, connection_id: connections.get(app_id, connection_id).name)


# ---------------------------------------------------------------- form values


def connection_values(form: dict, *, current: dict | None) -> dict:
    """The connection form as the API's body.  A blank optional field is left out (the
    preset's or the current value stays), a blank client secret too; on the settings
    page a blank name, button text or client id is sent, for the API to refuse.  On create
    (``current`` None) the preset, tenant and issuer are sent as typed; on the settings
    page the issuer only when it differs, since setting it fetches discovery anew.
    Scopes are separated by spaces or lines, email domains and attribute mappings
    (``attribute=claim``) one a line; each switch is its checkbox."""
    values: dict = {}
    for name in ("name", "display_name", "client_id", "client_secret", "tenant", "linking"):
        if form.get(name, "").strip():
            values[name] = form[name] if name == "client_secret" else form[name].strip()
        elif current is not None and name in ("name", "display_name", "client_id"):
            values[name] = ""  # a connection always has them: the API refuses them blank, at the field
    issuer = form.get("issuer", "").strip()
    if current is None and (preset := form.get("preset", "").strip()):
        values["preset"] = preset
    if issuer and (current is None or issuer != current["issuer"]):
        values["issuer"] = issuer
    if scopes := form.get("scopes", "").split():
        values["scopes"] = scopes
    if current is not None or form.get("email_domains", "").strip():
        values["email_domains"] = lines(form.get("email_domains", ""))
    mapping = {claim: form[CLAIM_PREFIX + claim].strip() for claim in CLAIMS
               if form.get(CLAIM_PREFIX + claim, "").strip()}
    if attributes := attribute_lines(form.get("claim_attributes", "")):
        mapping["attributes"] = attributes
    if mapping:
        values["claim_mapping"] = mapping
    for name in SWITCHES:
        values[name] = form.get(name) == "on"
    return values


def attribute_lines(text: str) -> dict:
    """``attribute=claim`` lines as the claim mapping's ``attributes``; a line without
    ``=`` is refused at the field, as the API would refuse a bad attribute."""
    attributes = {}
    for line in lines(text):
        attribute, equals, claim = line.partition("=")
        if not equals:
            raise ValidationFailed({"claim_mapping.attributes": f"{line[:70]!r}: write attribute=claim"})
        attributes[attribute.strip()] = claim.strip()
    return attributes
