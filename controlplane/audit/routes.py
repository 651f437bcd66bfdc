"""Routes of the audit log: an application's records and an organization's."""
from controlplane.audit import resources

V1 = "/api/v1/applications/{applicationId}/audit-events"
DASHBOARD = "/api/dashboard/organizations/{organizationId}/audit-events"
TAG = "audit"


def add_routes(routes, services):
    audit = services.audit
    routes.add(V1, resources.ApplicationAuditEvents(audit), TAG)
    routes.add(f"{V1}/export", resources.ApplicationAuditExport(audit), TAG)
    access = services.dashboard.access
    routes.add(DASHBOARD, resources.OrganizationAuditEvents(audit, access), TAG)
    routes.add(f"{DASHBOARD}/export", resources.OrganizationAuditExport(audit, access), TAG)
