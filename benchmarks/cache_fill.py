"""Memory of the decision service's cache per cached user, measured in one process.

    .venv/bin/python -m benchmarks.cache_fill [--users 100000]

Builds the decision service's ``DecisionService`` as a worker does (same cache, same
``Lookup``), with the control-plane client replaced by one that answers grants shaped as
the control plane's internal API answers them (``Grants.from_json`` of a JSON document,
so every user's strings are fresh objects, as after an HTTP fetch): 20 roles of 4 to 15
permissions, each user holding 1 to 3 of them, one in ten of those assignments scoped,
one user in five with two ABAC attributes. Every user is then checked once (a cache miss
that fills and compiles the entry) and once more (a hit). Prints the process's RSS before
and after, and the difference per user, as one JSON line.

Filling through HTTP would measure the control plane (100,000 lookups on memory://), not
the cache; ``benchmarks.footprint`` adds this difference to the sidecar's own idle RSS.
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import time
import uuid
from datetime import UTC, datetime

from decision.cache import DecisionCache
from decision.metrics import DecisionMetrics
from decision.service import DecisionService
from shared.rbac import Grants


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Follower:
    application_id = None

    def trusted(self) -> bool:
        return True


class _Client:
    def __init__(self, catalogue: list[dict]):
        self._catalogue = catalogue

    def grants(self, app_id, user_id, *, request_id=None):  # noqa: ARG002 -- ControlPlaneClient.grants' signature
        # A fresh parse per user, as a fetch over HTTP gives.
        return 1, Grants.from_json(json.loads(document(self._catalogue, user_id)))


def roles(rng: random.Random) -> list[dict]:
    resources = [f"resource{i}" for i in range(30)]
    actions = ["read", "write", "delete", "list", "share", "*"]
    out = []
    for index in range(20):
        permissions = sorted({f"{rng.choice(resources)}:{rng.choice(actions)}" for _ in range(rng.randint(4, 15))})
        out.append({"role_id": str(uuid.UUID(int=index)), "role_name": f"role-{index}", "permissions": permissions})
    return out


def document(catalogue: list[dict], user_id: str) -> str:
    """The user's grants as the internal API's JSON, drawn from a generator seeded by the id."""
    rng = random.Random(user_id)
    assignments = [{**role, "scope": f"project-{rng.randint(1, 50)}" if rng.random() < 0.1 else None,
                    "expires_at": None}
                   for role in rng.sample(catalogue, rng.randint(1, 3))]
    attributes = {"department": rng.choice(["sales", "ops", "eng"]), "level": rng.randint(1, 5)} \
        if rng.random() < 0.2 else {}
    return json.dumps({"user_id": user_id, "status": "active", "assignments": assignments,
                       "attributes": attributes, "seq": 1})


def fill(users: int) -> dict:
    rng = random.Random(7)
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(users)]
    cache = DecisionCache(ttl=3600, maxsize=max(users, 100), timer=time.monotonic)
    cache.resync(0)
    service = DecisionService(client=_Client(roles(rng)), cache=cache, follower=_Follower(), verifier=None,
                              metrics=DecisionMetrics(), clock=lambda: datetime.now(UTC))
    app_id = str(uuid.uuid4())
    gc.collect()
    before = rss_mb()
    for user_id in ids:
        service.begin(app_id).decide(user_id, ("resource1:read",), scope=None, min_revision=None, abac=False)
    gc.collect()
    hits = sum(service.begin(app_id).decide(user_id, ("resource1:read",), scope=None, min_revision=None,
                                            abac=False)[1] for user_id in ids)
    after = rss_mb()
    return {"users": users, "cached": len(cache), "hits": hits, "rss_before_mb": round(before, 1),
            "rss_after_mb": round(after, 1), "bytes_per_user": round((after - before) * 1024 * 1024 / users)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100000)
    args = parser.parse_args(argv)
    print(json.dumps(fill(args.users)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
