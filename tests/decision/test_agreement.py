"""The decision service and the control plane give the same answers.

The real control plane runs in this process (its tailer on, its internal API served over
HTTP on a free port); a decision service follows it. Random users, roles (with wildcards),
scoped and expiring assignments, ABAC policies and statuses are created through the
control plane's services, then both answer the same GET, POST and bulk checks -- again
after random revocations, role changes and suspensions have propagated, and after
assignments expire. Bad requests get the same errors from both.
"""
from __future__ import annotations

import itertools
import random
import threading
from datetime import timedelta
from wsgiref.simple_server import make_server

import falcon.testing
import pytest

from controlplane.app import create_app as create_control_plane
from decision.app import create_app as create_decision_service
from shared.ids import new_id
from tests.conftest import bearer, make_config
from tests.decision.conftest import FakeMonotonic, wait_for
from tests.decision.fakecp import _Quiet, _Server

INTERNAL_TOKEN = "agreement-internal-token"
RESOURCES = ("posts", "comments", "docs", "billing")
ACTIONS = ("read", "write", "delete")
SCOPES = (None, "team-a", "team-b")


@pytest.fixture
def config_overrides():
    return {"internal_token": INTERNAL_TOKEN, "stream_heartbeat": 1}


@pytest.fixture
def app(config, clock):
    """The control plane with its change-log tailer running (the stream needs it)."""
    control_plane = create_control_plane(config, clock=clock, start_background=True)
    yield control_plane
    control_plane.services.webhooks.worker.stop()  # start_background on memory:// started delivery too
    control_plane.services.tailer.stop()


@pytest.fixture
def sidecar(app, config, clock):
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    decision = create_decision_service(
        make_config(internal_token=INTERNAL_TOKEN, control_plane_url=f"http://127.0.0.1:{server.server_port}",
                    public_url=config.public_url),
        clock=clock, monotonic=FakeMonotonic(), backoff_max=0.1)
    assert wait_for(decision.service.follower.trusted, timeout=5)
    yield decision
    decision.service.follower.stop()
    server.shutdown()
    server.server_close()


class Both:
    """Ask the control plane and the decision service the same question."""

    def __init__(self, control_plane_client, sidecar, app_id, key):
        self.control_plane = control_plane_client
        self.sidecar = falcon.testing.TestClient(sidecar)
        self.app_id, self.headers = app_id, bearer(key)
        self.compared = 0

    def ask(self, method, path, **kwargs):
        url = f"/api/v1/applications/{self.app_id}/authz/{path}"
        kwargs["headers"] = {**self.headers, **kwargs.get("headers", {})}
        ours = self.sidecar.simulate_request(method, url, **kwargs)
        theirs = self.control_plane.simulate_request(method, url, **kwargs)
        assert ours.status_code == theirs.status_code, (method, path, kwargs, ours.text, theirs.text)
        self.compared += 1
        return ours.json, theirs.json

    def same_answer(self, method, path, **kwargs):
        ours, theirs = self.ask(method, path, **kwargs)
        ours.pop("cached", None)
        theirs.pop("cached", None)
        assert ours == theirs, (method, path, kwargs)

    def same_error(self, method, path, **kwargs):
        ours, theirs = self.ask(method, path, **kwargs)
        for body in (ours, theirs):
            del body["error"]["request_id"], body["error"]["timestamp"]
        assert ours == theirs, (method, path, kwargs)


def _patterns(rng, count):
    patterns = set()
    while len(patterns) < count:
        roll = rng.random()
        resource = "*" if roll < 0.1 else rng.choice(RESOURCES)
        action = "*" if 0.1 <= roll < 0.25 else rng.choice(ACTIONS)
        patterns.add(f"{resource}:{action}")
    return sorted(patterns)


def _checked_permissions(rng):
    return [f"{rng.choice(RESOURCES + ('audit',))}:{rng.choice(ACTIONS + ('*',))}" for _ in range(rng.randint(1, 12))]


def _policy(ctx, app_id, rng):
    condition = rng.choice([
        {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"attr": "user.id"}},
        {"op": "in", "left": {"attr": "user.attributes.team"}, "right": {"value": ["a", "b"]}},
        {"op": "ip_in_cidr", "left": {"attr": "context.ip"}, "right": {"value": "10.0.0.0/8"}},
        None,
    ])
    ctx.store["abac_policies"].insert_one({
        "_id": new_id(), "app_id": app_id, "name": f"policy-{rng.random()}", "effect": rng.choice(["allow", "deny"]),
        "permissions": _patterns(rng, rng.randint(1, 2)), "condition": condition, "is_active": rng.random() < 0.9,
        "created_at": ctx.clock(),
    })


def _suspend(ctx, app_id, user):
    ctx.users.admin.suspend(app_id, user["_id"])


def _delete(ctx, app_id, user):
    ctx.store["users"].update_one({"_id": user["_id"]}, {"$set": {"status": "deleted"}})
    ctx.events.emit(app_id, "user.deleted", {"user_id": user["_id"]}, subject={"user_id": user["_id"]},
                    user_ids=[user["_id"]])


def _compare_everything(both, rng, users):
    for user in users:
        for scope in SCOPES:
            params = {"user_id": user["_id"]} | ({"scope": scope} if scope else {})
            permissions = _checked_permissions(rng)
            for permission in permissions[:4]:
                both.same_answer("GET", "check", params={**params, "permission": permission})
            body = {**params, "resource": {"owner": rng.choice([user["_id"], "someone"])},
                    "context": {"ip": rng.choice(["10.1.2.3", "192.168.0.1"])}}
            for permission in permissions[:3]:
                both.same_answer("POST", "check", json={**body, "permission": permission})
            both.same_answer("POST", "check-bulk", json={**body, "permissions": permissions})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_grants_get_the_same_answers(seed, ctx, client, clock, application, make_api_key, stored_user,
                                            make_role, assign_role, sidecar):
    rng = random.Random(seed)
    app_id = application["_id"]
    both = Both(client, sidecar, app_id, make_api_key(application))
    roles = [make_role(application, permissions=_patterns(rng, rng.randint(1, 4))) for _ in range(6)]
    users = [stored_user(application, attributes={"team": rng.choice(["a", "b", "c"])}) for _ in range(10)]
    assignments = []
    for user, role in itertools.product(users, roles):
        if rng.random() < 0.35:
            scope = rng.choice(SCOPES)
            expires = clock() + timedelta(seconds=rng.choice([30, 300])) if rng.random() < 0.3 else None
            assign_role(application, user, role, scope=scope, expires_at=expires)
            assignments.append((user, role, scope))
    for _ in range(3):
        _policy(ctx, app_id, rng)
    ctx.events.emit(app_id, "policy.created", {})
    _suspend(ctx, app_id, users[0])
    _delete(ctx, app_id, users[1])

    _compare_everything(both, rng, users)

    # Changes reach the decision service through the stream; then both agree again.
    removable = [item for item in assignments if item[0] is not users[1]]  # not of the deleted user
    for user, role, scope in rng.sample(removable, k=min(4, len(removable))):
        ctx.roles.unassign(app_id, user["_id"], role["_id"], scope)
    for role in rng.sample(roles, k=2):
        ctx.roles.update(app_id, role["_id"], {"permissions": _patterns(rng, rng.randint(1, 4))})
    for user in rng.sample(users[2:], k=2):
        _suspend(ctx, app_id, user)
    head = ctx.events.head()
    assert wait_for(lambda: sidecar.service.cache.applied >= head, timeout=5)
    _compare_everything(both, rng, users)

    clock.advance(31)  # some assignments have expired
    _compare_everything(both, rng, users)
    assert both.compared > 300


def test_a_deny_of_a_name_a_wildcard_covers_denies_the_wildcard_in_both(ctx, client, application, make_api_key,
                                                                        stored_user, make_role, assign_role,
                                                                        sidecar):
    """Checking posts:* asks about every action on posts, *:read about reading everything:
    a deny of posts:delete, or of posts:read, makes them no in both services."""
    both = Both(client, sidecar, application["_id"], make_api_key(application))
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["*:*"]))
    for name, denied in (("no deletes", "posts:delete"), ("no reads", "posts:read")):
        ctx.abac.create_policy(application["_id"], {"name": name, "description": None, "effect": "deny",
                                                    "permissions": [denied], "condition": None, "is_active": True})
    head = ctx.events.head()
    assert wait_for(lambda: sidecar.service.cache.applied >= head, timeout=5)
    checked = ["posts:*", "*:read", "*:*", "*:delete", "posts:write", "comments:*"]
    ours, theirs = both.ask("POST", "check-bulk", json={"user_id": user["_id"], "permissions": checked})
    assert ours["results"] == theirs["results"] == {
        "posts:*": False, "*:read": False, "*:*": False, "*:delete": False, "posts:write": True, "comments:*": True}
    for permission in checked:
        both.same_answer("POST", "check", json={"user_id": user["_id"], "permission": permission})


BAD_GETS = [
    {}, {"user_id": "u"}, {"permission": "a:b"}, {"user_id": "u", "permission": "nope"},
    {"user_id": "u", "permission": "a:b:c"}, {"user_id": "u", "permission": "a: b"},
    {"user_id": "u" * 300, "permission": "a:b"}, {"user_id": "u", "permission": "a:b", "min_revision": "x"},
    {"user_id": "u", "permission": "a:b", "min_revision": "-3"}, {"user_id": "u", "permission": "a:b", "scope": "\x07"},
    {"user_id": "u", "permission": "x" * 300 + ":b"},
]

BAD_BODIES = [
    ("check", {}), ("check", {"user_id": 3, "permission": "a:b"}), ("check", {"user_id": "u", "permission": None}),
    ("check", {"user_id": "u", "permission": "a:b", "resource": []}),
    ("check", {"user_id": "u", "permission": "a:b", "context": "x"}),
    ("check", {"user_id": "u", "permission": "a:b", "min_revision": "7"}),
    ("check", {"user_id": "u", "permission": "a:b", "min_revision": True}),
    ("check", {"user_id": "u", "permission": "a:b", "scope": ""}),
    ("check", {"user_id": "u", "permission": "a:b", "resource": {"x": "y" * 70000}}),
    ("check-bulk", {"user_id": "u"}), ("check-bulk", {"user_id": "u", "permissions": []}),
    ("check-bulk", {"user_id": "u", "permissions": [f"p{i}:r" for i in range(51)]}),
    ("check-bulk", {"user_id": "u", "permissions": ["a:b", "bad"]}),
    ("check-bulk", {"user_id": "u", "permissions": "a:b"}),
    ("check-bulk", {"permissions": ["bad"]}),
]


def test_bad_requests_get_the_same_errors(client, application, make_api_key, sidecar):
    both = Both(client, sidecar, application["_id"], make_api_key(application))
    for params in BAD_GETS:
        both.same_error("GET", "check", params=params)
    for path, body in BAD_BODIES:
        both.same_error("POST", path, json=body)
    both.same_error("POST", "check", body="{nope", headers={"Content-Type": "application/json"})
    both.same_error("POST", "check-bulk", body="[]", headers={"Content-Type": "application/json"})
    both.same_error("POST", "check", body="x=1", headers={"Content-Type": "application/x-www-form-urlencoded"})


def test_credentials_get_the_same_errors(client, application, make_api_key, make_application, stored_user, make_role,
                                         assign_role, token_for, sidecar):
    narrow = make_api_key(application, permissions=["roles:read"])
    foreign = make_api_key(make_application())
    checker, plain, suspended = (stored_user(application), stored_user(application),
                                 stored_user(application, status="suspended"))
    assign_role(application, checker, make_role(application, permissions=["authz:check"]))
    assign_role(application, suspended, make_role(application, permissions=["authz:check"]))
    params = {"user_id": plain["_id"], "permission": "posts:read"}
    url = f"/api/v1/applications/{application['_id']}/authz/check"
    our_client = falcon.testing.TestClient(sidecar)
    head = sidecar.service.cache  # API keys made above propagate through the stream
    assert wait_for(lambda: head.applied >= client.app.services.events.head(), timeout=5)
    for credential, status in [(None, 401), ("sk_test_unknown", 401), (foreign, 401), (narrow, 403),
                               (token_for(application, plain), 403), (token_for(application, suspended), 401),
                               (token_for(application, checker), 200), ("garbage", 401)]:
        headers = bearer(credential) if credential else {}
        ours = our_client.simulate_get(url, params=params, headers=headers)
        theirs = client.simulate_get(url, params=params, headers=headers)
        assert ours.status_code == theirs.status_code == status, (credential, ours.text, theirs.text)
        if status != 200:
            assert ours.json["error"]["code"] == theirs.json["error"]["code"]
            assert ours.json["error"]["details"] == theirs.json["error"]["details"]
    for app_id in (new_id(), "not-an-id"):
        ours = our_client.simulate_get(f"/api/v1/applications/{app_id}/authz/check", params=params)
        theirs = client.simulate_get(f"/api/v1/applications/{app_id}/authz/check", params=params)
        assert ours.status_code == theirs.status_code == 404
        assert ours.json["error"]["code"] == theirs.json["error"]["code"] == "NOT_FOUND"


def test_a_grants_read_racing_a_revocation_on_the_real_control_plane_is_not_kept(
        ctx, application, make_api_key, stored_user, make_role, assign_role, sidecar, monkeypatch):
    user = stored_user(application)
    role = make_role(application, permissions=["posts:read"])
    assign_role(application, user, role)
    key = make_api_key(application)
    our_client = falcon.testing.TestClient(sidecar)
    url = f"/api/v1/applications/{application['_id']}/authz/check"
    params = {"user_id": user["_id"], "permission": "posts:read"}
    assert wait_for(lambda: sidecar.service.cache.applied >= ctx.events.head(), timeout=5)
    assert our_client.simulate_get(url, params={**params, "user_id": new_id()}, headers=bearer(key)).status_code == 200

    read, release = threading.Event(), threading.Event()
    real_grants = ctx.roles.grants

    def held_grants(app_id, user_id):
        grants = real_grants(app_id, user_id)  # seq read, then the data: still allowing
        if user_id == user["_id"]:
            read.set()
            assert release.wait(5)
        return grants

    monkeypatch.setattr(ctx.roles, "grants", held_grants)
    answers = []
    racing = threading.Thread(target=lambda: answers.append(
        our_client.simulate_get(url, params=params, headers=bearer(key)).json))
    racing.start()
    assert read.wait(5)
    ctx.roles.unassign(application["_id"], user["_id"], role["_id"], None)
    revoked = ctx.events.head()
    assert wait_for(lambda: sidecar.service.cache.applied >= revoked, timeout=5)
    release.set()
    racing.join(5)

    assert answers == [{"allowed": True, "permission": "posts:read", "cached": False}]  # its one answer
    assert our_client.simulate_get(url, params=params, headers=bearer(key)).json == {
        "allowed": False, "permission": "posts:read", "cached": False}
