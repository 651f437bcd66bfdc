"""Fixtures of the audit tests: audit records written straight into the store in bulk
(``insert_records``), shaped as ``EventLog`` writes them, and an application with a key
that reads its audit log."""
from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from shared.ids import new_id
from tests.conftest import bearer

FIRST_INSERTED = 10_000_000  # above any seq the tests' own writes reach
_seqs = itertools.count(FIRST_INSERTED)


def record_doc(seq: int, at, *, app_id=None, organization_id=None, action="role.created", actor_id="key-1",
               target_id="role-1", status="success", ip="192.0.2.1", **extra) -> dict:
    return {
        "_id": new_id(), "seq": seq, "app_id": app_id, "type": None, "subject": {}, "data": {"n": seq},
        "user_ids": [], "at": at, "action": action, "result": {"status": status},
        "actor": {"type": "api_key", "id": actor_id, "display": None},
        "target": {"type": "role", "id": target_id, "display": None}, "organization_id": organization_id,
        "request_id": f"req-{seq}", "ip": ip, "user_agent": "test", "sealed": False, **extra,
    }


@pytest.fixture
def insert_records(ctx, clock):
    """``insert_records(n, app_id=..., **fields)``: ``n`` records one millisecond apart,
    after the clock's now (which moves to the newest), so newer than anything written
    before, with seqs above anything the log has; returns their documents, oldest first."""

    def insert(n: int, **fields) -> list[dict]:
        start = next(_seqs)
        for _ in range(n):
            next(_seqs)
        base = clock()
        docs = [record_doc(start + i, base + timedelta(milliseconds=i + 1), **fields) for i in range(n)]
        clock.advance(n / 1000)
        for i in range(0, n, 10_000):
            ctx.store["events"].insert_many(docs[i:i + 10_000], ordered=False)
        return docs

    return insert


@pytest.fixture
def auditor(application, make_api_key):
    """(the application, the headers of an API key holding only audit:read)."""
    return application, bearer(make_api_key(application, permissions=["audit:read"]))
