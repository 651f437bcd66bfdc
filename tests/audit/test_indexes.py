"""Every audit query is served by a declared index.

The embedded store cannot show a query plan, so the shape is checked against the
declarations: the query's equality keys, then its sort keys, must be a prefix of one
declared index, and its range keys must be in that index too (MongoDB's equality, sort,
range rule: the index is then read in order, with no sort in memory). Given a real
MongoDB (``IAMGATE_TEST_MONGODB_URI``), ``explain()`` must show an index scan as well.
"""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.audit.store import INDEXES, SCOPES, SORT, query
from tests import mongodb

SINCE, UNTIL = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
VALUES = {"action": "user.", "actor_id": "a", "target_id": "t", "result": "failure", "ip": "192.0.2.1"}
SHAPES = [{}] + [{name: value} for name, value in VALUES.items()]
RANGES = [{}, {"since": SINCE}, {"until": UNTIL}, {"since": SINCE, "until": UNTIL}]
CASES = [(scope, {**shape, **time}, after) for scope in SCOPES for shape in SHAPES for time in RANGES
         for after in (None, (UNTIL, 5))]


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
    equality, ranges = keys_of(spec)
    sort = [key for key, _ in SORT]
    for keys in declared_keys():
        head = keys[:len(equality)]
        if set(head) == set(equality) and keys[len(equality):len(equality) + len(sort)] == sort \
                and ranges <= set(keys):
            return keys
    return None


@pytest.mark.parametrize("scope, filters, after", CASES)
def test_every_query_shape_is_served_by_a_declared_index(scope, filters, after):
    spec = query(scope, "id", filters, after)
    assert serving_index(spec) is not None, f"no declared index serves {spec} sorted by {SORT}"


def test_the_checker_refuses_a_query_no_index_serves():
    assert serving_index({"app_id": "x", "user_agent": "curl"}) is None
    assert serving_index({"app_id": "x", "data.n": {"$gt": 1}}) is None


@pytest.mark.skipif(mongodb.TEST_MONGODB_URI is None or "mongomock" in mongodb.describe(),
                    reason="needs a real MongoDB")
@pytest.mark.parametrize("scope, filters, after", CASES[::3])
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
