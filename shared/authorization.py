"""The answer to an authorization check: RBAC, and the ABAC policies covering the permission.

Spec "Authorization checks"; the order (docs/authorization.md, "Authorization checks"): a deny policy
whose condition holds denies; else RBAC allows; else an allow policy whose condition
holds allows; else deny. A user who is not active is never allowed. Pure: grants come
compiled for the check's scope at its instant (``shared.rbac.compile_grants``), policies
as data; nothing here does I/O, reads the clock or logs. A caller serving many tenants
on one event loop passes ``pause`` (a callable that yields the loop): a large policy set
is then evaluated ``PAUSE_EVERY`` policies at a time with a ``pause()`` between, so a
check of an application at every cap is never one long piece of work others wait behind.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

from shared.abac import CompiledPolicies, Policy, any_holds, compile_policies, condition_environment
from shared.rbac import CompiledGrants, Grants, compile_grants, resolve_scope


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one check; the ABAC fields are what a POST check reports."""

    allowed: bool
    abac_evaluated: bool = False
    policies_checked: int = 0


_NO_POLICIES = CompiledPolicies(())

ALLOWED = Decision(True)
DENIED = Decision(False)

# ABAC decisions by (allowed, policies_checked): values, so one object serves every check
# that reaches the same answer (a frozen dataclass costs more to build than to look up).
_ABAC_DECISIONS: dict[tuple[bool, int], Decision] = {}
_ABAC_DECISIONS_MAX = 1024


def _abac_decision(allowed: bool, count: int) -> Decision:
    decision = _ABAC_DECISIONS.get((allowed, count))
    if decision is None:
        decision = Decision(allowed, abac_evaluated=True, policies_checked=count)
        if len(_ABAC_DECISIONS) < _ABAC_DECISIONS_MAX:
            _ABAC_DECISIONS[(allowed, count)] = decision
    return decision


def rbac_decision(compiled: CompiledGrants, permission: str) -> Decision:
    """RBAC alone (a GET check, or no active policy covers ``permission``): allowed iff the
    user is active and an active assignment applying to the scope has a covering pattern."""
    return ALLOWED if compiled.user_active and compiled.allows(permission) else DENIED


def decide_compiled(compiled: CompiledGrants, permissions: Collection[str], *,
                    policies: Iterable[Policy] | CompiledPolicies = (), resource=None,
                    context=None, pause=None) -> dict[str, Decision]:
    """The decision for each of ``permissions``, the scope fixed when ``compiled`` was."""
    compiled_policies = (policies if type(policies) is CompiledPolicies
                         else compile_policies(policies) if policies else _NO_POLICIES)
    if not compiled_policies.policies:
        return {permission: rbac_decision(compiled, permission) for permission in permissions}

    if len(permissions) == 1:
        (permission,) = permissions
        return {permission: decide_one(compiled, permission, compiled_policies, resource, context, pause)}
    return _decide_each(compiled, permissions, compiled_policies, resource, context, pause)


def decide_one(compiled: CompiledGrants, permission: str, policies: CompiledPolicies, resource=None,
               context=None, pause=None) -> Decision:
    """:func:`decide_compiled` for one permission."""
    count, denies, allows = policies.effects(permission)
    if not count:
        return rbac_decision(compiled, permission)
    # Counted even when the user is not active: the count depends only on the policies,
    # and a different one would tell the caller the user is not active.
    allowed = compiled.user_active and _allowed(compiled, permission, denies, allows, condition_environment(
        compiled.user_id, compiled.attributes, resource, context), None, pause)
    return _ABAC_DECISIONS.get((allowed, count)) or _abac_decision(allowed, count)


def _allowed(compiled: CompiledGrants, permission: str, denies: tuple, allows: tuple, environment: dict, memo,
             pause) -> bool:
    """A deny whose condition holds denies; else RBAC allows; else an allow that holds."""
    return not _any_holds(denies, environment, memo, True, pause) and (
        compiled.allows(permission) or _any_holds(allows, environment, memo, False, pause))


def _decide_each(compiled: CompiledGrants, permissions: Collection[str], compiled_policies: CompiledPolicies,
                 resource, context, pause=None) -> dict[str, Decision]:
    """Policy by policy, each condition's answer remembered for the other permissions."""
    environment = None
    # A policy's condition gives one answer per check: remembered when several permissions
    # may ask for it again.
    holds: dict[int, bool] | None = {} if len(permissions) > 1 else None
    results: dict[str, Decision] = {}
    for permission in permissions:
        count, denies, allows = compiled_policies.effects(permission)
        if not count:
            results[permission] = rbac_decision(compiled, permission)
            continue
        if not compiled.user_active:
            # Counted all the same: the count depends only on the policies, and a
            # different one would tell the caller the user is not active.
            allowed = False
        else:
            if environment is None:
                environment = condition_environment(compiled.user_id, compiled.attributes, resource, context)
            allowed = _allowed(compiled, permission, denies, allows, environment, holds, pause)
        results[permission] = _abac_decision(allowed, count)
    return results


# Policies evaluated between two pauses: about 0.2 ms at IAMGATE_MAX_CONDITION_NODES each.
PAUSE_EVERY = 32


def _any_holds(tests: tuple, environment: dict, memo, malformed: bool, pause) -> bool:
    """``any_holds``, with ``pause()`` between every PAUSE_EVERY tests when given."""
    if pause is None or len(tests) <= PAUSE_EVERY:
        return any_holds(tests, environment, memo, malformed)
    for start in range(0, len(tests), PAUSE_EVERY):
        if start:
            pause()
        if any_holds(tests[start:start + PAUSE_EVERY], environment, memo, malformed):
            return True
    return False


def decide(grants: Grants, permission: str, *, now: datetime, scope: str | None = None,
           policies: Iterable[Policy] | CompiledPolicies = (), resource=None, context=None) -> Decision:
    """Answer one authorization check.

    A user who is not active is never allowed. Without policies (GET checks) this is RBAC:
    allowed iff an active assignment applying to the check's scope has a pattern covering
    ``permission``. With policies, those that are active and cover ``permission`` are
    evaluated: a deny policy whose condition holds denies; else RBAC allows; else an allow
    policy whose condition holds allows; else deny.
    """
    return decide_many(grants, (permission,), now=now, scope=scope, policies=policies, resource=resource,
                       context=context)[permission]


def decide_many(grants: Grants, permissions: Collection[str], *, now: datetime, scope: str | None = None,
                policies: Iterable[Policy] | CompiledPolicies = (), resource=None,
                context=None) -> dict[str, Decision]:
    """:func:`decide` for several permissions (bulk check), compiling the grants once."""
    compiled = compile_grants(grants, resolve_scope(scope, context), now)
    return decide_compiled(compiled, permissions, policies=policies, resource=resource, context=context)
