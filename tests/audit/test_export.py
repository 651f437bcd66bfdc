"""GET .../audit-events/export: every matching record as NDJSON, newest first, streamed
(a generator over one cursor: no page size, memory flat; benchmarks/audit_bench.py
measures the memory)."""
from __future__ import annotations

import json
import types

from shared.timeutil import isoformat
from tests.audit.conftest import FIRST_INSERTED
from tests.conftest import assert_error

V1 = "/api/v1/applications/{}/audit-events/export"
ORG = "/api/dashboard/organizations/{}/audit-events/export"


def lines(response) -> list[dict]:
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    body = response.text
    assert body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]


def test_an_export_of_100000_records_holds_every_one_newest_first(client, ctx, auditor, insert_records):
    app, headers = auditor
    docs = insert_records(100_000, app_id=app["_id"])
    records = [r for r in lines(client.simulate_get(V1.format(app["_id"]), headers=headers))
               if r["data"].get("n", 0) >= FIRST_INSERTED]
    assert len(records) == 100_000
    for record, doc in zip(records, reversed(docs), strict=True):
        assert record["id"] == doc["_id"]
        assert record["at"] == isoformat(doc["at"]) and record["data"] == {"n": doc["seq"]}
        assert record["application_id"] == app["_id"] and record["actor"]["id"] == "key-1"


def test_the_export_is_a_stream_not_a_body(ctx, auditor, insert_records):
    app, _ = auditor
    insert_records(3, app_id=app["_id"])
    chunks = ctx.audit.export("app_id", app["_id"], {})
    assert isinstance(chunks, types.GeneratorType)
    assert sum(chunk.count(b"\n") for chunk in chunks) >= 3


def test_the_export_takes_the_filters(client, clock, auditor, insert_records):
    app, headers = auditor
    insert_records(5, app_id=app["_id"])
    failed = insert_records(3, app_id=app["_id"], status="failure")
    clock.advance(60)
    later = insert_records(2, app_id=app["_id"], status="failure")
    url = V1.format(app["_id"])
    got = lines(client.simulate_get(url, params={"result": "failure"}, headers=headers))
    assert [r["id"] for r in got] == [d["_id"] for d in reversed(failed + later)]
    got = lines(client.simulate_get(url, params={"result": "failure", "until": isoformat(later[0]["at"])},
                                    headers=headers))
    assert [r["id"] for r in got] == [d["_id"] for d in reversed(failed)]


def test_a_bad_filter_is_refused_before_the_stream_starts(client, auditor):
    app, headers = auditor
    assert_error(client.simulate_get(V1.format(app["_id"]), params={"since": "soon"}, headers=headers), 400,
                 "VALIDATION_INVALID_FORMAT")


def test_the_organization_export(dashboard_account, dashboard_app, insert_records):
    org = dashboard_account.organization_id
    docs = insert_records(3, app_id=dashboard_app["id"], organization_id=org)
    got = [r for r in lines(dashboard_account.get(ORG.format(org))) if r["data"].get("n", 0) >= FIRST_INSERTED]
    assert [r["id"] for r in got] == [d["_id"] for d in reversed(docs)]
