"""The change stream over real HTTP: the launcher's gunicorn (gevent) control plane, read
with requests(stream=True) as a decision service reads it."""
from __future__ import annotations

import json
import uuid

import pytest
import requests

from tests.e2e.conftest import start_stack, wait_until
from tests.e2e.processes import sign_up

PASSWORD = "Correct-Horse-42"


class Frames:
    """Reads server-sent events from a streaming response as they arrive."""

    def __init__(self, response):
        self.response = response
        self._chunks = response.iter_content(chunk_size=None)
        self._buffer = b""

    def next(self) -> dict:
        while b"\n\n" not in self._buffer:
            self._buffer += next(self._chunks)
        raw, self._buffer = self._buffer.split(b"\n\n", 1)
        fields = dict(line.split(": ", 1) for line in raw.decode().split("\n"))
        out = {"event": fields["event"], "data": json.loads(fields["data"])}
        if "id" in fields:
            out["id"] = int(fields["id"])
        return out

    def until(self, predicate, limit=50) -> dict:
        for _ in range(limit):
            item = self.next()
            if predicate(item):
                return item
        raise AssertionError("frame not seen")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """One stack for the module (each test makes its own application in it)."""
    # One control-plane worker (memory:// forces it; a MongoDB store would start two), so
    # /metrics, which is per worker process, counts every stream.
    started = start_stack(tmp_path_factory.mktemp("stream"), IAMGATE_STREAM_HEARTBEAT="1", IAMGATE_WORKERS="1")
    yield started
    started.stop()


@pytest.fixture
def tenant(stack):
    """An application with an API key, a role and a registered end user, made over HTTP."""
    base = stack.control_url
    dashboard = sign_up(base, "Owner")
    app = dashboard.post(f"{base}/api/dashboard/applications", json={"name": "Stream App"}).json()["data"]
    key = dashboard.post(f"{base}/api/dashboard/applications/{app['id']}/api-keys",
                         json={"name": "admin"}).json()["data"]["key"]
    v1 = f"{base}/api/v1/applications/{app['id']}"
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {key}"
    user = requests.post(f"{v1}/users/register", json={
        "email": f"user-{uuid.uuid4().hex[:8]}@example.com", "password": PASSWORD, "name": "User"})
    assert user.status_code == 201, user.text
    role = api.post(f"{v1}/roles", json={"name": "editor", "display_name": "Editor", "permissions": ["posts:read"]})
    assert role.status_code == 201, role.text
    return {"app_id": app["id"], "v1": v1, "api": api, "user_id": user.json()["data"]["id"],
            "role_id": role.json()["data"]["id"]}


def open_stream(stack, path, **params):
    response = requests.get(stack.control_url + path, params=params, stream=True, timeout=(10, 10),
                            headers={"Authorization": f"Bearer {stack.internal_token}"})
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache"
    return Frames(response)


def head_of(stack, tenant) -> int:
    return requests.get(f"{stack.control_url}/internal/v1/applications/{tenant['app_id']}/policies",
                        headers={"Authorization": f"Bearer {stack.internal_token}"}).json()["seq"]


def test_hello_live_change_heartbeat_and_replay(stack, tenant):
    path = f"/internal/v1/applications/{tenant['app_id']}/changes"
    before = head_of(stack, tenant)
    frames = open_stream(stack, path)
    try:
        hello = frames.next()
        assert hello == {"event": "hello", "data": {"seq": before, "epoch": hello["data"]["epoch"]}}
        assert isinstance(hello["data"]["epoch"], str) and hello["data"]["epoch"]
        assigned = tenant["api"].post(f"{tenant['v1']}/users/{tenant['user_id']}/roles",
                                      json={"role_id": tenant["role_id"]})
        assert assigned.status_code == 201
        revision = int(assigned.headers["X-Iamgate-Revision"])
        change = frames.until(lambda f: f["event"] == "change" and f["data"]["type"] == "role.assigned")
        assert change == {"event": "change", "id": revision, "data": {
            "seq": revision, "app_id": tenant["app_id"], "type": "role.assigned", "user_ids": [tenant["user_id"]]}}
        heartbeat = frames.next()
        assert heartbeat["event"] == "heartbeat" and heartbeat["data"]["seq"] >= revision
    finally:
        frames.response.close()

    replay = open_stream(stack, path, since=before)
    try:
        again = replay.next()
        assert again["event"] == "hello" and again["data"]["epoch"] == hello["data"]["epoch"]  # the same log
        replayed = replay.until(lambda f: f["event"] == "change")  # the only event after `before`
        assert (replayed["id"], replayed["data"]["type"]) == (revision, "role.assigned")
    finally:
        replay.response.close()


def test_reset_when_since_cannot_be_replayed(stack, tenant):
    head = head_of(stack, tenant)
    frames = open_stream(stack, f"/internal/v1/applications/{tenant['app_id']}/changes", since=head + 1000)
    try:
        hello = frames.next()
        assert (hello["event"], hello["data"]["seq"]) == ("hello", head)
        assert frames.next() == {"event": "reset", "data": {"seq": head}}
        removed = tenant["api"].delete(f"{tenant['v1']}/users/{tenant['user_id']}/roles/{tenant['role_id']}")
        assert removed.status_code == 404  # nothing assigned: no event; the stream just goes on
        assert frames.next()["event"] == "heartbeat"
    finally:
        frames.response.close()


def test_the_all_applications_stream(stack, tenant):
    frames = open_stream(stack, "/internal/v1/changes")
    try:
        assert frames.next()["event"] == "hello"
        # A new role and its permission change no answer yet (nobody holds it): no change
        # frame, but a heartbeat soon says the stream covered them.
        created = tenant["api"].post(f"{tenant['v1']}/roles", json={
            "name": "viewer", "display_name": "Viewer", "permissions": ["posts:read"]})
        revision = int(created.headers["X-Iamgate-Revision"])
        covered = frames.until(lambda f: f["event"] != "heartbeat" or f["data"]["seq"] >= revision)
        assert covered["event"] == "heartbeat", covered
        assigned = tenant["api"].post(f"{tenant['v1']}/users/{tenant['user_id']}/roles",
                                      json={"role_id": created.json()["data"]["id"]})
        change = frames.until(lambda f: f["event"] == "change" and f["data"]["app_id"] == tenant["app_id"])
        assert change["id"] == int(assigned.headers["X-Iamgate-Revision"])
        assert (change["data"]["type"], change["data"]["user_ids"]) == ("role.assigned", [tenant["user_id"]])
    finally:
        frames.response.close()
    key = tenant["api"].headers["Authorization"]
    refused = requests.get(stack.control_url + "/internal/v1/changes", headers={"Authorization": key}, timeout=5)
    assert refused.status_code == 401


def test_many_streams_share_the_process_and_a_closed_one_is_released(stack, tenant):
    """Twenty concurrent clients each get their frames; the server keeps answering."""
    path = f"/internal/v1/applications/{tenant['app_id']}/changes"
    # The stack's own decision service follows a stream too, and a stream an earlier test
    # closed counts until its next heartbeat: the baseline can only fall while this runs.
    baseline = open_streams(stack)
    streams = [open_stream(stack, path) for _ in range(20)]
    try:
        for frames in streams:
            assert frames.next()["event"] == "hello"
        assert open_streams(stack) >= 20
        assigned = tenant["api"].post(f"{tenant['v1']}/users/{tenant['user_id']}/roles",
                                      json={"role_id": tenant["role_id"], "scope": "org:1"})
        revision = int(assigned.headers["X-Iamgate-Revision"])
        for frames in streams:
            assert frames.until(lambda f: f["event"] == "change")["id"] == revision
    finally:
        for frames in streams:
            frames.response.close()
    assert requests.get(stack.control_url + "/healthz", timeout=5).json() == {"status": "ok"}
    # The server notices each departed client at its next frame (a heartbeat at the latest).
    assert wait_until(lambda: open_streams(stack) <= baseline, timeout=10)


def open_streams(stack) -> float:
    metrics = requests.get(stack.control_url + "/metrics", timeout=5).text
    line = next(line for line in metrics.splitlines() if line.startswith("iamgate_change_streams_open "))
    return float(line.split()[1])
