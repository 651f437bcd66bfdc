"""Organizations and their members: roles owner, admin, member, viewer."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error

ORGS = "/api/dashboard/organizations"


def members_path(org_id):
    return f"{ORGS}/{org_id}/members"


def add_member(owner, org_id, account, role):
    return owner.post(members_path(org_id), json={"email": account.email, "role": role})


@pytest.fixture
def team(make_dashboard_account, clock):
    """An organization with one account of each role: {role: account}, joined in that order."""
    owner = make_dashboard_account(name="Olivia Owner")
    org_id = owner.post(ORGS, json={"name": "Acme"}).json["data"]["id"]
    accounts = {"owner": owner}
    for role in ("admin", "member", "viewer"):
        clock.advance(1)
        account = make_dashboard_account(name=role.title())
        assert add_member(owner, org_id, account, role).status_code == 201
        accounts[role] = account
    accounts["org_id"] = org_id
    return accounts


def test_create_and_list_organizations(dashboard_account, clock):
    clock.advance(1)  # listed oldest first
    response = dashboard_account.post(ORGS, json={"name": "  Acme Corp  "})

    assert response.status_code == 201
    org = response.json["data"]
    assert set(org) == {"id", "name", "role", "require_mfa", "created_at"}
    assert org["name"] == "Acme Corp" and org["role"] == "owner"
    listed = dashboard_account.get(ORGS).json["data"]
    assert [o["id"] for o in listed] == [dashboard_account.organization_id, org["id"]]
    assert all(o["role"] == "owner" for o in listed)


def test_create_organization_validates_the_name(dashboard_account):
    assert_error(dashboard_account.post(ORGS, json={}), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(dashboard_account.post(ORGS, json={"name": "x" * 256}), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(dashboard_account.post(ORGS, json={"name": 7}), 400, "VALIDATION_INVALID_FORMAT")


def test_organizations_need_a_session(client):
    assert_error(client.simulate_get(ORGS), 401, "UNAUTHORIZED")
    assert_error(client.simulate_post(ORGS, json={"name": "x"}), 401, "UNAUTHORIZED")


def test_add_member_returns_201_and_gives_access_with_the_role(dashboard_account, make_dashboard_account):
    colleague = make_dashboard_account(name="Colin")

    response = add_member(dashboard_account, dashboard_account.organization_id, colleague, "viewer")

    assert response.status_code == 201
    member = response.json["data"]
    assert member == {
        "organization_id": dashboard_account.organization_id, "account_id": colleague.id,
        "email": colleague.email, "name": "Colin", "role": "viewer", "created_at": member["created_at"],
    }
    roles = {o["id"]: o["role"] for o in colleague.get(ORGS).json["data"]}
    assert roles[dashboard_account.organization_id] == "viewer"


def test_member_email_is_case_insensitive(dashboard_account, make_dashboard_account):
    colleague = make_dashboard_account(email="colin@example.com")
    response = dashboard_account.post(members_path(dashboard_account.organization_id),
                                      json={"email": "COLIN@Example.com", "role": "member"})
    assert response.status_code == 201 and response.json["data"]["account_id"] == colleague.id


def test_add_member_needs_an_existing_dashboard_account(dashboard_account):
    response = dashboard_account.post(members_path(dashboard_account.organization_id),
                                      json={"email": "nobody@example.com", "role": "member"})
    assert_error(response, 404, "USER_NOT_FOUND")


def test_adding_an_existing_member_again_is_409(team):
    response = add_member(team["owner"], team["org_id"], team["viewer"], "admin")
    assert_error(response, 409, "RESOURCE_ALREADY_EXISTS")
    roles = {m["account_id"]: m["role"] for m in team["owner"].get(members_path(team["org_id"])).json["data"]}
    assert roles[team["viewer"].id] == "viewer"  # unchanged


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_cannot_add_members(team, make_dashboard_account, role):
    newcomer = make_dashboard_account()
    assert_error(add_member(team[role], team["org_id"], newcomer, "viewer"), 403, "FORBIDDEN")
    assert newcomer.get(ORGS).json["data"][0]["id"] != team["org_id"]


def test_admins_add_members_but_not_owners(team, make_dashboard_account):
    assert add_member(team["admin"], team["org_id"], make_dashboard_account(), "admin").status_code == 201
    assert_error(add_member(team["admin"], team["org_id"], make_dashboard_account(), "owner"), 403, "FORBIDDEN")
    assert add_member(team["owner"], team["org_id"], make_dashboard_account(), "owner").status_code == 201


def test_add_member_validates_the_body(dashboard_account):
    path = members_path(dashboard_account.organization_id)
    error = assert_error(dashboard_account.post(path, json={"email": "a@example.com", "role": "superuser"}),
                         400, "VALIDATION_INVALID_FORMAT")
    assert "role" in error["details"]["fields"]
    assert_error(dashboard_account.post(path, json={}), 400, "VALIDATION_MULTIPLE_ERRORS")


def test_foreign_or_unknown_organizations_are_not_found(team, make_dashboard_account):
    outsider = make_dashboard_account()
    for org_id in (team["org_id"], "00000000-0000-4000-8000-000000000000", "not-a-uuid"):
        assert_error(add_member(outsider, org_id, outsider, "owner"), 404, "NOT_FOUND")
        assert_error(outsider.get(members_path(org_id)), 404, "NOT_FOUND")
    assert outsider.id not in {m["account_id"] for m in team["owner"].get(members_path(team["org_id"])).json["data"]}


def test_any_member_can_list_members(team):
    listed = team["viewer"].get(members_path(team["org_id"]))
    assert listed.status_code == 200
    assert [(m["account_id"], m["role"]) for m in listed.json["data"]] == [
        (team[r].id, r) for r in ("owner", "admin", "member", "viewer")]


def test_change_member_role(team):
    path = f"{members_path(team['org_id'])}/{team['viewer'].id}"
    response = team["admin"].put(path, json={"role": "member"})
    assert response.status_code == 200 and response.json["data"]["role"] == "member"
    assert_error(team["member"].put(path, json={"role": "admin"}), 403, "FORBIDDEN")
    assert_error(team["admin"].put(path, json={"role": "owner"}), 403, "FORBIDDEN")
    assert_error(team["admin"].put(f"{members_path(team['org_id'])}/{team['owner'].id}", json={"role": "viewer"}),
                 403, "FORBIDDEN")
    assert_error(team["owner"].put(f"{members_path(team['org_id'])}/{team['admin'].id}", json={"role": "god"}),
                 400, "VALIDATION_INVALID_FORMAT")
    unknown = f"{members_path(team['org_id'])}/00000000-0000-4000-8000-000000000000"
    assert_error(team["owner"].put(unknown, json={"role": "viewer"}), 404, "USER_NOT_FOUND")


def test_the_last_owner_cannot_be_demoted_or_removed(team):
    owner_path = f"{members_path(team['org_id'])}/{team['owner'].id}"
    assert_error(team["owner"].put(owner_path, json={"role": "admin"}), 409, "ORGANIZATION_LAST_OWNER")
    assert_error(team["owner"].delete(owner_path), 409, "ORGANIZATION_LAST_OWNER")

    admin_path = f"{members_path(team['org_id'])}/{team['admin'].id}"
    assert team["owner"].put(admin_path, json={"role": "owner"}).json["data"]["role"] == "owner"
    # Two owners now: either may step down, but not both.
    assert team["owner"].put(owner_path, json={"role": "viewer"}).status_code == 200
    assert_error(team["admin"].delete(admin_path), 409, "ORGANIZATION_LAST_OWNER")


def test_remove_member_and_leave(team):
    base = members_path(team["org_id"])
    assert_error(team["member"].delete(f"{base}/{team['viewer'].id}"), 403, "FORBIDDEN")
    assert_error(team["admin"].delete(f"{base}/{team['owner'].id}"), 403, "FORBIDDEN")
    assert team["admin"].delete(f"{base}/{team['viewer'].id}").status_code == 204
    assert team["member"].delete(f"{base}/{team['member'].id}").status_code == 204  # leaving
    remaining = {m["account_id"] for m in team["owner"].get(base).json["data"]}
    assert remaining == {team["owner"].id, team["admin"].id}
    assert_error(team["viewer"].get(base), 404, "NOT_FOUND")
    assert_error(team["owner"].delete(f"{base}/{team['viewer'].id}"), 404, "USER_NOT_FOUND")


def test_removed_member_loses_access_to_the_organizations_applications(team, make_dashboard_app):
    app = make_dashboard_app(team["owner"], organization_id=team["org_id"])
    assert team["viewer"].get(f"/api/dashboard/applications/{app['id']}").status_code == 200
    team["owner"].delete(f"{members_path(team['org_id'])}/{team['viewer'].id}")
    assert_error(team["viewer"].get(f"/api/dashboard/applications/{app['id']}"), 404, "NOT_FOUND")
