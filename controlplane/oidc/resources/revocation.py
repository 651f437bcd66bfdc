"""Token revocation (RFC 7009)."""
from __future__ import annotations

import falcon

from controlplane.oidc.errors import InvalidRequest, UnauthenticatedClient
from controlplane.oidc.resources.common import ClientAuthenticated, protocol_params
from controlplane.openapi import op
from shared.http import no_store


class Revoke(ClientAuthenticated):
    docs = {"POST": op(errors=[InvalidRequest, UnauthenticatedClient])}
    public_clients = True

    def on_post(self, req, resp):
        """Token revocation (RFC 7009)

        Client-authenticated; a public client sends its client_id alone. A refresh token revokes its grant
        (whose access tokens userinfo and introspection refuse from then on); unknown tokens, access tokens
        and other clients' tokens are answered 200 and change nothing."""
        no_store(resp)
        params = protocol_params(req)
        self.flow.revoke(self._client(req, params), params)
        resp.status = falcon.HTTP_200
        resp.media = {}
