"""The control plane's WSGI-level check (controlplane/hotpath.py) answers exactly as the
Falcon route does.

Two worlds are built the same way, step for step, on the same clock: one app with its hot
path, one with ``app.hot_check = None`` (Falcon only, the reference). The same scenario of
requests and changes (valid and invalid requests, every credential error, the throttle,
an API key's ``last_used_at`` after a minute...) runs in both, and after every step the
two must agree on the status, every header but the request id, the body, the request-log
and error-log records, the metrics' counts, the general throttle's state (local counts
and the shared counter) and the API keys' ``last_used_at``. World-specific ids (the
application, keys, users, tokens) are written as placeholders before comparing. A spy
records which requests the hot path answered, and a last test shows that for those
Falcon is not called at all.

Requests are sent with a raw query string (``simulate_get(params=...)`` percent-encodes
the ':' of a permission, which sends the request to Falcon).
"""
from __future__ import annotations

import ipaddress
import json
import logging
import re
from datetime import UTC, datetime

import falcon
import falcon.testing
import pytest

from controlplane.app import create_app
from shared.config import Rate
from shared.ids import new_id
from shared.logs import JsonFormatter
from tests import mongodb
from tests.conftest import FakeClock, make_config
from tests.hot_spy import Spy

# Later than the real clock: mongomock's TTL sweep runs on the real clock, at most every
# 0.25 s, and would otherwise reclaim the throttle's counters in one world and not in the other.
START = datetime(2100, 1, 1, 12, 0, 0, tzinfo=UTC)
CHECK = "/api/v1/applications/<APP>/authz/check"
UNKNOWN_APP = "00000000-0000-4000-8000-000000000000"
WELL_FORMED_ID = "client-req.0001_abc"
GENERATED_ID = re.compile(r"^[0-9a-f]{32}$")
TIMESTAMP = re.compile(r'"timestamp":"[^"]*"')


class World:
    """A control plane with an application holding: API keys with every V1 permission
    (KEY), with roles:read only (NOPERM), with authz:* (WILDKEY), a revoked one (REVOKED)
    and one of another application (OTHERKEY); users READER (documents:read and
    authz:check), WILD (documents:* and *:list, and authz:check), PLAIN (no role) and
    SUSPENDED, with access tokens T_READER, T_PLAIN, T_SUSPENDED, T_OTHER (a user of the
    other application)."""

    def __init__(self, *, hot: bool, **config):
        self.clock = FakeClock(START)
        self.uri = mongodb.fresh_database_uri()
        self.app = create_app(make_config(**({"mongodb_uri": self.uri} if self.uri else {}), **config),
                              clock=self.clock, start_background=False)
        if hot:
            self.spy = Spy(self.app)
        else:
            self.app.hot_check = None
            self.spy = None
        self.client = falcon.testing.TestClient(self.app)
        ctx = self.ctx = self.app.services
        # The throttle also syncs its counts when 0.25 s have passed; on a loaded machine one
        # world would cross that line where the other does not. Frozen time: counts alone decide.
        ctx.api_throttle._monotonic = lambda: 0.0
        names = self.names = {}
        application = ctx.applications.create({"name": "App"}, organization_id=None, owner_account_id=None)
        other = ctx.applications.create({"name": "Other"}, organization_id=None, owner_account_id=None)
        names["APP"], names["OTHER"] = application["_id"], other["_id"]
        for name, app, permissions in (("KEY", application, None), ("NOPERM", application, ["roles:read"]),
                                       ("WILDKEY", application, ["authz:*"]), ("REVOKED", application, None),
                                       ("OTHERKEY", other, None)):
            doc, names[name] = ctx.api_keys.create(app, {"name": name, **({"permissions": permissions}
                                                                          if permissions else {})})
            names[name + "_ID"] = doc["_id"]
        ctx.api_keys.revoke(application["_id"], names["REVOKED_ID"])
        reader = self.role(application, "reader", ["documents:read", "authz:check"])
        wild = self.role(application, "wild", ["documents:*", "*:list", "authz:check"])
        for name, app, role in (("READER", application, reader), ("WILD", application, wild),
                                ("PLAIN", application, None), ("SUSPENDED", application, reader),
                                ("STRANGER", other, None)):
            names[name] = self.user(app)
            if role is not None:
                ctx.roles.assign(app["_id"], names[name], {"role_id": role["_id"]})
        for name in ("READER", "PLAIN", "SUSPENDED"):
            names["T_" + name], _ = ctx.tokens.issue_access_token(application["_id"], names[name], None)
        names["T_OTHER"], _ = ctx.tokens.issue_access_token(other["_id"], names["STRANGER"], None)
        ctx.store["users"].update_one({"_id": names["SUSPENDED"]}, {"$set": {"status": "suspended"}})
        names["NOBODY"] = new_id()  # no such user
        # Longest first, so that no placeholder's value is replaced inside a longer one.
        self.replacements = sorted(((value, f"<{name}>") for name, value in names.items()),
                                   key=lambda pair: -len(pair[0]))

    def role(self, app, name, permissions):
        role = self.ctx.roles.create(app["_id"], {"name": name, "display_name": "Role", "permissions": permissions})
        self.names["ROLE_" + name.upper()] = role["_id"]
        return role

    def user(self, app) -> str:
        user_id, now = new_id(), self.clock()
        self.ctx.store["users"].insert_one({
            "_id": user_id, "app_id": app["_id"], "email": f"{user_id}@example.com", "name": "User",
            "password_hash": None, "email_verified": True, "metadata": None, "avatar_url": None, "status": "active",
            "created_at": now, "updated_at": now, "deleted_at": None, "suspended_at": None})
        return user_id

    def render(self, text: str) -> str:
        return re.sub(r"<([A-Z_]+)>", lambda m: self.names[m.group(1)], text)

    def normal(self, value):
        """``value`` (text, or JSON-like data) with this world's ids as placeholders."""
        if isinstance(value, str):
            for actual, placeholder in self.replacements:
                value = value.replace(actual, placeholder)
            return value
        if isinstance(value, dict):
            return {self.normal(k): self.normal(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.normal(v) for v in value]
        return value

    def metrics(self) -> dict:
        """Request counts, latency observation counts and the authz cache's counts by label
        set (not the buckets or sums, which are timings, nor the process's own figures)."""
        counts = {}
        for metric in self.ctx.metrics.registry.collect():
            for sample in metric.samples:
                if sample.name.endswith(("_total", "_count")) and sample.name.startswith("iamgate_"):
                    counts[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return counts

    def state(self) -> dict:
        """The throttle's local counts and shared counters, and the keys' last use."""
        throttle = self.ctx.api_throttle
        return self.normal({
            "local": {key: [count.start, count.known, count.pending] for key, count in throttle._counts.items()},
            "shared": {doc["_id"]: doc["n"] for doc in self.ctx.store["rate_limits"].find()},
            "last_used": {doc["_id"]: str(doc.get("last_used_at")) for doc in self.ctx.store["api_keys"].find()},
        })


def run(world: World, steps, caplog) -> list:
    """Each step's observable outcome in ``world``, normalised."""
    outcomes, formatter = [], JsonFormatter()
    for step in steps:
        if callable(step):
            step(world)
            outcomes.append(("change", world.state()))
            continue
        method, path, query, headers, body = (*step, None, None, None)[:5]
        before, first_record = world.metrics(), len(caplog.records)
        result = world.client.simulate_request(
            method, world.render(path), query_string=world.render(query),
            headers={name: world.render(value) for name, value in (headers or {}).items()},
            body=json.dumps(body) if body is not None else None)
        after = world.metrics()
        request_id = result.headers.get("X-Request-Id")
        assert request_id == WELL_FORMED_ID or GENERATED_ID.match(request_id or ""), request_id
        records = []
        for record in caplog.records[first_record:]:
            line = json.loads(formatter.format(record))
            assert line.pop("request_id") == request_id
            line.pop("ts")
            if "duration_ms" in line:  # the request line: its time is its own, its type is not
                duration = line.pop("duration_ms")
                assert type(duration) is float and 0 <= duration < 60_000, duration
            if "exception" in line:
                line["exception"] = line["exception"].splitlines()[-1]  # the traceback's frames differ
            records.append(world.normal(line))
        text = result.text
        if result.status_code >= 400 and text:
            assert result.json["error"]["request_id"] == request_id
            text = TIMESTAMP.sub('"timestamp":"T"', text.replace(request_id, "<REQUEST_ID>"))
        outcomes.append({
            "status": result.status,
            "headers": [(name, world.normal(value)) for name, value in result.headers.items()
                        if name.lower() not in ("x-request-id",)],
            "body": world.normal(text),
            "log": records,
            "metrics": {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)},
            "state": world.state(),
        })
    return outcomes


def compare(steps, caplog, hot_answers, **config):
    """Run ``steps`` in a world with the hot path and one without; they must agree, and the
    hot path must have answered exactly the requests marked True in ``hot_answers``."""
    caplog.set_level(logging.INFO, logger="iamgate")
    worlds = []
    try:
        for hot in (True, False):
            worlds.append(World(hot=hot, **config))
            worlds[-1].outcomes = run(worlds[-1], steps, caplog)
        hot_world, falcon_world = worlds
        for step, hot_outcome, falcon_outcome in zip(steps, hot_world.outcomes, falcon_world.outcomes, strict=True):
            assert hot_outcome == falcon_outcome, step
        assert hot_world.spy.answers == hot_answers
        return hot_world.outcomes
    finally:
        for world in worlds:
            mongodb.drop_database(world.uri)


def key(name="KEY"):
    return {"Authorization": f"Bearer <{name}>"}


def q(user="READER", permission="documents:read"):
    return f"user_id=<{user}>&permission={permission}"


# (step, whether the hot path answers it)
SCENARIO = [
    (("GET", CHECK, q(), key()), True),                                 # grants not cached yet
    (("GET", CHECK, q(), key()), True),                                 # cached
    (("GET", CHECK, q(permission="documents:write"), key()), True),     # denied
    (("GET", CHECK, "permission=documents:read&user_id=<READER>", key()), True),  # either order
    (("GET", CHECK, q("WILD", "documents:delete"), key()), True),       # a wildcard grant: documents:*
    (("GET", CHECK, q("WILD", "invoices:list"), key()), True),          # *:list
    (("GET", CHECK, q("WILD", "firstseen_perm-1:do"), key()), True),    # a name never validated before
    (("GET", CHECK, q("NOBODY"), key()), True),                          # unknown user: not allowed
    (("GET", CHECK, q("PLAIN"), key()), True),                           # a user without roles
    (("GET", CHECK, q(), key("WILDKEY")), True),                         # key holding authz:*
    (("GET", CHECK, q(), {"Authorization": "Bearer <T_READER>"}), True),  # an end user holding authz:check
    (("GET", CHECK, q(), {**key(), "X-Request-Id": WELL_FORMED_ID}), True),
    (("GET", CHECK, q(), {**key(), "X-Request-Id": "bad id!"}), True),
    # Credential errors, answered by the hot path with Falcon's envelope.
    (("GET", CHECK, q()), True),                                          # no credential
    (("GET", CHECK, q(), {"Authorization": "Basic abc"}), True),          # another scheme
    (("GET", CHECK, q(), {"Authorization": "Bearer "}), True),            # empty
    (("GET", CHECK, q(), {"Authorization": "Bearer sk_live_" + "x" * 43}), True),  # unknown key
    (("GET", CHECK, q(), key("REVOKED")), True),
    (("GET", CHECK, q(), key("OTHERKEY")), True),                        # another application's key
    (("GET", CHECK, q(), {"Authorization": "Bearer not.a.jwt"}), True),
    (("GET", CHECK, q(), {"Authorization": "Bearer <T_SUSPENDED>"}), True),  # user no longer active
    (("GET", CHECK, q(), {"Authorization": "Bearer <T_OTHER>"}), True),  # token of another application
    (("GET", CHECK, q(), key("NOPERM")), True),                          # 403 PERMISSION_MISSING
    (("GET", CHECK, q(), {"Authorization": "Bearer <T_PLAIN>"}), True),  # user without authz:check: 403
    (("GET", CHECK.replace("<APP>", UNKNOWN_APP), q(), key()), True),    # 404
    (("GET", CHECK.replace("<APP>", "not-a-uuid"), q()), True),          # 404 before the credential
    # Not the plain form: Falcon answers, in both worlds.
    (("GET", CHECK, "user_id=<READER>&permission=documents%3Aread", key()), False),
    (("GET", CHECK, "user_id=<READER>&permission=documents:read&scope=team", key()), False),
    (("GET", CHECK, "user_id=<READER>&permission=documents:read&min_revision=0", key()), False),
    (("GET", CHECK, "user_id=<READER>&permission=documents:read&", key()), False),
    (("GET", CHECK, "user_id=<READER>&user_id=<PLAIN>", key()), False),
    (("GET", CHECK, "user_id=&permission=documents:read", key()), False),   # 400
    (("GET", CHECK, "user_id=<READER>&permission=bad", key()), False),      # 400
    (("GET", CHECK, "user_id=<READER>", key()), False),                     # 400
    (("GET", CHECK, "user_id=a+b&permission=documents:read", key()), False),
    (("GET", CHECK, q(), {"Authorization": "Bearer <NOPERM>"}), True),
    (("GET", CHECK + "/", q(), key()), False),                              # trailing slash
    (("GET", CHECK.replace("<APP>", "café"), q(), key()), False),           # non-ASCII
    (("GET", CHECK + "-bulk", q(), key()), False),                          # 405
    (("HEAD", CHECK, q(), key()), None),                                    # 405
    (("POST", CHECK, "", {**key(), "Content-Type": "application/json"},
      {"user_id": "<READER>", "permission": "documents:read"}), None),
    (("POST", CHECK, "", key(), {"user_id": "<READER>", "permission": "documents:read"}), None),  # 415
    (("GET", "/api/v1/applications/<APP>/roles", "", key()), False),
    # An API key's last use is written at most once a minute.
    (lambda world: world.clock.advance(61), None),
    (("GET", CHECK, q(), key()), True),
    (("GET", CHECK, q(), key()), True),
    # A change answered with X-Iamgate-Revision, then checks (no revision header) of the
    # user whose grants it changed: read again from the store, then cached.
    (("PUT", "/api/v1/applications/<APP>/roles/<ROLE_READER>", "", {**key(), "Content-Type": "application/json"},
      {"permissions": ["documents:write", "authz:check"]}), None),
    (("GET", CHECK, q(), key()), True),
    (("GET", CHECK, q(permission="documents:write"), key()), True),
]


def answers(scenario):
    """The spy's expected record: only GET requests reach it (the hot path declines others
    at once, but is still asked: None marks a non-GET request, which it declines)."""
    return [bool(answered) for step, answered in scenario if not callable(step)]


def test_the_hot_path_answers_as_falcon_does(caplog):
    outcomes = compare([step for step, _ in SCENARIO], caplog, answers(SCENARIO))
    statuses = [outcome["status"][:3] for outcome in outcomes if isinstance(outcome, dict)]
    # The scenario does cover each kind of answer.
    assert {"200", "400", "401", "403", "404", "405", "415"} <= set(statuses)
    changed, after_change = outcomes[-3:-1]
    assert "x-iamgate-revision" in {name.lower() for name, _ in changed["headers"]}
    assert json.loads(after_change["body"]) == {"allowed": False, "permission": "documents:read", "cached": False}
    first, cached = outcomes[0], outcomes[1]
    assert json.loads(first["body"]) == {"allowed": True, "permission": "documents:read", "cached": False}
    assert json.loads(cached["body"]) == {"allowed": True, "permission": "documents:read", "cached": True}
    assert first["log"] == [{"level": "info", "logger": "iamgate.controlplane", "message": "request",
                             "method": "GET", "route": "/api/v1/applications/{applicationId}/authz/check",
                             "status": 200, "client_ip": "127.0.0.1", "application_id": "<APP>"}]
    route = ("method", "GET"), ("route", "/api/v1/applications/{applicationId}/authz/check")
    assert first["metrics"] == {("iamgate_http_requests_total", (*route, ("status", "200"))): 1.0,
                                ("iamgate_http_request_duration_seconds_count", route): 1.0,
                                ("iamgate_authz_cache_misses_total", (("kind", "grants"),)): 1.0}
    assert cached["metrics"][("iamgate_authz_cache_hits_total", (("kind", "grants"),))] == 1.0


@pytest.mark.parametrize("limit", [3, 120])  # counted in the store every time; batched
def test_the_throttle_counts_and_refuses_alike(caplog, limit):
    steps = [("GET", CHECK, q(), key())] * (limit + 2) + [("GET", CHECK, q(), key("WILDKEY"))]
    outcomes = compare(steps, caplog, [True] * len(steps), rate_limit_api=Rate(limit, 60))
    statuses = [outcome["status"][:3] for outcome in outcomes]
    assert statuses == ["200"] * limit + ["429", "429", "200"]
    refused = outcomes[limit]
    assert {name.lower() for name, _ in refused["headers"]} >= {
        "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"}


def test_the_request_line_names_the_client_behind_a_trusted_proxy_alike(caplog):
    forwarded = {**key(), "X-Forwarded-For": "198.51.100.9, 203.0.113.7"}
    steps = [("GET", CHECK, q(), forwarded), ("GET", "/api/v1/applications/<APP>/roles", "", forwarded),
             ("GET", "/healthz", "", forwarded)]
    outcomes = compare(steps, caplog, [True, False, False], trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),))
    lines = [outcome["log"][-1] for outcome in outcomes]
    assert [(line["client_ip"], line["application_id"]) for line in lines] == [
        ("203.0.113.7", "<APP>"), ("203.0.113.7", "<APP>"), ("203.0.113.7", None)]


def test_an_unexpected_error_is_answered_alike(caplog, monkeypatch):
    from controlplane.authz.service import AuthzService

    def broken(self, app_id, values):
        raise RuntimeError("boom")

    monkeypatch.setattr(AuthzService, "check", broken)
    outcomes = compare([("GET", CHECK, q(), key())], caplog, [True])
    assert outcomes[0]["status"] == "500 Internal Server Error"
    assert [record["message"] for record in outcomes[0]["log"]] == ["unhandled error", "request"]
    assert outcomes[0]["log"][0]["exception"] == "RuntimeError: boom"


def test_falcon_is_not_called_for_the_plain_check(app, client, application, api_key, monkeypatch):
    calls = []
    falcon_call = falcon.App.__call__

    def counting(self, environ, start_response):
        calls.append(environ["PATH_INFO"])
        return falcon_call(self, environ, start_response)

    monkeypatch.setattr(falcon.App, "__call__", counting)
    path = f"/api/v1/applications/{application['_id']}/authz/check"
    for _ in range(3):
        result = client.simulate_get(path, query_string="user_id=u1&permission=documents:read",
                                     headers={"Authorization": f"Bearer {api_key}"})
        assert result.status_code == 200
    assert calls == []
    client.simulate_get(path, query_string="user_id=u1&permission=documents%3Aread",
                        headers={"Authorization": f"Bearer {api_key}"})
    assert calls == [path]
    app.hot_check = None
    client.simulate_get(path, query_string="user_id=u1&permission=documents:read",
                        headers={"Authorization": f"Bearer {api_key}"})
    assert calls == [path, path]
