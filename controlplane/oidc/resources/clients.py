"""Client management (V1/oidc/clients): the spec's envelope, permission oidc:manage."""
from __future__ import annotations

from controlplane.auth import permission
from controlplane.oidc import schemas
from controlplane.oidc.clients import ClientService, serialize_client
from controlplane.oidc.errors import ClientIsPublic, ClientNotFound
from controlplane.openapi import list_op, op
from controlplane.resource import ManagedCollection, ManagedItem, ServiceResource
from shared.errors import Conflict, PermissionMissing, ValidationFailed
from shared.http import respond

MANAGE = permission("oidc:manage")


class Clients(ManagedCollection):
    every_method = MANAGE
    docs = {
        "GET": list_op(schemas.CLIENT, summary="List the application's OIDC clients, oldest first",
                       errors=[PermissionMissing]),
        "POST": op("Register an OIDC client", body=schemas.CREATE_CLIENT, ok=201, response=schemas.CLIENT_WITH_SECRET,
                   description="client_secret is returned only here (sent with Cache-Control: no-store) and stored "
                               "hashed. Redirect URIs are absolute https URLs of printable ASCII without fragment or "
                               "user information, whose host is a DNS name (an IDN in punycode) or an IP address "
                               "and whose port is 1 to 65535; http is allowed for localhost and 127.0.0.1.",
                   errors=[ValidationFailed, PermissionMissing]),
    }

    serialize = staticmethod(serialize_client)


class ClientItem(ManagedItem):
    every_method = MANAGE
    _ref = "{clientId} is the client's id, or its client_id."
    docs = {
        "GET": op("Get an OIDC client (never its secret)", response=schemas.CLIENT, description=_ref,
                  errors=[PermissionMissing, ClientNotFound]),
        "PUT": op("Update an OIDC client", body=schemas.UPDATE_CLIENT, response=schemas.CLIENT,
                  description=f"{_ref} Lists given replace the stored ones; is_active false makes authorize answer "
                              "invalid_client.",
                  errors=[ValidationFailed, PermissionMissing, ClientNotFound]),
        "DELETE": op("Delete an OIDC client", ok=204,
                     description=f"{_ref} Access and ID tokens already issued stay valid until they expire.",
                     errors=[PermissionMissing, ClientNotFound]),
    }

    serialize = staticmethod(serialize_client)


class ClientSecret(ServiceResource[ClientService]):
    every_method = MANAGE
    docs = {
        "POST": op(body=schemas.ROTATE_SECRET, response=schemas.CLIENT_WITH_SECRET,
                   errors=[ValidationFailed, PermissionMissing, ClientNotFound, ClientIsPublic, Conflict]),
    }

    def on_post(self, req, resp, applicationId, clientId):
        """Rotate a confidential OIDC client's secret

        {clientId} is the client's id, or its client_id. The new client_secret is returned once (Cache-Control:
        no-store) and stored hashed. The secret it replaces authenticates the client for previous_secret_valid_for
        more seconds (0, the default: it stops at once; at most 7 days), until previous_secret_expires_at; a
        secret an earlier rotation replaced stops now. A public client has no secret: 409 OIDC_CLIENT_PUBLIC."""
        values = self.body(req)
        client, secret = self.service.rotate_secret(applicationId, clientId, values["previous_secret_valid_for"])
        respond(resp, serialize_client(client, secret), cacheable=False)
