"""Fixtures of the audit tests: audit records written straight into the store in bulk
(``insert_records``), shaped as ``EventLog`` writes them, and an application with a key
that reads its audit log; and the OIDC and MFA areas' helpers (a relying party's flow, a
user with TOTP on), shared rather than copied."""
from __future__ import annotations

import itertools
from datetime import UTC, timedelta

import pytest

from shared.ids import new_id
from tests.conftest import bearer
from tests.mfa.conftest import enable_mfa, start_login, verify  # noqa: F401  (fixtures)
from tests.oidc.conftest import authorize, exchange, issue_tokens, oidc_client, refresh_grant  # noqa: F401  (fixtures)

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


def bulk_insert(store, docs: list[dict]) -> None:
    """``insert_many``, except on the embedded store, where the documents go straight into
    mongomock's storage: its insert checks each unique index against every stored
    document, so a hundred thousand inserts would take minutes. The seqs and ids given
    are unique, which is all those checks would have found."""
    if not store.is_memory:
        for i in range(0, len(docs), 10_000):
            store["events"].insert_many(docs[i:i + 10_000], ordered=False)
        return
    documents = store.db._database["events"]._store._documents  # mongomock's, behind the embedded lock
    with store.db._lock:
        for doc in docs:
            documents[doc["_id"]] = {**doc, "at": doc["at"].astimezone(UTC).replace(tzinfo=None)}


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
        bulk_insert(ctx.store, docs)
        return docs

    return insert


@pytest.fixture
def auditor(application, make_api_key):
    """(the application, the headers of an API key holding only audit:read)."""
    return application, bearer(make_api_key(application, permissions=["audit:read"]))
