"""POST /oidc/token (RFC 6749 section 3.2): the authorization_code, refresh_token and
client_credentials grants (``controlplane.oidc.token``)."""
from __future__ import annotations

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.cors import REGISTERED_ORIGINS
from controlplane.oidc.errors import (
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    UnauthorizedClient,
    UnsupportedGrantType,
)
from controlplane.oidc.resources.common import protocol_params
from controlplane.openapi import op
from controlplane.resource import Resource
from shared.http import no_store

TOKEN_RESPONSE = {"type": "object", "properties": {
    "access_token": {"type": "string"}, "token_type": {"type": "string"}, "expires_in": {"type": "integer"},
    "refresh_token": {"type": "string"}, "id_token": {"type": "string"}, "scope": {"type": "string"}}}


class Token(Resource):
    access = {"POST": PUBLIC}
    accepted_media_types = wire.FORM_OR_JSON
    cors = REGISTERED_ORIGINS
    docs = {"POST": op(
        response=TOKEN_RESPONSE, wrapped=False,
        errors=[InvalidRequest, InvalidGrant, InvalidScope, UnauthorizedClient, UnsupportedGrantType],
    )}

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def on_post(self, req, resp):
        """Token endpoint: authorization_code, refresh_token and client_credentials grants

        Form-encoded (RFC 6749) or JSON. Client authentication: client_secret_post or client_secret_basic; a
        public client (token_endpoint_auth_method none) sends client_id alone. A grant type missing from the
        client's grant_types is unauthorized_client. A code is single use: presenting it twice revokes what
        the first exchange issued. Refresh tokens rotate; reusing a rotated one revokes the grant.
        client_credentials (confidential clients only) answers access_token, token_type, expires_in and scope:
        a token whose sub is the client_id."""
        no_store(resp)
        params = protocol_params(req)
        resp.media = self.endpoint.create_token_response(params, wire.basic_credentials(req))
