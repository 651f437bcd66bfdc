"""POST /oidc/token (RFC 6749 section 3.2): the authorization_code and refresh_token
grants (``controlplane.oidc.token``)."""
from __future__ import annotations

from shared.http import no_store

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.errors import InvalidGrant, InvalidRequest, InvalidScope, UnsupportedGrantType
from controlplane.oidc.resources.common import protocol_params
from controlplane.openapi import op
from controlplane.resource import Resource

TOKEN_RESPONSE = {"type": "object", "properties": {
    "access_token": {"type": "string"}, "token_type": {"type": "string"}, "expires_in": {"type": "integer"},
    "refresh_token": {"type": "string"}, "id_token": {"type": "string"}, "scope": {"type": "string"}}}


class Token(Resource):
    access = {"POST": PUBLIC}
    accepted_media_types = wire.FORM_OR_JSON
    docs = {"POST": op(
        "Token endpoint: authorization_code and refresh_token grants",
        description="Form-encoded (RFC 6749) or JSON. Client authentication: client_secret_post or "
                    "client_secret_basic. A code is single use: presenting it twice revokes what the first "
                    "exchange issued. Refresh tokens rotate; reusing a rotated one revokes the grant.",
        response=TOKEN_RESPONSE, wrapped=False,
        errors=[InvalidRequest, InvalidGrant, InvalidScope, UnsupportedGrantType],
    )}

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def on_post(self, req, resp):
        no_store(resp)
        params = protocol_params(req)
        resp.media = self.endpoint.create_token_response(params, wire.basic_credentials(req))
