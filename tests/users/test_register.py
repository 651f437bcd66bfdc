"""POST V1/users/register: the User, the verification email, user.created, and every
refusal (validation, weak password, taken email, tier limit, throttle) leaving no state."""
import ipaddress
import json
import threading

import pytest

from shared.config import Rate
from shared.ids import digest
from tests.conftest import assert_error, events_of
from tests.plugins.users import PASSWORD, fresh_address, users_url
from tests.users.conftest import assert_rate_limit_headers


def body(**overrides):
    values = {"email": "Ada@Example.com", "password": PASSWORD, "name": "Ada Lovelace"}
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def test_register_returns_the_user_and_a_message(post, application, ctx, outbox):
    response = post(application, "/register", body(metadata={"plan": "pro", "tags": ["a"]}))
    assert response.status_code == 201, response.text
    assert set(response.json) == {"data", "message"}
    assert isinstance(response.json["message"], str) and response.json["message"]
    user = response.json["data"]
    assert set(user) == {"id", "email", "name", "email_verified", "created_at", "metadata"}
    assert user["email"] == "ada@example.com"
    assert user["name"] == "Ada Lovelace"
    assert user["email_verified"] is False
    assert user["metadata"] == {"plan": "pro", "tags": ["a"]}
    assert user["created_at"].endswith("+00:00")

    stored = ctx.store["users"].find_one({"_id": user["id"]})
    assert stored["app_id"] == application["_id"]
    assert stored["status"] == "active"
    assert stored["password_hash"].startswith("$2") and PASSWORD not in stored["password_hash"]
    assert stored["deleted_at"] is None and stored["suspended_at"] is None and stored["avatar_url"] is None

    [email] = outbox
    assert email.to == "ada@example.com"
    assert "Test App" in email.subject and "Test App" in email.body
    assert f"/pages/{application['_id']}/verify-email?token=" in email.body
    # Stored as a SHA-256 digest only.
    assert ctx.store["user_tokens"].find_one({"_id": digest(email.token)})["purpose"] == "verification"
    assert ctx.store["user_tokens"].find_one({"_id": email.token}) is None

    [event] = events_of(ctx, "user.created")
    assert event["app_id"] == application["_id"]
    assert event["data"] == {"user_id": user["id"], "email": "ada@example.com", "name": "Ada Lovelace"}
    assert event["subject"] == {"user_id": user["id"]}


def test_metadata_may_be_null_or_omitted(post, application):
    assert post(application, "/register", body(email="a@example.com")).json["data"]["metadata"] is None
    response = post(application, "/register", {**body(email="b@example.com"), "metadata": None})
    assert response.status_code == 201 and response.json["data"]["metadata"] is None


def test_one_bad_field_is_invalid_format(post, application, ctx):
    error = assert_error(post(application, "/register", body(email="not-an-email")), 400, "VALIDATION_INVALID_FORMAT")
    assert set(error["details"]["fields"]) == {"email"}
    assert_error(post(application, "/register", body(name="x" * 256)), 400, "VALIDATION_INVALID_FORMAT")
    assert_error(post(application, "/register", body(metadata=["not", "an", "object"])), 400,
                 "VALIDATION_INVALID_FORMAT")
    assert_error(post(application, "/register", body(metadata={"blob": "x" * 20000})), 400,
                 "VALIDATION_INVALID_FORMAT")
    assert ctx.store["users"].count_documents({}) == 0


def test_several_bad_fields_are_multiple_errors(post, application):
    error = assert_error(post(application, "/register", {"email": "nope", "name": ""}), 400,
                         "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"email", "password", "name"}


def test_name_of_255_characters_is_accepted(post, application):
    assert post(application, "/register", body(name="x" * 255)).status_code == 201


@pytest.mark.parametrize("password, rule", [
    ("Sh0rt!", "min_length"),
    ("alllowercaseletters", "character_classes"),
    ("password1", "not_common"),
    ("ada@example.com", "not_email"),
    ("A1" * 65, "max_length"),
])
def test_weak_password_is_422_naming_the_rule(post, application, ctx, outbox, password, rule):
    error = assert_error(post(application, "/register", body(password=password)), 422, "VALIDATION_PASSWORD_TOO_WEAK")
    assert rule in error["details"]["rules"]
    assert ctx.store["users"].count_documents({}) == 0
    assert outbox == [] and events_of(ctx, "user.created") == []


def test_password_is_not_trimmed(post, application, login):
    assert post(application, "/register", body(password="  Spaced-Out-7  ")).status_code == 201
    assert login(application, "ada@example.com", "  Spaced-Out-7  ")["access_token"]


def test_taken_email_is_409_case_insensitively(post, application, ctx):
    assert post(application, "/register", body()).status_code == 201
    error = assert_error(post(application, "/register", body(email="ADA@example.COM")), 409,
                         "AUTH_EMAIL_ALREADY_REGISTERED")
    assert "already registered" in error["message"]
    assert ctx.store["users"].count_documents({}) == 1
    assert ctx.store["user_counters"].find_one({"_id": application["_id"]})["users"] == 1


def test_the_same_email_may_register_in_another_application(post, application, make_application):
    assert post(application, "/register", body()).status_code == 201
    assert post(make_application(), "/register", body()).status_code == 201


def test_soft_deleted_user_keeps_its_email_reserved(post, application, ctx):
    user_id = post(application, "/register", body()).json["data"]["id"]
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"status": "deleted"}})
    assert_error(post(application, "/register", body()), 409, "AUTH_EMAIL_ALREADY_REGISTERED")


def test_login_before_verification_is_allowed(post, application, login):
    post(application, "/register", body())
    assert login(application, "ada@example.com")["user"]["email_verified"] is False


def test_unknown_application_is_404(client):
    response = client.simulate_post(users_url({"_id": "00000000-0000-4000-8000-000000000000"}, "/register"),
                                    json=body())
    assert_error(response, 404, "NOT_FOUND")


def test_body_must_be_json(client, application):
    response = client.simulate_post(users_url(application, "/register"), body="email=a",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")


# -- tier limit


@pytest.fixture
def config_overrides(request):
    return getattr(request, "param", {})


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 2}], indirect=True)
def test_tier_limit_is_403_and_counts_only_this_application(post, application, make_application, ctx, outbox):
    assert post(application, "/register", body(email="a@example.com")).status_code == 201
    assert post(application, "/register", body(email="b@example.com")).status_code == 201
    error = assert_error(post(application, "/register", body(email="c@example.com")), 403, "tier_limit_exceeded")
    assert error["details"]["limit"] == 2
    assert ctx.store["users"].count_documents({"app_id": application["_id"]}) == 2
    assert len(outbox) == 2
    assert post(make_application(), "/register", body(email="c@example.com")).status_code == 201


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 1}], indirect=True)
def test_soft_delete_gives_the_slot_back(post, application, ctx):
    user_id = post(application, "/register", body(email="a@example.com")).json["data"]["id"]
    assert_error(post(application, "/register", body(email="b@example.com")), 403, "tier_limit_exceeded")
    # What the self-service area does on DELETE V1/users/{userId}:
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"status": "deleted"}})
    ctx.users.registration.release_user_slot(application["_id"])
    assert post(application, "/register", body(email="b@example.com")).status_code == 201


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 1}], indirect=True)
def test_a_slot_lost_to_a_crash_after_soft_delete_is_repaired_at_the_limit(post, application, ctx):
    user_id = post(application, "/register", body(email="a@example.com")).json["data"]["id"]
    # The soft delete wrote its status, then the process died before release_user_slot.
    ctx.store["users"].update_one({"_id": user_id}, {"$set": {"status": "deleted"}})
    assert post(application, "/register", body(email="b@example.com")).status_code == 201
    assert ctx.store["user_counters"].find_one({"_id": application["_id"]})["users"] == 1
    assert_error(post(application, "/register", body(email="c@example.com")), 403, "tier_limit_exceeded")


@pytest.mark.parametrize("metadata, reason", [
    ({"$where": 1}, "must not start with $"),
    ({"a.b": 1}, "contain ."),
    ({"nested": {"bad\u0000key": 1}}, "NUL"),
])
def test_metadata_keys_mongodb_cannot_store_are_refused(post, application, ctx, metadata, reason):
    error = assert_error(post(application, "/register", body(metadata=metadata)), 400, "VALIDATION_INVALID_FORMAT")
    assert reason in error["details"]["fields"]["metadata"]
    assert ctx.store["users"].count_documents({"app_id": application["_id"]}) == 0


@pytest.mark.parametrize("literal, words", [
    (str(2 ** 70), "integer beyond 64 bits"), (str(-(2 ** 63) - 1), "integer beyond 64 bits"),
    ("NaN", "NaN is not a JSON number"), ("Infinity", "Infinity is not a JSON number"),
    ("-Infinity", "-Infinity is not a JSON number"), ("1e999", "beyond the range of a double"),
])
def test_metadata_numbers_mongodb_or_json_cannot_carry_are_refused(client, application, ctx, literal, words):
    """The public route takes any JSON number in ``metadata``: an integer beyond 64 bits
    failed the store's write (a 500, after the bcrypt work), and NaN or Infinity (which
    Python's json reads, though they are no JSON) were stored and made every later answer
    carrying the user's metadata invalid JSON. Both are 400 before any work."""
    raw = json.dumps(body(metadata={"n": 0})).replace('"n": 0', f'"n": {literal}')
    response = client.simulate_post(users_url(application, "/register"), body=raw, remote_addr=fresh_address(),
                                    headers={"Content-Type": "application/json"})
    error = assert_error(response, 400)
    assert error["code"] in ("VALIDATION_INVALID_FORMAT", "VALIDATION_MALFORMED_JSON"), error
    assert words in json.dumps(error)
    assert ctx.store["users"].count_documents({"app_id": application["_id"]}) == 0


def test_metadata_of_a_64_bit_integer_is_stored(post, application, ctx):
    response = post(application, "/register", body(metadata={"n": 2 ** 63 - 1, "m": -(2 ** 63), "x": 1.5e308}))
    assert response.status_code == 201, response.text
    assert response.json["data"]["metadata"] == {"n": 2 ** 63 - 1, "m": -(2 ** 63), "x": 1.5e308}


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 1}], indirect=True)
def test_suspended_users_count_against_the_limit(post, application, ctx):
    user_id = post(application, "/register", body(email="a@example.com")).json["data"]["id"]
    ctx.users.admin.suspend(application["_id"], user_id)
    assert_error(post(application, "/register", body(email="b@example.com")), 403, "tier_limit_exceeded")


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 1}], indirect=True)
def test_slot_of_a_registration_that_crashed_is_reclaimed(post, application, ctx, clock):
    # A registration that reserved a slot and died before inserting its user.
    ctx.store["user_counters"].insert_one({"_id": application["_id"], "app_id": application["_id"], "users": 1,
                                           "pending": [{"user_id": "ghost", "at": clock()}]})
    assert_error(post(application, "/register", body()), 403, "tier_limit_exceeded")  # may still be in flight
    clock.advance(61)
    assert post(application, "/register", body()).status_code == 201
    counter = ctx.store["user_counters"].find_one({"_id": application["_id"]})
    assert counter["users"] == 1 and counter["pending"] == []


@pytest.mark.parametrize("config_overrides", [{"max_users_per_application": 3, "rate_limit_register": Rate(0, 60)}],
                         indirect=True)
def test_parallel_registrations_never_exceed_the_limit(client, application, ctx):
    statuses, lock = [], threading.Lock()

    def register(i):
        response = client.simulate_post(users_url(application, "/register"),
                                        json=body(email=f"user{i}@example.com"), remote_addr=f"10.9.0.{i}")
        with lock:
            statuses.append(response.status_code)

    threads = [threading.Thread(target=register, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201] * 3 + [403] * 9
    assert ctx.store["users"].count_documents({"app_id": application["_id"]}) == 3


# -- registration throttle (per client IP per application)


@pytest.mark.parametrize("config_overrides", [{"rate_limit_register": Rate(3, 60)}], indirect=True)
def test_registration_is_throttled_per_ip_per_application(post, application, make_application, clock):
    for i in range(3):
        response = post(application, "/register", body(email=f"u{i}@example.com"), remote_addr="10.1.1.1")
        assert response.status_code == 201
    # Malformed bodies are counted too: the throttle runs first.
    response = post(application, "/register", {"email": "bad"}, remote_addr="10.1.1.1")
    error = assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert_rate_limit_headers(response, 3)
    assert error["details"]["retry_after"] >= 1
    assert post(application, "/register", body(email="x@example.com"), remote_addr="10.1.1.2").status_code == 201
    assert post(make_application(), "/register", body(), remote_addr="10.1.1.1").status_code == 201
    clock.advance(60)
    assert post(application, "/register", body(email="late@example.com"), remote_addr="10.1.1.1").status_code == 201


@pytest.mark.parametrize("config_overrides", [{"rate_limit_register": Rate(3, 60)}], indirect=True)
def test_application_registration_rate_limit_overrides_the_default(post, application, ctx):
    ctx.applications.update(application["_id"], {"registration_rate_limit": 1})
    assert post(application, "/register", body(email="a@example.com"), remote_addr="10.1.1.1").status_code == 201
    response = post(application, "/register", body(email="b@example.com"), remote_addr="10.1.1.1")
    assert_error(response, 429, "RATE_LIMIT_EXCEEDED")
    assert_rate_limit_headers(response, 1)

    ctx.applications.update(application["_id"], {"registration_rate_limit": 0})  # unlimited
    for i in range(5):
        response = post(application, "/register", body(email=f"n{i}@example.com"), remote_addr="10.1.1.1")
        assert response.status_code == 201


@pytest.mark.parametrize("config_overrides", [{"rate_limit_register": Rate(2, 60),
                                               "trusted_proxies": (ipaddress.ip_network("127.0.0.0/8"),)}],
                         indirect=True)
def test_forwarded_address_counts_only_behind_a_trusted_proxy(client, application):
    proxied = {"X-Forwarded-For": "203.0.113.7"}

    def register(email, remote, headers=None):
        return client.simulate_post(users_url(application, "/register"), json=body(email=email),
                                    remote_addr=remote, headers=headers)

    assert register("a@example.com", "127.0.0.1", proxied).status_code == 201
    assert register("b@example.com", "127.0.0.1", proxied).status_code == 201
    assert register("c@example.com", "127.0.0.1", proxied).status_code == 429
    # Another client behind the same proxy has its own budget.
    assert register("d@example.com", "127.0.0.1", {"X-Forwarded-For": "203.0.113.8"}).status_code == 201
    # An untrusted peer cannot pick its address with the header.
    assert register("e@example.com", "198.51.100.1", proxied).status_code == 201
    assert register("f@example.com", "198.51.100.1", {"X-Forwarded-For": "203.0.113.9"}).status_code == 201
    assert register("g@example.com", "198.51.100.1", {"X-Forwarded-For": "203.0.113.10"}).status_code == 429
