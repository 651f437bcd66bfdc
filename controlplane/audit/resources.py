"""HTTP resources of the audit log: an application's records (V1, ``audit:read``) and an
organization's (dashboard, owners and admins), each as cursor pages and as an NDJSON
export."""
from __future__ import annotations

from controlplane.audit import schemas
from controlplane.audit.service import APPLICATION, ORGANIZATION, AuditLog
from controlplane.auth import DASHBOARD, permission
from controlplane.dashboard.access import DashboardAccess
from controlplane.dashboard.errors import OrganizationNotFound, RoleCannotWrite
from controlplane.dashboard.resources import account_id
from controlplane.openapi import op
from controlplane.resource import Resource
from shared.errors import PermissionMissing, ValidationFailed

READ = permission("audit:read")
NDJSON = "application/x-ndjson"
_PAGE_DOC = ("Newest first. Pass next_cursor as cursor for the next page; pages stay stable while new "
             "records arrive (they are newer than any cursor).")
_EXPORT_DOC = ("Every matching record, newest first, one JSON object per line (application/x-ndjson), "
               "streamed: no page size. A failure of the store part-way ends the stream early.")
_EXPORT_ANSWER = {200: ({"type": "string"}, "one record per line", NDJSON)}
_APP_ERRORS = [ValidationFailed, PermissionMissing]
_ORG_ERRORS = [ValidationFailed, OrganizationNotFound, RoleCannotWrite]


class _Audit(Resource):
    def __init__(self, audit: AuditLog):
        self.audit = audit

    def _page(self, req, resp, scope, scope_id):
        filters, limit = schemas.filters(req), schemas.limit(req)
        records, cursor = self.audit.page(scope, scope_id, filters, req.get_param("cursor") or None, limit)
        resp.media = {"data": records, "next_cursor": cursor}

    def _export(self, req, resp, scope, scope_id):
        filters = schemas.filters(req)
        resp.content_type = NDJSON
        resp.stream = self.audit.export(scope, scope_id, filters)


class ApplicationAuditEvents(_Audit):
    access = {"GET": READ}
    docs = {"GET": op("The application's audit records", query={**schemas.FILTER_QUERY, **schemas.PAGE_QUERY},
                      response=schemas.PAGE, wrapped=False, description=_PAGE_DOC, errors=_APP_ERRORS)}

    def on_get(self, req, resp, applicationId):
        self._page(req, resp, APPLICATION, applicationId)


class ApplicationAuditExport(_Audit):
    access = {"GET": READ}
    docs = {"GET": op("Export the application's audit records (NDJSON)", query=schemas.FILTER_QUERY,
                      description=_EXPORT_DOC, wrapped=False, also=_EXPORT_ANSWER, errors=_APP_ERRORS)}

    def on_get(self, req, resp, applicationId):
        self._export(req, resp, APPLICATION, applicationId)


class _OrganizationAudit(_Audit):
    """An organization's records, for its owners and admins (``DashboardAccess.require_admin``)."""

    def __init__(self, audit: AuditLog, dashboard_access: DashboardAccess):
        super().__init__(audit)
        self.access_rules = dashboard_access

    def _organization(self, req, organization_id: str) -> str:
        return self.access_rules.require_admin(organization_id, account_id(req), "read the audit log")


class OrganizationAuditEvents(_OrganizationAudit):
    access = {"GET": DASHBOARD}
    docs = {"GET": op("The organization's audit records: its applications' and its dashboard actions "
                      "(owners and admins)", query={**schemas.FILTER_QUERY, **schemas.PAGE_QUERY},
                      response=schemas.PAGE, wrapped=False, description=_PAGE_DOC, errors=_ORG_ERRORS)}

    def on_get(self, req, resp, organizationId):
        self._page(req, resp, ORGANIZATION, self._organization(req, organizationId))


class OrganizationAuditExport(_OrganizationAudit):
    access = {"GET": DASHBOARD}
    docs = {"GET": op("Export the organization's audit records (NDJSON; owners and admins)",
                      query=schemas.FILTER_QUERY, description=_EXPORT_DOC, wrapped=False, also=_EXPORT_ANSWER,
                      errors=_ORG_ERRORS)}

    def on_get(self, req, resp, organizationId):
        self._export(req, resp, ORGANIZATION, self._organization(req, organizationId))
