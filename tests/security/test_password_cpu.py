"""Hardening item 3: bcrypt as a shared CPU to exhaust.

- one address spreading password work over many applications (each application's
  throttle is per IP per application) now meets IAMGATE_RATE_LIMIT_IP across all of them;
- an application's ``registration_rate_limit: 0`` no longer lifts the limit;
- a full application answers tier_limit_exceeded without paying for a hash.
"""
from __future__ import annotations

import pytest

from shared.config import Rate
from tests.plugins.users import users_url

IP = "203.0.113.7"


@pytest.fixture
def config_overrides():
    return {"rate_limit_ip": Rate(5, 60), "registration_rate_limit_max": 3, "max_users_per_application": 1}


def test_one_ip_cannot_spread_logins_over_many_applications(client, make_application):
    apps = [make_application() for _ in range(6)]
    codes = [client.simulate_post(users_url(app, "/login"), remote_addr=IP,
                                  json={"email": "victim@example.com", "password": "Guess-123456"}).status_code
             for app in apps]
    assert codes == [401] * 5 + [429]


def test_dashboard_and_end_user_password_work_share_the_ip_budget(client, make_application):
    app = make_application()
    for _ in range(3):
        assert client.simulate_post("/api/dashboard/login", remote_addr=IP,
                                    json={"email": "x@example.com", "password": "Guess-123456"}).status_code == 401
    for _ in range(2):
        assert client.simulate_post(users_url(app, "/login"), remote_addr=IP,
                                    json={"email": "x@example.com", "password": "Guess-123456"}).status_code == 401
    r = client.simulate_post("/api/dashboard/register", remote_addr=IP,
                             json={"email": "new@example.com", "password": "Guess-123456", "name": "N"})
    assert r.status_code == 429 and r.json["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    assert client.simulate_post("/api/dashboard/login", remote_addr="203.0.113.8",
                                json={"email": "x@example.com", "password": "Guess-123456"}).status_code == 401


def test_registration_rate_limit_zero_is_capped_at_the_service_maximum(client, ctx, make_application):
    app = make_application()
    ctx.store["applications"].update_one({"_id": app["_id"]}, {"$set": {"registration_rate_limit": 0}})
    codes = [client.simulate_post(users_url(app, "/register"), remote_addr="198.51.100.9",
                                  json={"email": f"u{i}@example.com", "password": "Sturdy-Pass-42",
                                        "name": "U"}).status_code
             for i in range(4)]
    # One user fills the application (max 1); the 4th request from the address meets
    # the capped per-minute limit (3) instead of "unlimited".
    assert codes == [201, 403, 403, 429]


def test_a_full_application_costs_no_bcrypt(client, ctx, make_application, monkeypatch):
    app = make_application()
    r = client.simulate_post(users_url(app, "/register"), remote_addr="198.51.100.20",
                             json={"email": "first@example.com", "password": "Sturdy-Pass-42", "name": "U"})
    assert r.status_code == 201
    hashes = []
    real = ctx.hasher.hash
    monkeypatch.setattr(ctx.hasher, "hash", lambda password: hashes.append(1) or real(password))
    r = client.simulate_post(users_url(app, "/register"), remote_addr="198.51.100.21",
                             json={"email": "second@example.com", "password": "Sturdy-Pass-42", "name": "U"})
    assert r.status_code == 403 and r.json["error"]["code"] == "tier_limit_exceeded"
    assert hashes == []
