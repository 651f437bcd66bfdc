"""The dashboard's view of an end user's MFA and the reset for a user who lost both the
authenticator and the backup codes; and a deleted user's second factor going with it."""
import pytest

from shared.ids import new_id
from tests.conftest import assert_error, events_of
from tests.mfa.conftest import rfc6238


@pytest.fixture
def tenant(ctx, dashboard_app):
    return ctx.applications.get(dashboard_app["id"])


@pytest.fixture
def locked_out(tenant, make_user_token, enable_mfa):
    """A user of the dashboard's application with MFA on."""
    return enable_mfa(tenant, make_user_token(tenant))


def admin_path(app_id, user_id):
    return f"/api/dashboard/applications/{app_id}/users/{user_id}/mfa"


def test_the_dashboard_shows_an_end_users_mfa_status(dashboard_account, tenant, locked_out):
    response = dashboard_account.get(admin_path(tenant["_id"], locked_out.id))
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert data["mfa_enabled"] is True and data["backup_codes_remaining"] == 10
    assert [m["id"] for m in data["methods"]] == [locked_out.method_id]


def test_an_admin_resets_mfa_and_the_user_logs_in_with_the_password(dashboard_account, tenant, locked_out,
                                                                    start_login, ctx, outbox):
    response = dashboard_account.delete(admin_path(tenant["_id"], locked_out.id))
    assert response.status_code == 204, response.text
    pair = start_login(tenant, locked_out.email, locked_out.password)
    assert "access_token" in pair
    [event] = events_of(ctx, "mfa.disabled")
    assert event["data"] == {"user_id": locked_out.id, "method": "totp"} and event["app_id"] == tenant["_id"]
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": locked_out.id}) == 0
    assert [m.to for m in outbox] == [locked_out.email] and "administrator" in outbox[0].body
    assert_error(dashboard_account.delete(admin_path(tenant["_id"], locked_out.id)), 400, "MFA_NOT_ENABLED")


def test_reset_of_an_unknown_user_is_not_found(dashboard_account, tenant):
    assert_error(dashboard_account.delete(admin_path(tenant["_id"], new_id())), 404, "USER_NOT_FOUND")
    assert_error(dashboard_account.get(admin_path(tenant["_id"], new_id())), 404, "USER_NOT_FOUND")


def test_a_user_of_another_application_cannot_be_reset_through_this_one(dashboard_account, tenant,
                                                                        make_dashboard_app, make_user_token,
                                                                        enable_mfa, ctx):
    other = ctx.applications.get(make_dashboard_app(dashboard_account, name="Other")["id"])
    victim = enable_mfa(other, make_user_token(other))
    assert_error(dashboard_account.delete(admin_path(tenant["_id"], victim.id)), 404, "USER_NOT_FOUND")
    assert ctx.store["mfa_methods"].find_one({"_id": victim.method_id})["status"] == "active"


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_may_look_but_not_reset(dashboard_account, tenant, locked_out, make_dashboard_account,
                                                    role, ctx):
    colleague = make_dashboard_account()
    dashboard_account.post(f"/api/dashboard/organizations/{dashboard_account.organization_id}/members",
                           json={"email": colleague.email, "role": role})
    assert colleague.get(admin_path(tenant["_id"], locked_out.id)).status_code == 200
    assert_error(colleague.delete(admin_path(tenant["_id"], locked_out.id)), 403, "FORBIDDEN")
    assert ctx.store["mfa_methods"].find_one({"_id": locked_out.method_id})["status"] == "active"


def test_outsiders_see_nothing(make_dashboard_account, tenant, locked_out, client, ctx):
    intruder = make_dashboard_account()
    assert_error(intruder.get(admin_path(tenant["_id"], locked_out.id)), 404, "NOT_FOUND")
    assert_error(intruder.delete(admin_path(tenant["_id"], locked_out.id)), 404, "NOT_FOUND")
    assert_error(client.simulate_delete(admin_path(tenant["_id"], locked_out.id)), 401, "UNAUTHORIZED")
    assert ctx.store["mfa_methods"].find_one({"_id": locked_out.method_id})["status"] == "active"


def test_an_end_user_token_cannot_use_the_dashboard_route(client, tenant, locked_out, ctx):
    response = client.simulate_delete(admin_path(tenant["_id"], locked_out.id), headers=locked_out.headers)
    assert_error(response, 401, "UNAUTHORIZED")
    assert ctx.store["mfa_methods"].find_one({"_id": locked_out.method_id})["status"] == "active"


def test_a_deleted_users_second_factor_is_forgotten(ctx, application, mfa_user, start_login, verify, clock):
    """Whichever area deletes a user emits user.deleted; the MFA records go with it."""
    challenge = start_login(application, mfa_user.email, mfa_user.password)["challenge_token"]
    ctx.events.emit(application["_id"], "user.deleted", {"user_id": mfa_user.id}, subject={"user_id": mfa_user.id})
    for collection in ("mfa_methods", "mfa_backup_codes", "mfa_challenges"):
        assert ctx.store[collection].count_documents({"user_id": mfa_user.id}) == 0, collection
    assert_error(verify(application, challenge, rfc6238(mfa_user.secret, clock())), 410,
                 "AUTH_MFA_CHALLENGE_EXPIRED")


def test_the_export_lists_methods_without_secrets(ctx, application, mfa_user):
    [method] = ctx.mfa.export_methods(application["_id"], mfa_user.id)
    assert method["id"] == mfa_user.method_id and method["type"] == "totp"
    assert mfa_user.secret not in str(method) and "secret" not in method
