"""The WSGI-level checks (decision/hotpath.py) answer exactly as the Falcon routes do.

``HotCheck`` answers the plain form of ``GET .../authz/check`` and of ``POST .../authz/check``
and ``.../authz/check-bulk`` before Falcon sees it. Every
request here is sent twice on the same sidecar state: once as it comes (hot path) and once
with ``app.hot_check = None`` (Falcon only, the reference), and the status, body, headers,
request id, metrics and cache counters must agree. A spy around ``app.hot_check`` proves
which requests the hot path actually answered.

Requests are sent with a raw ``query_string`` (``simulate_get(params=...)`` percent-encodes
the ':' of a permission, which sends the request to Falcon).
"""
from __future__ import annotations

import json
import logging
import re
import uuid

import falcon.testing
import pytest

from shared.checks import CHECK_BULK_ROUTE as BULK_ROUTE
from shared.checks import CHECK_ROUTE as ROUTE
from shared.checks import FAST_BODY_BRACKETS, FAST_BODY_BYTES, body_values
from tests.conftest import assert_error, make_config
from tests.decision.conftest import Tenant, bulk_path, check_path, wait_for
from tests.decision.fakecp import policy
from tests.hot_spy import Spy

READ, WRITE = "documents:read", "documents:write"
GENERATED_ID = re.compile(r"^[0-9a-f]{32}$")  # shared.request_ids.new_request_id: uuid4 hex
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")
WELL_FORMED_ID = "client-req.0001_abc"
STALENESS = make_config().decision_max_staleness


class World:
    """A sidecar (internal token, or API-key single-application mode) with a spied hot
    path, a tenant, and a user holding documents:read whose grants are cached."""

    def __init__(self, make_sidecar, fake_cp, monotonic, *, single=False):
        self.cp, self.monotonic = fake_cp, monotonic
        self.cp_down = False
        if single:
            app_id = fake_cp.add_app()
            key = fake_cp.add_key(app_id)
            self.app = make_sidecar(internal_token="", decision_api_key=key)
            self.tenant = Tenant(fake_cp, falcon.testing.TestClient(self.app), app_id, key)
        else:
            self.app = make_sidecar()
            self.tenant = Tenant(fake_cp, falcon.testing.TestClient(self.app))
        self.spy = Spy(self.app)
        self.reader = self.tenant.user_with(READ)
        self.settle()
        # Through Falcon (params= encodes ':'): validates both names and caches the grants.
        assert self.tenant.allowed(self.reader, READ) is True
        assert self.tenant.allowed(self.reader, WRITE) is False
        assert self.spy.answers == [False, False]  # ':' percent-encoded: not the plain form
        self.spy.answers.clear()

    @property
    def app_id(self) -> str:
        return self.tenant.app_id

    def settle(self) -> None:
        """Every change event emitted so far is applied (nothing drops a cache entry later)."""
        assert wait_for(lambda: self.app.service.cache.applied >= self.cp.head)

    def request(self, user_id, permission, *, credential=None, app_id=None, permission_first=False,
                headers=None, authorization=True, extra=()) -> dict:
        pairs = [f"user_id={user_id}", f"permission={permission}"]
        if permission_first:
            pairs.reverse()
        pairs += extra
        sent = dict(headers or {})
        if authorization:
            sent["Authorization"] = f"Bearer {credential or self.tenant.key}"
        return {"path": check_path(app_id or self.app_id), "query": "&".join(pairs), "headers": sent}


def send(app, path, query="", headers=None, *, method="GET", hot=True, body=None):
    """One request through the WSGI app; ``hot=False`` disables the hot path for it."""
    saved = app.hot_check
    if not hot:
        app.hot_check = None
    try:
        return falcon.testing.TestClient(app).simulate_request(method, path, query_string=query,
                                                               headers=headers or {}, body=body)
    finally:
        app.hot_check = saved


def counters(app) -> dict:
    """The request path's metrics, as scraped (latency as counts: buckets depend on speed)."""
    metrics = app.service.metrics
    values = {}
    for collector in (metrics.requests, metrics.latency, metrics.hits, metrics.misses, metrics.stale_fills,
                      metrics.unavailable, metrics.control_plane):
        for family in collector.collect():
            for sample in family.samples:
                if sample.name.endswith(("_bucket", "_sum")):
                    continue
                values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def delta(before: dict, after: dict) -> dict:
    return {key: after.get(key, 0) - before.get(key, 0) for key in set(before) | set(after)
            if after.get(key, 0) != before.get(key, 0)}


def latency_count(app, method="GET", route=ROUTE) -> float:
    for family in app.service.metrics.latency.collect():
        for sample in family.samples:
            if sample.name.endswith("_count") and sample.labels == {"method": method, "route": route}:
                return sample.value
    return 0


def headers_of(result) -> dict:
    return {name.lower(): value for name, value in result.headers.items()}


def assert_same(hot, ref, sent_id: str | None) -> None:
    """``hot`` and ``ref`` (Falcon) are the same answer: status, headers, body, request id."""
    assert hot.status == ref.status, (hot.text, ref.text)
    hot_headers, ref_headers = headers_of(hot), headers_of(ref)
    assert set(hot_headers) == set(ref_headers)
    assert {"content-type", "content-length", "x-request-id"} <= set(hot_headers)
    for name in hot_headers:
        if name != "x-request-id":
            assert hot_headers[name] == ref_headers[name], name
    for result, result_headers in ((hot, hot_headers), (ref, ref_headers)):
        assert int(result_headers["content-length"]) == len(result.content)

    hot_id, ref_id = hot_headers["x-request-id"], ref_headers["x-request-id"]
    if sent_id is not None and re.fullmatch(r"[A-Za-z0-9._-]{8,128}", sent_id):
        assert hot_id == ref_id == sent_id
    else:
        assert GENERATED_ID.match(hot_id) and GENERATED_ID.match(ref_id), (hot_id, ref_id)
        assert hot_id != ref_id  # two requests, two ids

    if hot.status_code == 200:
        assert hot.content == ref.content
        return
    bodies = []
    for result, request_id in ((hot, hot_id), (ref, ref_id)):
        assert_error(result, result.status_code)  # the envelope, its id the header's
        body = result.json
        assert TIMESTAMP.match(body["error"].pop("timestamp"))
        if request_id != sent_id:
            body["error"].pop("request_id")
        bodies.append(body)
    assert bodies[0] == bodies[1]


@pytest.fixture(autouse=True)
def control_plane_stops_first(fake_cp, make_sidecar):
    """Speed only: with the control plane gone first, stopping a follower does not wait
    for its open stream to close (about 0.2 s a test)."""
    yield
    fake_cp.stop()


# --- which requests take the hot path --------------------------------------------------------


@pytest.fixture
def world(make_sidecar, fake_cp, monotonic):
    return World(make_sidecar, fake_cp, monotonic)


def test_the_plain_form_takes_the_hot_path_even_for_a_permission_never_validated(world):
    fresh = f"hot{uuid.uuid4().hex[:12]}:read"  # a name no test validated before
    sent = world.request(world.reader, fresh)
    first = send(world.app, sent["path"], sent["query"], sent["headers"])
    assert world.spy.answers == [True]  # the hot path validated the name itself
    assert first.json == {"allowed": False, "permission": fresh, "cached": True}
    second = send(world.app, sent["path"], sent["query"], sent["headers"])
    assert world.spy.answers == [True, True]
    assert second.content == first.content
    other = f"hot{uuid.uuid4().hex[:12]}:read"
    sent = world.request(world.reader, other)
    ref = send(world.app, sent["path"], sent["query"], sent["headers"], hot=False)  # Falcon validates it first
    assert_same(send(world.app, sent["path"], sent["query"], sent["headers"]), ref, None)

    for permission, user_first in ((READ, True), (READ, False), (WRITE, True)):
        sent = world.request(world.reader, permission, permission_first=not user_first)
        result = send(world.app, sent["path"], sent["query"], sent["headers"])
        assert world.spy.answers[-1] is True
        assert result.json == {"allowed": permission == READ, "permission": permission, "cached": True}


NOT_PLAIN = {
    "scope": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission={READ}&scope=x"),
    "scope, permission first": lambda u, a: ("GET", check_path(a), f"permission={READ}&user_id={u}&scope=x"),
    "empty scope": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission={READ}&scope="),
    "min_revision": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission={READ}&min_revision=1"),
    "min_revision, permission first": lambda u, a: (
        "GET", check_path(a), f"permission={READ}&user_id={u}&min_revision=1"),
    "unknown parameter, permission first": lambda u, a: ("GET", check_path(a), f"permission={READ}&user_id={u}&x=y"),
    "percent-encoded permission": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission=documents%3Aread"),
    "percent-encoded user id": lambda u, a: ("GET", check_path(a), f"user_id={u[:8]}%2D{u[9:]}&permission={READ}"),
    "plus in the user id": lambda u, a: ("GET", check_path(a), f"user_id=a+b&permission={READ}"),
    "user id twice": lambda u, a: ("GET", check_path(a), f"user_id={u}&user_id={u}&permission={READ}"),
    "user id twice, permission first": lambda u, a: (
        "GET", check_path(a), f"permission={READ}&user_id={u}&user_id={u}"),
    "permission twice": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission={READ}&permission={READ}"),
    "trailing &": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission={READ}&"),
    "trailing &, permission first": lambda u, a: ("GET", check_path(a), f"permission={READ}&user_id={u}&"),
    "&& between": lambda u, a: ("GET", check_path(a), f"user_id={u}&&permission={READ}"),
    "leading &": lambda u, a: ("GET", check_path(a), f"&user_id={u}&permission={READ}"),
    "empty user id": lambda u, a: ("GET", check_path(a), f"user_id=&permission={READ}"),
    "empty permission": lambda u, a: ("GET", check_path(a), f"user_id={u}&permission="),
    "user id only": lambda u, a: ("GET", check_path(a), f"user_id={u}"),
    "no query": lambda u, a: ("GET", check_path(a), ""),
    "other names": lambda u, a: ("GET", check_path(a), f"user={u}&permission={READ}"),
    "leading space in the user id": lambda u, a: ("GET", check_path(a), f"user_id= {u}&permission={READ}"),
    "user id too long": lambda u, a: ("GET", check_path(a), f"user_id={'u' * 256}&permission={READ}"),
    "trailing slash": lambda u, a: ("GET", check_path(a) + "/", f"user_id={u}&permission={READ}"),
    "extra segment in the app id": lambda u, a: (
        "GET", f"/api/v1/applications/{a}/x/authz/check", f"user_id={u}&permission={READ}"),
    "extra segment at the end": lambda u, a: ("GET", check_path(a) + "/x", f"user_id={u}&permission={READ}"),
    "no app id": lambda u, a: ("GET", "/api/v1/applications//authz/check", f"user_id={u}&permission={READ}"),
    "bulk route": lambda u, a: (
        "GET", f"/api/v1/applications/{a}/authz/check-bulk", f"user_id={u}&permission={READ}"),
    "non-ascii app id": lambda u, a: ("GET", check_path("caf\u00e9"), f"user_id={u}&permission={READ}"),
    "head": lambda u, a: ("HEAD", check_path(a), f"user_id={u}&permission={READ}"),
    "post": lambda u, a: ("POST", check_path(a), f"user_id={u}&permission={READ}"),
}


def test_anything_but_the_plain_form_goes_to_falcon(world):
    headers = {"Authorization": f"Bearer {world.tenant.key}"}
    for name, build in NOT_PLAIN.items():
        method, path, query = build(world.reader, world.app_id)
        asked = len(world.spy.answers)
        result = send(world.app, path, query, headers, method=method)
        assert world.spy.answers[asked:] == [False], name  # asked and declined
        ref = send(world.app, path, query, headers, method=method, hot=False)  # Falcon only
        assert result.status == ref.status, name
        if ref.status_code == 200:
            assert result.json == ref.json, name

    # A permission name the schema refuses goes to Falcon, every time, which reports it
    # (after the credentials: the hot path looked nothing up).
    for invalid in ("documents", "documents:read:x", "a b:read", "x" * 300 + ":read"):
        sent = world.request(world.reader, invalid)
        asked = len(world.spy.answers)
        result = send(world.app, **sent)
        assert result.status_code == 400, invalid
        assert send(world.app, **{**sent, "headers": {}}).status_code == 401, invalid
        assert world.spy.answers[asked:] == [False, False], invalid


# --- the same answer as Falcon's ------------------------------------------------------------


def _token_without_authz_check(w):
    caller = w.tenant.user_with(READ)
    return w.request(w.reader, READ, credential=w.cp.access_token(w.app_id, caller))


def _token_with_authz_check(w):
    caller = w.tenant.user_with("authz:check")
    return w.request(w.reader, READ, credential=w.cp.access_token(w.app_id, caller))


def _token_checking_itself(w):
    caller = w.tenant.user_with("authz:check", READ)
    return w.request(caller, READ, credential=w.cp.access_token(w.app_id, caller))


def _token_of_suspended_user(w):
    caller = w.tenant.user_with("authz:check", status="suspended")
    return w.request(w.reader, READ, credential=w.cp.access_token(w.app_id, caller))


def _expired_token(w):
    caller = w.tenant.user_with("authz:check")
    return w.request(w.reader, READ, credential=w.cp.access_token(w.app_id, caller, expires_in=-1))


def _weak_key(w):
    return w.request(w.reader, READ, credential=w.cp.add_key(w.app_id, permissions=["roles:read"]))


def _wide_key(w):
    return w.request(w.reader, READ, credential=w.cp.add_key(w.app_id, permissions=["authz:*"]))


def _foreign_key(w):
    return w.request(w.reader, READ, credential=w.cp.add_key(w.cp.add_app()))


def _revoked_key(w):
    key = w.cp.add_key(w.app_id)
    w.settle()
    assert send(w.app, **w.request(w.reader, READ, credential=key), hot=False).status_code == 200
    w.cp.revoke_key(w.app_id, key)
    return w.request(w.reader, READ, credential=key)


def _scoped_grant_permission_first(w):
    user = w.tenant.user_with(READ, scope="project-1")
    return w.request(user, READ, permission_first=True, extra=["scope=project-1"])


def _suspended_user(w):
    user = w.tenant.user_with(READ, status="suspended")
    return w.request(user, READ)


def _deleted_application(w):
    w.cp.delete_app(w.app_id)
    return w.request(w.reader, READ)


def _lost_control_plane(w):
    w.cp.stop()
    w.cp_down = True
    assert wait_for(lambda: not w.app.service.follower.connected)


def _staleness_exceeded(w):
    _lost_control_plane(w)
    w.monotonic.advance(STALENESS + 0.1)
    assert not w.app.service.follower.trusted()
    return w.request(w.reader, READ)


def _within_staleness_cached(w):
    _lost_control_plane(w)
    return w.request(w.reader, READ)


def _within_staleness_uncached(w):
    user = w.tenant.user_with(READ)
    w.settle()
    _lost_control_plane(w)
    return w.request(user, READ)


def _lookups_failing(w):
    user = w.tenant.user_with(READ)
    w.cp.lookup_status = 500
    return w.request(user, READ)


# name: (mode, request builder, expected status, expected error code, taken by the hot path)
VARIANTS = {
    "allowed": ("token", lambda w: w.request(w.reader, READ), 200, None, True),
    "denied": ("token", lambda w: w.request(w.reader, WRITE), 200, None, True),
    "permission first": ("token", lambda w: w.request(w.reader, READ, permission_first=True), 200, None, True),
    "permission first, denied": ("token", lambda w: w.request(w.reader, WRITE, permission_first=True), 200, None,
                                 True),
    "permission first, then scope": ("token", _scoped_grant_permission_first, 200, None, False),
    "permission first, then another parameter": (
        "token", lambda w: w.request(w.reader, READ, permission_first=True, extra=["x=y"]), 200, None, False),
    "permission first, then user id again": (
        "token", lambda w: w.request(w.reader, READ, permission_first=True, extra=[f"user_id={w.reader}"]), 200,
        None, False),
    "unknown user id": ("token", lambda w: w.request(str(uuid.uuid4()), READ), 200, None, True),
    "non-uuid user id": ("token", lambda w: w.request("not-a-uuid", READ), 200, None, True),
    "non-ascii user id": ("token", lambda w: w.request("j\u00fcrgen", READ), 200, None, True),
    "odd user id": ("token", lambda w: w.request("a=b:c,d\"e<", READ), 200, None, True),
    "suspended user": ("token", _suspended_user, 200, None, True),
    "well-formed request id": ("token", lambda w: w.request(w.reader, READ, headers={"X-Request-Id": WELL_FORMED_ID}),
                               200, None, True),
    "short request id": ("token", lambda w: w.request(w.reader, READ, headers={"X-Request-Id": "short"}), 200,
                         None, True),
    "malformed request id": ("token", lambda w: w.request(w.reader, READ, headers={"X-Request-Id": "bad id!/x"}),
                             200, None, True),
    "wrong api key": ("token", lambda w: w.request(w.reader, READ, credential="sk_test_" + "x" * 43), 401,
                      "UNAUTHORIZED", True),
    "wrong api key, well-formed request id": (
        "token", lambda w: w.request(w.reader, READ, credential="sk_live_nope",
                                     headers={"X-Request-Id": WELL_FORMED_ID}), 401, "UNAUTHORIZED", True),
    "wrong api key, malformed request id": (
        "token", lambda w: w.request(w.reader, READ, credential="sk_live_nope", headers={"X-Request-Id": "x y"}),
        401, "UNAUTHORIZED", True),
    "foreign api key": ("token", _foreign_key, 401, "UNAUTHORIZED", True),
    "revoked api key": ("token", _revoked_key, 401, "UNAUTHORIZED", True),
    "missing authorization": ("token", lambda w: w.request(w.reader, READ, authorization=False), 401,
                              "UNAUTHORIZED", True),
    "basic scheme": ("token", lambda w: w.request(w.reader, READ, authorization=False,
                                                  headers={"Authorization": "Basic abc"}), 401, "UNAUTHORIZED", True),
    "bearer without a token": ("token", lambda w: w.request(w.reader, READ, authorization=False,
                                                            headers={"Authorization": "Bearer "}), 401,
                               "UNAUTHORIZED", True),
    "bare token": ("token", lambda w: w.request(w.reader, READ, authorization=False,
                                                headers={"Authorization": w.tenant.key}), 401, "UNAUTHORIZED", True),
    "garbage jwt": ("token", lambda w: w.request(w.reader, READ, credential="not.a.jwt"), 401, "UNAUTHORIZED", True),
    "key without authz:check": ("token", _weak_key, 403, "FORBIDDEN", True),
    "key with authz:*": ("token", _wide_key, 200, None, True),
    "unknown application": ("token", lambda w: w.request(w.reader, READ, app_id=str(uuid.uuid4())), 404,
                            "NOT_FOUND", True),
    "non-uuid application": ("token", lambda w: w.request(w.reader, READ, app_id="not-an-app"), 404, "NOT_FOUND",
                             True),
    "non-ascii application": ("token", lambda w: w.request(w.reader, READ, app_id="caf\u00e9-\u00fc"), 404,
                              "NOT_FOUND", False),
    "deleted application": ("token", _deleted_application, 404, "NOT_FOUND", True),
    "api-key mode, its application": ("key", lambda w: w.request(w.reader, READ), 200, None, True),
    "api-key mode, another application": ("key", lambda w: w.request(w.reader, READ, app_id=w.cp.add_app()), 404,
                                          "NOT_FOUND", True),
    "user token with authz:check": ("token", _token_with_authz_check, 200, None, True),
    "user token checking itself": ("token", _token_checking_itself, 200, None, True),
    "user token without authz:check": ("token", _token_without_authz_check, 403, "FORBIDDEN", True),
    "token of a suspended user": ("token", _token_of_suspended_user, 401, "UNAUTHORIZED", True),
    "expired token": ("token", _expired_token, 401, "UNAUTHORIZED", True),
    "staleness exceeded": ("token", _staleness_exceeded, 503, "DECISION_UNAVAILABLE", True),
    "control plane down, cached": ("token", _within_staleness_cached, 200, None, True),
    "control plane down, not cached": ("token", _within_staleness_uncached, 503, "DECISION_UNAVAILABLE", True),
    "lookups failing": ("token", _lookups_failing, 503, "DECISION_UNAVAILABLE", True),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_hot_path_answers_as_falcon_does(make_sidecar, fake_cp, monotonic, name):
    mode, build, status, code, taken = VARIANTS[name]
    w = World(make_sidecar, fake_cp, monotonic, single=mode == "key")
    sent = build(w)
    if not w.cp_down:  # let the events of the set-up land first
        w.settle()
    sent_id = sent["headers"].get("X-Request-Id")

    warm = send(w.app, **sent, hot=False)  # settles whatever the first request fetches or learns
    assert warm.status_code == status, warm.text
    assert w.spy.answers == []

    before = counters(w.app)
    hot = send(w.app, **sent)
    assert w.spy.answers == [taken]
    between = counters(w.app)
    ref = send(w.app, **sent, hot=False)
    assert w.spy.answers == [taken]  # the reference call did not ask the hot path
    after = counters(w.app)

    assert hot.status_code == status, hot.text
    assert_same(hot, ref, sent_id)
    assert delta(before, between) == delta(between, after)
    assert delta(before, between)[("iamgate_decision_http_requests_total",
                                   (("method", "GET"), ("route", ROUTE), ("status", str(status))))] == 1
    if code is not None:
        error = assert_error(hot, status, code)
        if status == 403:
            assert error["details"] == {"required_permission": "authz:check"}
        if status == 404:
            assert error["details"] == {"application_id": sent["path"].split("/")[4]}
    if status == 503:
        assert headers_of(hot)["retry-after"] == headers_of(ref)["retry-after"] == "1"
    else:
        assert "retry-after" not in headers_of(hot)


def test_a_non_ascii_application_id_is_named_as_sent(world):
    app_id = "caf\u00e9"
    sent = world.request(world.reader, READ, app_id=app_id)
    for hot in (True, False):
        error = assert_error(send(world.app, **sent, hot=hot), 404, "NOT_FOUND")
        assert error["details"] == {"application_id": app_id}


# --- metrics -----------------------------------------------------------------------------------


def _labels(**labels) -> tuple:
    return tuple(sorted(labels.items()))


def test_hot_path_requests_are_counted_as_falcon_counts_them(world):
    app, metrics, n = world.app, world.app.service.metrics, 5
    ok = ("GET", ROUTE, "200")
    plain = world.request(world.reader, READ)
    start = counters(app)
    requests_before, latency_before = metrics.requests.value(ok), latency_count(app)
    for _ in range(n):
        assert send(app, **plain).json == {"allowed": True, "permission": READ, "cached": True}
    assert world.spy.answers == [True] * n
    assert metrics.requests.value(ok) == requests_before + n
    assert latency_count(app) == latency_before + n
    hot_delta = delta(start, counters(app))
    assert hot_delta == {  # and nothing else: no miss, no lookup, nothing "unmatched"
        ("iamgate_decision_http_requests_total", _labels(method="GET", route=ROUTE, status="200")): n,
        ("iamgate_decision_http_request_duration_seconds_count", _labels(method="GET", route=ROUTE)): n,
        ("iamgate_decision_cache_hits_total", _labels(kind="grants")): n,
        ("iamgate_decision_cache_hits_total", _labels(kind="api_keys")): n,
    }

    # The same n requests through Falcon add the same.
    middle = counters(app)
    for _ in range(n):
        assert send(app, **plain, hot=False).status_code == 200
    assert delta(middle, counters(app)) == hot_delta

    # Errors are counted under their status.
    weak = world.cp.add_key(world.app_id, permissions=["roles:read"])
    world.settle()
    errors = {"401": world.request(world.reader, READ, credential="sk_test_nope"),
              "403": world.request(world.reader, READ, credential=weak),
              "404": world.request(world.reader, READ, app_id=str(uuid.uuid4()))}
    before = {status: metrics.requests.value(("GET", ROUTE, status)) for status in errors}
    latency_before, answered = latency_count(app), len(world.spy.answers)
    for status, sent in errors.items():
        for _ in range(2):
            assert send(app, **sent).status == falcon.code_to_http_status(int(status))
    assert world.spy.answers[answered:] == [True] * 6
    assert {status: metrics.requests.value(("GET", ROUTE, status)) - before[status] for status in errors} == {
        "401": 2, "403": 2, "404": 2}
    assert latency_count(app) == latency_before + 6


def test_cache_misses_and_control_plane_lookups_are_counted_on_the_hot_path(world):
    app, metrics = world.app, world.app.service.metrics
    users = [world.tenant.user_with(READ) for _ in range(3)]
    world.settle()
    before = (metrics.misses.value(("grants",)), metrics.control_plane.value(("grants", "ok")))
    for user in users:
        assert send(app, **world.request(user, READ)).json == {"allowed": True, "permission": READ, "cached": False}
        assert send(app, **world.request(user, READ)).json == {"allowed": True, "permission": READ, "cached": True}
    assert world.spy.answers == [True] * 6
    assert (metrics.misses.value(("grants",)), metrics.control_plane.value(("grants", "ok"))) == (
        before[0] + 3, before[1] + 3)


# --- invalidation ------------------------------------------------------------------------------


def test_a_removed_role_stops_allowing_on_the_hot_path_once_the_event_arrives(world):
    cp, app_id = world.cp, world.app_id
    user = world.tenant.user_with()
    role = cp.add_role(app_id, [READ])
    cp.assign(app_id, user, role)
    world.settle()
    sent = world.request(user, READ)
    assert send(world.app, **sent).json == {"allowed": True, "permission": READ, "cached": False}
    assert send(world.app, **sent).json == {"allowed": True, "permission": READ, "cached": True}

    seq = cp.unassign(app_id, user, role)
    assert wait_for(lambda: world.app.service.cache.applied >= seq)
    assert send(world.app, **sent).json == {"allowed": False, "permission": READ, "cached": False}
    assert send(world.app, **sent).json == {"allowed": False, "permission": READ, "cached": True}
    assert world.spy.answers == [True] * 4
    assert world.app.service.metrics.invalidations.value(("grants",)) >= 1


# --- unexpected errors -------------------------------------------------------------------------


def test_an_unexpected_error_is_a_logged_500_as_on_falcon(world, monkeypatch, caplog):
    def boom(app_id, request_id=None):
        raise RuntimeError("lookup exploded")

    monkeypatch.setattr(world.app.service, "begin", boom)
    sent = world.request(world.reader, READ)
    results, records = [], []
    for hot in (True, False):
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            before = counters(world.app)
            result = send(world.app, **sent, hot=hot)
            results.append((result, delta(before, counters(world.app))))
        logged = [r for r in caplog.records if r.getMessage() == "unhandled error"]
        assert len(logged) == 1, logged
        records.append(logged[0])
    assert world.spy.answers == [True]

    (hot, hot_delta), (ref, ref_delta) = results
    error = assert_error(hot, 500, "INTERNAL_ERROR")
    assert error["message"] == "An unexpected error occurred." and error["details"] == {}
    assert_same(hot, ref, None)
    assert hot_delta == ref_delta
    assert hot_delta[("iamgate_decision_http_requests_total",
                      (("method", "GET"), ("route", ROUTE), ("status", "500")))] == 1

    for record, result in zip(records, (hot, ref), strict=True):
        assert record.getMessage() == "unhandled error"
        assert record.exc_info and record.exc_info[0] is RuntimeError
        assert record.request_id == result.headers["X-Request-Id"]
    assert records[0].name == records[1].name


# --- POST checks and check-bulk ----------------------------------------------------------------

ATTRIBUTES = {"resource": {"owner_id": "someone", "tags": ["a", "b"]}, "context": {"hour": 11, "ip": "10.0.0.1"}}
NIGHT = {"resource": {"owner_id": "someone"}, "context": {"hour": 23}}


class PostWorld(World):
    """``World`` plus two active policies on documents:read: a deny at night and an allow
    for the owner (``resource.owner_id`` = the user)."""

    def __init__(self, make_sidecar, fake_cp, monotonic, *, single=False):
        super().__init__(make_sidecar, fake_cp, monotonic, single=single)
        self.cp.set_policies(self.app_id, [
            policy("deny", [READ], {"op": "gte", "left": {"attr": "context.hour"}, "right": {"value": 22}}),
            policy("allow", ["documents:*"], {"op": "eq", "left": {"attr": "resource.owner_id"},
                                              "right": {"attr": "user.id"}}),
        ])
        self.settle()

    def post(self, body, *, bulk=False, credential=None, app_id=None, headers=None, authorization=True,
             content_type="application/json", raw=None, path=None) -> dict:
        sent = dict(headers or {})
        if content_type is not None:
            sent["Content-Type"] = content_type
        if authorization:
            sent["Authorization"] = f"Bearer {credential or self.tenant.key}"
        app_id = app_id or self.app_id
        return {"path": path or (bulk_path(app_id) if bulk else check_path(app_id)), "query": "", "headers": sent,
                "method": "POST", "body": raw if raw is not None else json.dumps(body)}

    def check(self, user_id, permission, **kw) -> dict:
        return self.post({"user_id": user_id, "permission": permission, **ATTRIBUTES}, **kw)

    def bulk(self, user_id, permissions, **kw) -> dict:
        return self.post({"user_id": user_id, "permissions": permissions, **ATTRIBUTES}, bulk=True, **kw)


def _post_scoped(w):
    user = w.tenant.user_with(READ, scope="project-1")
    return w.post({"user_id": user, "permission": READ, "scope": "project-1"})


def _post_context_scope(w):
    user = w.tenant.user_with(READ, scope="project-1")
    return w.post({"user_id": user, "permission": READ, "context": {"scope": "project-1", "hour": 23}})


def _post_owner(w):
    owner = w.tenant.user_with()
    return w.post({"user_id": owner, "permission": WRITE, "resource": {"owner_id": owner}})


def _post_staleness_exceeded(w):
    _lost_control_plane(w)
    w.monotonic.advance(STALENESS + 0.1)
    return w.check(w.reader, READ)


def _post_lookups_failing(w):
    user = w.tenant.user_with(READ)
    w.cp.lookup_status = 500
    return w.check(user, READ)


def _post_min_revision(w):
    return w.post({"user_id": w.reader, "permission": READ, "min_revision": w.cp.head + 1000, **ATTRIBUTES})


def _post_token_with_authz_check(w):
    caller = w.tenant.user_with("authz:check")
    return w.check(w.reader, READ, credential=w.cp.access_token(w.app_id, caller))


def _post_sized(w, size, *, brackets, fast):
    """A check body of exactly ``size`` bytes with ``brackets`` opening brackets (ATTRIBUTES
    plus filler and nested empty arrays), on the side of shared.checks.body_values's bounds
    that ``fast`` says."""
    body = {"user_id": w.reader, "permission": READ, **ATTRIBUTES}
    body["resource"] = {**body["resource"], "nested": [[]] * (brackets - 5), "filler": ""}
    body["resource"]["filler"] = "x" * (size - len(json.dumps(body).encode()))
    raw = json.dumps(body).encode()
    assert len(raw) == size and raw.count(b"[") + raw.count(b"{") == brackets
    assert (body_values(json.loads(raw), raw, bulk=False) is not None) is fast
    return w.post(None, raw=raw.decode())


# name: (mode, request builder, expected status, expected error code, taken by the hot path)
POST_VARIANTS = {
    "allowed, policies evaluated": ("token", lambda w: w.check(w.reader, READ), 200, None, True),
    "denied by a deny policy": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ, **NIGHT}), 200,
                                None, True),
    "allowed by an allow policy without RBAC": ("token", _post_owner, 200, None, True),
    "RBAC denies, allow policy does not hold": ("token", lambda w: w.check(w.reader, WRITE), 200, None, True),
    "no policy covers": ("token", lambda w: w.check(w.reader, "reports:read"), 200, None, True),
    "no resource nor context": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ}), 200, None,
                                True),
    "null resource": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ, "resource": None}), 200,
                      None, True),
    "scope": ("token", _post_scoped, 200, None, True),
    "context.scope": ("token", _post_context_scope, 200, None, True),
    "min_revision ahead of the log": ("token", _post_min_revision, 400, "AUTHZ_REVISION_AHEAD", True),
    "unknown user id": ("token", lambda w: w.check(str(uuid.uuid4()), READ), 200, None, True),
    "odd user id": ("token", lambda w: w.check("a\"b\\c\u00e9", READ), 200, None, True),
    "unknown field": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ, "x": 1}), 200, None, True),
    "charset in the media type": ("token", lambda w: w.check(w.reader, READ,
                                                            content_type="application/json; charset=utf-8"),
                                  200, None, True),
    "media type in capitals": ("token", lambda w: w.check(w.reader, READ, content_type="Application/JSON"), 200,
                               None, True),
    "well-formed request id": ("token", lambda w: w.check(w.reader, READ, headers={"X-Request-Id": WELL_FORMED_ID}),
                               200, None, True),
    # the edges of the validation fast path (shared.checks.body_values): beyond them the
    # schema's general path validates, still on the hot path
    "body at the fast path's size bound": (
        "token", lambda w: _post_sized(w, FAST_BODY_BYTES, brackets=6, fast=True), 200, None, True),
    "body one byte over it": (
        "token", lambda w: _post_sized(w, FAST_BODY_BYTES + 1, brackets=6, fast=False), 200, None, True),
    "body with the most brackets of the fast path": (
        "token", lambda w: _post_sized(w, 400, brackets=FAST_BODY_BRACKETS, fast=True), 200, None, True),
    "body with one more": (
        "token", lambda w: _post_sized(w, 400, brackets=FAST_BODY_BRACKETS + 1, fast=False), 200, None, True),
    "user id with white space around": ("token", lambda w: w.check(f" {w.reader}\t", READ), 200, None, True),
    "scope with white space around": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ,
                                                                  "scope": " project-1 "}), 200, None, True),
    "min_revision as 2.0": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ,
                                                        "min_revision": 2.0, **ATTRIBUTES}), 200, None, True),
    "permission not validated before": ("token", lambda w: w.check(w.reader, "fresh:name"), 200, None, True),
    "non-ascii in resource": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ,
                                                          "resource": {"owner_id": "\u00e9\U0001f600"}}), 200, None,
                              True),
    "bulk": ("token", lambda w: w.bulk(w.reader, [READ, WRITE, "reports:read"]), 200, None, True),
    "bulk at night": ("token", lambda w: w.post({"user_id": w.reader, "permissions": [READ, WRITE], **NIGHT},
                                                bulk=True), 200, None, True),
    "bulk with duplicates": ("token", lambda w: w.bulk(w.reader, [WRITE, READ, WRITE]), 200, None, True),
    "bulk, odd user id": ("token", lambda w: w.bulk("x\"y\u00fc", [READ]), 200, None, True),
    "api-key mode, its application": ("key", lambda w: w.check(w.reader, READ), 200, None, True),
    "user token with authz:check": ("token", _post_token_with_authz_check, 200, None, True),
    # errors after validation: answered by the hot path
    "wrong api key": ("token", lambda w: w.check(w.reader, READ, credential="sk_test_" + "x" * 43), 401,
                      "UNAUTHORIZED", True),
    "missing authorization": ("token", lambda w: w.check(w.reader, READ, authorization=False), 401,
                              "UNAUTHORIZED", True),
    "bulk, wrong api key": ("token", lambda w: w.bulk(w.reader, [READ], credential="sk_live_nope"), 401,
                            "UNAUTHORIZED", True),
    "key without authz:check": ("token", lambda w: w.check(w.reader, READ, credential=w.cp.add_key(
        w.app_id, permissions=["roles:read"])), 403, "FORBIDDEN", True),
    "unknown application": ("token", lambda w: w.check(w.reader, READ, app_id=str(uuid.uuid4())), 404, "NOT_FOUND",
                            True),
    "api-key mode, another application": ("key", lambda w: w.check(w.reader, READ, app_id=w.cp.add_app()), 404,
                                          "NOT_FOUND", True),
    "staleness exceeded": ("token", _post_staleness_exceeded, 503, "DECISION_UNAVAILABLE", True),
    "lookups failing": ("token", _post_lookups_failing, 503, "DECISION_UNAVAILABLE", True),
    # anything unusual: Falcon answers, in its order (media type, credentials, body)
    "missing permission": ("token", lambda w: w.post({"user_id": w.reader}), 400, "VALIDATION_INVALID_FORMAT",
                           False),
    "bad permission name": ("token", lambda w: w.check(w.reader, "nocolon"), 400, "VALIDATION_INVALID_FORMAT",
                            False),
    "several bad fields": ("token", lambda w: w.post({"user_id": 5, "permission": "x", "resource": []}), 400,
                           "VALIDATION_MULTIPLE_ERRORS", False),
    "resource not an object": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ,
                                                          "resource": "doc"}), 400, "VALIDATION_INVALID_FORMAT",
                               False),
    "context over 64 KiB": ("token", lambda w: w.post({"user_id": w.reader, "permission": READ,
                                                       "context": {"x": "y" * 70000}}), 400,
                            "VALIDATION_INVALID_FORMAT", False),
    "bulk with an unhashable item": ("token", lambda w: w.bulk(w.reader, [READ, ["x"]]), 400,
                                     "VALIDATION_INVALID_FORMAT", False),
    "user id of 256 characters": ("token", lambda w: w.check("u" * 256, READ), 400, "VALIDATION_INVALID_FORMAT",
                                  False),
    "bulk of 51": ("token", lambda w: w.bulk(w.reader, [f"p{i}:read" for i in range(51)]), 400,
                   "VALIDATION_INVALID_FORMAT", False),
    "malformed json": ("token", lambda w: w.post(None, raw='{"user_id": '), 400, None, False),
    "array body": ("token", lambda w: w.post([1, 2]), 400, None, False),
    "empty body": ("token", lambda w: w.post(None, raw=""), 400, "VALIDATION_MULTIPLE_ERRORS", False),
    "invalid body, wrong api key": ("token", lambda w: w.post({"user_id": w.reader}, credential="sk_test_nope"),
                                    401, "UNAUTHORIZED", False),
    "text/plain": ("token", lambda w: w.check(w.reader, READ, content_type="text/plain"), 415, None, False),
    "no media type": ("token", lambda w: w.check(w.reader, READ, content_type=None), 415, None, False),
    "trailing slash": ("token", lambda w: w.check(w.reader, READ, path=check_path(w.app_id) + "/"), 200, None,
                       False),
    "non-ascii application": ("token", lambda w: w.check(w.reader, READ, app_id="caf\u00e9"), 404, "NOT_FOUND",
                              False),
}


@pytest.mark.parametrize("name", list(POST_VARIANTS))
def test_the_post_hot_path_answers_as_falcon_does(make_sidecar, fake_cp, monotonic, name):
    mode, build, status, code, taken = POST_VARIANTS[name]
    w = PostWorld(make_sidecar, fake_cp, monotonic, single=mode == "key")
    sent = build(w)
    if not w.cp_down:
        w.settle()
    sent_id = sent["headers"].get("X-Request-Id")
    route = BULK_ROUTE if sent["path"].endswith("-bulk") else ROUTE

    warm = send(w.app, **sent, hot=False)
    assert warm.status_code == status, warm.text
    assert w.spy.answers == []

    before = counters(w.app)
    hot = send(w.app, **sent)
    assert w.spy.answers == [taken]
    between = counters(w.app)
    ref = send(w.app, **sent, hot=False)
    after = counters(w.app)

    assert hot.status_code == status, hot.text
    assert_same(hot, ref, sent_id)
    assert delta(before, between) == delta(between, after)
    if taken:
        assert delta(before, between)[("iamgate_decision_http_requests_total",
                                       (("method", "POST"), ("route", route), ("status", str(status))))] == 1
    if code is not None:
        assert_error(hot, status, code)
    if status == 200 and route == ROUTE:
        assert set(hot.json) == {"allowed", "permission", "cached", "abac_evaluated", "policies_checked"}


def test_post_answers_follow_the_policies(make_sidecar, fake_cp, monotonic):
    w = PostWorld(make_sidecar, fake_cp, monotonic)
    day, night = w.check(w.reader, READ), w.post({"user_id": w.reader, "permission": READ, **NIGHT})
    for sent, allowed in ((day, True), (night, False)):
        send(w.app, **sent)  # fills the policies
        answer = send(w.app, **sent).json
        assert answer == {"allowed": allowed, "permission": READ, "cached": True, "abac_evaluated": True,
                          "policies_checked": 2}
    assert send(w.app, **w.bulk(w.reader, [READ, WRITE])).json == {
        "user_id": w.reader, "results": {READ: True, WRITE: False}}
    assert w.spy.answers == [True] * 5

    # A policy change reaches the hot path through the same cache invalidation.
    w.cp.set_policies(w.app_id, [])
    w.settle()
    assert send(w.app, **night).json == {"allowed": True, "permission": READ, "cached": False,
                                         "abac_evaluated": False, "policies_checked": 0}


def test_a_body_the_hot_path_declined_is_read_whole_by_falcon(make_sidecar, fake_cp, monotonic):
    """The hot path read the body before declining; Falcon still sees all of it."""
    w = PostWorld(make_sidecar, fake_cp, monotonic)
    sent = w.post({"user_id": w.reader, "permission": READ, "scope": "", **ATTRIBUTES})  # empty scope: refused
    result = send(w.app, **sent)
    assert w.spy.answers == [False]
    error = assert_error(result, 400, "VALIDATION_INVALID_FORMAT")
    assert "scope" in error["details"]["fields"]
