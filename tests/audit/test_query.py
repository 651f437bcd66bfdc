"""GET V1/audit-events and GET /api/dashboard/organizations/{organizationId}/audit-events:
filters, newest first, cursor pages that hold still while records arrive, errors in the
envelope, and no tenant ever reading another's records."""
from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from controlplane.apikeys.service import V1_PERMISSIONS
from controlplane.audit import context as audit
from controlplane.audit.schemas import RECORD
from shared.timeutil import isoformat
from tests.audit.conftest import FIRST_INSERTED
from tests.conftest import assert_error, bearer

V1 = "/api/v1/applications/{}/audit-events"
ORG = "/api/dashboard/organizations/{}/audit-events"


def seqs(response):
    """The seqs of the records ``insert_records`` wrote, which their ``data.n`` holds (the
    fixtures' own, an API key created say, are left out)."""
    assert response.status_code == 200, response.text
    return [record["data"]["n"] for record in response.json["data"] if record["data"].get("n", 0) >= FIRST_INSERTED]


def test_records_come_newest_first_in_the_documented_shape(client, auditor, insert_records):
    app, headers = auditor
    docs = insert_records(3, app_id=app["_id"])
    response = client.simulate_get(V1.format(app["_id"]), headers=headers)
    assert seqs(response) == [d["seq"] for d in reversed(docs)]
    record = response.json["data"][0]
    assert list(record) == ["id", "at", "action", "result", "actor", "target", "application_id",
                            "organization_id", "request_id", "ip", "user_agent", "data", "prev_hash", "hash"]
    assert list(record) == RECORD["required"] and set(record) == set(RECORD["properties"])  # OpenAPI says the same
    assert record["id"] == docs[-1]["_id"] and record["result"] == {"status": "success"}
    assert set(record["actor"]) == set(record["target"]) == {"type", "id", "display"}
    assert response.json["next_cursor"] is None


def test_cursor_pages_are_stable_while_new_records_arrive(client, clock, auditor, insert_records):
    app, headers = auditor
    docs = insert_records(25, app_id=app["_id"])
    url = V1.format(app["_id"])
    first = client.simulate_get(url, params={"limit": 10}, headers=headers)
    assert seqs(first) == [d["seq"] for d in reversed(docs)][:10]
    clock.advance(1)
    insert_records(5, app_id=app["_id"])  # newer than everything paged so far
    seen = seqs(first)
    cursor = first.json["next_cursor"]
    while cursor:
        page = client.simulate_get(url, params={"limit": 10, "cursor": cursor}, headers=headers)
        seen += seqs(page)
        cursor = page.json["next_cursor"]
    assert seen == [d["seq"] for d in reversed(docs)]


def test_records_of_the_same_instant_are_ordered_by_seq_across_pages(client, clock, auditor, insert_records):
    app, headers = auditor
    docs = insert_records(6, app_id=app["_id"])
    ctx_events = client.app.services.store["events"]
    ctx_events.update_many({"app_id": app["_id"]}, {"$set": {"at": docs[0]["at"]}})
    url = V1.format(app["_id"])
    first = client.simulate_get(url, params={"limit": 4}, headers=headers)
    second = client.simulate_get(url, params={"limit": 4, "cursor": first.json["next_cursor"]}, headers=headers)
    assert seqs(first) + seqs(second) == [d["seq"] for d in reversed(docs)]


@pytest.mark.parametrize("name, value, field", [
    ("actor_id", "key-2", "actor_id"), ("target_id", "role-2", "target_id"), ("result", "failure", "status"),
    ("ip", "198.51.100.9", "ip"),
])
def test_each_filter_alone_and_with_a_time_range(client, clock, auditor, insert_records, name, value, field):
    app, headers = auditor
    insert_records(4, app_id=app["_id"])
    old = insert_records(2, app_id=app["_id"], **{field: value})
    clock.advance(60)
    new = insert_records(2, app_id=app["_id"], **{field: value})
    url = V1.format(app["_id"])
    assert seqs(client.simulate_get(url, params={name: value}, headers=headers)) == \
        [d["seq"] for d in reversed(old + new)]
    since = isoformat(new[0]["at"] - timedelta(seconds=1))
    assert seqs(client.simulate_get(url, params={name: value, "since": since}, headers=headers)) == \
        [d["seq"] for d in reversed(new)]
    until = isoformat(new[0]["at"] - timedelta(seconds=1))
    assert seqs(client.simulate_get(url, params={name: value, "until": until}, headers=headers)) == \
        [d["seq"] for d in reversed(old)]


def test_the_action_filter_is_a_prefix(client, auditor, insert_records):
    app, headers = auditor
    login = insert_records(2, app_id=app["_id"], action="user.login")
    created = insert_records(1, app_id=app["_id"], action="user.created")
    insert_records(2, app_id=app["_id"], action="role.created")
    url = V1.format(app["_id"])
    assert seqs(client.simulate_get(url, params={"action": "user."}, headers=headers)) == \
        [d["seq"] for d in reversed(login + created)]
    assert seqs(client.simulate_get(url, params={"action": "user.login"}, headers=headers)) == \
        [d["seq"] for d in reversed(login)]
    assert seqs(client.simulate_get(url, params={"action": "user.*"}, headers=headers)) == []  # not a pattern


@pytest.mark.parametrize("params, field", [
    ({"cursor": "not-a-cursor"}, "cursor"), ({"since": "yesterday"}, "since"), ({"until": "2026-13-01"}, "until"),
    ({"result": "maybe"}, "result"), ({"limit": "0"}, "limit"), ({"limit": "101"}, "limit"),
    ({"action": "x" * 201}, "action"),
    ({"since": "2026-11-27T00:00:00Z", "until": "2026-11-26T00:00:00Z"}, "until"),
])
def test_bad_parameters_are_400_in_the_envelope(client, auditor, params, field):
    app, headers = auditor
    error = assert_error(client.simulate_get(V1.format(app["_id"]), params=params, headers=headers), 400,
                         "VALIDATION_INVALID_FORMAT")
    assert field in error["details"]["fields"]


def test_the_route_needs_audit_read(client, application, make_api_key):
    secret = make_api_key(application, permissions=["roles:read"])
    assert_error(client.simulate_get(V1.format(application["_id"]), headers=bearer(secret)), 403, "FORBIDDEN")


def test_a_default_api_key_holds_audit_read(client, application, api_key):
    assert client.simulate_get(V1.format(application["_id"]), headers=bearer(api_key)).status_code == 200


def test_the_docs_list_audit_read_with_the_api_key_permissions():
    """docs/dashboard.md's list of an API key's default permissions is V1_PERMISSIONS, and
    docs/authorization.md's table says what audit:read opens."""
    root = Path(__file__).parents[2] / "docs"
    defaults = (root / "dashboard.md").read_text().split("default\n  every V1 permission (")[1].split(")")[0]
    listed = set(re.findall(r"`([a-z_]+:[a-z_]+)`", defaults)) | {"decision:sync"}
    assert listed == set(V1_PERMISSIONS)
    assert "| audit:read | `GET V1/audit-events`" in (root / "authorization.md").read_text()


FILTERS = [{}, {"action": "role."}, {"actor_id": "key-1"}, {"target_id": "role-1"}, {"result": "success"},
           {"ip": "192.0.2.1"}, {"since": "2000-01-01T00:00:00Z"}, {"until": "2100-01-01T00:00:00Z"}]


@pytest.mark.parametrize("params", FILTERS, ids=[",".join(p) or "none" for p in FILTERS])
def test_a_tenant_never_reads_another_tenants_records(client, ctx, make_application, make_api_key, insert_records,
                                                      dashboard_account, make_dashboard_account, params):
    a, b = make_application("A"), make_application("B")
    a_key = bearer(make_api_key(a, permissions=["audit:read"]))
    mine = insert_records(3, app_id=a["_id"], organization_id=dashboard_account.organization_id)
    other = make_dashboard_account()
    insert_records(3, app_id=b["_id"], organization_id=other.organization_id)
    for path in (V1.format(a["_id"]), V1.format(a["_id"]) + "/export"):
        response = client.simulate_get(path, params=params, headers=a_key)
        assert response.status_code == 200
        assert str(b["_id"]) not in response.text
    assert seqs(client.simulate_get(V1.format(a["_id"]), params=params, headers=a_key)) == \
        [d["seq"] for d in reversed(mine)]
    # A's key on B's routes: refused before anything is read.
    for path in (V1.format(b["_id"]), V1.format(b["_id"]) + "/export"):
        assert_error(client.simulate_get(path, params=params, headers=a_key), 401, "UNAUTHORIZED")
    # The dashboard: A's owner reads A's organization only; B's is not found.
    own = dashboard_account.get(ORG.format(dashboard_account.organization_id), params=params)
    assert seqs(own) == [d["seq"] for d in reversed(mine)]
    exported = dashboard_account.get(ORG.format(dashboard_account.organization_id) + "/export", params=params)
    assert exported.status_code == 200 and str(b["_id"]) not in exported.text
    assert str(a["_id"]) in exported.text
    for path in (ORG.format(other.organization_id), ORG.format(other.organization_id) + "/export"):
        assert_error(dashboard_account.get(path, params=params), 404, "NOT_FOUND")


def test_the_organization_lists_its_applications_and_its_dashboard_actions(ctx, dashboard_account, dashboard_app):
    org = dashboard_account.organization_id
    ctx.audit.record("organization.member_added", result=audit.success(),
                     target=audit.actor("dashboard_account", "acc-2"), organization_id=org)
    response = dashboard_account.get(ORG.format(org))
    actions = [record["action"] for record in response.json["data"]]
    assert "organization.member_added" in actions
    assert all(record["organization_id"] == org for record in response.json["data"])


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_only_owners_and_admins_read_the_organizations_records(ctx, dashboard_account, make_dashboard_account,
                                                               role):
    reader = make_dashboard_account()
    added = dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                                   json={"email": reader.email, "role": role})
    assert added.status_code == 201, added.text
    assert_error(reader.get(ORG.format(dashboard_account.organization_id)), 403, "FORBIDDEN")
    admin = make_dashboard_account()
    dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                           json={"email": admin.email, "role": "admin"})
    assert admin.get(ORG.format(dashboard_account.organization_id)).status_code == 200


def test_a_deleted_applications_records_stay_in_its_organizations_log(ctx, dashboard_account, dashboard_app):
    """Deleting an application purges its data, not its audit records: the organization
    still lists them, the deletion last."""
    org, app_id = dashboard_account.organization_id, dashboard_app["id"]
    deleted = dashboard_account.delete(f"/api/dashboard/applications/{app_id}")
    assert deleted.status_code == 204, deleted.text
    records = dashboard_account.get(ORG.format(org), params={"target_id": app_id}).json["data"]
    assert [r["action"] for r in records] == ["application.deleted", "application.created"]
    assert records[0]["actor"] == {"type": "dashboard_account", "id": dashboard_account.id, "display": None}
    assert {r["organization_id"] for r in records} == {org}
