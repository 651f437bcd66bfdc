"""The decision service answers the control plane's check routes with the same shapes,
credentials and errors (spec "Authorization checks"; docs/decision-service.md)."""
from __future__ import annotations

import uuid

import falcon.testing
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import assert_error, bearer
from tests.decision.conftest import Tenant, bulk_path, check_path, wait_for
from tests.decision.fakecp import future, policy, signing_key

# --- answers and shapes -------------------------------------------------------------------


def test_get_check_answers_rbac_with_the_spec_shape(tenant):
    user = tenant.user_with("posts:read")
    first = tenant.get(user, "posts:read")
    assert first.status_code == 200
    assert first.json == {"allowed": True, "permission": "posts:read", "cached": False}
    assert first.headers["Content-Type"].startswith("application/json")
    assert first.headers["X-Request-Id"]
    again = tenant.get(user, "posts:read")
    assert again.json == {"allowed": True, "permission": "posts:read", "cached": True}
    assert tenant.get(user, "posts:write").json == {"allowed": False, "permission": "posts:write", "cached": True}


@pytest.mark.parametrize("granted, checked, allowed", [
    ("posts:*", "posts:delete", True),
    ("*:read", "comments:read", True),
    ("*:*", "anything:at-all", True),
    ("posts:read", "posts:*", False),
    ("posts:read", "Posts:read", False),
])
def test_wildcards_follow_the_engine(tenant, granted, checked, allowed):
    user = tenant.user_with(granted)
    assert tenant.allowed(user, checked) is allowed


def test_post_check_adds_the_abac_fields(tenant, fake_cp):
    user = tenant.user_with("docs:read", attributes={"department": "sales"})
    fake_cp.set_policies(tenant.app_id, [
        policy("deny", ["docs:read"], {"op": "eq", "left": {"attr": "resource.classified"}, "right": {"value": True}}),
        policy("allow", ["docs:write"], {"op": "eq", "left": {"attr": "user.attributes.department"},
                                         "right": {"attr": "resource.department"}}),
    ])
    plain = tenant.post({"user_id": user, "permission": "docs:read"})
    assert plain.status_code == 200
    assert plain.json == {"allowed": True, "permission": "docs:read", "cached": False,
                          "abac_evaluated": True, "policies_checked": 1}
    denied = tenant.post({"user_id": user, "permission": "docs:read", "resource": {"classified": True}})
    assert denied.json["allowed"] is False and denied.json["cached"] is True
    allowed_by_policy = tenant.post({"user_id": user, "permission": "docs:write",
                                     "resource": {"department": "sales"}})
    assert allowed_by_policy.json["allowed"] is True
    assert tenant.post({"user_id": user, "permission": "docs:write",
                        "resource": {"department": "ops"}}).json["allowed"] is False
    uncovered = tenant.post({"user_id": user, "permission": "other:read"})
    assert uncovered.json == {"allowed": False, "permission": "other:read", "cached": True,
                              "abac_evaluated": False, "policies_checked": 0}


def test_get_check_ignores_policies(tenant, fake_cp):
    user = tenant.user_with("docs:read")
    fake_cp.set_policies(tenant.app_id, [policy("deny", ["docs:read"])])
    assert tenant.get(user, "docs:read").json == {"allowed": True, "permission": "docs:read", "cached": False}
    assert tenant.post({"user_id": user, "permission": "docs:read"}).json["allowed"] is False


def test_bulk_check_answers_each_permission_once(tenant):
    user = tenant.user_with("posts:read", "comments:*")
    response = tenant.bulk({"user_id": user, "permissions": ["posts:read", "posts:write", "comments:delete",
                                                             "posts:read"]})
    assert response.status_code == 200
    assert response.json == {"user_id": user, "results": {"posts:read": True, "posts:write": False,
                                                          "comments:delete": True}}
    assert list(response.json["results"]) == ["posts:read", "posts:write", "comments:delete"]


def test_bulk_check_applies_policies_and_escapes_the_user_id(tenant, fake_cp):
    user = tenant.user_with("docs:read", "docs:write")
    fake_cp.set_policies(tenant.app_id, [policy("deny", ["docs:write"], {
        "op": "ip_in_cidr", "left": {"attr": "context.ip"}, "right": {"value": "10.0.0.0/8"}})])
    response = tenant.bulk({"user_id": user, "permissions": ["docs:read", "docs:write"],
                            "context": {"ip": "10.1.2.3"}})
    assert response.json["results"] == {"docs:read": True, "docs:write": False}
    odd = tenant.bulk({"user_id": 'a"b\\c\u2028d</script>', "permissions": ["docs:read"]})
    assert odd.status_code == 200 and odd.json == {"user_id": 'a"b\\c\u2028d</script>', "results": {"docs:read": False}}


def test_scope_from_query_body_and_context(tenant):
    user = tenant.user_with("projects:edit", scope="project-1")
    assert tenant.allowed(user, "projects:edit") is False
    assert tenant.allowed(user, "projects:edit", scope="project-1") is True
    assert tenant.allowed(user, "projects:edit", scope="project-2") is False
    assert tenant.allowed(user, "projects:edit", scope="") is False  # an empty scope is no scope
    assert tenant.post({"user_id": user, "permission": "projects:edit", "scope": "project-1"}).json["allowed"]
    assert tenant.post({"user_id": user, "permission": "projects:edit",
                        "context": {"scope": "project-1"}}).json["allowed"]
    assert not tenant.post({"user_id": user, "permission": "projects:edit", "scope": "project-2",
                            "context": {"scope": "project-1"}}).json["allowed"]
    assert tenant.bulk({"user_id": user, "permissions": ["projects:edit"],
                        "context": {"scope": "project-1"}}).json["results"] == {"projects:edit": True}


def test_unscoped_assignments_apply_at_every_scope(tenant):
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read", scope="anything") is True


@pytest.mark.parametrize("status", ["suspended", "deleted"])
def test_inactive_users_are_simply_not_allowed(tenant, status):
    user = tenant.user_with("posts:read", status=status)
    assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": False}


@pytest.mark.parametrize("user_id", ["7c3e9a1d-2f4b-4d8e-a6c0-5b1f3e7d9a24", "not-a-uuid"])
def test_unknown_users_are_simply_not_allowed(tenant, user_id):
    response = tenant.get(user_id, "posts:read")
    assert response.status_code == 200 and response.json["allowed"] is False


def test_an_expiring_assignment_stops_allowing_at_its_expiry(tenant, clock):
    user = tenant.user_with("posts:read", expires_at=future(clock, 60))
    assert tenant.allowed(user, "posts:read") is True
    clock.advance(59)
    assert tenant.get(user, "posts:read").json == {"allowed": True, "permission": "posts:read", "cached": True}
    clock.advance(1)
    assert tenant.get(user, "posts:read").json == {"allowed": False, "permission": "posts:read", "cached": True}


def test_cached_grants_expire_after_the_cache_ttl(make_sidecar, fake_cp, clock):
    tenant = Tenant(fake_cp, falcon.testing.TestClient(make_sidecar(decision_cache_ttl=60)))
    user = tenant.user_with("posts:read")
    assert tenant.get(user, "posts:read").json["cached"] is False
    assert tenant.get(user, "posts:read").json["cached"] is True
    clock.advance(61)
    assert tenant.get(user, "posts:read").json["cached"] is False


# --- credentials ---------------------------------------------------------------------------


def test_a_user_token_with_authz_check_may_check_others(tenant, fake_cp):
    caller = tenant.user_with("authz:check")
    subject = tenant.user_with("posts:read")
    token = fake_cp.access_token(tenant.app_id, caller)
    assert tenant.get(subject, "posts:read", credential=token).json["allowed"] is True
    assert tenant.bulk({"user_id": subject, "permissions": ["posts:read"]}, credential=token).json["results"] == {
        "posts:read": True}


def test_a_user_checking_itself_costs_one_lookup(tenant, fake_cp):
    caller = tenant.user_with("authz:check", "posts:read")
    token = fake_cp.access_token(tenant.app_id, caller)
    before = fake_cp.requests.count(f"/internal/v1/applications/{tenant.app_id}/users/{caller}/grants")
    assert tenant.get(caller, "posts:read", credential=token).json["allowed"] is True
    assert fake_cp.requests.count(f"/internal/v1/applications/{tenant.app_id}/users/{caller}/grants") == before + 1


def test_missing_or_malformed_authorization_is_401(tenant):
    user = tenant.user_with("posts:read")
    response = tenant.client.simulate_get(check_path(tenant.app_id), params={"user_id": user, "permission": "p:r"})
    assert_error(response, 401, "UNAUTHORIZED")
    for header in ("Basic abc", "Bearer", "Bearer   ", "token"):
        response = tenant.client.simulate_get(check_path(tenant.app_id), params={"user_id": user, "permission": "p:r"},
                                              headers={"Authorization": header})
        assert_error(response, 401, "UNAUTHORIZED")


def test_unknown_revoked_and_foreign_api_keys_are_401(tenant, fake_cp):
    user = tenant.user_with("posts:read")
    assert_error(tenant.get(user, "posts:read", credential="sk_test_" + "x" * 43), 401, "UNAUTHORIZED")
    other_app = fake_cp.add_app()
    foreign = fake_cp.add_key(other_app)
    assert_error(tenant.get(user, "posts:read", credential=foreign), 401, "UNAUTHORIZED")
    app = tenant.client.app
    spare = fake_cp.add_key(tenant.app_id)  # usable once its api_keys.changed event arrived
    assert wait_for(lambda: app.service.cache.applied >= fake_cp.head)
    assert tenant.get(user, "posts:read", credential=spare).status_code == 200
    seq = fake_cp.revoke_key(tenant.app_id, spare)
    assert wait_for(lambda: app.service.cache.applied >= seq)
    assert_error(tenant.get(user, "posts:read", credential=spare), 401, "UNAUTHORIZED")
    assert tenant.get(user, "posts:read").status_code == 200


def test_a_key_without_authz_check_is_403_naming_it(tenant, fake_cp):
    user = tenant.user_with("posts:read")
    weak = fake_cp.add_key(tenant.app_id, permissions=["roles:read"])
    wide = fake_cp.add_key(tenant.app_id, permissions=["authz:*"])
    assert wait_for(lambda: tenant.client.app.service.cache.applied >= fake_cp.head)
    error = assert_error(tenant.get(user, "posts:read", credential=weak), 403, "FORBIDDEN")
    assert error["details"] == {"required_permission": "authz:check"}
    assert tenant.get(user, "posts:read", credential=wide).status_code == 200


def test_a_user_without_authz_check_is_403(tenant, fake_cp):
    caller = tenant.user_with("posts:read")
    error = assert_error(tenant.get(caller, "posts:read", credential=fake_cp.access_token(tenant.app_id, caller)),
                         403, "FORBIDDEN")
    assert error["details"] == {"required_permission": "authz:check"}


def test_authz_check_in_a_scoped_assignment_does_not_count(tenant, fake_cp):
    caller = tenant.user_with("authz:check", scope="project-1")
    token = fake_cp.access_token(tenant.app_id, caller)
    assert_error(tenant.get(caller, "posts:read", credential=token, scope="project-1"), 403, "FORBIDDEN")


@pytest.mark.parametrize("status", ["suspended", "deleted"])
def test_a_token_of_an_inactive_user_is_401(tenant, fake_cp, status):
    caller = tenant.user_with("authz:check", status=status)
    response = tenant.get(caller, "posts:read", credential=fake_cp.access_token(tenant.app_id, caller))
    assert_error(response, 401, "UNAUTHORIZED")


def test_a_token_issued_before_the_accounts_hand_over_is_401(tenant, fake_cp):
    """An account handed over to its email's owner: the squatter's token, verified and
    remembered before, stops at the change; the owner's, which carries the stamp, works."""
    caller = tenant.user_with("authz:check", "posts:read")
    before = fake_cp.access_token(tenant.app_id, caller)
    assert tenant.get(caller, "posts:read", credential=before).status_code == 200
    stamp = 1795808541247
    fake_cp.hand_over(tenant.app_id, caller, stamp)
    assert wait_for(lambda: tenant.get(caller, "posts:read", credential=before).status_code == 401)
    assert_error(tenant.get(caller, "posts:read", credential=before), 401, "UNAUTHORIZED")
    after = fake_cp.access_token(tenant.app_id, caller, tnb=stamp)
    assert tenant.get(caller, "posts:read", credential=after).status_code == 200
    assert_error(tenant.get(caller, "posts:read", credential=fake_cp.access_token(tenant.app_id, caller,
                                                                                   tnb=stamp - 1)), 401)


def test_a_token_newer_than_the_cached_stamp_reads_the_grants_again(tenant, fake_cp):
    """The owner's token after a second reset carries a stamp newer than the cached
    grants' (the reset's change is still on its way): they are read again, not a 401."""
    owner = tenant.user_with("authz:check", "posts:read")
    first = 1795808541247
    fake_cp.hand_over(tenant.app_id, owner, first)
    token = fake_cp.access_token(tenant.app_id, owner, tnb=first)
    assert wait_for(lambda: tenant.get(owner, "posts:read", credential=token).status_code == 200)
    fake_cp.stream_paused = True
    try:
        second = first + 60_000
        fake_cp.hand_over(tenant.app_id, owner, second)
        fresh = fake_cp.access_token(tenant.app_id, owner, tnb=second)
        assert tenant.get(owner, "posts:read", credential=fresh).status_code == 200
        assert_error(tenant.get(owner, "posts:read", credential=token), 401, "UNAUTHORIZED")
    finally:
        fake_cp.stream_paused = False


def test_a_token_of_an_unknown_user_is_401(tenant, fake_cp):
    token = fake_cp.access_token(tenant.app_id, str(uuid.uuid4()))
    assert_error(tenant.get(str(uuid.uuid4()), "posts:read", credential=token), 401, "UNAUTHORIZED")


def _forged(fake_cp, tenant, caller, clock):
    now = int(clock().timestamp())
    claims = {"iss": fake_cp.issuer, "sub": caller, "aud": tenant.app_id, "iat": now, "exp": now + 900,
              "jti": "j", "sid": "s"}
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "wrong key": jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": fake_cp.kid}),
        "unknown kid": fake_cp.access_token(tenant.app_id, caller, kid="nobody"),
        "no kid": jwt.encode(claims, other_key, algorithm="RS256"),
        "alg none": jwt.encode(claims, None, algorithm="none", headers={"kid": fake_cp.kid}),
        "hs256": jwt.encode(claims, "a-shared-secret-of-32-bytes-length", algorithm="HS256",
                            headers={"kid": fake_cp.kid}),
        "other audience": fake_cp.access_token(str(uuid.uuid4()), caller),
        "other issuer": fake_cp.access_token(tenant.app_id, caller, iss="https://evil.example"),
        "expired": fake_cp.access_token(tenant.app_id, caller, expires_in=-1),
        "no jti": jwt.encode({k: v for k, v in claims.items() if k != "jti"}, signing_key(), algorithm="RS256",
                             headers={"kid": fake_cp.kid}),
        "garbage": "not.a.jwt",
    }


def test_forged_and_foreign_tokens_are_401(tenant, fake_cp, clock):
    caller = tenant.user_with("authz:check", "posts:read")
    assert tenant.get(caller, "posts:read", credential=fake_cp.access_token(tenant.app_id, caller)).status_code == 200
    for name, token in _forged(fake_cp, tenant, caller, clock).items():
        response = tenant.get(caller, "posts:read", credential=token)
        assert response.status_code == 401, (name, response.text)
        assert_error(response, 401, "UNAUTHORIZED")


def test_a_verified_token_stops_working_when_it_expires(tenant, fake_cp, clock):
    caller = tenant.user_with("authz:check", "posts:read")
    token = fake_cp.access_token(tenant.app_id, caller, expires_in=30)
    assert tenant.get(caller, "posts:read", credential=token).status_code == 200
    jwks_reads = fake_cp.requests.count("/.well-known/jwks.json")
    assert tenant.get(caller, "posts:read", credential=token).status_code == 200
    assert fake_cp.requests.count("/.well-known/jwks.json") == jwks_reads  # verified once, remembered
    clock.advance(30)
    error = assert_error(tenant.get(caller, "posts:read", credential=token), 401, "UNAUTHORIZED")
    assert error["details"] == {"reason": "expired"}


def test_a_token_verified_for_one_application_is_not_accepted_by_another(tenant, fake_cp):
    caller = tenant.user_with("authz:check")
    token = fake_cp.access_token(tenant.app_id, caller)
    assert tenant.get(caller, "posts:read", credential=token).status_code == 200
    other_app = fake_cp.add_app()
    response = tenant.client.simulate_get(check_path(other_app), params={"user_id": caller, "permission": "p:r"},
                                          headers=bearer(token))
    assert_error(response, 401, "UNAUTHORIZED")


# --- applications, routes and methods ------------------------------------------------------


@pytest.mark.parametrize("app_id", ["e1a4c7f0-9b3d-4e2a-8f6c-0d5b7a9c1e38", "not-an-id"])
def test_an_unknown_application_is_404(tenant, app_id):
    response = tenant.client.simulate_get(check_path(app_id), params={"user_id": "u", "permission": "p:r"},
                                          headers=bearer(tenant.key))
    error = assert_error(response, 404, "NOT_FOUND")
    assert error["details"] == {"application_id": app_id}


def test_an_unknown_application_is_remembered_briefly(tenant, fake_cp, clock):
    app_id = str(uuid.uuid4())
    path = f"/internal/v1/applications/{app_id}/api-keys"
    for _ in range(3):
        tenant.client.simulate_get(check_path(app_id), params={"user_id": "u", "permission": "p:r"})
    assert fake_cp.requests.count(path) == 1
    clock.advance(3)
    tenant.client.simulate_get(check_path(app_id), params={"user_id": "u", "permission": "p:r"})
    assert fake_cp.requests.count(path) == 2


def test_a_deleted_application_is_404_at_once(tenant, fake_cp):
    user = tenant.user_with("posts:read")
    assert tenant.allowed(user, "posts:read")
    seq = fake_cp.delete_app(tenant.app_id)
    assert wait_for(lambda: tenant.client.app.service.cache.applied >= seq)
    assert_error(tenant.get(user, "posts:read"), 404, "NOT_FOUND")


def test_unknown_routes_and_methods_use_the_envelope(sidecar_client, tenant):
    assert_error(sidecar_client.simulate_get("/api/v1/nothing"), 404, "NOT_FOUND")
    assert_error(sidecar_client.simulate_delete(check_path(tenant.app_id), headers=bearer(tenant.key)), 405,
                 "METHOD_NOT_ALLOWED")
    assert_error(sidecar_client.simulate_get(bulk_path(tenant.app_id), headers=bearer(tenant.key)), 405,
                 "METHOD_NOT_ALLOWED")


def test_post_without_json_is_415(tenant):
    response = tenant.client.simulate_post(check_path(tenant.app_id), body="user_id=x",
                                           headers={**bearer(tenant.key),
                                                    "Content-Type": "application/x-www-form-urlencoded"})
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("params, field", [
    ({"permission": "posts:read"}, "user_id"),
    ({"user_id": "u"}, "permission"),
    ({"user_id": "u", "permission": "posts"}, "permission"),
    ({"user_id": "u", "permission": "posts:read:x"}, "permission"),
    ({"user_id": "u", "permission": "posts: read"}, "permission"),
    ({"user_id": "u", "permission": "p:" + "r" * 300}, "permission"),
    ({"user_id": "u" * 256, "permission": "posts:read"}, "user_id"),
    ({"user_id": "u", "permission": "posts:read", "min_revision": "-1"}, "min_revision"),
    ({"user_id": "u", "permission": "posts:read", "min_revision": "abc"}, "min_revision"),
    ({"user_id": "u", "permission": "posts:read", "scope": "a\x01b"}, "scope"),
])
def test_get_check_rejects_bad_parameters(tenant, params, field):
    response = tenant.client.simulate_get(check_path(tenant.app_id), params=params, headers=bearer(tenant.key))
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]


@pytest.mark.parametrize("body, field", [
    ({"permission": "posts:read"}, "user_id"),
    ({"user_id": 5, "permission": "posts:read"}, "user_id"),
    ({"user_id": "u", "permission": ["posts:read"]}, "permission"),
    ({"user_id": "u", "permission": "posts:read", "resource": "x"}, "resource"),
    ({"user_id": "u", "permission": "posts:read", "context": [1]}, "context"),
    ({"user_id": "u", "permission": "posts:read", "resource": {"blob": "x" * 70000}}, "resource"),
    ({"user_id": "u", "permission": "posts:read", "min_revision": "5"}, "min_revision"),
    ({"user_id": "u", "permission": "posts:read", "scope": ""}, "scope"),
])
def test_post_check_rejects_bad_bodies(tenant, body, field):
    error = assert_error(tenant.post(body), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]


@pytest.mark.parametrize("permissions", [[], [f"p{i}:read" for i in range(51)], ["posts:read", "bad"], "posts:read",
                                         ["posts:read", 3]])
def test_bulk_check_takes_1_to_50_valid_permissions(tenant, permissions):
    error = assert_error(tenant.bulk({"user_id": "u", "permissions": permissions}), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == ["permissions"]


def test_bulk_check_takes_exactly_50(tenant):
    user = tenant.user_with("p7:read")
    response = tenant.bulk({"user_id": user, "permissions": [f"p{i}:read" for i in range(50)]})
    assert response.status_code == 200
    assert [p for p, allowed in response.json["results"].items() if allowed] == ["p7:read"]


def test_several_bad_fields_are_reported_together(tenant):
    error = assert_error(tenant.post({"permission": "nope"}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"user_id", "permission"}


def test_malformed_json_is_400(tenant):
    response = tenant.client.simulate_post(check_path(tenant.app_id), body="{not json",
                                           headers={**bearer(tenant.key), "Content-Type": "application/json"})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    response = tenant.client.simulate_post(check_path(tenant.app_id), body="[1]",
                                           headers={**bearer(tenant.key), "Content-Type": "application/json"})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


def test_credentials_are_checked_before_the_body(tenant):
    assert_error(tenant.client.simulate_post(check_path(tenant.app_id), json={}), 401, "UNAUTHORIZED")
