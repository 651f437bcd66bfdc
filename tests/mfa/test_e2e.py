"""MFA end to end: the real processes (``make run``) over HTTP, on the wall clock.

An application is created through the dashboard API, a user registers, turns TOTP on
with a code computed here from RFC 6238, then logs in: the login answers a challenge
and verify answers the token pair.  Parallel verifies with one correct code, spread over
gunicorn's gevent worker, issue one token pair.
"""
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
import requests

from tests.e2e.conftest import start_stack
from tests.e2e.processes import sign_up
from tests.mfa.conftest import rfc6238

PASSWORD = "Correct-Horse-9"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack = start_stack(tmp_path_factory.mktemp("mfa-e2e"))
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def v1(stack):
    dashboard = sign_up(stack.control_url, "E2E")
    app = dashboard.post(stack.control_url + "/api/dashboard/applications", json={"name": "E2E Shop"})
    assert app.status_code == 201, app.text
    return f"{stack.control_url}/api/v1/applications/{app.json()['data']['id']}/users"


def now():
    return datetime.now(UTC)


def fresh_step():
    """Wait (at most ~2 s) if the current 30-second step is about to end, so the
    confirmation's code is still the current one when the server checks it."""
    remaining = 30 - time.time() % 30
    if remaining < 2:
        time.sleep(remaining + 0.1)


def test_login_challenge_and_verify_over_http(v1):
    email = "e2e-user@example.com"
    user = requests.post(v1 + "/register", json={"email": email, "password": PASSWORD, "name": "Ada"})
    assert user.status_code == 201, user.text
    user_id = user.json()["data"]["id"]
    pair = requests.post(v1 + "/login", json={"email": email, "password": PASSWORD}).json()["data"]
    headers = {"Authorization": f"Bearer {pair['access_token']}"}

    setup = requests.post(f"{v1}/{user_id}/mfa/totp/setup", json={"label": "Phone"}, headers=headers)
    assert setup.status_code == 200, setup.text
    secret, method_id = setup.json()["data"]["secret"], setup.json()["data"]["method_id"]
    assert setup.json()["data"]["provisioning_uri"].startswith("otpauth://totp/E2E%20Shop:e2e-user@example.com?")
    fresh_step()
    confirmed_at = now()
    confirm = requests.post(f"{v1}/{user_id}/mfa/totp/confirm", headers=headers,
                            json={"method_id": method_id, "code": rfc6238(secret, confirmed_at)})
    assert confirm.status_code == 201, confirm.text
    backup_codes = confirm.json()["data"]["backup_codes"]

    challenge = requests.post(v1 + "/login", json={"email": email, "password": PASSWORD, "remember_me": True})
    assert challenge.json()["data"]["mfa_required"] is True
    token = challenge.json()["data"]["challenge_token"]
    # the confirmation spent its step's code; the next step's is within the accepted drift
    replay = requests.post(v1 + "/mfa/verify", json={"challenge_token": token, "code": rfc6238(secret, confirmed_at)})
    assert replay.status_code == 401 and replay.json()["error"]["code"] == "AUTH_INVALID_MFA_CODE"

    codes = [rfc6238(secret, confirmed_at, 1)] * 5
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(
            lambda code: requests.post(v1 + "/mfa/verify", json={"challenge_token": token, "code": code}), codes))
    statuses = sorted(r.status_code for r in results)
    assert statuses.count(200) == 1, [r.text for r in results]
    assert set(statuses) <= {200, 401, 410, 429}
    tokens = next(r for r in results if r.status_code == 200).json()["data"]
    mine = {"Authorization": f"Bearer {tokens['access_token']}"}
    status = requests.get(f"{v1}/{user_id}/mfa/status", headers=mine).json()["data"]
    assert status["mfa_enabled"] is True and status["backup_codes_remaining"] == 10

    # a backup code on a new challenge, then turn MFA off and the login is plain again
    token = requests.post(v1 + "/login", json={"email": email, "password": PASSWORD}).json()["data"]["challenge_token"]
    used = requests.post(v1 + "/mfa/verify", json={"challenge_token": token, "code": backup_codes[0].lower()})
    assert used.status_code == 200 and used.json()["message"] == "A backup code was used; 9 remain."
    off = requests.delete(f"{v1}/{user_id}/mfa/totp", json={"password": PASSWORD}, headers=mine)
    assert off.status_code == 204, off.text
    plain = requests.post(v1 + "/login", json={"email": email, "password": PASSWORD}).json()["data"]
    assert "access_token" in plain
