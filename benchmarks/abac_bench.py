"""What the one ABAC evaluator costs, in process: a POST check's policy work with 1, 20 and
100 active policies covering the permission (the decision benchmark's conditions, which do
not hold, so every deny is evaluated), what compiling costs a node, and what a tenant at
every cap leaves the garbage collector (tracked objects, a full collection's duration).

    .venv/bin/python -m benchmarks.run abac

Each figure is the median of interleaved repetitions (short: the machine is shared). The
HTTP side of a POST check is benchmarks/decision_bench.py's; this is the part the
evaluator decides, and the figure to set beside it. Prints; always exits 0.
"""
from __future__ import annotations

import gc
import json
import statistics
import time
from types import MappingProxyType

from shared.abac import ALLOW, DENY, CompiledPolicies, Policy, evaluator
from shared.authorization import decide_compiled
from shared.rbac import CompiledGrants

RESOURCE = {"owner_id": "someone", "classification": "internal", "tags": ["a", "b"], "path": "/docs/1",
            "private": False}
CONTEXT = {"ip": "10.20.1.5", "hour": 11, "country": "fr"}


def conditions(i: int) -> list[dict]:
    return [
        {"op": "eq", "left": {"attr": "resource.classification"}, "right": {"value": f"secret-{i}"}},
        {"not": {"op": "ip_in_cidr", "left": {"attr": "context.ip"},
                 "right": {"value": ["10.20.0.0/16", "10.30.0.0/16"]}}},
        {"any": [{"op": "lt", "left": {"attr": "context.hour"}, "right": {"value": 6}},
                 {"op": "gte", "left": {"attr": "context.hour"}, "right": {"value": 22 + i}}]},
        {"op": "contains", "left": {"attr": "resource.tags"}, "right": {"value": f"embargoed-{i}"}},
        {"op": "eq", "left": {"attr": "user.attributes.blocked"}, "right": {"value": True}},
        {"all": [{"op": "ne", "left": {"attr": "resource.owner_id"}, "right": {"attr": "user.id"}},
                 {"op": "eq", "left": {"attr": "resource.private"}, "right": {"value": True}}]},
        {"op": "in", "left": {"attr": "context.country"}, "right": {"value": ["aa", "bb", f"c{i}"]}},
    ]


def policies(count: int) -> list[Policy]:
    """``count`` policies covering ``documents:read``, two denies to an allow."""
    made = []
    for i in range(count):
        if i % 3 == 2:
            starts = {"op": "starts_with", "left": {"attr": "resource.path"}, "right": {"value": f"/s/{i}/"}}
            made.append(Policy(f"a{i}", f"a{i}", ALLOW, ("documents:read",), starts))
        else:
            choices = conditions(i)
            made.append(Policy(f"d{i}", f"d{i}", DENY, ("documents:read",), choices[i % len(choices)]))
    return made


def check_cost(counts=(1, 20, 100), repeats: int = 9, calls: int = 2000) -> dict[int, float]:
    """Microseconds a check of ``documents:read`` takes, by how many policies cover it."""
    grants = CompiledGrants("u1", True, None, frozenset({"documents:read"}), MappingProxyType({}), None)
    sets = {count: CompiledPolicies(policies(count)) for count in counts}
    samples: dict[int, list[float]] = {count: [] for count in counts}
    for _ in range(repeats):
        for count, compiled in sets.items():
            assert decide_compiled(grants, ["documents:read"], policies=compiled, resource=RESOURCE,
                                   context=CONTEXT)["documents:read"].allowed
            started = time.perf_counter()
            for _ in range(calls):
                decide_compiled(grants, ["documents:read"], policies=compiled, resource=RESOURCE, context=CONTEXT)
            samples[count].append((time.perf_counter() - started) / calls * 1e6)
    return {count: statistics.median(values) for count, values in samples.items()}


def at_the_caps(repeats: int = 7) -> dict:
    """Tracked objects and a full collection with a tenant's 1,000 policies of 32 nodes and
    4 KiB each compiled (tests/security/test_abac_policy_cost.py's conditions), the
    process's own objects frozen as each worker freezes them."""
    from tests.security.test_abac_policy_cost import COVERING, condition_at_the_caps

    gc.collect()
    gc.freeze()
    documents = [json.dumps({"id": f"p{i}", "name": f"p{i}", "effect": DENY if i % 2 else ALLOW,
                             "permissions": [COVERING[i % 4] if i < 400 else f"other{i}:read"],
                             "condition": condition_at_the_caps(i, 4096, 32)}) for i in range(1000)]
    started = time.perf_counter()
    compiled = CompiledPolicies(Policy.from_json(json.loads(document)) for document in documents)
    for permission in ["docs:read", *(f"other{i}:read" for i in range(400, 1000))]:
        compiled.effects(permission)
    build = time.perf_counter() - started
    del documents
    for _ in range(10):  # what a long-running worker's collections have untracked
        gc.collect()
    tracked = len(gc.get_objects())
    durations = []
    for _ in range(repeats):
        started = time.perf_counter()
        gc.collect()
        durations.append(time.perf_counter() - started)
    gc.unfreeze()
    return {"tracked": tracked, "collection_ms": statistics.median(durations) * 1e3,
            "build_ms": build * 1e3, "policies": len(compiled)}


def main(argv=None) -> int:  # noqa: ARG001 -- benchmarks.run's signature
    for count, microseconds in check_cost().items():
        print(f"check of a permission covered by {count} policies: {microseconds:.1f} µs (median)")
    caps = at_the_caps()
    print(f"tenant at every cap ({caps['policies']} policies): {caps['tracked']} tracked objects, full collection "
          f"{caps['collection_ms']:.1f} ms (median); parsed, indexed and compiled in {caps['build_ms']:.0f} ms")
    print(f"program cache: {len(evaluator._PROGRAMS)} programs, {evaluator._PROGRAMS.bytes / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
