"""What several OIDC endpoints share: the protocol body's parameters and client
authentication."""
from __future__ import annotations

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.cors import REGISTERED_ORIGINS
from controlplane.oidc.errors import InvalidRequest, UnauthenticatedClient
from controlplane.resource import Resource
from shared.errors import DomainError

OBJECT = {"type": "object"}
HTML = {"type": "string"}


def wants_html(req) -> bool:
    """A browser navigating (``Accept: text/html``): it gets a page, never a JSON body.
    A caller that sends no Accept, or JSON's, is a program and keeps the JSON errors."""
    return "text/html" in (req.get_header("Accept") or "")


def protocol_params(req) -> dict:
    """The request's form or JSON parameters; a body that cannot be read is 400
    ``invalid_request``."""
    try:
        return wire.body_params(req)
    except InvalidRequest:
        raise
    except DomainError as exc:
        raise InvalidRequest(exc.message) from None


class ClientAuthenticated(Resource):
    """An endpoint a client calls with its credentials (RFC 7009 and RFC 7662)."""

    access = {"POST": PUBLIC}
    accepted_media_types = wire.FORM_OR_JSON
    cors = REGISTERED_ORIGINS
    # Whether a public client may call it by client_id alone (RFC 7009 2.1 lets it
    # revoke; RFC 7662 introspection is for clients that authenticate).
    public_clients = False

    def __init__(self, clients, flow):
        self.clients = clients
        self.flow = flow

    def _client(self, req, params) -> dict:
        return self.clients.authenticate_request(params, wire.basic_credentials(req), failure=UnauthenticatedClient,
                                                 missing=UnauthenticatedClient, public=self.public_clients)
