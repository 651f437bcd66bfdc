"""Refresh (rotation, grace window, reuse detection), logout, and the V1 bearer checks
of end-user access tokens: tampering, expiry, audience, status checked live, ownership."""
import base64
import hashlib
import hmac
import json

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.ids import digest
from tests.conftest import assert_error, bearer
from tests.plugins.users import PASSWORD, users_url


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


def refresh(post, app, token):
    return post(app, "/token/refresh", {"refresh_token": token})


def session_of(ctx, token):
    return ctx.store["sessions"].find_one({"refresh_digest": digest(token)})


# ---------------------------------------------------------------- refresh


def test_refresh_rotates_the_token(post, application, user_token, ctx, clock):
    session_id = session_of(ctx, user_token.refresh_token)["_id"]
    clock.advance(30)
    response = refresh(post, application, user_token.refresh_token)
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    pair = response.json["data"]
    assert set(pair) == {"access_token", "refresh_token", "token_type", "expires_in", "user"}
    assert pair["refresh_token"] != user_token.refresh_token
    assert pair["user"]["id"] == user_token.user["id"] and pair["expires_in"] == 900
    claims = ctx.tokens.verify(pair["access_token"], audience=application["_id"])
    assert claims["sid"] == session_id and claims["sub"] == user_token.user["id"]

    session = ctx.store["sessions"].find_one({"_id": session_id})
    assert session["refresh_digest"] == digest(pair["refresh_token"])
    assert session["previous_digest"] == digest(user_token.refresh_token)
    assert session["rotated_at"] is not None and session["last_used_at"] > session["created_at"]
    # The new token keeps working, and rotates again.
    assert refresh(post, application, pair["refresh_token"]).status_code == 200


def test_refresh_needs_no_bearer_token_and_ignores_one(client, application, user_token):
    response = client.simulate_post(users_url(application, "/token/refresh"),
                                    json={"refresh_token": user_token.refresh_token},
                                    headers=bearer("garbage"))
    assert response.status_code == 200


def test_refresh_keeps_the_session_lifetime(post, application, user_token, ctx, clock):
    """Rotation does not extend the session: 7 days after login it ends."""
    token = user_token.refresh_token
    for _ in range(6):
        clock.advance(24 * 3600)
        token = refresh(post, application, token).json["data"]["refresh_token"]
    clock.advance(24 * 3600)
    error = assert_error(refresh(post, application, token), 401, "UNAUTHORIZED")
    assert error["details"]["reason"] == "expired"


def test_within_the_grace_window_the_last_rotated_token_still_refreshes(post, application, user_token, ctx, clock):
    """Two tabs refresh with the same token at once: both stay signed in."""
    first = refresh(post, application, user_token.refresh_token).json["data"]
    clock.advance(9)
    second = refresh(post, application, user_token.refresh_token)
    assert second.status_code == 200, second.text
    second = second.json["data"]
    assert second["access_token"] != first["access_token"]
    # Both tabs hold a valid successor; the session is intact.
    assert second["refresh_token"] == first["refresh_token"]
    session = session_of(ctx, first["refresh_token"])
    assert session["revoked_at"] is None
    assert refresh(post, application, first["refresh_token"]).status_code == 200


def test_reuse_after_the_grace_window_revokes_the_session(post, application, user_token, ctx, clock):
    successor = refresh(post, application, user_token.refresh_token).json["data"]["refresh_token"]
    clock.advance(10)
    error = assert_error(refresh(post, application, user_token.refresh_token), 401, "UNAUTHORIZED")
    assert error["details"]["reason"] == "reused"
    session = ctx.store["sessions"].find_one({"previous_digest": digest(user_token.refresh_token)})
    assert session["revoked_at"] is not None and session["revoked_reason"] == "refresh_token_reused"
    # The thief's or the victim's successor is dead too.
    assert assert_error(refresh(post, application, successor), 401)["details"]["reason"] == "revoked"


def test_reuse_of_an_older_token_of_the_family_revokes_the_session(post, application, user_token, ctx):
    second = refresh(post, application, user_token.refresh_token).json["data"]["refresh_token"]
    third = refresh(post, application, second).json["data"]["refresh_token"]
    # The very first token was rotated two steps ago: no grace, whatever the clock says.
    error = assert_error(refresh(post, application, user_token.refresh_token), 401, "UNAUTHORIZED")
    assert error["details"]["reason"] == "reused"
    assert assert_error(refresh(post, application, third), 401)["details"]["reason"] == "revoked"


@pytest.mark.parametrize("config_overrides", [{"refresh_reuse_grace": 0}], indirect=True)
def test_without_a_grace_window_any_reuse_revokes(post, application, user_token):
    refresh(post, application, user_token.refresh_token)
    assert assert_error(refresh(post, application, user_token.refresh_token), 401)["details"]["reason"] == "reused"


def test_the_grace_window_does_not_revive_a_revoked_session(post, application, user_token, client):
    successor = refresh(post, application, user_token.refresh_token).json["data"]
    client.simulate_post(users_url(application, "/logout"), json={"refresh_token": successor["refresh_token"]},
                         headers=bearer(successor["access_token"]))
    assert assert_error(refresh(post, application, user_token.refresh_token), 401)["details"]["reason"] == "revoked"


def test_unknown_and_malformed_refresh_tokens(post, application):
    assert assert_error(refresh(post, application, "no-such-token"), 401, "UNAUTHORIZED")["details"]["reason"] == \
        "unknown"
    assert_error(post(application, "/token/refresh", {}), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(post(application, "/token/refresh", {"refresh_token": 42}), 400, "VALIDATION_INVALID_FORMAT")


def test_refresh_token_of_another_application_is_refused(post, make_application, user_token):
    assert assert_error(refresh(post, make_application(), user_token.refresh_token), 401)["details"]["reason"] == \
        "unknown"


def test_remember_me_session_lasts_30_days(post, application, make_user, login, clock):
    user = make_user(application)
    pair = login(application, user["email"], remember_me=True)
    clock.advance(29 * 24 * 3600)
    assert refresh(post, application, pair["refresh_token"]).status_code == 200
    clock.advance(24 * 3600)
    assert_error(refresh(post, application, pair["refresh_token"]), 401)


def test_suspended_user_cannot_refresh(post, application, user_token, ctx):
    ctx.store["users"].update_one({"_id": user_token.user["id"]}, {"$set": {"status": "suspended"}})
    assert_error(refresh(post, application, user_token.refresh_token), 401, "UNAUTHORIZED")
    session = ctx.store["sessions"].find_one({"user_id": user_token.user["id"]})
    assert session["revoked_at"] is not None and session["revoked_reason"] == "user_inactive"


# ---------------------------------------------------------------- logout


def logout(client, app, refresh_token, headers):
    return client.simulate_post(users_url(app, "/logout"), json={"refresh_token": refresh_token}, headers=headers)


def test_logout_revokes_the_refresh_token_but_not_the_access_token(client, post, application, user_token, ctx):
    response = logout(client, application, user_token.refresh_token, user_token.headers)
    assert response.status_code == 204 and response.text == ""
    session = ctx.store["sessions"].find_one({"previous_digest": None, "user_id": user_token.user["id"]})
    assert session["revoked_at"] is not None and session["revoked_reason"] == "logout"
    assert assert_error(refresh(post, application, user_token.refresh_token), 401)["details"]["reason"] == "revoked"
    # The access token stays valid until it expires (spec, Authentication 2).
    assert logout(client, application, "anything", user_token.headers).status_code == 204


def test_logout_with_a_just_rotated_token_revokes_the_family(client, post, application, user_token):
    successor = refresh(post, application, user_token.refresh_token).json["data"]["refresh_token"]
    assert logout(client, application, user_token.refresh_token, user_token.headers).status_code == 204
    assert_error(refresh(post, application, successor), 401)


def test_a_user_cannot_revoke_another_users_refresh_token(client, post, application, make_user_token):
    alice, bob = make_user_token(application), make_user_token(application)
    assert logout(client, application, bob.refresh_token, alice.headers).status_code == 204
    assert refresh(post, application, bob.refresh_token).status_code == 200


def test_an_api_key_may_revoke_any_refresh_token_of_its_application(client, post, application, user_token, api_key):
    assert logout(client, application, user_token.refresh_token, bearer(api_key)).status_code == 204
    assert_error(refresh(post, application, user_token.refresh_token), 401)


def test_logout_of_an_unknown_token_is_204(client, application, user_token):
    assert logout(client, application, "never-issued", user_token.headers).status_code == 204


def test_logout_needs_a_bearer_credential_and_a_body(client, application, user_token):
    assert_error(logout(client, application, user_token.refresh_token, None), 401, "UNAUTHORIZED")
    response = client.simulate_post(users_url(application, "/logout"), json={}, headers=user_token.headers)
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


# ---------------------------------------------------------------- V1 bearer checks of user tokens


def probe(client, app, token):
    """A V1 route any credential of the application may call."""
    return logout(client, app, "x", bearer(token))


def _b64(raw) -> str:
    raw = raw.encode() if isinstance(raw, str) else raw
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _forge(claims, header, key, algorithm):
    return jwt.encode(claims, key, algorithm=algorithm, headers=header)


def test_a_valid_token_is_accepted(client, application, user_token):
    assert probe(client, application, user_token.access_token).status_code == 204


def test_a_bad_signature_is_refused(client, application, user_token):
    header, payload, signature = user_token.access_token.split(".")
    flipped = signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")
    assert_error(probe(client, application, f"{header}.{payload}.{flipped}"), 401, "UNAUTHORIZED")


def test_a_tampered_subject_is_refused(client, application, make_user_token):
    alice, bob = make_user_token(application), make_user_token(application)
    header, payload, signature = alice.access_token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = bob.user["id"]
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert_error(probe(client, application, f"{header}.{payload}.{signature}"), 401, "UNAUTHORIZED")


def test_a_token_of_another_application_is_refused(client, make_application, user_token):
    error = assert_error(probe(client, make_application(), user_token.access_token), 401, "UNAUTHORIZED")
    assert error["details"]["reason"] == "audience"


def test_an_expired_token_is_refused(client, application, user_token, clock):
    clock.advance(899)
    assert probe(client, application, user_token.access_token).status_code == 204
    clock.advance(1)
    error = assert_error(probe(client, application, user_token.access_token), 401, "UNAUTHORIZED")
    assert error["details"]["reason"] == "expired"


def test_alg_none_is_refused(client, application, user_token):
    claims = jwt.decode(user_token.access_token, options={"verify_signature": False})
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert_error(probe(client, application, f"{header}.{body}."), 401, "UNAUTHORIZED")


def test_hs256_signed_with_the_public_key_is_refused(client, application, user_token, ctx):
    """The classic key-confusion forgery: HMAC keyed with the published RSA key."""
    claims = jwt.decode(user_token.access_token, options={"verify_signature": False})
    kid, private = ctx.keys.signing_key()
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = f"{_b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': kid}))}.{_b64(json.dumps(claims))}"
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{_b64(signature)}"
    assert_error(probe(client, application, forged), 401, "UNAUTHORIZED")


def test_an_unknown_kid_and_a_foreign_key_are_refused(client, application, user_token, ctx):
    claims = jwt.decode(user_token.access_token, options={"verify_signature": False})
    foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert_error(probe(client, application, _forge(claims, {"kid": "unknown-kid"}, foreign, "RS256")), 401)
    kid, _ = ctx.keys.signing_key()
    assert_error(probe(client, application, _forge(claims, {"kid": kid}, foreign, "RS256")), 401)


def test_a_token_with_another_issuer_is_refused(client, application, user_token, ctx):
    claims = jwt.decode(user_token.access_token, options={"verify_signature": False})
    kid, private = ctx.keys.signing_key()
    forged = _forge({**claims, "iss": "https://evil.example"}, {"kid": kid}, private, "RS256")
    assert_error(probe(client, application, forged), 401, "UNAUTHORIZED")


def test_a_suspended_users_token_stops_at_once_and_for_good(client, application, user_token, ctx):
    ctx.users.admin.suspend(application["_id"], user_token.user["id"])
    assert_error(probe(client, application, user_token.access_token), 401, "UNAUTHORIZED")
    ctx.users.admin.unsuspend(application["_id"], user_token.user["id"])
    # The suspension stamped the account: a token issued before it stays refused.
    assert_error(probe(client, application, user_token.access_token), 401, "UNAUTHORIZED")


def test_a_deleted_users_token_stops_at_once(client, application, user_token, ctx):
    ctx.store["users"].update_one({"_id": user_token.user["id"]}, {"$set": {"status": "deleted"}})
    assert_error(probe(client, application, user_token.access_token), 401, "UNAUTHORIZED")


def test_a_deleted_applications_tokens_stop_at_once(client, application, user_token, ctx):
    ctx.applications.delete(application["_id"])
    assert_error(probe(client, application, user_token.access_token), 404, "NOT_FOUND")


def test_access_token_survives_session_revocation_until_expiry(client, application, user_token, ctx, clock):
    assert ctx.users.sessions.revoke_user(application["_id"], user_token.user["id"]) == 1
    assert probe(client, application, user_token.access_token).status_code == 204
    clock.advance(900)
    assert_error(probe(client, application, user_token.access_token), 401)


# ---------------------------------------------------------------- JWT-owner


def change_password(client, app, user_id, headers):
    body = {"current_password": PASSWORD, "new_password": "Brand-New-Pass-7",
            "new_password_confirmation": "Brand-New-Pass-7"}
    return client.simulate_post(users_url(app, f"/{user_id}/change-password"), json=body, headers=headers)


def test_a_user_token_on_another_users_route_is_403(client, application, make_user_token, post):
    alice, bob = make_user_token(application), make_user_token(application)
    assert_error(change_password(client, application, bob.user["id"], alice.headers), 403, "FORBIDDEN")
    # Bob's password is unchanged.
    assert post(application, "/login", {"email": bob.user["email"], "password": PASSWORD}).status_code == 200


def test_api_keys_never_pass_the_owner_gate(client, application, user_token, api_key):
    assert_error(change_password(client, application, user_token.user["id"], bearer(api_key)), 403, "FORBIDDEN")


def test_owner_route_without_a_token_is_401(client, application, user_token):
    assert_error(change_password(client, application, user_token.user["id"], None), 401, "UNAUTHORIZED")


def test_the_owner_passes(client, application, user_token):
    assert change_password(client, application, user_token.user["id"], user_token.headers).status_code == 200
