"""HTTP resources of connections (V1/connections, docs/connections.md).  Every method
needs connections:manage, for end-user tokens (their roles) and API keys (their
permissions) alike."""
from __future__ import annotations

from controlplane.auth import permission
from controlplane.connections import schemas
from controlplane.connections.errors import (
    ConnectionChangedConcurrently,
    ConnectionEmailDomainTaken,
    ConnectionLimitExceeded,
    ConnectionNameTaken,
    ConnectionNotFound,
    ConnectionProviderError,
)
from controlplane.connections.service import UpstreamConnectionService, serialize
from controlplane.openapi import list_op, op
from controlplane.resource import ServiceResource
from shared.errors import PermissionMissing, ValidationFailed
from shared.http import respond, respond_list

MANAGE = permission("connections:manage")

_ITEM_ERRORS = [PermissionMissing, ConnectionNotFound]
_WRITE_ERRORS = [ValidationFailed, PermissionMissing, ConnectionNameTaken, ConnectionEmailDomainTaken,
                 ConnectionProviderError]


class ConnectionCollection(ServiceResource[UpstreamConnectionService]):
    every_method = MANAGE
    docs = {
        "GET": list_op(schemas.CONNECTION, errors=[PermissionMissing]),
        "POST": op(body=schemas.CREATE_CONNECTION, ok=201, response=schemas.CONNECTION,
                   errors=[*_WRITE_ERRORS, ConnectionLimitExceeded]),
    }

    def on_get(self, req, resp, applicationId):
        """List the application's connections (upstream identity providers), oldest first"""
        respond_list(req, resp, self.service.list(applicationId), serialize)

    def on_post(self, req, resp, applicationId):
        """Create a connection

        A preset fills the issuer, scopes and claim mapping. An oidc connection's discovery document is
        fetched now and its endpoints pinned; a provider that cannot be reached or names another issuer is 502
        CONNECTION_PROVIDER_ERROR and nothing is stored. The client secret is never returned."""
        respond(resp, serialize(self.service.create(applicationId, self.body(req))), status=201)


class ConnectionItem(ServiceResource[UpstreamConnectionService]):
    every_method = MANAGE
    docs = {
        "GET": op(response=schemas.CONNECTION, errors=_ITEM_ERRORS),
        "PATCH": op(body=schemas.UPDATE_CONNECTION, response=schemas.CONNECTION,
                    errors=[*_WRITE_ERRORS, ConnectionNotFound, ConnectionChangedConcurrently]),
        "DELETE": op(ok=204, errors=_ITEM_ERRORS),
    }

    def on_get(self, req, resp, applicationId, connectionId):
        """Get a connection (without its client secret)"""
        respond(resp, serialize(self.service.get(applicationId, connectionId)))

    def on_patch(self, req, resp, applicationId, connectionId):
        """Update a connection

        Setting the issuer (even to its current value) fetches discovery again and pins the endpoints anew."""
        values = self.body(req, partial=True)
        respond(resp, serialize(self.service.update(applicationId, connectionId, values)))

    def on_delete(self, req, resp, applicationId, connectionId):
        """Delete a connection"""
        self.service.delete(applicationId, connectionId)
        resp.status = 204


class ConnectionTest(ServiceResource[UpstreamConnectionService]):
    every_method = MANAGE
    docs = {
        "POST": op(response=schemas.TEST_REPORT, errors=_ITEM_ERRORS),
    }

    def on_post(self, req, resp, applicationId, connectionId):
        """Test a connection: fetch discovery and the JWKS now and report what is wrong

        200 whatever the checks find: each check says, in words, what was found (an issuer that differs, no
        RS256 signing key, a timeout, a refused address...). Nothing is changed; set the issuer again to pin
        changed endpoints."""
        respond(resp, self.service.test(applicationId, connectionId), cacheable=False)
