"""The UserInfo endpoint (OIDC Core 5.3)."""
from __future__ import annotations

from controlplane.auth import PUBLIC
from controlplane.oidc import wire
from controlplane.oidc.cors import REGISTERED_ORIGINS
from controlplane.oidc.errors import InvalidRequest, InvalidToken
from controlplane.oidc.resources.common import OBJECT, protocol_params
from controlplane.openapi import op
from controlplane.resource import Resource
from shared.http import no_store


class UserInfo(Resource):
    access = {"GET": PUBLIC, "POST": PUBLIC}
    accepted_media_types = wire.FORM_JSON_OR_EMPTY
    cors = REGISTERED_ORIGINS
    _doc = op("UserInfo endpoint (OIDC Core 5.3)",
              description="Bearer: an OIDC access token. Claims by scope: sub; email, email_verified (email); "
                          "name, picture (profile). A token whose grant was revoked (RFC 7009, logout, a password "
                          "reset, DELETE sessions, suspension, deletion) is 401 invalid_token. 401 answers carry "
                          "WWW-Authenticate (RFC 6750), exposed to CORS callers.",
              response=OBJECT, wrapped=False, errors=[InvalidRequest, InvalidToken])
    docs = {"GET": _doc, "POST": _doc}

    def __init__(self, userinfo):
        self.userinfo = userinfo

    def on_get(self, req, resp):
        no_store(resp)
        resp.media = self.userinfo.claims(wire.bearer(req))

    def on_post(self, req, resp):
        no_store(resp)
        resp.media = self.userinfo.claims(wire.bearer(req), protocol_params(req).get("access_token"))
