"""The verify-email and reset-password pages, rendered through Pages by the real app
(their behaviour is tested in tests/users/test_pages.py; this checks the move)."""
from __future__ import annotations

import re


def test_the_email_pages_may_fetch_their_own_origin_only(client, application):
    response = client.simulate_get(f"/pages/{application['_id']}/verify-email")
    policy = response.headers["Content-Security-Policy"]
    assert "connect-src 'self'" in policy and "form-action 'self'" in policy
    assert response.headers["X-Frame-Options"] == "DENY"
    assert f'fetch("/api/v1/applications/{application["_id"]}" + path' in response.text


def test_the_reset_form_has_no_named_fields(client, application):
    """Only the script sends the form (as JSON): if it does not run, the password is not
    submitted into a URL."""
    text = client.simulate_get(f"/pages/{application['_id']}/reset-password").text
    assert re.findall(r'<input[^>]*\bname=', text) == []
    assert 'autocomplete="new-password"' in text
