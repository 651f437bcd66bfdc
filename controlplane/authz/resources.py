"""HTTP resources of V1/authz/check (GET: RBAC, POST: with ABAC) and V1/authz/check-bulk.
Responses are not wrapped in ``data`` (spec).  Permission authz:check."""
from __future__ import annotations

from controlplane.auth import permission
from controlplane.authz.service import AuthzService
from controlplane.openapi import op
from controlplane.resource import Resource
from shared import checks
from shared.errors import PermissionMissing, RevisionAhead, ValidationFailed
from shared.http import read_json

CHECK = permission("authz:check")
_ERRORS = [ValidationFailed, PermissionMissing, RevisionAhead]


class Check(Resource):
    access = {"GET": CHECK, "POST": CHECK}
    docs = {
        "GET": op(query=checks.CHECK_QUERY_PARAMETERS, response=checks.CHECK_RESPONSE, wrapped=False, errors=_ERRORS),
        "POST": op(body=checks.CHECK, response=checks.CHECK_ABAC_RESPONSE, wrapped=False, errors=_ERRORS),
    }

    def __init__(self, authz: AuthzService):
        self.authz = authz

    def on_get(self, req, resp, applicationId):
        """Check one permission (RBAC)

        user_id is required for every caller, an end user's own token included. A min_revision above the
        change log's head is 400 AUTHZ_REVISION_AHEAD."""
        values = checks.check_query(req)
        resp.media = self.authz.check(applicationId, values)

    def on_post(self, req, resp, applicationId):
        """Check one permission with ABAC policies"""
        values = checks.CHECK.validate(read_json(req))
        resp.media = self.authz.check_abac(applicationId, values)


class CheckBulk(Resource):
    access = {"POST": CHECK}
    docs = {
        "POST": op(body=checks.CHECK_BULK, response=checks.BULK_RESPONSE, wrapped=False, errors=_ERRORS),
    }

    def __init__(self, authz: AuthzService):
        self.authz = authz

    def on_post(self, req, resp, applicationId):
        """Check 1 to 50 permissions at once"""
        values = checks.CHECK_BULK.validate(read_json(req))
        resp.media = self.authz.check_bulk(applicationId, values)
