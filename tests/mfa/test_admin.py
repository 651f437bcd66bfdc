"""The dashboard's view of an end user's MFA and the reset for a user who lost every
second factor (TOTP and backup codes, passkeys); and a deleted user's second factor going
with it."""
import pytest

from shared.ids import new_id
from tests.conftest import assert_error, events_of
from tests.mfa.conftest import rfc6238
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.passkeys.conftest import register  # noqa: F401  (fixture)

# The server's passkey settings of the tests that register one (tests/passkeys/conftest.py).
PASSKEYS = {"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}
with_passkeys = pytest.mark.parametrize("config_overrides", [PASSKEYS], indirect=True)


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


@with_passkeys
@pytest.mark.parametrize("with_totp", [True, False], ids=["totp-and-passkey", "passkey-only"])
def test_an_administrators_mfa_reset_lets_a_user_who_lost_every_factor_sign_in(
        ctx, dashboard_account, tenant, make_user_token, register, enable_mfa, start_login, outbox,  # noqa: F811
        with_totp):
    """docs/mfa.md: the administrator's reset (DELETE .../users/{userId}/mfa) is for a
    user who lost their second factor, and its notice said "Signing in now needs only
    your password".  MfaService.reset only knew TOTP: a user's passkeys, which are a
    second factor of the same login challenge, survived it, so the user who lost the
    phone holding both was still asked for a passkey (mfa_methods ["webauthn"]); and a
    user whose only second factor was a lost passkey got 400 MFA_NOT_ENABLED, with no way
    back in at all (a password reset keeps the passkeys, docs/passkeys.md)."""
    tenant = ctx.applications.update(tenant["_id"], {"passkeys": "second_factor"})
    user = make_user_token(tenant)
    if with_totp:
        enable_mfa(tenant, user)
    assert register(tenant, user, SoftAuthenticator()).status_code == 201  # then the phone is lost
    outbox.clear()

    reset = dashboard_account.delete(admin_path(tenant["_id"], user.user["id"]))
    after = start_login(tenant, user.user["email"], user.password)
    assert reset.status_code == 204 and "access_token" in after, (
        f"reset {reset.status_code} {reset.json}, the next password login: {after}, "
        f"notices: {[m.body for m in outbox]}")


@with_passkeys
def test_the_reset_says_what_it_removed_in_events_records_and_one_notice(
        ctx, dashboard_account, tenant, make_user_token, register, enable_mfa, outbox):  # noqa: F811
    """Each factor the reset removes emits its own mfa.disabled (method totp, webauthn),
    as enabling each emitted its mfa.enabled; each passkey is a passkey.deleted record
    whose actor is the administrator; the status shows nothing left; one notice says an
    administrator removed both, and that the password alone signs in now.  Nothing is
    left to reset after."""
    tenant = ctx.applications.update(tenant["_id"], {"passkeys": "second_factor"})
    user = make_user_token(tenant)
    user_id = user.user["id"]
    enable_mfa(tenant, user)
    passkeys = [register(tenant, user, SoftAuthenticator()).json["data"]["id"] for _ in range(2)]
    outbox.clear()

    assert dashboard_account.delete(admin_path(tenant["_id"], user_id)).status_code == 204
    assert [e["data"] for e in events_of(ctx, "mfa.disabled", user_id)] == [
        {"user_id": user_id, "method": "totp"}, {"user_id": user_id, "method": "webauthn"}]
    records = list(ctx.store["events"].find({"action": "passkey.deleted", "target.id": user_id}))
    assert sorted(r["data"]["passkey_id"] for r in records) == sorted(passkeys)
    assert {(r["actor"]["type"], r["actor"]["id"], r["data"]["mfa_reset"]) for r in records} == {
        ("dashboard_account", dashboard_account.id, True)}
    assert ctx.store["passkeys"].count_documents({"user_id": user_id}) == 0
    assert ctx.store["passkey_challenges"].count_documents({"user_id": user_id}) == 0
    status = dashboard_account.get(admin_path(tenant["_id"], user_id)).json["data"]
    assert status["mfa_enabled"] is False and status["passkeys"] == {"count": 0, "second_factor": False}
    [notice] = outbox
    assert "administrator" in notice.body and "the authenticator app, its backup codes and your 2 passkeys" in \
        notice.body and "Signing in now needs only your password." in notice.body
    assert_error(dashboard_account.delete(admin_path(tenant["_id"], user_id)), 400, "MFA_NOT_ENABLED")


@with_passkeys
def test_a_reset_of_an_account_without_a_password_says_how_to_set_one(
        ctx, dashboard_account, tenant, make_user_token, register, outbox):  # noqa: F811
    """A user whose passkeys signed in alone may have no password: the reset removes the
    lost passkeys all the same (the user has lost them), and the notice points to the
    password reset email rather than to a password the account does not have."""
    tenant = ctx.applications.update(tenant["_id"], {"passkeys": "passwordless"})
    user = make_user_token(tenant)
    assert register(tenant, user, SoftAuthenticator()).status_code == 201
    ctx.store["users"].update_one({"_id": user.user["id"]}, {"$set": {"password_hash": None}})
    outbox.clear()
    assert dashboard_account.delete(admin_path(tenant["_id"], user.user["id"])).status_code == 204
    [notice] = outbox
    assert "removing your passkey." in notice.body and "password reset email" in notice.body
    assert "needs only your password" not in notice.body


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
