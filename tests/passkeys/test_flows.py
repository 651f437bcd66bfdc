"""Register a passkey, sign in with it alone, use it as the second factor, manage it, and
the notices mailed to the account when one is added or removed."""
import json
import re
import threading

from controlplane.passkeys import service
from controlplane.passkeys.authenticators import TABLE_FILE
from controlplane.passkeys.service import MAX_PASSKEYS_PER_USER
from shared.ids import digest
from tests.conftest import assert_error, bearer, events_of, in_parallel
from tests.mfa.conftest import mfa_url
from tests.oidc import test_hosted as hosted
from tests.passkeys.authenticator import SoftAuthenticator
from tests.passkeys.conftest import passkeys_url
from tests.plugins.users import fresh_address, users_url

ADDED, REMOVED = "A passkey was added to your", "A passkey was removed from your"


def test_register_then_sign_in_alone(client, ctx, app_pw, make_user_token, register, sign_in):
    user = make_user_token(app_pw)
    key = SoftAuthenticator()
    response = register(app_pw, user, key, name="Laptop")
    assert response.status_code == 201, response.text
    passkey = response.json["data"]
    assert passkey["name"] == "Laptop" and passkey["discoverable"] is True and passkey["user_verified"] is True
    assert passkey["transports"] == ["internal", "hybrid"] and passkey["authenticator_name"] is None  # all-zero AAGUID
    stored = ctx.store["passkeys"].find_one({"_id": passkey["id"]})
    assert stored["credential_id"] == key.id and stored["user_id"] == user.user["id"]

    signed_in = sign_in(app_pw, key)
    assert signed_in.status_code == 200, signed_in.text
    pair = signed_in.json["data"]
    assert pair["user"]["id"] == user.user["id"] and pair["token_type"] == "Bearer"
    me = client.simulate_get(users_url(app_pw, f"/{user.user['id']}/profile"), headers=bearer(pair["access_token"]))
    assert me.status_code == 200, me.text
    assert len(events_of(ctx, "user.login", user.user["id"])) == 2  # the password login, then the passkey
    listed = client.simulate_get(passkeys_url(app_pw), headers=user.headers).json["data"]
    assert listed[0]["last_used_at"] is not None


def test_registration_options_are_what_a_browser_parses(client, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    register(app_pw, user, SoftAuthenticator())
    data = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={},
                              headers=user.headers).json["data"]
    options = data["options"]
    assert options["rp"]["id"] == "localhost" and options["attestation"] == "none"
    assert options["user"]["name"] == user.user["email"]
    assert set(options) >= {"rp", "user", "challenge", "pubKeyCredParams", "timeout", "excludeCredentials",
                            "authenticatorSelection"}
    assert len(options["excludeCredentials"]) == 1  # the one already registered
    assert "=" not in options["challenge"] and "+" not in options["challenge"]  # base64url, unpadded


def test_second_factor_joins_the_mfa_challenge(client, ctx, passkey_app, make_user_token, register,
                                               sign_in_options):
    app = passkey_app("second_factor")
    user = make_user_token(app)
    key = SoftAuthenticator(resident=False, user_verifying=False)
    assert register(app, user, key).status_code == 201
    assert len(events_of(ctx, "mfa.enabled", user.user["id"])) == 1

    login = client.simulate_post(users_url(app, "/login"), json={"email": user.user["email"],
                                                                 "password": user.password},
                                 remote_addr=fresh_address()).json["data"]
    assert login["mfa_required"] is True and login["mfa_methods"] == ["webauthn"]
    data = sign_in_options(app, login["challenge_token"])
    assert [c["id"] for c in data["options"]["allowCredentials"]] == [key.id]
    response = client.simulate_post(passkeys_url(app, "/authentication/verify"), remote_addr=fresh_address(),
                                    json={"challenge_id": data["challenge_id"], "credential": key.get(data["options"])})
    assert response.status_code == 200, response.text
    assert response.json["data"]["user"]["id"] == user.user["id"]
    challenge = ctx.store["mfa_challenges"].find_one({"_id": digest(login["challenge_token"])})
    assert challenge["consumed_at"] is not None
    # the MFA challenge is spent: asking again for options is refused
    again = client.simulate_post(passkeys_url(app, "/authentication/options"), remote_addr=fresh_address(),
                                 json={"challenge_token": login["challenge_token"]})
    assert_error(again, 410, "AUTH_MFA_CHALLENGE_EXPIRED")


def test_totp_and_passkey_are_both_offered(client, passkey_app, make_user_token, register, enable_mfa):
    app = passkey_app("second_factor")
    user = make_user_token(app)
    enable_mfa(app, user)
    assert register(app, user, SoftAuthenticator()).status_code == 201
    login = client.simulate_post(users_url(app, "/login"), json={"email": user.user["email"],
                                                                 "password": user.password},
                                 remote_addr=fresh_address()).json["data"]
    assert login["mfa_methods"] == ["totp", "webauthn"]
    status = client.simulate_get(mfa_url(app, user.user["id"], "/status"), headers=user.headers).json["data"]
    assert status["mfa_enabled"] is True


def _turn_totp_off(client, app, mfa):
    off = client.simulate_delete(mfa_url(app, mfa.id, "/totp"), json={"password": mfa.password}, headers=mfa.headers)
    assert off.status_code == 204, off.text
    return client.simulate_post(users_url(app, "/login"), json={"email": mfa.email, "password": mfa.password},
                                remote_addr=fresh_address()).json["data"]


def test_turning_totp_off_does_not_tell_a_user_with_a_passkey_that_mfa_is_off(
        client, ctx, passkey_app, make_user_token, register, enable_mfa, outbox):
    """A user with TOTP and a passkey (both answer the login's challenge) turns TOTP off
    (DELETE mfa/totp).  The login still asks for the passkey, rightly; but the user was
    mailed "Signing in now needs only your password" and the change log got an
    ``mfa.disabled`` {user_id} with no method, so a webhook consumer and the user both
    believed the account had no second factor while it still had one (and the passkey's
    ``mfa.enabled`` had said method webauthn).  Each factor's events name it, and the
    notice names the passkey that is still asked for."""
    app = passkey_app("second_factor")
    user = make_user_token(app)
    mfa = enable_mfa(app, user)
    assert register(app, user, SoftAuthenticator()).status_code == 201
    outbox.clear()
    login = _turn_totp_off(client, app, mfa)
    assert login.get("mfa_methods") == ["webauthn"]  # the passkey still guards the account
    enabled = sorted(e["data"]["method"] for e in events_of(ctx, "mfa.enabled", mfa.id))
    disabled = [e["data"] for e in events_of(ctx, "mfa.disabled", mfa.id)]
    assert enabled == ["totp", "webauthn"] and disabled == [{"user_id": mfa.id, "method": "totp"}]
    [notice] = outbox
    assert "needs only your password" not in notice.body and "still asks for one of your passkeys" in notice.body
    assert "turned off" not in notice.subject


def test_a_passkey_the_application_does_not_accept_leaves_only_the_password(
        client, ctx, passkey_app, make_user_token, register, enable_mfa, outbox):
    """Passkeys turned off for the application keep the registered ones, which no
    longer answer the login: once TOTP goes, the password alone signs in, and the notice
    says so."""
    app = passkey_app("second_factor")
    user = make_user_token(app)
    mfa = enable_mfa(app, user)
    assert register(app, user, SoftAuthenticator()).status_code == 201
    app = ctx.applications.update(app["_id"], {"passkeys": "off"})
    outbox.clear()
    assert "access_token" in _turn_totp_off(client, app, mfa)
    [notice] = outbox
    assert "Signing in now needs only your password" in notice.body and "turned off" in notice.subject


def test_a_key_without_user_verification_does_not_sign_in_alone(app_pw, make_user_token, register, sign_in):
    user = make_user_token(app_pw)
    key = SoftAuthenticator(user_verifying=False)
    register(app_pw, user, key)
    assert_error(sign_in(app_pw, key), 400, "PASSKEY_USER_VERIFICATION_REQUIRED")


def test_a_non_resident_key_does_not_sign_in_alone(app_pw, make_user_token, register, sign_in):
    user = make_user_token(app_pw)
    key = SoftAuthenticator(resident=False)
    register(app_pw, user, key)
    assert_error(sign_in(app_pw, key), 400, "PASSKEY_USER_VERIFICATION_REQUIRED")


def test_second_factor_mode_refuses_a_sign_in_alone(client, passkey_app):
    app = passkey_app("second_factor")
    response = client.simulate_post(passkeys_url(app, "/authentication/options"), json={},
                                    remote_addr=fresh_address())
    assert_error(response, 403, "PASSKEY_DISABLED")


def test_passwordless_users_may_lose_the_password(client, passkey_app, make_user_token, register):
    app = passkey_app("passwordless", passkeys_allow_password=False)
    user = make_user_token(app)
    register(app, user, SoftAuthenticator())
    response = client.simulate_post(users_url(app, "/login"), json={"email": user.user["email"],
                                                                    "password": user.password},
                                    remote_addr=fresh_address())
    assert_error(response, 403, "PASSKEY_REQUIRED")


def test_rename_list_delete(client, ctx, clock, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    first = register(app_pw, user, SoftAuthenticator()).json["data"]
    clock.advance(1)
    second = register(app_pw, user, SoftAuthenticator()).json["data"]
    renamed = client.simulate_patch(passkeys_url(app_pw, f"/{first['id']}"), json={"name": "Phone"},
                                    headers=user.headers)
    assert renamed.status_code == 200 and renamed.json["data"]["name"] == "Phone"
    assert [p["id"] for p in client.simulate_get(passkeys_url(app_pw), headers=user.headers).json["data"]] == \
        [first["id"], second["id"]]
    assert client.simulate_delete(passkeys_url(app_pw, f"/{first['id']}"), headers=user.headers).status_code == 204
    assert events_of(ctx, "mfa.disabled", user.user["id"]) == []  # one passkey is left
    assert client.simulate_delete(passkeys_url(app_pw, f"/{second['id']}"), headers=user.headers).status_code == 204
    assert len(events_of(ctx, "mfa.disabled", user.user["id"])) == 1
    assert_error(client.simulate_delete(passkeys_url(app_pw, f"/{second['id']}"), headers=user.headers), 404,
                 "PASSKEY_NOT_FOUND")


def test_another_users_passkey_cannot_be_renamed_or_deleted(client, app_pw, make_user_token, register):
    owner, other = make_user_token(app_pw), make_user_token(app_pw)
    passkey = register(app_pw, owner, SoftAuthenticator()).json["data"]
    url = passkeys_url(app_pw, f"/{passkey['id']}")
    assert_error(client.simulate_patch(url, json={"name": "x"}, headers=other.headers), 404, "PASSKEY_NOT_FOUND")
    assert_error(client.simulate_delete(url, headers=other.headers), 404, "PASSKEY_NOT_FOUND")
    assert client.simulate_get(passkeys_url(app_pw), headers=other.headers).json["data"] == []


def test_the_last_way_in_cannot_be_deleted(client, ctx, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    passkey = register(app_pw, user, SoftAuthenticator()).json["data"]
    ctx.store["users"].update_one({"_id": user.user["id"]}, {"$set": {"password_hash": None}})
    assert_error(client.simulate_delete(passkeys_url(app_pw, f"/{passkey['id']}"), headers=user.headers), 409,
                 "PASSKEY_LAST_CREDENTIAL")
    assert ctx.store["passkeys"].count_documents({"user_id": user.user["id"]}) == 1


def test_a_user_has_at_most_twenty_passkeys(client, ctx, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    for _ in range(MAX_PASSKEYS_PER_USER):
        assert register(app_pw, user, SoftAuthenticator()).status_code == 201
    options = client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={}, headers=user.headers)
    error = assert_error(options, 409, "PASSKEY_LIMIT_EXCEEDED")
    assert error["details"] == {"limit": 20}
    assert ctx.store["passkeys"].count_documents({"user_id": user.user["id"]}) == 20
    other = make_user_token(app_pw)  # the limit is each user's
    assert register(app_pw, other, SoftAuthenticator()).status_code == 201


def _both_count_first(ctx, monkeypatch) -> None:
    """Make two parallel requests both count the user's passkeys before either goes on."""
    store, both_counted, calls = ctx.passkeys.passkeys, threading.Barrier(2, timeout=5), []
    count = store.count_for_user

    def count_then_wait(app_id, user_id):
        result = count(app_id, user_id)
        calls.append(result)
        if len(calls) <= 2:
            both_counted.wait()
        return result

    monkeypatch.setattr(store, "count_for_user", count_then_wait)


def test_parallel_registrations_cannot_pass_the_limit(client, ctx, app_pw, make_user_token, register, monkeypatch):
    """Two registrations with room for one: both pass the count before either stores its
    passkey; what is stored stays within the limit."""
    monkeypatch.setattr(service, "MAX_PASSKEYS_PER_USER", 2)
    user = make_user_token(app_pw)
    assert register(app_pw, user, SoftAuthenticator()).status_code == 201
    started = [client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={},
                                    headers=user.headers).json["data"] for _ in range(2)]
    _both_count_first(ctx, monkeypatch)
    statuses = in_parallel(2, lambda i: client.simulate_post(passkeys_url(app_pw, "/registration/verify"), json={
        "challenge_id": started[i]["challenge_id"], "credential": SoftAuthenticator().create(started[i]["options"])},
        headers=user.headers).status_code)
    assert sorted(statuses) in ([201, 409], [409, 409]), statuses
    assert ctx.store["passkeys"].count_documents({"user_id": user.user["id"]}) == 1 + statuses.count(201)


def test_two_parallel_deletions_cannot_remove_the_last_way_in(client, ctx, app_pw, make_user_token, register,
                                                              monkeypatch, outbox):
    """A user without a password deletes both passkeys at once: each deletion counts two
    before either deletes; at least one passkey stays, and what stays is not reported
    as removed."""
    user = make_user_token(app_pw)
    ids = [register(app_pw, user, SoftAuthenticator()).json["data"]["id"] for _ in range(2)]
    ctx.store["users"].update_one({"_id": user.user["id"]}, {"$set": {"password_hash": None}})
    _both_count_first(ctx, monkeypatch)
    outbox.clear()
    statuses = in_parallel(2, lambda i: client.simulate_delete(passkeys_url(app_pw, f"/{ids[i]}"),
                                                               headers=user.headers).status_code)
    assert sorted(statuses) in ([204, 409], [409, 409]), statuses
    left = ctx.store["passkeys"].count_documents({"user_id": user.user["id"]})
    assert left == statuses.count(409) and left >= 1
    assert len([m for m in outbox if REMOVED in m.subject]) == statuses.count(204)


def test_an_ended_sessions_access_token_adds_no_passkey(client, ctx, app_pw, make_user_token, register, outbox):
    """An access token stays valid after its session is revoked (a password reset, a
    sign-out everywhere), but a passkey would outlive it: registration needs the
    session live."""
    user = make_user_token(app_pw)
    outbox.clear()
    revoked = client.simulate_post(users_url(app_pw, "/logout"), json={"refresh_token": user.refresh_token},
                                   headers=user.headers, remote_addr=fresh_address())
    assert revoked.status_code in (200, 204), revoked.text
    assert client.simulate_get(passkeys_url(app_pw), headers=user.headers).status_code == 200  # still valid
    assert_error(register(app_pw, user, SoftAuthenticator()), 401, "UNAUTHORIZED")
    assert ctx.store["passkeys"].count_documents({"user_id": user.user["id"]}) == 0
    assert outbox == []  # nothing was added


def test_a_session_ending_during_registration_leaves_no_passkey(client, ctx, app_pw, make_user_token, register,
                                                               monkeypatch):
    """Checked after the passkey is stored: a session revoked while the attestation was
    verified is seen, and the passkey removed."""
    user = make_user_token(app_pw)
    enrol = ctx.passkeys.credentials.enrol

    def enrol_then_end_the_session(*args, **kwargs):
        passkey = enrol(*args, **kwargs)
        ctx.store["sessions"].update_many({"user_id": user.user["id"]}, {"$set": {"revoked_at": ctx.clock()}})
        return passkey

    monkeypatch.setattr(ctx.passkeys.credentials, "enrol", enrol_then_end_the_session)
    assert_error(register(app_pw, user, SoftAuthenticator()), 401, "UNAUTHORIZED")
    assert ctx.store["passkeys"].count_documents({"user_id": user.user["id"]}) == 0
    assert events_of(ctx, "mfa.enabled", user.user["id"]) == []


def test_a_deleted_user_loses_the_passkeys(client, ctx, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    register(app_pw, user, SoftAuthenticator())
    ctx.events.emit(app_pw["_id"], "user.deleted", {"user_id": user.user["id"]}, subject={"user_id": user.user["id"]})
    assert ctx.store["passkeys"].count_documents({"user_id": user.user["id"]}) == 0


def test_the_openapi_examples_have_the_shape_of_real_options(client, app_pw, make_user_token):
    """The documented examples are what parseCreationOptionsFromJSON / parseRequestOptionsFromJSON
    read: the same members as a real answer, binary values in unpadded base64url."""
    document = client.simulate_get("/openapi.json").json
    user = make_user_token(app_pw)
    for path, real in [
        ("/registration/options", client.simulate_post(passkeys_url(app_pw, "/registration/options"), json={},
                                                       headers=user.headers)),
        ("/authentication/options", client.simulate_post(passkeys_url(app_pw, "/authentication/options"), json={},
                                                         remote_addr=fresh_address())),
    ]:
        operation = document["paths"]["/api/v1/applications/{applicationId}/auth/passkeys" + path]["post"]
        schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
        example = _find_example(schema)["options"]
        options = real.json["data"]["options"]
        assert set(example) == set(options), path
        for value in (example["challenge"], options["challenge"]):
            assert len(value) == 43 and set(value) <= set(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _find_example(schema):
    if "example" in schema:
        return schema["example"]
    for value in schema.get("properties", {}).values():
        if isinstance(value, dict) and _find_example(value) is not None:
            return _find_example(value)
    return None


def test_remember_me_gives_the_long_session(client, ctx, app_pw, make_user_token, register, sign_in_options):
    user, key = make_user_token(app_pw), SoftAuthenticator()
    register(app_pw, user, key)
    data = sign_in_options(app_pw)
    response = client.simulate_post(passkeys_url(app_pw, "/authentication/verify"), remote_addr=fresh_address(),
                                    json={"challenge_id": data["challenge_id"], "credential": key.get(data["options"]),
                                          "remember_me": True})
    assert response.status_code == 200, response.text
    sessions = list(ctx.store["sessions"].find({"user_id": user.user["id"], "is_remember_me": True}))
    assert len(sessions) == 1


def test_a_known_aaguid_is_listed_with_its_authenticator_name(client, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    icloud = bytes.fromhex("fbfc3007154e4ecc8c0b6e020557d7bd")
    assert register(app_pw, user, SoftAuthenticator(aaguid=icloud), name="Phone").status_code == 201
    assert register(app_pw, user, SoftAuthenticator(aaguid=bytes.fromhex("ab" * 16))).status_code == 201
    listed = client.simulate_get(passkeys_url(app_pw), headers=user.headers).json["data"]
    assert {p["aaguid"]: p["authenticator_name"] for p in listed} == {
        "fbfc3007-154e-4ecc-8c0b-6e020557d7bd": "iCloud Keychain", "abababab-abab-abab-abab-abababababab": None}


def test_the_aaguid_table_is_well_formed():
    table = json.loads(TABLE_FILE.read_text())
    assert table["source"].startswith("https://github.com/passkeydeveloper/") and re.fullmatch(r"\d{4}-\d\d-\d\d",
                                                                                                   table["date"])
    for aaguid, name in table["names"].items():
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", aaguid) and name


def test_mfa_status_counts_the_passkeys_and_says_whether_they_are_a_second_factor(
        client, ctx, passkey_app, make_user_token, register):
    app = passkey_app("second_factor")
    user = make_user_token(app)
    status_url = users_url(app, f"/{user.user['id']}/mfa/status")
    before = client.simulate_get(status_url, headers=user.headers).json["data"]
    assert before == {"mfa_enabled": False, "methods": [], "backup_codes_remaining": 0,
                      "passkeys": {"count": 0, "second_factor": False}}
    assert register(app, user, SoftAuthenticator()).status_code == 201
    assert client.simulate_get(status_url, headers=user.headers).json["data"]["passkeys"] == {
        "count": 1, "second_factor": True}
    ctx.applications.update(app["_id"], {"passkeys": "off"})  # kept, but no longer a factor
    assert client.simulate_get(status_url, headers=user.headers).json["data"]["passkeys"] == {
        "count": 1, "second_factor": False}


def test_the_data_export_lists_the_passkeys_without_key_material(client, app_pw, make_user_token, register):
    user = make_user_token(app_pw)
    key = SoftAuthenticator()
    passkey = register(app_pw, user, key, name="Laptop").json["data"]
    response = client.simulate_get(users_url(app_pw, f"/{user.user['id']}/data-export"), headers=user.headers,
                                   remote_addr=fresh_address())
    assert response.status_code == 200, response.text
    exported = response.json["data"]["passkeys"]
    assert exported == [passkey]
    assert key.id not in response.text and "public_key" not in response.text


# ---------------------------------------------------------------- notices to the account


def test_a_new_passkey_is_mailed_to_the_account(ctx, clock, app_pw, make_user_token, register, outbox):
    """A password reset or change leaves a passkey (docs/authentication.md): its owner
    hears of each one added, with what to do if it was not them."""
    user = make_user_token(app_pw)
    outbox.clear()
    icloud = bytes.fromhex("fbfc3007154e4ecc8c0b6e020557d7bd")
    assert register(app_pw, user, SoftAuthenticator(aaguid=icloud), name="Work laptop").status_code == 201
    [mail] = outbox
    assert mail.to == user.user["email"] and mail.subject == f"{ADDED} Passkey App account"
    assert '"Work laptop" (iCloud Keychain)' in mail.body and user.user["email"] in mail.body
    assert clock().strftime("%Y-%m-%d at %H:%M UTC") in mail.body
    assert "remove this passkey in your account's settings, and reset your password" in mail.body
    assert "http" not in mail.body  # no link: nothing to phish with, no secret to leak
    assert mail.body.startswith("Hello Test User,") and mail.body.endswith("-- Passkey App\n")


def test_an_unnamed_passkey_is_mailed_by_its_default_name(app_pw, make_user_token, register, outbox):
    user = make_user_token(app_pw)
    outbox.clear()
    assert register(app_pw, user, SoftAuthenticator()).status_code == 201
    assert [m.subject for m in outbox] == [f"{ADDED} Passkey App account"]
    assert 'A passkey named "Passkey" was added' in outbox[0].body  # all-zero AAGUID: no model


def test_a_hostile_passkey_name_stays_one_quoted_line_of_the_notice(app_pw, make_user_token, register, outbox):
    """The name is whoever added the passkey's to choose: it cannot forge lines (or a
    signature) in the mail its victim reads, nor turn text around."""
    user = make_user_token(app_pw)
    outbox.clear()
    hostile = "Laptop\r\n\r\nIf this was not you, call +1 555 0100.\n-- Passkey App\u2028\u202eevil"
    assert register(app_pw, user, SoftAuthenticator(), name=hostile).status_code == 201
    [mail] = outbox
    named = next(line for line in mail.body.splitlines() if line.startswith("A passkey named"))
    assert '"Laptop If this was not you, call +1 555 0100. -- Passkey App evil"' in named
    assert "\r" not in mail.body and "\u2028" not in mail.body and "\u202e" not in mail.body
    assert [line for line in mail.body.splitlines() if line.startswith("--")] == ["-- Passkey App"]


def test_a_passkey_added_at_the_hosted_offer_is_mailed(ctx, client, hosted_app, oidc_client, make_user, outbox):
    ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    person, rp, browser = make_user(hosted_app), oidc_client(hosted_app, name="Portal"), hosted.Browser(client)
    offer = hosted.sign_in(browser, rp, person)
    hosted.assert_page(offer, "Sign in faster next time")
    outbox.clear()
    hosted.assert_page(hosted.post_created(browser, offer, SoftAuthenticator()), "Allow access?")
    assert [(m.to, m.subject) for m in outbox] == [(person["email"], f"{ADDED} Test App account")]
    assert 'A passkey named "Passkey" was added' in outbox[0].body


def test_a_deleted_passkey_is_mailed_to_the_account(client, clock, app_pw, make_user_token, register, outbox):
    user = make_user_token(app_pw)
    passkey = register(app_pw, user, SoftAuthenticator(), name="Old phone").json["data"]
    outbox.clear()
    clock.advance(600)  # the notice says when it was removed, not when it was added
    assert client.simulate_delete(passkeys_url(app_pw, f"/{passkey['id']}"), headers=user.headers).status_code == 204
    [mail] = outbox
    assert mail.to == user.user["email"] and mail.subject == f"{REMOVED} Passkey App account"
    assert 'The passkey named "Old phone" was removed' in mail.body
    assert clock().strftime("%Y-%m-%d at %H:%M UTC") in mail.body and "reset your password" in mail.body
    # A refused deletion tells nobody anything.
    outbox.clear()
    assert_error(client.simulate_delete(passkeys_url(app_pw, f"/{passkey['id']}"), headers=user.headers), 404,
                 "PASSKEY_NOT_FOUND")
    assert outbox == []


def test_a_hand_over_removes_the_passkeys_without_a_notice_each(client, ctx, app_pw, make_user_token, register,
                                                               outbox):
    """A reset of an unverified account hands it to the mailbox's owner and removes the
    passkeys someone else added: the owner asked for that, and is not told of each."""
    squatter = make_user_token(app_pw)
    assert register(app_pw, squatter, SoftAuthenticator()).status_code == 201
    assert register(app_pw, squatter, SoftAuthenticator()).status_code == 201
    assert [m.subject for m in outbox][-2:] == [f"{ADDED} Passkey App account"] * 2
    email = squatter.user["email"]
    outbox.clear()
    forgot = client.simulate_post(users_url(app_pw, "/password/forgot"), json={"email": email},
                                  remote_addr=fresh_address())
    assert forgot.status_code == 200, forgot.text
    reset = client.simulate_post(users_url(app_pw, "/password/reset"), remote_addr=fresh_address(),
                                 json={"token": outbox[-1].token, "email": email, "password": "Owner-Takes-It-8"})
    assert reset.status_code == 200, reset.text
    assert ctx.store["passkeys"].count_documents({"user_id": squatter.user["id"]}) == 0
    assert [m.subject for m in outbox] == ["Reset your Passkey App password"]
