"""Only the user themself may touch their MFA: another user's token and API keys get
403 on every JWT-owner route, a missing or foreign credential 401, and nothing changes."""
import pytest

from tests.conftest import assert_error, bearer
from tests.mfa.conftest import mfa_url, rfc6238

# (method, path, body) of every JWT-owner route; the bodies would be accepted from the owner.
ROUTES = [
    ("POST", "/totp/setup", {}),
    ("POST", "/totp/confirm", {"method_id": "6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", "code": "123456"}),
    ("GET", "/status", None),
    ("POST", "/backup-codes/regenerate", {"password": "Correct-Horse-9"}),
    ("DELETE", "/totp", {"password": "Correct-Horse-9"}),
]


@pytest.fixture
def call(client, application, mfa_user):
    def do(method, path, body, headers, app=None, user_id=None):
        return client.simulate_request(method, mfa_url(app or application, user_id or mfa_user.id, path),
                                       json=body, headers=headers)

    return do


def unchanged(ctx, mfa_user):
    method = ctx.store["mfa_methods"].find_one({"_id": mfa_user.method_id})
    assert method["status"] == "active"
    assert ctx.store["mfa_methods"].count_documents({"user_id": mfa_user.id}) == 1
    assert ctx.store["mfa_backup_codes"].count_documents({"user_id": mfa_user.id, "set_id": method["backup_set_id"],
                                                          "used_at": None}) == 10


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_another_users_token_is_forbidden(call, application, mfa_user, make_user_token, ctx, method, path, body):
    other = make_user_token(application)
    assert_error(call(method, path, body, bearer(other.access_token)), 403, "FORBIDDEN")
    unchanged(ctx, mfa_user)


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_an_api_key_is_forbidden(call, mfa_user, api_key, ctx, method, path, body):
    assert_error(call(method, path, body, bearer(api_key)), 403, "FORBIDDEN")
    unchanged(ctx, mfa_user)


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_no_credential_is_unauthorized(call, mfa_user, ctx, method, path, body):
    assert_error(call(method, path, body, None), 401, "UNAUTHORIZED")
    unchanged(ctx, mfa_user)


@pytest.mark.parametrize("method, path, body", ROUTES)
def test_a_token_of_another_application_is_unauthorized(call, mfa_user, make_application, make_user_token, ctx,
                                                        method, path, body):
    other_app = make_application()
    stranger = make_user_token(other_app)
    # the stranger's own id, in the victim's application, and the victim's id in the stranger's
    assert_error(call(method, path, body, bearer(stranger.access_token), user_id=stranger.user["id"]), 401,
                 "UNAUTHORIZED")
    assert_error(call(method, path, body, bearer(mfa_user.token.access_token), app=other_app), 401, "UNAUTHORIZED")
    unchanged(ctx, mfa_user)


def test_another_user_cannot_confirm_a_pending_setup_through_their_own_route(client, application, user_token,
                                                                             make_user_token, clock):
    """method_id is looked up within the caller's own methods only."""
    data = client.simulate_post(mfa_url(application, user_token.user["id"], "/totp/setup"), json={},
                                headers=user_token.headers).json["data"]
    attacker = make_user_token(application)
    response = client.simulate_post(mfa_url(application, attacker.user["id"], "/totp/confirm"),
                                    headers=attacker.headers,
                                    json={"method_id": data["method_id"], "code": rfc6238(data["secret"], clock())})
    assert_error(response, 404, "MFA_METHOD_NOT_FOUND")


def test_a_suspended_users_token_stops_working(call, application, mfa_user, ctx):
    ctx.users.admin.suspend(application["_id"], mfa_user.id)
    assert_error(call("GET", "/status", None, mfa_user.headers), 401, "UNAUTHORIZED")


def test_every_route_is_documented(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    base = "/api/v1/applications/{applicationId}/users"
    expected = {
        f"{base}/{{userId}}/mfa/totp/setup": {"post"},
        f"{base}/{{userId}}/mfa/totp/confirm": {"post"},
        f"{base}/{{userId}}/mfa/totp": {"delete"},
        f"{base}/{{userId}}/mfa/status": {"get"},
        f"{base}/{{userId}}/mfa/backup-codes/regenerate": {"post"},
        f"{base}/mfa/verify": {"post"},
        "/api/dashboard/applications/{applicationId}/users/{userId}/mfa": {"get", "delete"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
    verify = paths[f"{base}/mfa/verify"]["post"]
    assert verify["security"] == []
    assert {"401", "410", "429"} <= set(verify["responses"])
    assert paths[f"{base}/{{userId}}/mfa/status"]["get"]["security"] == [{"bearer": []}]
