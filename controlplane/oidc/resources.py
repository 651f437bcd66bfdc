"""HTTP resources of the OIDC provider.

Client management (V1/oidc/clients, permission oidc:manage) answers in the spec's
envelope.  The protocol endpoints (/.well-known/*, /oidc/*) are public to the
authentication middleware and authenticate their callers themselves, as their RFCs
say (a user JWT at authorize, client credentials at token, revoke and introspect, the
OIDC access token at userinfo); their errors are RFC 6749 bodies (``wire``) and every
answer carries ``Cache-Control: no-store``.
"""
from __future__ import annotations

import html

import falcon

from shared.errors import DomainError, PermissionMissing, Unauthorized, ValidationFailed
from shared.http import no_store, read_json, respond

from controlplane.applications.service import branding
from controlplane.auth import PUBLIC, permission
from controlplane.oidc import schemas, wire
from controlplane.oidc.clients import serialize_client
from controlplane.oidc.discovery import provider_metadata
from controlplane.oidc.errors import (ClientNotFound, InvalidClient, InvalidGrant, InvalidRequest, InvalidScope,
                                      InvalidToken, OAuthError, UnauthenticatedClient, UnsupportedGrantType,
                                      UnsupportedResponseType)
from controlplane.openapi import op
from controlplane.resource import Resource

MANAGE = permission("oidc:manage")
_OBJECT = {"type": "object"}


# ---------------------------------------------------------------- client management (V1)


class Clients(Resource):
    access = {"GET": MANAGE, "POST": MANAGE}
    docs = {
        "GET": op("List the application's OIDC clients", response=schemas.CLIENT_LIST, errors=[PermissionMissing]),
        "POST": op("Register an OIDC client", body=schemas.CREATE_CLIENT, ok=201, response=schemas.CLIENT_WITH_SECRET,
                   description="client_secret is returned only here (sent with Cache-Control: no-store) and stored "
                               "hashed. Redirect URIs are absolute https URLs without fragment; http is allowed for "
                               "localhost and 127.0.0.1.",
                   errors=[ValidationFailed, PermissionMissing]),
    }

    def __init__(self, clients):
        self.clients = clients

    def on_get(self, req, resp, applicationId):
        respond(resp, [serialize_client(c) for c in self.clients.list(applicationId)])

    def on_post(self, req, resp, applicationId):
        values = schemas.CREATE_CLIENT.validate(read_json(req))
        client, secret = self.clients.create(applicationId, values)
        no_store(resp)
        respond(resp, {**serialize_client(client), "client_secret": secret}, status=201)


class ClientItem(Resource):
    access = {"GET": MANAGE, "PUT": MANAGE, "DELETE": MANAGE}
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

    def __init__(self, clients):
        self.clients = clients

    def on_get(self, req, resp, applicationId, clientId):
        respond(resp, serialize_client(self.clients.get(applicationId, clientId)))

    def on_put(self, req, resp, applicationId, clientId):
        values = schemas.UPDATE_CLIENT.validate(read_json(req), partial=True)
        respond(resp, serialize_client(self.clients.update(applicationId, clientId, values)))

    def on_delete(self, req, resp, applicationId, clientId):
        self.clients.delete(applicationId, clientId)
        resp.status = falcon.HTTP_204


# ---------------------------------------------------------------- discovery and keys


class Discovery(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("OpenID Provider metadata (OpenID Connect Discovery 1.0)", response=_OBJECT, wrapped=False)}

    def __init__(self, issuer: str):
        self.metadata = provider_metadata(issuer)

    def on_get(self, req, resp):
        resp.media = self.metadata
        resp.cache_control = ["public", "max-age=300"]


JWKS_RESPONSE = {
    "type": "object",
    "properties": {"keys": {"type": "array", "items": {"type": "object", "properties": {
        k: {"type": "string"} for k in ("kty", "use", "alg", "kid", "n", "e")}}}},
}


class Jwks(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Public signing keys (JWKS) for access and ID tokens", response=JWKS_RESPONSE, wrapped=False)}

    def __init__(self, keys):
        self.keys = keys

    def on_get(self, req, resp):
        resp.media = self.keys.jwks()
        resp.cache_control = ["public", "max-age=300"]


# ---------------------------------------------------------------- the protocol endpoints

_AUTHORIZE_QUERY = {
    name: ({"type": "string"}, desc) for name, desc in {
        "response_type": "code", "client_id": "the client", "redirect_uri": "registered for the client",
        "scope": "space-separated, must include openid", "state": "passed back", "nonce": "put in the ID token",
        "code_challenge": "base64url SHA-256 of the verifier (43 to 128 characters)",
        "code_challenge_method": "S256", "prompt": "none, login or consent (hosted mode)",
    }.items()
}
AUTHORIZE_RESPONSE = {"type": "object", "properties": {
    "code": {"type": "string"}, "state": {"type": ["string", "null"]}, "redirect_uri": {"type": "string"},
    "branding": {"type": "object"}}}
TOKEN_RESPONSE = {"type": "object", "properties": {
    "access_token": {"type": "string"}, "token_type": {"type": "string"}, "expires_in": {"type": "integer"},
    "refresh_token": {"type": "string"}, "id_token": {"type": "string"}, "scope": {"type": "string"}}}


class Authorize(Resource):
    """GET /oidc/authorize (RFC 6749 4.1.1).  With a bearer user JWT of the client's
    application: the spec's JSON answer, never a redirect (its errors are 400 bodies)."""

    access = {"GET": PUBLIC}
    docs = {"GET": op(
        "Authorization endpoint (code flow with PKCE S256)",
        description="Bearer: a user access token of the client's application. The answer is JSON {code, state, "
                    "redirect_uri, branding}; the code lives 60 s. Consent for (user, client) is recorded on first "
                    "use (consent.granted). Errors are RFC 6749 bodies {error, error_description}.",
        query=_AUTHORIZE_QUERY, response=AUTHORIZE_RESPONSE, wrapped=False,
        errors=[InvalidRequest, InvalidClient, InvalidScope, UnsupportedResponseType, InvalidToken],
    )}

    def __init__(self, authorize, authenticator):
        self.authorize = authorize
        self.authenticator = authenticator

    def on_get(self, req, resp):
        no_store(resp)
        try:
            request = self.authorize.validate(wire.query_params(req))
        except OAuthError as exc:
            raise exc.not_redirected() from None
        try:
            app = self.authenticator.application(request.app_id)
        except DomainError:
            raise InvalidClient() from None
        token = wire.bearer(req)
        if token is None:
            raise InvalidToken("A user access token of the application is required.", missing=True)
        try:
            principal = self.authenticator.user_token(token, request.app_id)
        except Unauthorized as exc:
            raise InvalidToken(exc.message) from None
        if self.authorize.needs_consent(request, principal.user_id):
            self.authorize.grant_consent(request, principal.user_id)
        code = self.authorize.issue_code(request.app_id, principal.user_id, request,
                                         auth_time=principal.claims["iat"], session_id=principal.session_id)
        resp.media = {"code": code, "state": request.state, "redirect_uri": request.redirect_uri,
                      "branding": branding(app)}


def _params(req) -> dict:
    try:
        return wire.body_params(req)
    except InvalidRequest:
        raise
    except DomainError as exc:
        raise InvalidRequest(exc.message) from None


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
        params = _params(req)
        resp.media = self.endpoint.create_token_response(params, wire.basic_credentials(req))


class UserInfo(Resource):
    access = {"GET": PUBLIC, "POST": PUBLIC}
    accepted_media_types = wire.FORM_JSON_OR_EMPTY
    _doc = op("UserInfo endpoint (OIDC Core 5.3)",
              description="Bearer: an OIDC access token. Claims by scope: sub; email, email_verified (email); "
                          "name, picture (profile). 401 answers carry WWW-Authenticate (RFC 6750).",
              response=_OBJECT, wrapped=False, errors=[InvalidRequest, InvalidToken])
    docs = {"GET": _doc, "POST": _doc}

    def __init__(self, userinfo):
        self.userinfo = userinfo

    def on_get(self, req, resp):
        no_store(resp)
        resp.media = self.userinfo.claims(wire.bearer(req))

    def on_post(self, req, resp):
        no_store(resp)
        resp.media = self.userinfo.claims(wire.bearer(req), _params(req).get("access_token"))


class _ClientAuthenticated(Resource):
    access = {"POST": PUBLIC}
    accepted_media_types = wire.FORM_OR_JSON

    def __init__(self, clients, flow):
        self.clients = clients
        self.flow = flow

    def _client(self, req, params) -> dict:
        return self.clients.authenticate_request(params, wire.basic_credentials(req), failure=UnauthenticatedClient)


class Revoke(_ClientAuthenticated):
    docs = {"POST": op(
        "Token revocation (RFC 7009)",
        description="Client-authenticated. A refresh token revokes its grant; unknown tokens, access tokens and "
                    "other clients' tokens are answered 200 and change nothing.",
        errors=[InvalidRequest, UnauthenticatedClient],
    )}

    def on_post(self, req, resp):
        no_store(resp)
        params = _params(req)
        self.flow.revoke(self._client(req, params), params)
        resp.status = falcon.HTTP_200
        resp.media = {}


class Introspect(_ClientAuthenticated):
    docs = {"POST": op(
        "Token introspection (RFC 7662)",
        description="Client-authenticated. Tokens are reported active only to the client they were issued to.",
        response=_OBJECT, wrapped=False, errors=[InvalidRequest, UnauthenticatedClient],
    )}

    def on_post(self, req, resp):
        no_store(resp)
        params = _params(req)
        resp.media = self.flow.introspect(self._client(req, params), params)


_LOGGED_OUT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">
<title>Signed out - {name}</title></head>
<body><main><h1>You are signed out</h1><p>You have been signed out of {name}.</p></main></body></html>
"""


class Logout(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op(
        "RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0)",
        description="id_token_hint is verified (an expired hint is accepted; alg none and HS256 are refused). "
                    "Revokes the OIDC refresh tokens of the hinted session. Redirects to post_logout_redirect_uri "
                    "(with state) only when it is registered on the hinted client; otherwise a logged-out page.",
        query={name: ({"type": "string"}, desc) for name, desc in {
            "id_token_hint": "an ID token issued to the client", "post_logout_redirect_uri": "registered on the client",
            "state": "passed back"}.items()},
        errors=[InvalidRequest],
    )}

    def __init__(self, logout, applications):
        self.logout = logout
        self.applications = applications

    def on_get(self, req, resp):
        no_store(resp)
        params = wire.query_params(req)
        if any(isinstance(value, list) for value in params.values()):
            raise InvalidRequest("A parameter must not be repeated.")
        result = self.logout.end_session(params)
        if result.redirect_uri is not None:
            resp.status = falcon.HTTP_302
            resp.location = wire.add_params(result.redirect_uri, {"state": result.state})
            return
        app = self.applications.get(result.app_id) if result.app_id else None
        name = branding(app)["name"] if app else "this service"
        resp.content_type = falcon.MEDIA_HTML
        resp.set_header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
        resp.text = _LOGGED_OUT.format(name=html.escape(name))
