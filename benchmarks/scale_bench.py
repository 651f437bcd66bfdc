"""Cost as data grows (``make bench-scale``): a user holding 1, 10 or 100 roles with 10 to
1,000 permissions in all (a tenth of them wildcards), against a user with one role of one
permission measured in the same run.

In process, through ``falcon.testing`` on a control plane over the embedded store (no
sockets, so the figures are the application's own cost and far less noisy than a load
test on a shared machine):

- the control plane's cached ``GET V1/authz/check`` (API key): median and p99 over
  ``--checks`` requests, for a permission granted exactly, one granted only through a
  wildcard, and one denied;
- the first check after the user's grants were invalidated (fetch and compile);
- ``GET /internal/v1/applications/{id}/users/{id}/grants`` (what a decision service fetches
  on a cache miss): median time and payload size;
- the compiled grants' check alone (``shared.rbac.CompiledGrants.allows``, which the
  decision service's cache answers with too).

- the decision service's memory per cached user at 10,000 and 100,000 cached users (the
  default ``IAMGATE_DECISION_CACHE_SIZE``): ``benchmarks.cache_fill`` in a fresh process
  per size, which fills the service's own cache through its own ``Lookup`` and reports
  the process's RSS before (the same-run baseline) and after.

Targets: a 1,000-permission user's cached check costs at most 1.5x a
1-permission user's; a cached user costs at most 2 KB of decision-service memory.

    .venv/bin/python -m benchmarks.scale_bench [--checks 2000] [--cached-users 10000,100000] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import timeit
from datetime import UTC, datetime

import falcon.testing

from benchmarks.decision_bench import percentile
from benchmarks.doc import ROOT, conditions, write_section
from controlplane.app import create_app
from shared.config import Config
from shared.ids import new_id
from shared.rbac import compile_grants

SECTION = "## Cost as data grows: latest run"
SHAPES = [(1, 1), (1, 10), (10, 100), (10, 1000), (100, 100), (100, 1000)]  # (roles, permissions in all)
TARGET_RATIO = 1.5
TARGET_BYTES_PER_USER = 2048
INTERNAL_TOKEN = "scale-bench-internal-token-0123456789"


def permissions(count: int, offset: int) -> list[str]:
    """``count`` permissions, every tenth a wildcard (``resN:*``, and ``*:approveN``)."""
    out = []
    for i in range(offset, offset + count):
        if i % 20 == 9:
            out.append(f"res{i}:*")
        elif i % 20 == 19:
            out.append(f"*:approve{i}")
        else:
            out.append(f"res{i}:read")
    return out


class World:
    def __init__(self):
        config = Config.from_env(env={"IAMGATE_RATE_LIMIT_API": "100000000/60",
                                      "IAMGATE_INTERNAL_TOKEN": INTERNAL_TOKEN}, bcrypt_rounds=4,
                                 secret_key="scale-bench-secret-key-0123456789")
        self.app = create_app(config, start_background=False)
        self.ctx = self.app.services
        self.client = falcon.testing.TestClient(self.app)
        self.application = self.ctx.applications.create({"name": "scale"}, organization_id=None,
                                                         owner_account_id=None)
        _, key = self.ctx.api_keys.create(self.application, {"name": "bench"})
        self.headers = {"Authorization": f"Bearer {key}"}
        self.internal = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
        self.app_id = self.application["_id"]

    def user(self, roles: int, total: int) -> tuple[str, list[str]]:
        now = datetime.now(UTC)
        user_id = new_id()
        self.ctx.store["users"].insert_one({"_id": user_id, "app_id": self.app_id, "email": f"{user_id}@example.com",
                                            "name": "u", "status": "active", "email_verified": True,
                                            "created_at": now, "updated_at": now, "deleted_at": None,
                                            "suspended_at": None})
        granted = []
        per_role = max(1, total // roles)
        for r in range(roles):
            names = ["documents:read"] if total == 1 else permissions(per_role, offset=r * per_role)
            role = self.ctx.roles.create(self.app_id, {"name": f"r-{user_id[:8]}-{r}", "display_name": "R",
                                                       "permissions": names, "is_system_role": False})
            self.ctx.roles.assign(self.app_id, user_id, {"role_id": role["_id"], "scope": None, "expires_at": None})
            granted += names
        return user_id, granted


def timed(call, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


ROUNDS = 10  # the cached checks of every row and kind are interleaved over this many rounds


def prepare(world: World, roles: int, total: int) -> dict:
    user_id, granted = world.user(roles, total)
    exact = next(p for p in reversed(granted) if not p.endswith(":*") and not p.startswith("*:"))
    wildcard = next((p.replace(":*", ":delete") for p in granted if p.endswith(":*")), None)
    url = f"/api/v1/applications/{world.app_id}/authz/check"

    def check(permission, expected):
        response = world.client.simulate_get(url, params={"user_id": user_id, "permission": permission},
                                             headers=world.headers)
        assert response.status_code == 200 and response.json["allowed"] is expected, response.text
        return response

    row = {"roles": roles, "permissions": len(granted), "wildcards": sum("*" in p for p in granted),
           "user_id": user_id, "samples": {}, "calls": {}}
    for name, permission, expected in (("exact", exact, True), ("wildcard", wildcard, True),
                                       ("denied", "nothing:here", False)):
        if permission is not None:
            check(permission, expected)
            row["calls"][name] = lambda p=permission, e=expected: check(p, e)
            row["samples"][name] = []

    def uncached():
        world.ctx.authz.grants_cache.invalidate((world.app_id, user_id), world.ctx.events.head())
        check(exact, True)

    row["uncached_call"] = uncached
    return row


def measure(world: World, row: dict, checks: int) -> None:
    for name, samples in row["samples"].items():
        row[name] = (statistics.median(samples), percentile(samples, 99))
    row["uncached"] = statistics.median(timed(row["uncached_call"], max(20, checks // 20)))
    grants_url = f"/internal/v1/applications/{world.app_id}/users/{row['user_id']}/grants"
    response = world.client.simulate_get(grants_url, headers=world.internal)
    assert response.status_code == 200, response.text
    row["grants_bytes"] = len(response.content)
    row["grants"] = statistics.median(timed(lambda: world.client.simulate_get(grants_url, headers=world.internal),
                                            max(20, checks // 20)))
    compiled = compile_grants(world.ctx.roles.grants(world.app_id, row["user_id"]), None, datetime.now(UTC))
    n = 200_000
    row["allows_ns"] = min(timeit.repeat(lambda: compiled.allows("nothing:here"), number=n, repeat=3)) / n * 1e9


def run(checks: int) -> list[dict]:
    world = World()
    rows = [prepare(world, roles, total) for roles, total in SHAPES]
    per_round = max(1, checks // ROUNDS)
    for _ in range(ROUNDS):  # interleaved: a burst of foreign load hits every row alike
        for row in rows:
            for name, call in row["calls"].items():
                row["samples"][name] += timed(call, per_round)
    for row in rows:
        measure(world, row, checks)
    return rows


def cache_memory(sizes: list[int]) -> list[dict]:
    """``benchmarks.cache_fill`` once per size, each in a process of its own (RSS is per process)."""
    out = []
    for users in sizes:
        fill = subprocess.run([sys.executable, "-m", "benchmarks.cache_fill", "--users", str(users)], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        out.append(json.loads(fill.stdout.strip().splitlines()[-1]))
    return out


def memory_met(memory: list[dict]) -> bool:
    return all(m["bytes_per_user"] <= TARGET_BYTES_PER_USER for m in memory)


def ratio(rows: list[dict]) -> float:
    base = rows[0]["exact"][0]
    return max(row[kind][0] for row in rows if row["permissions"] >= 1000 for kind in ("exact", "wildcard", "denied")
               if kind in row) / base


def report(rows: list[dict], checks: int, memory: list[dict]) -> str:
    def us(seconds):
        return f"{seconds * 1e6:,.0f} µs"

    lines = [conditions(), "",
             f"`python -m benchmarks.scale_bench --checks {checks}` (`make bench-scale`): in process through "
             "falcon.testing, control plane on memory://, API key; medians (p99 in brackets) over "
             f"{checks} cached checks per row and kind. The first row (one role, one permission) is the "
             "same-run baseline.", "",
             "| roles | permissions (wildcards) | cached check, exact | via wildcard | denied | first check after "
             "invalidation | grants fetch | grants payload | `CompiledGrants.allows` |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        cells = [f"{us(row[k][0])} ({us(row[k][1])})" if k in row else "-" for k in ("exact", "wildcard", "denied")]
        lines.append(f"| {row['roles']} | {row['permissions']} ({row['wildcards']}) | {' | '.join(cells)} "
                     f"| {us(row['uncached'])} | {us(row['grants'])} | {row['grants_bytes']:,} B "
                     f"| {row['allows_ns']:.0f} ns |")
    measured = ratio(rows)
    lines += ["", "| target | measured | met |", "|---|---|---|",
              f"| cached check of a 1,000-permission user <= 1.5x a 1-permission user's (slowest kind) "
              f"| {measured:.2f}x | {'yes' if measured <= TARGET_RATIO else 'NO'} |"]
    if memory:
        lines += ["", "Decision-service memory per cached user (`python -m benchmarks.cache_fill --users N`, one fresh "
                  "process per size: the service's `DecisionService` and `DecisionCache` filled through its own "
                  "`Lookup` with grants parsed from JSON as after a fetch, 1 to 3 of 20 roles each; RSS before the "
                  "fill is the same-run baseline):", "",
                  "| cached users | entries in the cache | RSS before | RSS after | per cached user |",
                  "|---|---|---|---|---|"]
        for m in memory:
            lines.append(f"| {m['users']:,} | {m['cached']:,} | {m['rss_before_mb']:.1f} MB "
                         f"| {m['rss_after_mb']:.1f} MB | {m['bytes_per_user']:,} B |")
        worst = max(m["bytes_per_user"] for m in memory)
        lines += ["", "| target | measured | met |", "|---|---|---|",
                  f"| a cached user costs at most 2 KB of decision-service memory | {worst:,} B (largest of the sizes) "
                  f"| {'yes' if memory_met(memory) else 'NO'} |"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=2000, help="cached checks per row and kind (default 2000)")
    parser.add_argument("--cached-users", default="10000,100000",
                        help="decision-cache sizes to measure memory at, comma-separated ('' for none)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args(argv)
    rows = run(args.checks)
    memory = cache_memory([int(n) for n in args.cached_users.split(",") if n.strip()])
    table = report(rows, args.checks, memory)
    print(f"\n{table}\n")
    if not args.no_write:
        write_section(SECTION, table)
    return 0 if ratio(rows) <= TARGET_RATIO and memory_met(memory) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
