"""Hardening item 4: the internal API decision services read.

- an ``authz:check`` key could read every user's assignments and attributes and the
  other keys' permission lists: the internal API now needs ``decision:sync``;
- internal routes skipped the per-credential throttle;
- an open change stream was authorized once and streamed forever, after its key was
  revoked or its application deleted: it now re-checks at least every heartbeat and
  ends with ``revoked``;
- streams per credential are capped (429 STREAM_LIMIT_EXCEEDED).
"""
from __future__ import annotations

import json
import time

import pytest

from controlplane.internal.service import ChangeFeed, TooManyStreams
from shared.config import Rate

HEARTBEAT = 0.2
USER = "0b4c1a6e-3f7e-4c55-9d1c-2f5d9c8e7a61"


@pytest.fixture
def config_overrides():
    return {"max_streams_per_credential": 2}


def url(app, suffix):
    return f"/internal/v1/applications/{app['_id']}{suffix}"


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("suffix", [f"/users/{USER}/grants", "/policies", "/api-keys", "/changes"])
def test_an_authz_check_key_cannot_read_the_internal_api(client, application, make_api_key, suffix):
    key = make_api_key(application, permissions=["authz:check"])
    r = client.simulate_get(url(application, suffix), headers=bearer(key))
    assert r.status_code == 403 and r.json["error"]["details"]["required_permission"] == "decision:sync"


def test_decision_sync_is_in_the_api_key_permission_set_and_the_default(client, application, make_api_key, ctx):
    key = make_api_key(application, permissions=["decision:sync"])
    assert client.simulate_get(url(application, "/policies"), headers=bearer(key)).status_code == 200
    default = make_api_key(application)
    assert "decision:sync" in ctx.api_keys.authenticate(default)["permissions"]


@pytest.mark.parametrize("config_overrides", [{"rate_limit_api": Rate(3, 60)}])
def test_internal_routes_go_through_the_per_credential_throttle(client, application, make_api_key):
    key = make_api_key(application, permissions=["decision:sync"])
    codes = [client.simulate_get(url(application, "/policies"), headers=bearer(key)).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]


@pytest.fixture
def feed(ctx):
    ctx.tailer.start()
    yield ChangeFeed(ctx.events, ctx.tailer, heartbeat=HEARTBEAT)
    ctx.tailer.stop()


def _open(ctx, feed, application, key):
    principal = ctx.authenticator.internal(key, application["_id"])
    guard = ctx.internal.stream_access.open(key, principal, application["_id"])
    return feed.frames(application["_id"], None, guard)


def _until_revoked(stream, seconds=3.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        chunk = next(stream)
        if chunk.startswith(b"event: revoked"):
            with pytest.raises(StopIteration):
                next(stream)
            return json.loads(chunk.split(b"data: ", 1)[1])
    raise AssertionError("the stream kept going")


def test_a_stream_ends_when_its_key_is_revoked(ctx, feed, application, make_api_key):
    key = make_api_key(application, permissions=["decision:sync"])
    stream = _open(ctx, feed, application, key)
    assert next(stream).startswith(b"event: hello")
    ctx.api_keys.revoke(application["_id"], ctx.api_keys.authenticate(key)["_id"])
    started = time.monotonic()
    assert "seq" in _until_revoked(stream)
    assert time.monotonic() - started < 3 * HEARTBEAT + 1


def test_a_stream_ends_when_its_application_is_deleted(ctx, feed, application, make_api_key):
    key = make_api_key(application, permissions=["decision:sync"])
    stream = _open(ctx, feed, application, key)
    next(stream)
    ctx.applications.delete(application["_id"])
    _until_revoked(stream)


def test_streams_per_credential_are_capped(client, ctx, feed, application, make_api_key):
    key = make_api_key(application, permissions=["decision:sync"])
    first, second = _open(ctx, feed, application, key), _open(ctx, feed, application, key)
    next(first), next(second)
    with pytest.raises(TooManyStreams):
        _open(ctx, feed, application, key)
    r = client.simulate_get(url(application, "/changes"), headers=bearer(key))
    assert r.status_code == 429 and r.json["error"]["code"] == "STREAM_LIMIT_EXCEEDED"
    first.close()  # the client went away: its slot is given back
    third = _open(ctx, feed, application, key)
    assert next(third).startswith(b"event: hello")
    other = make_api_key(application, permissions=["decision:sync"])
    next(_open(ctx, feed, application, other))  # another key has its own cap


@pytest.mark.parametrize("guarded", [False, True])
def test_an_idle_stream_waits_instead_of_spinning(ctx, feed, application, make_api_key, monkeypatch, guarded):
    waits = []
    real = ctx.tailer.wait_after
    monkeypatch.setattr(ctx.tailer, "wait_after",
                        lambda last, timeout, *rest, **options: waits.append(timeout)
                        or real(last, timeout, *rest, **options))
    if guarded:
        stream = _open(ctx, feed, application, make_api_key(application, permissions=["decision:sync"]))
    else:
        stream = feed.frames(application["_id"], None)
    assert next(stream).startswith(b"event: hello")
    for _ in range(3):
        assert next(stream).startswith(b"event: heartbeat")
    assert len(waits) <= 12, waits  # about one wait per heartbeat, not a busy loop
    stream.close()
