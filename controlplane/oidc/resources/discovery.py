"""Discovery and keys: /.well-known/openid-configuration and /.well-known/jwks.json."""
from __future__ import annotations

from controlplane.auth import PUBLIC
from controlplane.oidc.cors import ANY_ORIGIN
from controlplane.oidc.discovery import provider_metadata
from controlplane.oidc.resources.common import OBJECT
from controlplane.openapi import op
from controlplane.resource import Resource


class Discovery(Resource):
    access = {"GET": PUBLIC}
    cors = ANY_ORIGIN
    docs = {"GET": op(response=OBJECT, wrapped=False, store=False)}

    def __init__(self, issuer: str):
        self.metadata = provider_metadata(issuer)

    def on_get(self, req, resp):
        """OpenID Provider metadata (OpenID Connect Discovery 1.0)"""
        resp.media = self.metadata
        resp.cache_control = ["public", "max-age=300"]


JWKS_RESPONSE = {
    "type": "object",
    "properties": {"keys": {"type": "array", "items": {"type": "object", "properties": {
        k: {"type": "string"} for k in ("kty", "use", "alg", "kid", "n", "e")}}}},
}


class Jwks(Resource):
    access = {"GET": PUBLIC}
    cors = ANY_ORIGIN
    docs = {"GET": op(response=JWKS_RESPONSE, wrapped=False)}

    def __init__(self, keys):
        self.keys = keys

    def on_get(self, req, resp):
        """Public signing keys (JWKS) for access and ID tokens"""
        resp.media = self.keys.jwks()
        resp.cache_control = ["public", "max-age=300"]
