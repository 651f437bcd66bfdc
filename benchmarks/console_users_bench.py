"""The console's users list and search with 100,000 users in one application, on the
embedded ``memory://`` store.

    .venv/bin/python -m benchmarks.console_users_bench [--users 100000] [--rounds 7]

``--users`` users of one application are written straight into the store (as
tests/audit/conftest.py writes audit records: a hundred thousand registrations would
take minutes of bcrypt), plus 1,000 users of another application.  Then an owner signed
in to the console asks, through falcon.testing (the whole request: auth middleware,
service, store, template), for:

- the list's first page (``/users``) and its last page (``?page=N``),
- a search by email prefix (``?q=user-04242``), by a piece of a name (``?q=Lovelace``),
  and by id (``?q=<uuid>``),
- the list with ``?status=suspended``.

Each is timed ``--rounds`` times; the median and the slowest wall time, and the median
CPU time of the process, are printed in milliseconds.  Exit status 1 when a median CPU
time is 300 ms or more (the issue's target; CPU time, because a request runs on one
thread and the wall time of a shared machine adds the waits for a core).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import falcon.testing

from controlplane.app import create_app
from tests.conftest import make_config

TARGET_MS = 300
SURNAMES = ("Lovelace", "Hopper", "Turing", "Noether", "Curie", "Hamilton", "Johnson", "Liskov")


def user_doc(app_id: str, n: int, created: datetime) -> dict:
    return {
        "_id": str(uuid.uuid4()), "app_id": app_id, "email": f"user-{n:06d}@example.com",
        "name": f"User {n} {SURNAMES[n % len(SURNAMES)]}", "password_hash": None, "email_verified": n % 3 == 0,
        "metadata": None, "avatar_url": None, "status": "suspended" if n % 50 == 0 else "active",
        "created_at": created, "updated_at": created, "deleted_at": None, "suspended_at": None,
        "last_login_at": None,
    }


def insert_users(store, docs: list[dict]) -> None:
    """Straight into the store: ``insert_many`` on MongoDB, mongomock's storage on the
    embedded store (its insert checks each unique index against every stored document),
    then the embedded store's index map is dropped so the next read maps them too."""
    if not store.is_memory:
        for i in range(0, len(docs), 10_000):
            store["users"].insert_many(docs[i:i + 10_000], ordered=False)
        return
    collection_store = store.db._database["users"]._store
    with store.db._lock:
        for doc in docs:
            collection_store._documents[doc["_id"]] = {
                **doc, **{k: v.astimezone(UTC).replace(tzinfo=None) for k, v in doc.items()
                          if isinstance(v, datetime)}}
        collection_store.__dict__.pop("_iamgate_index", None)


def timed(client, path: str, query: str, cookies: dict, rounds: int) -> tuple[float, float, float]:
    """Median and slowest wall time, and median CPU time, in ms.  The request runs on one
    thread, so its CPU time is what it takes on an idle core; on a loaded machine the
    wall time adds the waits for a core."""
    walls, cpus = [], []
    for _ in range(rounds):
        began, began_cpu = time.perf_counter(), time.process_time()
        response = client.simulate_get(path, query_string=query, cookies=cookies)
        cpus.append((time.process_time() - began_cpu) * 1000)
        walls.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, response.text[:500]
    return statistics.median(walls), max(walls), statistics.median(cpus)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)

    app = create_app(make_config(), start_background=False)
    services, client = app.services, falcon.testing.TestClient(app)
    registered = client.simulate_post("/api/dashboard/register", json={
        "email": "bench@example.com", "password": "Correct-Horse-9", "name": "Bench"})
    account_id = registered.json["data"]["id"]
    services.dashboard.accounts.store.update_account(account_id, {"email_verified": True})
    login = client.simulate_post("/api/dashboard/login", json={"email": "bench@example.com",
                                                                "password": "Correct-Horse-9"})
    cookies = {name: cookie.value for name, cookie in login.cookies.items()}
    created = client.simulate_post("/api/dashboard/applications", json={"name": "Big"}, cookies=cookies)
    other = client.simulate_post("/api/dashboard/applications", json={"name": "Other"}, cookies=cookies)
    app_id, other_id = created.json["data"]["id"], other.json["data"]["id"]

    start = datetime.now(UTC) - timedelta(days=365)
    docs = [user_doc(app_id, n, start + timedelta(seconds=n)) for n in range(args.users)]
    began = time.perf_counter()
    insert_users(services.store, docs + [user_doc(other_id, n, start) for n in range(1_000)])
    print(f"inserted {args.users} users in {time.perf_counter() - began:.1f} s")

    path = f"/console/applications/{app_id}/users"
    last_page = -(-sum(1 for d in docs if d["status"] != "deleted") // 25)
    cases = [
        ("first page", ""), (f"page {last_page} (the last)", f"page={last_page}"),
        ("email prefix user-04242", "q=user-04242"), ("name piece Lovelace", "q=Lovelace"),
        ("by id", f"q={docs[4242]['_id']}"), ("status=suspended", "status=suspended"),
    ]
    failed = False
    print(f"{'query':32} {'median ms':>10} {'max ms':>8} {'CPU median ms':>14}")
    for label, query in cases:
        median, slowest, cpu = timed(client, path, query, cookies, args.rounds)
        failed |= cpu >= TARGET_MS
        print(f"{label:32} {median:10.1f} {slowest:8.1f} {cpu:14.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
