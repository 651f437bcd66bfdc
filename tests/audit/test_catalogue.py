"""Every action of the audit catalogue (docs/audit.md) is performed here through the HTTP
API, and its record names the right actor, target and result, with the request's id and
client address.

``SCENARIOS`` maps each action to the steps that perform it; the test is parametrized
over the catalogue itself, so an action added to the catalogue without a scenario fails
(``test_every_catalogued_action_has_a_scenario`` says which).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controlplane.audit.actions import ACTIONS, CHANGE_ACTIONS, RECORDED_ACTIONS
from tests.conftest import bearer
from tests.mfa.conftest import mfa_url, rfc6238
from tests.oidc.conftest import REDIRECT_URI, clients_url, pkce_pair
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.passkeys.conftest import passkeys_url
from tests.plugins.users import PASSWORD, users_url

IP = "198.51.100.23"  # every scenario's last request comes from here
SUCCESS = {"status": "success"}
# The actions records may name: a change-log kind whose events are all renamed
# (api_keys.changed: api_key.created, api_key.revoked) names none.
CATALOGUE = sorted(set(ACTIONS) - {kind for kind, _ in CHANGE_ACTIONS})
WEBHOOK_URL = "http://127.0.0.1:9/hooks?token=url-token-0123456789"  # a URL may carry a token
DASHBOARD = "/api/dashboard"


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True, "webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}


def failure(reason: str) -> dict:
    return {"status": "failure", "reason": reason}


@dataclass
class Expect:
    """What the newest record of the action must say; ``response`` is the request that
    performed it (its X-Request-Id is the record's ``request_id``)."""

    response: object
    actor: tuple  # (type, id)
    target: tuple  # (type, id)
    result: dict = field(default_factory=lambda: SUCCESS)
    data: dict = field(default_factory=dict)  # items the record's data must hold
    application_id: object = "app"  # "app": the scenario's application


class Env:
    """The fixtures a scenario asks for, by name (``env.client``, ``env.application``...)."""

    def __init__(self, request):
        self._request = request

    def __getattr__(self, name):
        return self._request.getfixturevalue(name)

    def call(self, method, path, *, token=None, **kwargs):
        headers = {**(bearer(token) if token else {}), **kwargs.pop("headers", {})}
        return self.client.simulate_request(method, path, headers=headers, remote_addr=IP, **kwargs)

    def v1(self, method, path, *, token=None, **kwargs):
        return self.call(method, f"/api/v1/applications/{self.application['_id']}{path}",
                         token=token or self.api_key, **kwargs)

    def dashboard(self, method, path, **kwargs):
        return self.dashboard_account.request(method, DASHBOARD + path, remote_addr=IP, **kwargs)

    def key_id(self):
        return self.ctx.store["api_keys"].find_one({"app_id": self.application["_id"]})["_id"]

    def user(self):
        """A fresh user of the application, signed in: ``UserToken``."""
        return self.make_user_token(self.application)


def ok(response, status=(200, 201, 204)):
    assert response.status_code in ((status,) if isinstance(status, int) else status), response.text
    return response


SCENARIOS = {}


def scenario(*actions):
    def register(run):
        for action in actions:
            assert action not in SCENARIOS, action
            SCENARIOS[action] = run
        return run

    return register


# ---------------------------------------------------------------- end users: sign-in and sessions

@scenario("user.created")
def _register(env):
    response = ok(env.call("POST", users_url(env.application, "/register"),
                           json={"email": "new-user@example.com", "password": PASSWORD, "name": "New"}))
    user_id = response.json["data"]["id"]
    return Expect(response, ("user", user_id), ("user", user_id))


@scenario("user.login")
def _login(env):
    user = env.make_user(env.application)
    response = ok(env.call("POST", users_url(env.application, "/login"),
                           json={"email": user["email"], "password": PASSWORD}))
    return Expect(response, ("user", user["id"]), ("user", user["id"]))


@scenario("user.locked")
def _locked(env):
    user = env.make_user(env.application)
    for _ in range(env.ctx.config.lockout_threshold):
        response = env.call("POST", users_url(env.application, "/login"),
                            json={"email": user["email"], "password": "Wrong-Horse-1"})
    assert response.status_code == 401, response.text
    return Expect(response, ("system", None), ("user", user["id"]),
                  data={"failures": env.ctx.config.lockout_threshold})


@scenario("token.revoked")
def _logout(env):
    user = env.user()
    response = ok(env.call("POST", users_url(env.application, "/logout"), token=user.access_token,
                           json={"refresh_token": user.refresh_token}), 204)
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]), data={"token": "refresh_token"})


@scenario("token.reuse_detected")
def _refresh_reuse(env):
    user = env.user()
    url = users_url(env.application, "/token/refresh")
    ok(env.call("POST", url, json={"refresh_token": user.refresh_token}))
    env.clock.advance(env.ctx.config.refresh_reuse_grace + 1)
    response = env.call("POST", url, json={"refresh_token": user.refresh_token})
    assert response.status_code == 401, response.text
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]))


@scenario("session.revoked")
def _session_revoked(env):
    user = env.user()
    path = f"/users/{user.user['id']}/sessions"
    session_id = ok(env.v1("GET", path, token=user.access_token)).json["data"][0]["id"]
    response = ok(env.v1("DELETE", f"{path}/{session_id}", token=user.access_token), 204)
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]), data={"session_id": session_id})


@scenario("user.sessions_revoked")
def _sessions_revoked(env):
    user = env.user()
    response = ok(env.v1("DELETE", f"/users/{user.user['id']}/sessions", token=user.access_token))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]), data={"sessions_revoked": 1})


@scenario("user.password_changed")
def _password_changed(env):
    user = env.user()
    response = ok(env.v1("POST", f"/users/{user.user['id']}/change-password", token=user.access_token,
                         json={"current_password": PASSWORD, "new_password": "Another-Horse-77",
                               "new_password_confirmation": "Another-Horse-77"}))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]))


@scenario("user.password_reset_requested")
def _reset_requested(env):
    user = env.make_user(env.application)
    response = ok(env.call("POST", users_url(env.application, "/password/forgot"), json={"email": user["email"]}))
    return Expect(response, ("user", user["id"]), ("user", user["id"]))


@scenario("user.password_reset")
def _reset(env):
    user, outbox = env.make_user(env.application), env.outbox
    ok(env.call("POST", users_url(env.application, "/password/forgot"), json={"email": user["email"]}))
    response = ok(env.call("POST", users_url(env.application, "/password/reset"),
                           json={"token": outbox[-1].token, "email": user["email"], "password": "Brand-New-Horse-5"}))
    return Expect(response, ("user", user["id"]), ("user", user["id"]))


@scenario("user.claimed")
def _claimed(env):
    """A reset of an account whose email was never verified hands it to the mailbox's owner."""
    expect = _reset(env)
    return Expect(expect.response, expect.actor, expect.target, data={"via": "password_reset"})


@scenario("user.updated")
def _profile(env):
    user = env.user()
    response = ok(env.v1("PUT", f"/users/{user.user['id']}/profile", token=user.access_token, json={"name": "Renamed"}))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]))


@scenario("user.deleted")
def _deleted(env):
    user = env.user()
    response = ok(env.v1("DELETE", f"/users/{user.user['id']}", token=user.access_token), 204)
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]))


def _dashboard_user(env):
    """A user of an application of the dashboard account."""
    return env.stored_user({"_id": env.dashboard_app["id"]})


@scenario("user.suspended", "user.unsuspended")
def _suspension(env):
    user, app_id = _dashboard_user(env), env.dashboard_app["id"]
    ok(env.dashboard("POST", f"/applications/{app_id}/users/{user['_id']}/suspend", json={}))
    response = ok(env.dashboard("POST", f"/applications/{app_id}/users/{user['_id']}/unsuspend", json={}))
    if env.action == "user.suspended":
        response = ok(env.dashboard("POST", f"/applications/{app_id}/users/{user['_id']}/suspend", json={}))
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("user", user["_id"]),
                  application_id=app_id)


# ---------------------------------------------------------------- MFA

def _mfa_user(env):
    return env.enable_mfa(env.application, env.user())


def _challenge(env, mfa):
    return env.start_login(env.application, mfa.email, mfa.password)["challenge_token"]


@scenario("mfa.enabled")
def _mfa_enabled(env):
    user = env.user()
    headers = bearer(user.access_token)
    setup = ok(env.client.simulate_post(mfa_url(env.application, user.user["id"], "/totp/setup"), json={},
                                        headers=headers)).json["data"]
    response = ok(env.call("POST", mfa_url(env.application, user.user["id"], "/totp/confirm"), headers=headers,
                           json={"method_id": setup["method_id"], "code": rfc6238(setup["secret"], env.clock())}))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]), data={"method": "totp"})


@scenario("mfa.disabled")
def _mfa_disabled(env):
    mfa = _mfa_user(env)
    response = ok(env.call("DELETE", mfa_url(env.application, mfa.id, "/totp"), headers=mfa.headers,
                           json={"password": mfa.password}), 204)
    return Expect(response, ("user", mfa.id), ("user", mfa.id), data={"method": "totp"})


@scenario("mfa.backup_codes_regenerated")
def _backup_codes_regenerated(env):
    mfa = _mfa_user(env)
    response = ok(env.call("POST", mfa_url(env.application, mfa.id, "/backup-codes/regenerate"), headers=mfa.headers,
                           json={"password": mfa.password}))
    return Expect(response, ("user", mfa.id), ("user", mfa.id))


@scenario("mfa.backup_code_used")
def _backup_code_used(env):
    mfa = _mfa_user(env)
    response = ok(env.call("POST", users_url(env.application, "/mfa/verify"),
                           json={"challenge_token": _challenge(env, mfa), "code": mfa.backup_codes[0]}))
    return Expect(response, ("user", mfa.id), ("user", mfa.id))


@scenario("mfa.challenge")
def _mfa_challenge(env):
    mfa = _mfa_user(env)
    response = ok(env.call("POST", users_url(env.application, "/mfa/verify"),
                           json={"challenge_token": _challenge(env, mfa), "code": rfc6238(mfa.secret, env.clock())}))
    return Expect(response, ("user", mfa.id), ("user", mfa.id), data={"method": "totp"})


# ---------------------------------------------------------------- passkeys

def _passkey_user(env, authenticator, app_id=None):
    """A signed-in user of the application (``app_id``, else the scenario's; passkeys:
    passwordless) and their passkey's registration response."""
    application = env.ctx.applications.update(app_id or env.application["_id"], {"passkeys": "passwordless"})
    user = env.make_user_token(application)
    options = ok(env.client.simulate_post(passkeys_url(application, "/registration/options"), json={},
                                          headers=user.headers)).json["data"]
    response = env.call("POST", passkeys_url(application, "/registration/verify"), headers=user.headers,
                        json={"challenge_id": options["challenge_id"],
                              "credential": authenticator.create(options["options"])})
    return user, ok(response)


def _passkey_sign_in(env, authenticator, **falsify):
    options = ok(env.client.simulate_post(passkeys_url(env.application, "/authentication/options"), json={},
                                          remote_addr="203.0.113.9")).json["data"]
    return env.call("POST", passkeys_url(env.application, "/authentication/verify"),
                    json={"challenge_id": options["challenge_id"],
                          "credential": authenticator.get(options["options"], **falsify)})


@scenario("passkey.registered")
def _passkey_registered(env):
    user, response = _passkey_user(env, SoftAuthenticator())
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]),
                  data={"passkey_id": response.json["data"]["id"]})


@scenario("passkey.deleted")
def _passkey_deleted(env):
    user, registered = _passkey_user(env, SoftAuthenticator())
    passkey_id = registered.json["data"]["id"]
    response = ok(env.call("DELETE", passkeys_url(env.application, f"/{passkey_id}"), headers=user.headers), 204)
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]), data={"passkey_id": passkey_id})


@scenario("passkey.deleted#mfa_reset", "mfa.disabled#mfa_reset")
def _mfa_reset_removes_passkeys(env):
    """An administrator's MFA reset removes the user's passkeys: the administrator is the
    actor of each passkey's record and of the factor's mfa.disabled."""
    app_id = env.dashboard_app["id"]
    user, registered = _passkey_user(env, SoftAuthenticator(), app_id)
    response = ok(env.dashboard("DELETE", f"/applications/{app_id}/users/{user.user['id']}/mfa"), 204)
    data = ({"passkey_id": registered.json["data"]["id"], "mfa_reset": True} if env.action.startswith("passkey.")
            else {"user_id": user.user["id"], "method": "webauthn"})
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("user", user.user["id"]),
                  application_id=app_id, data=data)


@scenario("passkey.sign_in")
def _passkey_sign_in_ok(env):
    key = SoftAuthenticator()
    user, _ = _passkey_user(env, key)
    response = ok(_passkey_sign_in(env, key))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]), data={"second_factor": False})


@scenario("passkey.sign_in#sign_count_invalid")
def _passkey_sign_count_backwards(env):
    key = SoftAuthenticator(counter=10)
    user, _ = _passkey_user(env, key)
    response = _passkey_sign_in(env, key, sign_count=4)
    assert response.status_code == 400, response.text
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]),
                  result=failure("sign_count_invalid"))


# ---------------------------------------------------------------- OIDC

def _oidc_flow(env):
    """A relying party and a signed-in user's authorization code: (rp, user, code, verifier)."""
    rp, user = env.oidc_client(env.application), env.user()
    verifier, challenge = pkce_pair()
    code = ok(env.authorize(user, rp, challenge=challenge)).json["code"]
    return rp, user, code, verifier


def _token_request(env, rp, **body):
    return env.call("POST", "/oidc/token",
                    json={"client_id": rp["client_id"], "client_secret": rp["client_secret"], **body})


def _exchange(env, rp, code, verifier):
    return _token_request(env, rp, grant_type="authorization_code", code=code, redirect_uri=REDIRECT_URI,
                          code_verifier=verifier)


@scenario("consent.granted")
def _consent(env):
    rp, user = env.oidc_client(env.application), env.user()
    query = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": REDIRECT_URI,
             "scope": "openid profile email", "state": "s", "code_challenge": pkce_pair()[1],
             "code_challenge_method": "S256"}
    response = ok(env.call("GET", "/oidc/authorize", params=query, token=user.access_token))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]))


@scenario("connection.created")
def _connection_created(env):
    rp, user, code, verifier = _oidc_flow(env)
    response = ok(_exchange(env, rp, code, verifier))
    return Expect(response, ("client", rp["client_id"]), ("user", user.user["id"]))


@scenario("connection.failed")
def _connection_failed(env):
    rp, user, code, _ = _oidc_flow(env)
    response = _exchange(env, rp, code, pkce_pair()[0])
    assert response.status_code == 400, response.text
    return Expect(response, ("client", rp["client_id"]), ("user", user.user["id"]),
                  data={"reason": "invalid_verifier"})


@scenario("oidc.code_replayed")
def _code_replayed(env):
    rp, user, code, verifier = _oidc_flow(env)
    ok(_exchange(env, rp, code, verifier))
    response = _exchange(env, rp, code, verifier)
    assert response.status_code == 400, response.text
    return Expect(response, ("client", rp["client_id"]), ("user", user.user["id"]),
                  data={"client_id": rp["client_id"]})


def _oidc_tokens(env):
    rp, user, code, verifier = _oidc_flow(env)
    return rp, user, ok(_exchange(env, rp, code, verifier)).json


@scenario("connection.refreshed")
def _connection_refreshed(env):
    rp, user, tokens = _oidc_tokens(env)
    response = ok(_token_request(env, rp, grant_type="refresh_token", refresh_token=tokens["refresh_token"]))
    return Expect(response, ("client", rp["client_id"]), ("user", user.user["id"]))


@scenario("connection.revoked")
def _connection_revoked(env):
    rp, user, tokens = _oidc_tokens(env)
    response = ok(env.call("POST", "/oidc/revoke", json={"token": tokens["refresh_token"], "client_id": rp["client_id"],
                                                         "client_secret": rp["client_secret"]}))
    return Expect(response, ("client", rp["client_id"]), ("user", user.user["id"]), data={"reason": "revoked"})


@scenario("consent.withdrawn")
def _consent_withdrawn(env):
    rp, user, _ = _oidc_tokens(env)
    response = ok(env.v1("DELETE", f"/users/{user.user['id']}/consent", token=user.access_token))
    return Expect(response, ("user", user.user["id"]), ("user", user.user["id"]))


@scenario("token.reuse_detected#oidc")
def _oidc_refresh_reuse(env):
    rp, user, tokens = _oidc_tokens(env)
    ok(_token_request(env, rp, grant_type="refresh_token", refresh_token=tokens["refresh_token"]))
    env.clock.advance(env.ctx.config.refresh_reuse_grace + 1)
    response = _token_request(env, rp, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert response.status_code == 400, response.text
    return Expect(response, ("client", rp["client_id"]), ("user", user.user["id"]),
                  data={"client_id": rp["client_id"]})


@scenario("oidc_client.created", "oidc_client.updated", "oidc_client.deleted", "oidc_client.secret_rotated")
def _oidc_clients(env):
    app, key = env.application, env.api_key
    response = ok(env.call("POST", clients_url(app), token=key,
                           json={"name": "RP", "redirect_uris": [REDIRECT_URI]}))
    client_id = response.json["data"]["client_id"]
    data = {"after": {"name": "RP", "redirect_uris": [REDIRECT_URI]}}
    if env.action != "oidc_client.created":
        response = ok(env.call("PUT", clients_url(app, f"/{client_id}"), token=key, json={"name": "RP two"}))
        data = {"fields": ["name"], "before": {"name": "RP"}, "after": {"name": "RP two"}}
    if env.action == "oidc_client.secret_rotated":
        response = ok(env.call("POST", clients_url(app, f"/{client_id}/rotate-secret"), token=key,
                               json={"previous_secret_valid_for": 3600}))
        data = {"fields": ["client_secret"], "previous_secret_valid_for": 3600}
    if env.action == "oidc_client.deleted":
        response, data = ok(env.call("DELETE", clients_url(app, f"/{client_id}"), token=key), 204), {}
    return Expect(response, ("api_key", env.key_id()), ("client", client_id), data=data)


# ---------------------------------------------------------------- roles, permissions, policies, attributes

@scenario("role.created", "role.updated", "role.deleted", "permission.granted", "permission.revoked")
def _roles(env):
    response = ok(env.v1("POST", "/roles", json={"name": "editor", "display_name": "Editor",
                                                  "permissions": ["posts:read"]}))
    role_id = response.json["data"]["id"]
    if env.action in ("role.updated", "permission.granted", "permission.revoked"):
        # posts:write granted, posts:read revoked
        response = ok(env.v1("PUT", f"/roles/{role_id}", json={"display_name": "Editors",
                                                                "permissions": ["posts:write"]}))
    if env.action == "role.deleted":
        response = ok(env.v1("DELETE", f"/roles/{role_id}"), 204)
    return Expect(response, ("api_key", env.key_id()), ("role", role_id))


@scenario("role.assigned", "role.removed")
def _assignments(env):
    user = env.stored_user(env.application)
    role = env.make_role(env.application, "viewer")
    response = ok(env.v1("POST", f"/users/{user['_id']}/roles", json={"role_id": role["_id"]}))
    if env.action == "role.removed":
        response = ok(env.v1("DELETE", f"/users/{user['_id']}/roles/{role['_id']}"), 204)
    return Expect(response, ("api_key", env.key_id()), ("user", user["_id"]))


@scenario("policy.created", "policy.updated", "policy.deleted")
def _policies(env):
    response = ok(env.v1("POST", "/abac/policies", json={"name": "weekdays", "effect": "allow",
                                                         "permissions": ["posts:read"], "condition": None}))
    policy_id = response.json["data"]["id"]
    if env.action == "policy.updated":
        response = ok(env.v1("PUT", f"/abac/policies/{policy_id}", json={"name": "weekdays", "is_active": False}))
    if env.action == "policy.deleted":
        response = ok(env.v1("DELETE", f"/abac/policies/{policy_id}"), 204)
    return Expect(response, ("api_key", env.key_id()), ("policy", policy_id))


@scenario("attribute.set", "attribute.deleted")
def _attributes(env):
    user = env.stored_user(env.application)
    response = ok(env.v1("PUT", f"/users/{user['_id']}/attributes/department", json={"value": "sales"}))
    if env.action == "attribute.deleted":
        response = ok(env.v1("DELETE", f"/users/{user['_id']}/attributes/department"), 204)
    return Expect(response, ("api_key", env.key_id()), ("user", user["_id"]))


# A write that finds its change already made (docs/architecture.md, "Repeated writes"): the
# repeat's record names what it repeated.

@scenario("grants.invalidated", "policies.invalidated")
def _repeats(env):
    if env.action == "policies.invalidated":
        policy_id = ok(env.v1("POST", "/abac/policies", json={"name": "weekdays", "effect": "allow",
                                                              "permissions": ["posts:read"]})).json["data"]["id"]
        response = ok(env.v1("PUT", f"/abac/policies/{policy_id}", json={"is_active": True}))
        return Expect(response, ("api_key", env.key_id()), ("policy", policy_id),
                      data={"policy_id": policy_id, "repeat_of": "policy.updated"})
    user = env.stored_user(env.application)
    for _ in range(2):
        response = ok(env.v1("PUT", f"/users/{user['_id']}/attributes/department", json={"value": "sales"}))
    return Expect(response, ("api_key", env.key_id()), ("user", user["_id"]),
                  data={"user_id": user["_id"], "repeat_of": "attribute.set"})


@scenario("grants.invalidated#role")
def _repeated_role_update(env):
    role = env.make_role(env.application, "viewer", ["posts:read"])
    env.assign_role(env.application, env.stored_user(env.application), role)
    response = ok(env.v1("PUT", f"/roles/{role['_id']}", json={"permissions": ["posts:read"]}))
    return Expect(response, ("api_key", env.key_id()), ("role", role["_id"]),
                  data={"role_id": role["_id"], "repeat_of": "role.updated"})


@scenario("grants.invalidated#suspension")
def _repeated_suspension(env):
    user, app_id = _dashboard_user(env), env.dashboard_app["id"]
    for _ in range(2):
        response = ok(env.dashboard("POST", f"/applications/{app_id}/users/{user['_id']}/suspend", json={}))
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("user", user["_id"]),
                  application_id=app_id, data={"user_id": user["_id"], "repeat_of": "user.suspended"})


# ---------------------------------------------------------------- webhooks

@scenario("webhook.created", "webhook.updated", "webhook.deleted", "webhook.secret_rotated")
def _webhooks(env):
    response = ok(env.v1("POST", "/webhooks", json={"url": WEBHOOK_URL, "events": ["user.created"]}))
    webhook_id = response.json["data"]["id"]
    data = {"fields": ["url", "events", "is_active"], "after": {"events": ["user.created"], "is_active": True}}
    if env.action == "webhook.updated":
        response = ok(env.v1("PUT", f"/webhooks/{webhook_id}", json={"events": ["user.created", "role.created"],
                                                                      "url": WEBHOOK_URL + "-2"}))
        data = {"fields": ["url", "events"], "before": {"events": ["user.created"]},
                "after": {"events": ["user.created", "role.created"]}}
    if env.action == "webhook.secret_rotated":
        response, data = ok(env.v1("POST", f"/webhooks/{webhook_id}/rotate-secret", json={})), {"fields": ["secret"]}
    if env.action == "webhook.deleted":
        response, data = ok(env.v1("DELETE", f"/webhooks/{webhook_id}"), 204), {}
    return Expect(response, ("api_key", env.key_id()), ("webhook", webhook_id), data=data)


@scenario("webhook.redelivered")
def _redelivery(env):
    webhook_id = ok(env.v1("POST", "/webhooks", json={"url": WEBHOOK_URL, "events": ["user.created"]}))
    webhook_id = webhook_id.json["data"]["id"]
    env.make_user(env.application)
    env.ctx.webhooks.dispatcher.catch_up()
    [original] = env.ctx.webhooks.management.deliveries(env.application["_id"], webhook_id)
    response = ok(env.v1("POST", f"/webhooks/{webhook_id}/deliveries/{original['_id']}/redeliver", json={}), 202)
    data = {"delivery_id": response.json["data"]["id"], "redelivery_of": original["_id"], "event": "user.created"}
    return Expect(response, ("api_key", env.key_id()), ("webhook", webhook_id), data=data)


# ---------------------------------------------------------------- connections (upstream identity providers)

@scenario("upstream_connection.created", "upstream_connection.updated", "upstream_connection.deleted")
def _upstream_connections(env):
    # The github preset has fixed endpoints: no provider is called.
    response = ok(env.v1("POST", "/connections", json={"preset": "github", "client_id": "c", "client_secret": "s"}))
    connection_id = response.json["data"]["id"]
    data = {"fields": ["type", "preset", "name", "display_name", "issuer", "client_id", "client_secret", "scopes",
                       "claim_mapping", "role_mapping", "linking", "trusted", "jit", "auto_update", "store_tokens",
                       "email_domains", "is_active"]}
    if env.action == "upstream_connection.updated":
        response = ok(env.v1("PATCH", f"/connections/{connection_id}", json={"client_secret": "t", "jit": False}))
        data = {"fields": ["client_secret", "jit"], "before": {"jit": True}, "after": {"jit": False}}
    if env.action == "upstream_connection.deleted":
        response, data = ok(env.v1("DELETE", f"/connections/{connection_id}"), 204), {}
    return Expect(response, ("api_key", env.key_id()), ("upstream_connection", connection_id), data=data)


# ---------------------------------------------------------------- the dashboard

@scenario("application.created")
def _application_created(env):
    response = ok(env.dashboard("POST", "/applications", json={"name": "Shop"}))
    app_id = response.json["data"]["id"]
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("application", app_id),
                  application_id=app_id, data={"after": {"name": "Shop"}})



@scenario("application.updated")
def _application_updated(env):
    app_id = env.dashboard_app["id"]
    response = ok(env.dashboard("PUT", f"/applications/{app_id}",
                                json={"name": "Dashboard App", "max_concurrent_sessions": 3}))
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("application", app_id),
                  application_id=app_id, data={"fields": ["max_concurrent_sessions"],
                                               "before": {"max_concurrent_sessions": 0},
                                               "after": {"max_concurrent_sessions": 3}})


@scenario("application.deleted")
def _application_deleted(env):
    app_id = env.dashboard_app["id"]
    response = ok(env.dashboard("DELETE", f"/applications/{app_id}"), 204)
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("application", app_id),
                  application_id=app_id)


@scenario("api_key.created", "api_key.revoked")
def _api_keys(env):
    app_id = env.dashboard_app["id"]
    response = ok(env.dashboard("POST", f"/applications/{app_id}/api-keys", json={"name": "ci"}))
    key_id = response.json["data"]["id"]
    if env.action == "api_key.revoked":
        response = ok(env.dashboard("DELETE", f"/applications/{app_id}/api-keys/{key_id}"), 204)
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("api_key", key_id),
                  application_id=app_id)


@scenario("organization.created")
def _organization_created(env):
    response = ok(env.dashboard("POST", "/organizations", json={"name": "Acme"}))
    org_id = response.json["data"]["id"]
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("organization", org_id),
                  application_id=None, data={"name": "Acme"})


@scenario("organization.member_added", "organization.member_role_changed", "organization.member_removed")
def _members(env):
    other = env.make_dashboard_account()
    org = env.dashboard_account.organization_id
    response = ok(env.dashboard("POST", f"/organizations/{org}/members", json={"email": other.email, "role": "member"}))
    data = {"role": "member"}
    if env.action == "organization.member_role_changed":
        response = ok(env.dashboard("PUT", f"/organizations/{org}/members/{other.id}", json={"role": "admin"}))
        data = {"fields": ["role"], "before": {"role": "member"}, "after": {"role": "admin"}}
    if env.action == "organization.member_removed":
        response = ok(env.dashboard("DELETE", f"/organizations/{org}/members/{other.id}"), 204)
        data = {"role": "member", "left": False}
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("dashboard_account", other.id),
                  application_id=None, data=data)


@scenario("organization.updated")
def _organization_updated(env):
    org = env.dashboard_account.organization_id
    response = ok(env.dashboard("PATCH", f"/organizations/{org}", json={"name": "Renamed"}))
    return Expect(response, ("dashboard_account", env.dashboard_account.id), ("organization", org),
                  application_id=None, data={"fields": ["name"], "after": {"name": "Renamed"}})


@scenario("dashboard_account.mfa_enabled", "dashboard_account.mfa_challenge", "dashboard_account.mfa_disabled")
def _dashboard_mfa(env):
    account, clock = env.dashboard_account, env.clock
    setup = ok(env.dashboard("POST", "/me/mfa/totp/setup", json={})).json["data"]
    response = ok(env.dashboard("POST", "/me/mfa/totp/confirm",
                                json={"method_id": setup["method_id"], "code": rfc6238(setup["secret"], clock()),
                                      "password": account.password}))
    data = {"method": "totp"}
    if env.action == "dashboard_account.mfa_challenge":
        clock.advance(60)
        token = ok(env.call("POST", f"{DASHBOARD}/login", json={"email": account.email, "password": account.password})
                   ).json["data"]["challenge_token"]
        response = ok(env.call("POST", f"{DASHBOARD}/login/mfa",
                               json={"challenge_token": token, "code": rfc6238(setup["secret"], clock())}))
    if env.action == "dashboard_account.mfa_disabled":
        response, data = ok(env.dashboard("DELETE", "/me/mfa/totp", json={"password": account.password}), 204), {
            "confirmed_by": "password"}
    return Expect(response, ("dashboard_account", account.id), ("dashboard_account", account.id),
                  application_id=None, data=data)


@scenario("dashboard_account.passkey_sign_in")
def _dashboard_passkey_sign_in(env):
    account, key = env.dashboard_account, SoftAuthenticator()
    options = ok(env.dashboard("POST", "/me/passkeys/registration/options", json={})).json["data"]
    passkey = ok(env.dashboard("POST", "/me/passkeys/registration/verify", json={
        "challenge_id": options["challenge_id"], "credential": key.create(options["options"]),
        "password": account.password})).json["data"]
    options = ok(env.client.simulate_post(f"{DASHBOARD}/login/passkey/options", json={},
                                          remote_addr="203.0.113.9")).json["data"]
    response = ok(env.call("POST", f"{DASHBOARD}/login/passkey", json={
        "challenge_id": options["challenge_id"], "credential": key.get(options["options"])}))
    return Expect(response, ("dashboard_account", account.id), ("dashboard_account", account.id),
                  application_id=None, data={"passkey_id": passkey["id"], "second_factor": False})


@scenario("dashboard_account.reauthenticated")
def _dashboard_reauthenticated(env):
    account = env.dashboard_account
    response = ok(env.dashboard("POST", "/me/reauthenticate", json={"password": account.password}), 204)
    return Expect(response, ("dashboard_account", account.id), ("dashboard_account", account.id),
                  application_id=None, data={"method": "password"})


# ---------------------------------------------------------------- the tests

def newest(ctx, action: str, result: dict) -> dict:
    query = {"action": action, "result.status": result["status"]}
    if "reason" in result:
        query["result.reason"] = result["reason"]
    docs = list(ctx.store["events"].find(query).sort("seq", -1).limit(1))
    assert docs, f"no {action} record with result {result}"
    return docs[0]


def holds(actual, expected) -> bool:
    """``actual`` has every item of ``expected``, dicts compared item by item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(holds(actual.get(k), v) for k, v in expected.items())
    return actual == expected


@pytest.fixture
def action(request):
    return request.param


CASES = CATALOGUE + sorted(name for name in SCENARIOS if "#" in name)


@pytest.mark.parametrize("action", CASES, indirect=True)
def test_the_action_is_recorded_with_its_actor_target_and_result(action, request, ctx):
    assert action in SCENARIOS, f"nothing here performs {action}: add it to SCENARIOS"
    expect = SCENARIOS[action](Env(request))
    doc = newest(ctx, action.split("#")[0], expect.result)
    assert (doc["actor"]["type"], doc["actor"]["id"]) == expect.actor, doc["actor"]
    assert (doc["target"]["type"], doc["target"]["id"]) == expect.target, doc["target"]
    assert doc["result"] == expect.result
    assert doc["request_id"] == expect.response.headers["X-Request-Id"]
    assert doc["ip"] == IP
    app_id = request.getfixturevalue("application")["_id"] if expect.application_id == "app" else expect.application_id
    assert doc["app_id"] == app_id
    if app_id is None:
        assert doc["organization_id"] is not None  # a dashboard action: its organization's
    assert holds(doc["data"], expect.data), doc["data"]


def test_every_catalogued_action_has_a_scenario():
    assert sorted(set(CATALOGUE) - set(SCENARIOS)) == []
    assert sorted({name.split("#")[0] for name in SCENARIOS} - set(CATALOGUE)) == []


def test_the_catalogue_table_of_docs_lists_every_action():
    text = (Path(__file__).parents[2] / "docs" / "audit.md").read_text()
    listed = set(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \|", text, flags=re.MULTILINE))
    assert listed == set(CATALOGUE)
    assert set(RECORDED_ACTIONS) <= listed
