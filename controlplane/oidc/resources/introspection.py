"""Token introspection (RFC 7662)."""
from __future__ import annotations

from controlplane.oidc.errors import InvalidRequest, UnauthenticatedClient
from controlplane.oidc.resources.common import OBJECT, ClientAuthenticated, protocol_params
from controlplane.openapi import op
from shared.http import no_store


class Introspect(ClientAuthenticated):
    docs = {"POST": op(response=OBJECT, wrapped=False, errors=[InvalidRequest, UnauthenticatedClient])}

    def on_post(self, req, resp):
        """Token introspection (RFC 7662)

        Client-authenticated. Tokens are reported active only to the client they were issued to; an access
        token is inactive once its grant is revoked."""
        no_store(resp)
        params = protocol_params(req)
        resp.media = self.flow.introspect(self._client(req, params), params)
