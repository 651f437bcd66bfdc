"""GET V1/users/{userId}/data-export: everything stored about the user in documented
shapes, never a secret, and at most one export per hour per user."""
import json
import math
from datetime import timedelta

import pyotp
import pytest

from controlplane.audit.schemas import RECORD as AUDIT_RECORD
from controlplane.connections.store import ConnectionStore
from shared.errors import NotFound
from shared.ids import digest
from shared.timeutil import isoformat
from tests.conftest import assert_error

TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"


@pytest.fixture
def clock(clock):
    # Start one minute into a rate-limit window, so "within the hour" never straddles two
    # (forward, not back: mongomock applies TTL indexes against the real time).
    clock.now = clock.now.replace(minute=1, second=0, microsecond=0) + timedelta(hours=1)
    return clock


@pytest.fixture
def me(application, make_user_token):
    return make_user_token(application, name="Grace Hopper", metadata={"team": "compilers"})


def export(call, app, user, token=None):
    return call("GET", app, user, "/data-export", token=token)


def test_export_has_every_section_in_its_documented_shape(call, application, me, ctx, clock, login_from_device,
                                                          make_role, assign_role, mfa_method, oidc_consent):
    second = login_from_device(application, me, "Tablet/3")
    tablet = ctx.store["sessions"].find_one({"user_id": me.user["id"], "device_info.user_agent": "Tablet/3"})
    assert call("DELETE", application, me, f"/sessions/{tablet['_id']}").status_code == 204
    call("PUT", application, me, "/profile", json={"avatar_url": "https://example.com/g.png"})
    role = make_role(application, "reviewer", ["posts:read"], display_name="Reviewer")
    assign_role(application, {"_id": me.user["id"]}, role, scope="org:7")
    method = mfa_method(application, me.user["id"], secret=TOTP_SECRET)
    consent = oidc_consent(application, me.user["id"], client_id="client-abc", scopes=("openid", "email"))
    ctx.store["users"].update_one({"_id": me.user["id"]}, {"$set": {"attributes": {"department": "navy"}}})

    response = export(call, application, me)
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    data = response.json["data"]
    assert set(data) == {"exported_at", "user", "sessions", "roles", "mfa_methods", "passkeys", "oauth_connections",
                         "linked_identities", "audit_logs"}
    assert data["linked_identities"] == []  # test_export_lists_linked_identities_without_their_tokens
    assert data["passkeys"] == []  # tests/passkeys/test_flows.py exports one
    assert data["exported_at"] == isoformat(clock.now)

    user = data["user"]
    assert {"id", "email", "name", "created_at"} <= set(user)
    assert (user["id"], user["email"], user["name"], user["created_at"]) == (
        me.user["id"], me.user["email"], "Grace Hopper", me.user["created_at"])
    assert user["metadata"] == {"team": "compilers"} and user["avatar_url"] == "https://example.com/g.png"
    assert user["attributes"] == {"department": "navy"} and user["email_verified"] is False
    assert user["last_login_at"] is not None

    sessions = data["sessions"]
    assert len(sessions) == 2
    for item in sessions:
        assert set(item) == {"id", "device_info", "is_remember_me", "last_used_at", "expires_at", "created_at",
                             "revoked_at"}
    revoked = [s for s in sessions if s["device_info"]["user_agent"] == "Tablet/3"]
    assert len(revoked) == 1 and revoked[0]["revoked_at"] is not None
    assert [s["revoked_at"] for s in sessions if s is not revoked[0]] == [None]
    assert second["refresh_token"] not in response.text

    assert data["roles"] == [{"role_id": role["_id"], "name": "reviewer", "display_name": "Reviewer",
                              "scope": "org:7", "expires_at": None, "assigned_at": data["roles"][0]["assigned_at"]}]
    assert data["mfa_methods"] == [{
        "id": method["_id"], "type": "totp", "label": "Authenticator App", "is_primary": True, "status": "active",
        "verified_at": data["mfa_methods"][0]["verified_at"], "last_used_at": None}]
    assert data["mfa_methods"][0]["verified_at"] is not None
    assert data["oauth_connections"] == [{"client_id": "client-abc", "scopes": ["openid", "email"],
                                          "granted_at": data["oauth_connections"][0]["granted_at"],
                                          "withdrawn_at": None}]
    assert consent["client_id"] == "client-abc"

    logs = data["audit_logs"]
    assert [e["action"] for e in logs] == ["user.created", "user.login", "user.login", "session.revoked",
                                           "user.updated", "role.assigned"]
    assert [e["at"] for e in logs] == sorted(e["at"] for e in logs)
    for item in logs:  # the user's own audit records (docs/audit.md, "Fields")
        assert list(item) == AUDIT_RECORD["required"]
        assert me.user["id"] in (item["actor"]["id"], item["target"]["id"])
    assert logs[3]["data"]["session_id"] == revoked[0]["id"]  # the revoked tablet session
    assert logs[4]["data"]["changed"] == ["avatar_url"]


def test_export_contains_no_secret_anywhere(call, application, me, ctx, login_from_device, mfa_method, refresh,
                                            oidc_consent, oidc_refresh_token, outbox):
    pair = login_from_device(application, me)
    rotated = refresh(application, pair["refresh_token"]).json["data"]  # leaves a rotated-token digest behind
    method = mfa_method(application, me.user["id"], secret=TOTP_SECRET)
    pending = mfa_method(application, me.user["id"], status="pending", secret="KRSXG5CTMVRXEZLUKRSXG5CT",
                         is_primary=False)
    consent = oidc_consent(application, me.user["id"])
    oidc_token = oidc_refresh_token(application, me.user["id"], consent["client_id"])
    ctx.users.passwords.forgot(application, me.user["email"])  # a reset-token digest in user_tokens
    # An event whose data (wrongly) carries credentials must not leak them through the export.
    ctx.events.emit(application["_id"], "user.password_changed",
                    {"user_id": me.user["id"], "password": "Correct-Horse-9", "nested": {"refresh_token": "rt-x"},
                     "items": [{"totp_secret": TOTP_SECRET, "kept": "yes"}]},
                    subject={"user_id": me.user["id"]})

    response = export(call, application, me)
    assert response.status_code == 200, response.text
    text = response.text
    user = ctx.store["users"].find_one({"_id": me.user["id"]})
    secrets = [user["password_hash"], me.password, TOTP_SECRET, "KRSXG5CTMVRXEZLUKRSXG5CT", method["secret"],
               pending["secret"], oidc_token["token_digest"], pair["refresh_token"], rotated["refresh_token"],
               me.refresh_token, "rt-x"]
    for session in ctx.store["sessions"].find({"user_id": me.user["id"]}):
        secrets += [session["refresh_digest"], session.get("previous_digest")]
    secrets += [doc["_id"] for doc in ctx.store["refresh_token_history"].find({"user_id": me.user["id"]})]
    secrets += [doc["_id"] for doc in ctx.store["user_tokens"].find({"user_id": me.user["id"]})]
    secrets += [digest(t) for t in (me.refresh_token, pair["refresh_token"], rotated["refresh_token"])]
    secrets = [s for s in secrets if s]
    assert len(secrets) >= 16
    for secret in secrets:
        assert secret not in text, secret
    for word in ("password_hash", "refresh_digest", "previous_digest", "secret", "token_digest"):
        assert word not in text
    leaky = [e for e in response.json["data"]["audit_logs"] if "nested" in e["data"]][0]
    assert leaky["data"] == {"user_id": me.user["id"], "nested": {}, "items": [{"kept": "yes"}]}


def test_export_is_limited_to_one_per_hour_per_user(call, application, me, make_user_token, clock, fresh_token):
    clock.now = clock.now.replace(minute=59, second=0, microsecond=0)  # a fixed window would end in a minute
    first = clock.now
    assert export(call, application, me, token=fresh_token(application, me)).status_code == 200
    clock.advance(30 * 60)
    response = export(call, application, me, token=fresh_token(application, me))
    error = assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert response.headers["X-RateLimit-Limit"] == "1" and response.headers["X-RateLimit-Remaining"] == "0"
    # Exactly 60 minutes after the export that was allowed, not at the top of the hour.
    assert int(response.headers["X-RateLimit-Reset"]) == math.ceil(first.timestamp()) + 3600
    assert int(response.headers["Retry-After"]) == 30 * 60
    assert error["details"]["retry_after"] == int(response.headers["Retry-After"])
    # Another user of the application has a budget of its own.
    other = make_user_token(application)
    assert export(call, application, other).status_code == 200
    # The limit lapses with the hour.
    clock.advance(int(response.headers["Retry-After"]))
    token = fresh_token(application, me)
    assert export(call, application, me, token=token).status_code == 200
    assert_error(export(call, application, me, token=token), 429, "RATE_LIMIT_EXCEEDED")


def test_a_refused_export_reads_no_data(call, application, me, ctx, monkeypatch):
    assert export(call, application, me).status_code == 200
    monkeypatch.setattr(ctx.selfservice.user_sessions, "all_for_user", lambda *a: pytest.fail("read after the limit"))
    assert_error(export(call, application, me), 429, "RATE_LIMIT_EXCEEDED")


def test_export_shows_only_this_users_data(call, application, me, make_user_token, make_application, ctx,
                                           mfa_method, oidc_consent):
    other = make_user_token(application)
    mfa_method(application, other.user["id"])
    oidc_consent(application, other.user["id"])
    foreign_app = make_application()
    foreign = make_user_token(foreign_app)
    # Same user id in another application: tenant isolation is by app_id, not only by user id.
    ctx.store["mfa_methods"].insert_one({"_id": "x", "app_id": foreign_app["_id"], "user_id": me.user["id"],
                                         "type": "totp", "label": "Elsewhere", "status": "active", "secret": "s"})
    data = export(call, application, me).json["data"]
    assert len(data["sessions"]) == 1 and data["mfa_methods"] == [] and data["oauth_connections"] == []
    assert all(e["data"].get("user_id") == me.user["id"] for e in data["audit_logs"])
    assert other.user["email"] not in json.dumps(data) and foreign.user["email"] not in json.dumps(data)


def test_export_keeps_withdrawn_consents_and_expired_sessions(call, application, me, clock, oidc_consent,
                                                             login_from_device):
    oidc_consent(application, me.user["id"], client_id="old-client", withdrawn=True)
    clock.advance(8 * 86400)  # the first session expired
    fresh = login_from_device(application, me)
    data = call("GET", application, me, "/data-export", token=fresh["access_token"]).json["data"]
    assert len(data["sessions"]) == 2
    assert data["oauth_connections"][0]["client_id"] == "old-client"
    assert data["oauth_connections"][0]["withdrawn_at"] is not None


def test_export_of_a_deleted_user_is_404_and_costs_nothing(ctx, application, me):
    ctx.store["users"].update_one({"_id": me.user["id"]}, {"$set": {"status": "deleted"}})
    with pytest.raises(NotFound) as caught:
        ctx.selfservice.export(application["_id"], me.user["id"])
    assert caught.value.code == "USER_NOT_FOUND"
    assert ctx.store["rate_limits"].count_documents({"_id": {"$regex": "^export:"}}) == 0


def test_export_after_a_real_totp_enrolment_has_neither_secret_nor_backup_codes(call, application, me, clock):
    setup = call("POST", application, me, "/mfa/totp/setup", json={"label": "Phone"})
    if setup.status_code == 404:
        pytest.skip("the MFA area is not registered")
    assert setup.status_code == 200, setup.text
    secret, method_id = setup.json["data"]["secret"], setup.json["data"]["method_id"]
    confirm = call("POST", application, me, "/mfa/totp/confirm",
                   json={"method_id": method_id, "code": pyotp.TOTP(secret).at(clock.now)})
    assert confirm.status_code == 201, confirm.text
    backup_codes = confirm.json["data"]["backup_codes"]

    response = export(call, application, me)
    assert response.status_code == 200, response.text
    for value in [secret, *backup_codes, *(code.replace("-", "") for code in backup_codes)]:
        assert value not in response.text
    methods = response.json["data"]["mfa_methods"]
    assert [(m["id"], m["label"], m["status"]) for m in methods] == [(method_id, "Phone", "active")]
    assert "mfa.enabled" in [e["action"] for e in response.json["data"]["audit_logs"]]


def test_export_lists_linked_identities_without_their_tokens(call, application, me, ctx, clock, make_connection):
    connection = make_connection(application["_id"], name="acme-sso")
    ConnectionStore(ctx.store).insert(connection)
    linked_at = clock.now - timedelta(days=2)
    ctx.store["identities"].insert_one({
        "_id": "00000000-0000-4000-8000-00000000001d", "app_id": application["_id"], "user_id": me.user["id"],
        "connection_id": connection.id, "issuer": "https://idp.example.com", "sub": "248289761001",
        "email": "grace@example.com", "email_verified": True, "created_at": linked_at, "last_sign_in_at": clock.now,
        "tokens": {"ciphertext": "gAAAA-sealed-upstream-tokens", "expires_at": None, "stored_at": linked_at},
        "claims": {"groups": ["navy"]}})
    response = export(call, application, me)
    assert response.status_code == 200, response.text
    assert response.json["data"]["linked_identities"] == [{
        "id": "00000000-0000-4000-8000-00000000001d", "connection_id": connection.id, "connection_name": "acme-sso",
        "issuer": "https://idp.example.com", "sub": "248289761001", "email": "grace@example.com",
        "email_verified": True, "linked_at": isoformat(linked_at), "last_sign_in_at": isoformat(clock.now)}]
    assert "gAAAA-sealed-upstream-tokens" not in response.text and "navy" not in response.text
