"""Every audit query is served by a declared index.

The embedded store cannot show a query plan, so the shape is checked against the
declarations: the query's equality keys, then its sort keys, must be a prefix of one
declared index, and its range keys must be in that index too (MongoDB's equality, sort,
range rule: the index is then read in order, with no sort in memory). A query with
several filters is served by the index of one of them, read in order, the others
checked on the documents read (docs/audit.md). The shapes checked are every combination
``store.query`` can build, and every query the four routes actually send. Given a real
MongoDB (``IAMGATE_TEST_MONGODB_URI``), ``explain()`` must show an index scan as well.
"""
from __future__ import annotations

from datetime import UTC, datetime
from itertools import combinations

import pytest

from controlplane.audit import context as audit
from controlplane.audit.chain import Sealer
from controlplane.audit.store import INDEXES, SCOPES, SORT, outside_query, query
from tests import mongodb
from tests.conftest import bearer

SINCE, UNTIL = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
VALUES = {"action": "user.", "actor_id": "a", "target_id": "t", "result": "failure", "ip": "192.0.2.1"}
SHAPES = [dict(chosen) for n in range(len(VALUES) + 1) for chosen in combinations(VALUES.items(), n)]
RANGES = [{}, {"since": SINCE}, {"until": UNTIL}, {"since": SINCE, "until": UNTIL}]
CASES = [(scope, {**shape, **time}, after) for scope in SCOPES for shape in SHAPES for time in RANGES
         for after in (None, (UNTIL, 5))]
# What the issue asks of a real query plan: each filter alone, and with the time range.
SINGLE_FILTER_CASES = [case for case in CASES if len(set(case[1]) & set(VALUES)) <= 1]


def declared_keys() -> list[list[str]]:
    return [list(model.document["key"]) for model in INDEXES["events"]]


def keys_of(spec: dict) -> tuple[list[str], set[str]]:
    """(equality keys in order, range keys) of a query ``controlplane.audit.store.query``
    built. The cursor's ``$or`` bounds the sort keys: its keys count as ranges."""
    equality, ranges = [], set()
    for key, value in spec.items():
        if key == "$and":
            for part in value:
                eq, rng = keys_of(part)
                equality += eq
                ranges |= rng
        elif key == "$or":
            for part in value:
                eq, rng = keys_of(part)
                ranges |= set(eq) | rng
        elif isinstance(value, dict):
            ranges.add(key)
        else:
            equality.append(key)
    return equality, ranges


def serving_index(spec: dict) -> list[str] | None:
    """The declared index that reads ``spec`` in the listing's order: its leading keys are
    equalities of the query, then come the sort keys. With one filter at most, the index
    must hold every key of the query; with several, it must lead with one of them."""
    equality, ranges = keys_of(spec)
    filters = (set(equality) - set(SCOPES)) | (ranges & {"action"})
    sort = [key for key, _ in SORT]
    for keys in declared_keys():
        head = []
        for key in keys:
            if key not in equality:
                break
            head.append(key)
        if keys[len(head):len(head) + len(sort)] != sort or not set(head) & set(SCOPES):
            continue
        rest = (set(equality) - set(head)) | (ranges - set(keys))
        if not rest or (len(filters) > 1 and len(head) > 1):
            return keys
    return None


@pytest.mark.parametrize("scope, filters, after", CASES)
def test_every_query_shape_is_served_by_a_declared_index(scope, filters, after):
    spec = query(scope, "id", filters, after)
    assert serving_index(spec) is not None, f"no declared index serves {spec} sorted by {SORT}"


def test_the_checker_refuses_a_query_no_index_serves():
    assert serving_index({"app_id": "x", "user_agent": "curl"}) is None
    assert serving_index({"app_id": "x", "data.n": {"$gt": 1}}) is None
    assert serving_index({"ip": "192.0.2.1"}) is None  # no scope
    # Two filters, neither of which leads an index: the scope's index alone would read them all.
    assert serving_index({"app_id": "x", "user_agent": "curl", "data.n": 1}) is None
    assert serving_index({"app_id": "x", "actor.id": "a", "result.status": "failure"}) is not None


class Spy:
    """The events collection, noting the filter and sort of every ``find``."""

    def __init__(self, collection, seen):
        self._collection, self._seen = collection, seen

    def find(self, spec=None, *args, **kwargs):
        cursor = self._collection.find(spec, *args, **kwargs)
        seen, sort = self._seen, cursor.sort

        def sorted_by(keys, *rest):
            seen.append((spec, keys))
            return sort(keys, *rest)

        cursor.sort = sorted_by
        return cursor

    def __getattr__(self, name):
        return getattr(self._collection, name)


ROUTE_PARAMS = [{}, *({name: value} for name, value in VALUES.items()), dict(VALUES),
                {"actor_id": "a", "result": "failure"}]


def test_every_query_the_routes_send_is_served(ctx, client, application, make_api_key, dashboard_account,
                                               insert_records, monkeypatch):
    """The application's and the organization's listing (a first page and the next) and
    export, with each filter, several at once, and each with a time range."""
    headers = bearer(make_api_key(application, permissions=["audit:read"]))
    org = dashboard_account.organization_id
    insert_records(3, app_id=application["_id"], organization_id=org, actor_id="a", status="failure")
    seen = []
    monkeypatch.setattr(ctx.audit.store, "_events", Spy(ctx.audit.store._events, seen))
    v1 = f"/api/v1/applications/{application['_id']}/audit-events"
    dashboard = f"/api/dashboard/organizations/{org}/audit-events"
    for params in ROUTE_PARAMS:
        for time in RANGES:
            query_params = {**params, **{k: v.isoformat() for k, v in time.items()}, "limit": 1}
            for path, get in ((v1, lambda p, q: client.simulate_get(p, params=q, headers=headers)),
                              (dashboard, lambda p, q: dashboard_account.get(p, params=q))):
                first = get(path, query_params)
                assert first.status_code == 200, first.text
                if first.json["next_cursor"]:
                    assert get(path, {**query_params, "cursor": first.json["next_cursor"]}).status_code == 200
                export = {k: v for k, v in query_params.items() if k != "limit"}
                assert get(path + "/export", export).status_code == 200
    assert len(seen) > 4 * len(ROUTE_PARAMS) * len(RANGES) - 1
    for spec, sort in seen:
        assert sort == SORT, spec
        assert serving_index(spec) is not None, f"no declared index serves {spec} sorted by {SORT}"


@pytest.mark.skipif(mongodb.TEST_MONGODB_URI is None or "mongomock" in mongodb.describe(),
                    reason="needs a real MongoDB")
@pytest.mark.parametrize("scope, filters, after", SINGLE_FILTER_CASES[::3])
def test_mongodb_plans_an_index_scan(ctx, insert_records, scope, filters, after):
    insert_records(50, app_id="app", organization_id="org")
    plan = str(ctx.store["events"].find(query(scope, "app" if scope == "app_id" else "org", filters, after))
               .sort(SORT).explain()["queryPlanner"]["winningPlan"])
    assert "IXSCAN" in plan and "COLLSCAN" not in plan and "'stage': 'SORT'" not in plan, plan


def test_the_other_audit_reads_are_served_too():
    """The GDPR export's read (each branch of its $or), the sealer's work list and a chain."""
    keys = declared_keys()
    for side in ("actor.id", "target.id"):
        assert ["app_id", side, "at", "seq"] in keys
    assert ["chain", "link"] in keys
    unsealed = next(m.document for m in INDEXES["events"] if m.document["name"] == "audit_unsealed")
    assert list(unsealed["key"]) == ["seq"] and unsealed["partialFilterExpression"] == {"sealed": False}


OUTSIDE_CASES = [(scope, chain, start) for scope, chain in (({"app_id": "app"}, "app"),
                                                            ({"app_id": None, "organization_id": "org"},
                                                             "organization:org"))
                 for start in (None, SINCE)]


@pytest.mark.parametrize("scope, chain, start", OUTSIDE_CASES)
def test_the_look_beside_the_chain_is_served_by_the_scopes_index(scope, chain, start):
    """``audit verify``'s count of the records outside the chain (docs/audit.md,
    "Integrity") is a rooted ``$or`` whose every branch leads with the scope's equality,
    the first key of the scope's own index (``audit_<scope>``): a pass over the scope's
    records, never over the whole log, and no index of its own for every write to pay."""
    field = "organization_id" if scope.get("app_id") is None else "app_id"
    keys = next(list(m.document["key"]) for m in INDEXES["events"] if m.document["name"] == f"audit_{field}")
    spec = outside_query(scope, chain, start)
    assert set(spec) == {"$or"} and len(spec["$or"]) == (1 if start is None else 2)
    for branch in spec["$or"]:
        assert keys[0] == field and branch[field] == scope[field], (branch, keys)


def test_verify_of_an_intact_chain_adds_one_count_to_its_walk(ctx, clock, application, monkeypatch):
    """The look beside the chain costs one count while there is nothing there;
    the first record outside is read only when the count finds one."""
    ctx.audit.record("user.login", result=audit.failure("invalid_credentials"), target=audit.actor("user", "u"),
                     application_id=application["_id"])
    clock.advance(6)
    Sealer(ctx.audit.store, clock, settle=5).seal_once()
    calls = []
    events = ctx.audit.store._events

    class Calls:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(events, name)

    monkeypatch.setattr(ctx.audit.store, "_events", Calls())
    verdict = ctx.audit.verify(application_id=application["_id"])
    assert verdict.intact and verdict.outside == 0
    assert sorted(calls) == ["count_documents", "count_documents", "find"]  # the walk, the unsealed, the outside


@pytest.mark.skipif(mongodb.TEST_MONGODB_URI is None or "mongomock" in mongodb.describe(),
                    reason="needs a real MongoDB")
@pytest.mark.parametrize("scope, chain, start", OUTSIDE_CASES)
def test_mongodb_plans_the_look_beside_the_chain_on_its_index(ctx, insert_records, scope, chain, start):
    insert_records(50, app_id="app", organization_id="org")
    plan = str(ctx.store["events"].find(outside_query(scope, chain, start)).explain()["queryPlanner"]["winningPlan"])
    assert "COLLSCAN" not in plan, plan
