"""``member_of_application``: the dashboard's gate on ``{applicationId}`` routes, as
another area's dashboard resource would use it (a resource with a ``dashboard_access``)."""
from __future__ import annotations

import falcon
import pytest

from controlplane.auth import DASHBOARD
from controlplane.dashboard.access import member_of_application
from controlplane.resource import Resource
from tests.conftest import assert_error

PATH = "/api/dashboard/test-hook/{applicationId}"
ORGS = "/api/dashboard/organizations"


class Probe(Resource):
    access = {"GET": DASHBOARD, "POST": DASHBOARD}

    def __init__(self, dashboard_access):
        self.dashboard_access = dashboard_access

    @falcon.before(member_of_application())
    def on_get(self, req, resp, applicationId):
        resp.media = {"application": req.context.application["_id"], "role": req.context.org_role}

    @falcon.before(member_of_application(write=True))
    def on_post(self, req, resp, applicationId):
        resp.media = {"application": req.context.application["_id"], "role": req.context.org_role}


@pytest.fixture
def probe_path(app, ctx):
    app.add_route(PATH, Probe(ctx.dashboard.access))
    return lambda app_id: PATH.replace("{applicationId}", app_id)


def add_member(owner, account, role):
    response = owner.post(f"{ORGS}/{owner.organization_id}/members", json={"email": account.email, "role": role})
    assert response.status_code == 201


@pytest.mark.parametrize("role", ["owner", "admin", "member", "viewer"])
def test_every_member_reads_with_its_role(probe_path, dashboard_account, dashboard_app, make_dashboard_account, role):
    caller = dashboard_account
    if role != "owner":
        caller = make_dashboard_account()
        add_member(dashboard_account, caller, role)

    response = caller.get(probe_path(dashboard_app["id"]))

    assert response.status_code == 200
    assert response.json == {"application": dashboard_app["id"], "role": role}


@pytest.mark.parametrize("role,status", [("owner", 200), ("admin", 200), ("member", 403), ("viewer", 403)])
def test_only_owners_and_admins_write(probe_path, dashboard_account, dashboard_app, make_dashboard_account,
                                      role, status):
    caller = dashboard_account
    if role != "owner":
        caller = make_dashboard_account()
        add_member(dashboard_account, caller, role)

    response = caller.post(probe_path(dashboard_app["id"]), json={})

    if status == 403:
        error = assert_error(response, 403, "FORBIDDEN")
        assert error["details"] == {"role": role, "required_role": ["owner", "admin"]}
    else:
        assert response.status_code == 200


@pytest.mark.parametrize("app_id", ["not-a-uuid", "00000000-0000-4000-8000-000000000000"])
def test_unknown_ids_are_not_found(probe_path, dashboard_account, app_id):
    error = assert_error(dashboard_account.get(probe_path(app_id)), 404, "NOT_FOUND")
    assert error["details"] == {"application_id": app_id}


def test_another_organizations_application_is_not_found(probe_path, dashboard_app, make_dashboard_account):
    stranger = make_dashboard_account()

    for response in (stranger.get(probe_path(dashboard_app["id"])),
                     stranger.post(probe_path(dashboard_app["id"]), json={})):
        assert_error(response, 404, "NOT_FOUND")


def test_anonymous_callers_are_refused_before_the_application_is_looked_up(probe_path, client, dashboard_app):
    assert_error(client.simulate_get(probe_path(dashboard_app["id"])), 401, "UNAUTHORIZED")
