"""Helpers of the users tests (fixtures shared with other areas live in tests/plugins/users.py)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from shared.timeutil import aware
from tests.plugins.users import fresh_address, users_url


@pytest.fixture
def post(client):
    """``post(app, "/login", body, headers=None, remote_addr=None)`` -> the response; each
    call comes from a fresh client address unless one is given."""

    def do(app, path, body=None, headers=None, remote_addr=None):
        return client.simulate_post(users_url(app, path), json=body if body is not None else {}, headers=headers,
                                    remote_addr=remote_addr or fresh_address())

    return do


def assert_rate_limit_headers(response, limit):
    headers = response.headers
    assert headers["X-RateLimit-Limit"] == str(limit)
    assert headers["X-RateLimit-Remaining"] == "0"
    assert int(headers["X-RateLimit-Reset"]) > 0
    assert int(headers["Retry-After"]) >= 1


def near(stored, expected) -> bool:
    """A stored timestamp equals ``expected`` (MongoDB keeps milliseconds)."""
    return abs(aware(stored) - expected) < timedelta(milliseconds=1)
