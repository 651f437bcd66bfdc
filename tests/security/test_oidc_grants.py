"""Account recovery ends what a relying party holds: a password reset, ``DELETE
V1/users/{userId}/sessions``, a suspension and a deletion revoke the user's OIDC grants;
a V1 logout, ``DELETE V1/users/{userId}/sessions/{sessionId}``, the reuse of a session's
refresh token (a theft signal) and an eviction by the concurrent-session limit those made
in that session, and a password change those made in every session but the calling one.
Their refresh tokens are refused at the token endpoint, and their access tokens (which
name their grant, ``grant_id``) at userinfo (401 ``invalid_token``) and introspection
(``{"active": false}``): at once in the worker that made the change, at the next tailer
poll in every other one, and from a per-worker copy of the grant's state (no store read
per request).

The attacker holds the tokens a relying party was given (a stolen refresh token, an
access token); the user takes the account back."""
from __future__ import annotations

import base64

import falcon.testing
import jwt
import pytest

from controlplane.app import create_app
from tests.conftest import bearer, events_of

# The OIDC area's fixtures (a client, the code flow, the refresh grant), brought into this module.
from tests.oidc.conftest import assert_oauth_error, authorize, exchange, issue_tokens, oidc_client, refresh_grant  # noqa: F401
from tests.plugins.users import UserToken, fresh_address, users_url


@pytest.fixture
def app_doc(ctx, dashboard_app):
    """An application of a dashboard organization (its admin can suspend end users)."""
    return ctx.applications.get(dashboard_app["id"])


@pytest.fixture
def victim(app_doc, make_user_token):
    return make_user_token(app_doc)


@pytest.fixture
def rp(app_doc, oidc_client):  # noqa: F811
    return oidc_client(app_doc)


@pytest.fixture
def stolen(issue_tokens, victim, rp):  # noqa: F811
    """What a relying party was given for the victim, and what an attacker copies."""
    return issue_tokens(victim, rp)


def basic(rp) -> dict:
    raw = base64.b64encode(f"{rp['client_id']}:{rp['client_secret']}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


def userinfo(client, token):
    return client.simulate_get("/oidc/userinfo", headers=bearer(token))


def introspect(client, rp, token) -> dict:
    response = client.simulate_post("/oidc/introspect", json={"token": token}, headers=basic(rp))
    assert response.status_code == 200, response.text
    return response.json


def assert_refused_at_userinfo(response):
    assert_oauth_error(response, "invalid_token", status=401)
    assert response.headers["www-authenticate"].startswith('Bearer realm="iamgate", error="invalid_token"')


# ---------------------------------------------------------------- the four events


def reset_password(client, outbox, app, victim):
    forgot = client.simulate_post(users_url(app, "/password/forgot"), json={"email": victim.user["email"]},
                                  remote_addr=fresh_address())
    assert forgot.status_code == 200, forgot.text
    response = client.simulate_post(users_url(app, "/password/reset"), remote_addr=fresh_address(), json={
        "token": outbox[-1].token, "email": victim.user["email"], "password": "Another-Horse-77"})
    assert response.status_code == 200, response.text


def revoke_all_sessions(client, outbox, app, victim):
    response = client.simulate_delete(users_url(app, f"/{victim.user['id']}/sessions"), headers=victim.headers)
    assert response.status_code == 200, response.text


def suspend(client, outbox, app, victim, admin):
    response = admin.post(f"/api/dashboard/applications/{app['_id']}/users/{victim.user['id']}/suspend", json={})
    assert response.status_code == 200, response.text


def delete_account(client, outbox, app, victim):
    response = client.simulate_delete(users_url(app, f"/{victim.user['id']}"), headers=victim.headers)
    assert response.status_code == 204, response.text


EVENTS = {
    "password_reset": reset_password,
    "sessions_revoked": revoke_all_sessions,
    "suspended": suspend,
    "user_deleted": delete_account,
}


@pytest.fixture(params=sorted(EVENTS))
def recovery(request, client, outbox, app_doc, victim, dashboard_account):
    """(the reason of connection.revoked, a call that makes the event happen)."""
    reason, event = request.param, EVENTS[request.param]
    extra = (dashboard_account,) if reason == "suspended" else ()
    return reason, lambda: event(client, outbox, app_doc, victim, *extra)


def test_the_stolen_tokens_stop_working(client, ctx, app_doc, rp, victim, stolen, refresh_grant,  # noqa: F811
                                        recovery):
    reason, happen = recovery
    assert userinfo(client, stolen["access_token"]).status_code == 200  # the grant's state is now cached
    assert introspect(client, rp, stolen["access_token"])["active"] is True
    happen()
    assert_refused_at_userinfo(userinfo(client, stolen["access_token"]))
    assert introspect(client, rp, stolen["access_token"]) == {"active": False}
    assert introspect(client, rp, stolen["refresh_token"]) == {"active": False}
    assert_oauth_error(refresh_grant(rp, stolen["refresh_token"]), "invalid_grant")
    revoked = [e["data"] for e in events_of(ctx, "connection.revoked", victim.user["id"])]
    assert revoked == [{"kind": "grant", "user_id": victim.user["id"], "client_id": rp["client_id"], "reason": reason,
                        "grants_revoked": 1}]


def test_an_unsuspended_user_is_not_signed_back_in_to_relying_parties(client, ctx, app_doc, rp, victim, stolen,
                                                                      refresh_grant):  # noqa: F811
    ctx.users.admin.suspend(app_doc["_id"], victim.user["id"])
    ctx.users.admin.unsuspend(app_doc["_id"], victim.user["id"])
    assert_refused_at_userinfo(userinfo(client, stolen["access_token"]))
    assert_oauth_error(refresh_grant(rp, stolen["refresh_token"]), "invalid_grant")


def test_after_a_reset_the_user_connects_again_without_a_new_consent(client, ctx, outbox, app_doc, rp, victim,
                                                                     stolen, issue_tokens, login):  # noqa: F811
    """The consent stays: only the grants end.  (Of a verified account: an unverified one
    is handed over to the mailbox's owner, consents withdrawn: test_account_claim.py.)"""
    ctx.store["users"].update_one({"_id": victim.user["id"]}, {"$set": {"email_verified": True}})
    reset_password(client, outbox, app_doc, victim)
    pair = login(app_doc, victim.user["email"], "Another-Horse-77")
    again = issue_tokens(UserToken(victim.user, "Another-Horse-77", pair["access_token"], pair["refresh_token"]), rp)
    assert userinfo(client, again["access_token"]).status_code == 200
    assert len(events_of(ctx, "consent.granted", victim.user["id"])) == 1


def test_other_users_grants_are_untouched(client, app_doc, rp, victim, stolen, issue_tokens,  # noqa: F811
                                          make_user_token, recovery):
    bystander = issue_tokens(make_user_token(app_doc), rp)
    recovery[1]()
    assert userinfo(client, bystander["access_token"]).status_code == 200


# ---------------------------------------------------------------- one session's end


def session_of(user: UserToken) -> str:
    return jwt.decode(user.access_token, options={"verify_signature": False})["sid"]


def log_out(client, ctx, app, ended: UserToken, survivor: UserToken):
    response = client.simulate_post(users_url(app, "/logout"), json={"refresh_token": ended.refresh_token},
                                    headers=ended.headers)
    assert response.status_code == 204, response.text


def revoke_the_session(client, ctx, app, ended: UserToken, survivor: UserToken):
    response = client.simulate_delete(users_url(app, f"/{ended.user['id']}/sessions/{session_of(ended)}"),
                                      headers=ended.headers)
    assert response.status_code == 204, response.text


def change_the_password(client, ctx, app, ended: UserToken, survivor: UserToken):
    """From the surviving session: the user's other sessions end, the calling one stays."""
    new = "Another-Horse-77"
    response = client.simulate_post(users_url(app, f"/{survivor.user['id']}/change-password"), headers=survivor.headers,
                                    json={"current_password": survivor.password, "new_password": new,
                                          "new_password_confirmation": new})
    assert response.status_code == 200, response.text


def refresh_v1(client, app, refresh_token: str):
    return client.simulate_post(users_url(app, "/token/refresh"), json={"refresh_token": refresh_token},
                                remote_addr=fresh_address())


def reuse_the_refresh_token(client, ctx, app, ended: UserToken, survivor: UserToken):
    """A token rotated two steps ago comes back (no grace window): a theft signal."""
    second = refresh_v1(client, app, ended.refresh_token).json["data"]["refresh_token"]
    assert refresh_v1(client, app, second).status_code == 200
    response = refresh_v1(client, app, ended.refresh_token)
    assert response.status_code == 401 and response.json["error"]["details"]["reason"] == "reused", response.text


def evict_by_the_session_limit(client, ctx, app, ended: UserToken, survivor: UserToken):
    """A third login under a limit of two evicts the oldest session, ``ended``."""
    ctx.applications.update(app["_id"], {"max_concurrent_sessions": 2})
    ctx.clock.advance(1)
    response = client.simulate_post(users_url(app, "/login"), remote_addr=fresh_address(), json={
        "email": survivor.user["email"], "password": survivor.password})
    assert response.status_code == 200, response.text
    assert ctx.store["sessions"].find_one({"_id": session_of(ended)})["revoked_reason"] == "session_limit"


SESSION_ENDS = {"logout": log_out, "session_revoked": revoke_the_session, "password_changed": change_the_password,
                "session_token_reused": reuse_the_refresh_token, "session_limit": evict_by_the_session_limit}


@pytest.mark.parametrize("reason", sorted(SESSION_ENDS))
def test_ending_one_session_ends_its_grants_only(client, ctx, app_doc, rp, victim, stolen, refresh_grant,  # noqa: F811
                                                 issue_tokens, login, reason):  # noqa: F811
    """The relying party's sign-in made in the session ends with it; one made in another
    session of the same user (another device) keeps working."""
    ctx.clock.advance(1)  # the other device signs in later: the session limit evicts the victim's session
    pair = login(app_doc, victim.user["email"], victim.password)
    other_device = UserToken(victim.user, victim.password, pair["access_token"], pair["refresh_token"])
    assert session_of(other_device) != session_of(victim)
    kept = issue_tokens(other_device, rp)
    assert userinfo(client, stolen["access_token"]).status_code == 200  # the grant's state is now cached
    SESSION_ENDS[reason](client, ctx, app_doc, victim, other_device)
    assert_refused_at_userinfo(userinfo(client, stolen["access_token"]))
    assert introspect(client, rp, stolen["access_token"]) == {"active": False}
    assert_oauth_error(refresh_grant(rp, stolen["refresh_token"]), "invalid_grant")
    assert userinfo(client, kept["access_token"]).status_code == 200
    assert introspect(client, rp, kept["access_token"])["active"] is True
    assert refresh_grant(rp, kept["refresh_token"]).status_code == 200
    revoked = [e["data"] for e in events_of(ctx, "connection.revoked", victim.user["id"])]
    assert revoked == [{"kind": "grant", "user_id": victim.user["id"], "client_id": rp["client_id"], "reason": reason,
                        "grants_revoked": 1}]


# ---------------------------------------------------------------- the grant's state in the lookup cache


def test_a_warm_token_costs_no_store_read_of_its_grant(client, ctx, rp, stolen, monkeypatch):
    reads = []
    real = ctx.oidc.connections.grants.state
    monkeypatch.setattr(ctx.oidc.connections.grants, "state", lambda grant_id: reads.append(grant_id) or real(grant_id))
    for _ in range(5):
        assert userinfo(client, stolen["access_token"]).status_code == 200
        assert introspect(client, rp, stolen["access_token"])["active"] is True
    assert len(reads) == 1


def test_a_revocation_in_another_worker_stops_the_token_at_its_next_tailer_poll(client, ctx, clock, config,
                                                                               app_doc, victim, stolen):
    other = falcon.testing.TestClient(create_app(config, store=ctx.store, clock=clock, start_background=False))
    assert userinfo(other, stolen["access_token"]).status_code == 200  # the other worker's copy: live
    revoke_all_sessions(client, None, app_doc, victim)
    assert other.app.services.tailer.poll_once() >= 1
    assert_refused_at_userinfo(userinfo(other, stolen["access_token"]))


def test_without_any_event_a_copy_lives_at_most_the_ttl(client, ctx, clock, stolen):
    """A revocation that reaches this worker through no event (a missed poll, a write by hand)."""
    assert userinfo(client, stolen["access_token"]).status_code == 200
    ctx.store["oidc_refresh_tokens"].update_many({}, {"$set": {"revoked_at": clock()}})
    assert userinfo(client, stolen["access_token"]).status_code == 200  # the copy
    clock.advance(2.1)
    assert_refused_at_userinfo(userinfo(client, stolen["access_token"]))


def test_an_access_token_without_a_grant_is_refused(client, ctx, rp, victim, stolen):
    """A token naming no grant, an unknown one or another application's is not ours to honour."""
    claims = jwt.decode(stolen["access_token"], options={"verify_signature": False})
    other_app = ctx.applications.create({"name": "Other"}, organization_id=None, owner_account_id=None)
    for change in ({"grant_id": None}, {"grant_id": "00000000-0000-4000-8000-000000000000"},
                   {"app_id": other_app["_id"]}):
        forged = ctx.tokens.sign({k: v for k, v in {**claims, **change}.items() if v is not None},
                                 headers={"typ": "at+jwt"})
        assert_refused_at_userinfo(userinfo(client, forged))
        assert introspect(client, rp, forged) == {"active": False}
