"""Hardening item 8: cache bypass through an absurd ``min_revision``.

A ``min_revision`` no write ever produced made every check skip the cache (a store read
per check, at the caller's will).  Above the change-log head it is now 400
AUTHZ_REVISION_AHEAD on the control plane's checks; at or below the head it is served.
"""
from __future__ import annotations

import pytest

ABSURD = 10 ** 15


def _url(app, path="/check"):
    return f"/api/v1/applications/{app['_id']}/authz{path}"


@pytest.fixture
def checker(application, make_api_key):
    return {"Authorization": f"Bearer {make_api_key(application, permissions=['authz:check'])}"}


def test_get_check_refuses_a_revision_ahead_of_the_log(client, ctx, application, checker, stored_user, monkeypatch):
    user = stored_user(application)
    reads = []
    real = ctx.roles.grants
    monkeypatch.setattr(ctx.roles, "grants", lambda *a: reads.append(1) or real(*a))
    query = {"user_id": user["_id"], "permission": "posts:read"}
    assert client.simulate_get(_url(application), params=query, headers=checker).status_code == 200
    for _ in range(3):
        r = client.simulate_get(_url(application), params={**query, "min_revision": ABSURD}, headers=checker)
        assert r.status_code == 400, r.text
        assert r.json["error"]["code"] == "AUTHZ_REVISION_AHEAD"
        assert r.json["error"]["details"]["head"] == ctx.events.head()
    assert reads == [1]  # the refused checks never reached the store


@pytest.mark.parametrize("path, extra", [("/check", {"permission": "posts:read"}),
                                         ("/check-bulk", {"permissions": ["posts:read"]})])
def test_post_checks_refuse_it_too(client, ctx, application, checker, stored_user, path, extra):
    user = stored_user(application)
    body = {"user_id": user["_id"], "min_revision": ctx.events.head() + 1, **extra}
    r = client.simulate_post(_url(application, path), json=body, headers=checker)
    assert r.status_code == 400 and r.json["error"]["code"] == "AUTHZ_REVISION_AHEAD"
    body["min_revision"] = ctx.events.head()
    assert client.simulate_post(_url(application, path), json=body, headers=checker).status_code == 200
