"""The decision service's cache and the change-log bookkeeping that keeps it honest.

Per worker process (gunicorn's gevent workers each have their own):

- grants per (application, user), TTL ``IAMGATE_DECISION_CACHE_TTL``, at most
  ``IAMGATE_DECISION_CACHE_SIZE`` entries; each entry keeps its grants compiled per scope,
  so a cached check is a few dictionary lookups;
- ABAC policies per application (compiled) and API key digests per application. A policy
  event naming the policies it changed (``policy_ids``) marks them in the cached set
  instead of dropping it; the next check fetches just those and patches them in
  (``swap_policies``), so an edit costs what changed, not the whole set.

Rules (docs/decision-service.md, "Cache"):

- every fill carries the change-log seq the control plane read it at. A fill older than an
  invalidation already applied to its key is used for the answer that asked for it but never
  stored ("no stale re-fill"), so a fetch racing a revocation cannot keep the pre-revocation
  answer alive. A fill older than the last reset or resync (``floor``) is not stored either;
- ``applied`` is the highest seq whose invalidations have been applied; a check with
  ``min_revision`` above it is answered from a fresh fetch instead;
- ``resync`` drops everything (a ``reset`` frame, a first connection, or a change log that
  went backwards because a control plane without persistence restarted).

Expiry is the cache's clock (the service clock, so tests move it); assignment expiry inside
grants is handled by recompiling when a compiled form's ``valid_until`` has passed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from types import MappingProxyType

from cachetools import TTLCache

from shared.abac import CompiledPolicies
from shared.authorization import Decision, rbac_decision
from shared.concurrency import native_lock
from shared.invalidation import API_KEY_KINDS, APPLICATION_KINDS, MAX_PATCHED_POLICIES, POLICY_KINDS
from shared.rbac import Assignment, CompiledGrants, Grants, compile_grants

# Applications a worker keeps policies and API keys of; beyond, the least recently
# filled are re-fetched on their next check.
MAX_APPLICATIONS = 10000
# An unknown application id is remembered this long (seconds), so a caller probing
# random ids costs the control plane at most one lookup per id per interval. Any change
# event of the application forgets it at once.
MISSING_APPLICATION_TTL = 2.0
# Distinct scopes compiled per cached user; callers choose scopes, so this is bounded.
MAX_SCOPES_PER_USER = 64
# RBAC answers remembered per compiled scope (permission names are the caller's choice).
MAX_ANSWERS_PER_SCOPE = 1024
# Invalidations remembered for in-flight fills; beyond, the floor rises instead (safe:
# it only stops storing fills that started before it).
MAX_REMEMBERED_INVALIDATIONS = 100000

_UNSYNCED = float("inf")  # before the stream's first hello nothing may be stored


class Compactor:
    """Shares what cached users have in common (the cache's own memory per user): one
    ``Assignment`` object per distinct assignment (so a role's permission tuple and its
    strings exist once, not once per user fetched), one tuple per distinct set of
    assignments, one frozenset per distinct set of granted patterns, one table of RBAC
    answers per distinct (active, patterns) pair, and one empty attribute mapping.

    Everything shared is an immutable value, so sharing changes no answer. Each table is
    bounded: past ``MAX_SHARED`` distinct values it starts again (only sharing is lost)."""

    MAX_SHARED = 65536

    def __init__(self):
        self._lock = native_lock()
        self._values: dict = {}
        self._assignments: dict[tuple, Assignment] = {}
        self._answers: dict[tuple, dict[str, Decision]] = {}

    def _shared(self, value):
        try:
            found = self._values.get(value)
        except TypeError:  # unhashable (an attribute holding a list): not shared
            return value
        if found is not None:
            return found
        if len(self._values) >= self.MAX_SHARED:
            self._values.clear()
        self._values[value] = value
        return value

    def grants(self, grants: Grants, user_id: str | None = None) -> Grants:
        """``grants``, its parts replaced by shared equal ones; ``user_id``: the cache key's
        string, kept instead of the fetched copy."""
        if user_id is not None and grants.user_id == user_id and grants.user_id is not user_id:
            object.__setattr__(grants, "user_id", user_id)
        with self._lock:
            assignments = tuple(self._assignment(assignment) for assignment in grants.assignments)
            shared = self._shared(assignments)
        if shared is not grants.assignments:
            object.__setattr__(grants, "assignments", shared)  # frozen: the same value, a shared object
        if not grants.attributes:
            object.__setattr__(grants, "attributes", _NO_ATTRIBUTES)
        return grants

    def _assignment(self, assignment: Assignment) -> Assignment:
        key = (assignment.role_id, assignment.role_name, assignment.permissions, assignment.scope,
               assignment.expires_at)
        found = self._assignments.get(key)
        if found is None:
            permissions = tuple(sys.intern(permission) for permission in assignment.permissions)
            object.__setattr__(assignment, "permissions", self._shared(permissions))
            if len(self._assignments) >= self.MAX_SHARED:
                self._assignments.clear()
            found = self._assignments[key] = assignment
        return found

    def compiled(self, compiled: CompiledGrants) -> CompiledGrants:
        with self._lock:
            patterns = self._shared(compiled.patterns)
        if patterns is compiled.patterns:
            return compiled
        return replace(compiled, patterns=patterns)

    def answers(self, compiled: CompiledGrants) -> dict[str, Decision]:
        """The RBAC answers table of everyone with these compiled grants' (active, patterns)."""
        key = (compiled.user_active, compiled.patterns)
        with self._lock:
            table = self._answers.get(key)
            if table is None:
                if len(self._answers) >= self.MAX_SHARED:
                    self._answers.clear()
                table = self._answers[key] = {}
        return table


_NO_ATTRIBUTES: MappingProxyType[str, object] = MappingProxyType({})
COMPACT = Compactor()


class ScopedGrants:
    """A user's grants compiled for one scope, with the RBAC decisions given so far (a
    decision is a pure function of whether the user is active and of the granted
    patterns, so users sharing both share the table: ``Compactor.answers``)."""

    __slots__ = ("compiled", "_decisions")

    def __init__(self, compiled: CompiledGrants, compactor: Compactor = COMPACT):
        self.compiled = compiled = compactor.compiled(compiled)
        self._decisions: dict[str, Decision] = compactor.answers(compiled)

    def allows(self, permission: str) -> bool:
        return self.decide(permission).allowed

    def decide(self, permission: str) -> Decision:
        """RBAC alone (no policy applies): ``shared.authorization.rbac_decision``, remembered."""
        decision = self._decisions.get(permission)
        if decision is None:
            decision = rbac_decision(self.compiled, permission)
            if len(self._decisions) >= MAX_ANSWERS_PER_SCOPE:
                self._decisions.clear()
            self._decisions[permission] = decision
        return decision

    def decide_many(self, permissions) -> dict[str, Decision]:
        decisions = self._decisions
        try:
            return {permission: decisions[permission] for permission in permissions}
        except KeyError:
            return {permission: self.decide(permission) for permission in permissions}


class GrantsEntry:
    """A user's grants as read at ``seq``, with their compiled form per scope (the
    unscoped form, which nearly every check uses, in a slot of its own)."""

    __slots__ = ("grants", "seq", "_unscoped", "_scopes")

    def __init__(self, grants: Grants, seq: int, *, user_id: str | None = None):
        self.grants = COMPACT.grants(grants, user_id)
        self.seq = seq
        self._unscoped: ScopedGrants | None = None
        self._scopes: dict[str, ScopedGrants] | None = None

    def at(self, scope: str | None, now) -> ScopedGrants:
        """The grants compiled for ``scope``; recompiled once an assignment in them expired."""
        if scope is None:
            scoped = self._unscoped
        else:
            scoped = self._scopes.get(scope) if self._scopes is not None else None
        if scoped is None or (scoped.compiled.valid_until is not None and now >= scoped.compiled.valid_until):
            scoped = ScopedGrants(compile_grants(self.grants, scope, now))
            if scope is None:
                self._unscoped = scoped
            else:
                if self._scopes is None or len(self._scopes) >= MAX_SCOPES_PER_USER:
                    self._scopes = {}
                self._scopes[scope] = scoped
        return scoped


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    permissions: tuple[str, ...]
    may_check: bool  # holds a pattern covering authz:check


@dataclass(frozen=True, slots=True)
class PolicySet:
    """An application's active policies as read at ``seq``; ``stale``: the ids of those
    a change event named since, to be fetched and patched in before the next use;
    ``read_at``: when the set was last read whole (the cache's clock), what its TTL counts
    from however often it is patched."""

    seq: int
    compiled: CompiledPolicies
    stale: frozenset = frozenset()
    read_at: float | None = None


@dataclass(frozen=True, slots=True)
class KeyRing:
    seq: int
    by_digest: dict  # SHA-256 hex of the key -> ApiKey


@dataclass(frozen=True, slots=True)
class Dropped:
    """How many cached entries a change event dropped, by kind."""

    grants: int = 0
    policies: int = 0
    api_keys: int = 0

    @property
    def total(self) -> int:
        return self.grants + self.policies + self.api_keys


class DecisionCache:
    def __init__(self, *, ttl: float, maxsize: int, timer):
        self._ttl = ttl
        self._timer = timer
        self._lock = native_lock()
        self._grants: TTLCache = TTLCache(maxsize, ttl, timer)
        self._policies: TTLCache = TTLCache(MAX_APPLICATIONS, ttl, timer)
        self._keys: TTLCache = TTLCache(MAX_APPLICATIONS, ttl, timer)
        self._missing: TTLCache = TTLCache(MAX_APPLICATIONS, MISSING_APPLICATION_TTL, timer)
        self._invalidated: dict[tuple, int] = {}
        self._inflight = 0
        self.floor = _UNSYNCED
        self.applied = 0   # highest seq whose invalidations are applied
        self.head = 0      # highest seq the stream said exists

    # -- reads (the hot path: no I/O, no allocation beyond the lookup)

    # Item access rather than TTLCache.get, which wraps it in a second timer context.

    def grants(self, app_id: str, user_id: str) -> GrantsEntry | None:
        return self._cached(self._grants, (app_id, user_id))

    def policies(self, app_id: str) -> PolicySet | None:
        return self._cached(self._policies, app_id)

    def keys(self, app_id: str) -> KeyRing | None:
        return self._cached(self._keys, app_id)

    def _cached(self, table, key):
        with self._lock:
            try:
                return table[key]
            except KeyError:
                return None

    def is_missing(self, app_id: str) -> bool:
        with self._lock:
            return app_id in self._missing

    def fresh_through(self, revision: int) -> bool:
        """Every change up to ``revision`` has been applied (read-your-writes)."""
        return self.applied >= revision

    # -- fills

    def filling(self) -> _Fill:
        """Wrap a control-plane fetch and the ``store_*`` of its result (both inside the
        block): while fetches are in flight, invalidations are remembered for the
        no-stale-re-fill rule."""
        return _Fill(self)

    def store_grants(self, app_id: str, user_id: str, entry: GrantsEntry) -> bool:
        app_id = sys.intern(app_id)  # one string per application, not one per cached user
        return self._store(self._grants, (app_id, user_id), entry.seq, entry,
                           (("grants", app_id, user_id), ("app", app_id)))

    def store_policies(self, app_id: str, policies: PolicySet) -> bool:
        if policies.read_at is None:
            policies = replace(policies, read_at=self._timer())
        return self._store(self._policies, app_id, policies.seq, policies, (("policies", app_id), ("app", app_id)))

    def swap_policies(self, app_id: str, old: PolicySet, new: PolicySet) -> bool:
        """Store ``new``, ``old`` patched, only if the cache still holds ``old``: an event
        applied meanwhile marked it again (the next check patches once more), a reset
        dropped it. A set whose whole read is older than the TTL is dropped instead, so
        patches never keep unchanged policies longer than a fill would be kept."""
        with self._lock:
            if self._policies.get(app_id) is not old:
                return False
            if self._timer() - old.read_at >= self._ttl:
                del self._policies[app_id]
                return False
            self._policies[app_id] = new
            return True

    def store_keys(self, app_id: str, ring: KeyRing) -> bool:
        return self._store(self._keys, app_id, ring.seq, ring, (("keys", app_id), ("app", app_id)))

    def store_missing(self, app_id: str) -> None:
        with self._lock:
            self._missing[app_id] = True

    def _store(self, cache: TTLCache, key, seq: int, value, invalidation_keys) -> bool:
        """Store unless an invalidation newer than ``seq`` was applied to ``key``."""
        with self._lock:
            if seq < self.floor:
                return False
            invalidated = self._invalidated
            for invalidation_key in invalidation_keys:
                if seq < invalidated.get(invalidation_key, -1):
                    return False
            cache[key] = value
            return True

    # -- the stream's side

    def apply(self, seq: int, app_id: str | None, type_: str, user_ids, policy_ids=None) -> Dropped | None:
        """Apply one change event (``shared.invalidation``: ``user_ids`` are the users the
        control plane found affected, ``policy_ids`` the policies a policy event changed,
        None when it named none). Returns what was dropped or marked for a patch, or None
        for an event already applied."""
        with self._lock:
            if seq <= self.applied:
                return None
            self.applied = seq
            self.head = max(self.head, seq)
            if app_id is None:
                return Dropped()
            self._missing.pop(app_id, None)
            remember = self._remember if self._inflight else _forget
            if type_ in APPLICATION_KINDS:
                remember(("app", app_id), seq)
                doomed = [key for key in self._grants if key[0] == app_id]
                for key in doomed:
                    del self._grants[key]
                return Dropped(grants=len(doomed),
                               policies=int(self._policies.pop(app_id, None) is not None),
                               api_keys=int(self._keys.pop(app_id, None) is not None))
            policies = api_keys = grants = 0
            if type_ in POLICY_KINDS:
                remember(("policies", app_id), seq)
                policies = self._mark_policies(app_id, seq, policy_ids)
            elif type_ in API_KEY_KINDS:
                remember(("keys", app_id), seq)
                api_keys = _drop_older(self._keys, app_id, seq)
            for user_id in user_ids:
                remember(("grants", app_id, user_id), seq)
                grants += _drop_older(self._grants, (app_id, user_id), seq)
            return Dropped(grants, policies, api_keys)

    def advance(self, seq: int) -> None:
        """The stream covered every event up to ``seq`` (a heartbeat)."""
        with self._lock:
            self.head = max(self.head, seq)
            if seq > self.applied:
                self.applied = seq

    def saw_head(self, seq: int) -> None:
        with self._lock:
            self.head = max(self.head, seq)

    def resync(self, seq: int) -> int:
        """Drop everything and continue from ``seq``; returns how many entries were dropped."""
        with self._lock:
            dropped = len(self._grants) + len(self._policies) + len(self._keys)
            self._grants.clear()
            self._policies.clear()
            self._keys.clear()
            self._missing.clear()
            self._invalidated.clear()
            self.floor = seq
            self.applied = seq
            self.head = seq
            return dropped

    @property
    def lag(self) -> int:
        return max(0, self.head - self.applied)

    def __len__(self) -> int:
        return len(self._grants)

    # -- no-stale-re-fill bookkeeping (called with the lock held)

    def _mark_policies(self, app_id: str, seq: int, policy_ids) -> int:
        """Mark ``policy_ids`` in the application's cached set for a patch (1 if it was
        there and older than ``seq``), or drop it when they are unknown or too many."""
        entry = self._policies.get(app_id)
        if entry is None or entry.seq >= seq:
            return 0
        stale = entry.stale.union(policy_ids) if policy_ids is not None else None
        if stale is None or len(stale) > MAX_PATCHED_POLICIES:
            del self._policies[app_id]
        else:
            self._policies[app_id] = replace(entry, stale=stale)
        return 1

    def _remember(self, key: tuple, seq: int) -> None:
        if len(self._invalidated) >= MAX_REMEMBERED_INVALIDATIONS:
            self._invalidated.clear()
            self.floor = max(self.floor, self.applied)
        self._invalidated[key] = seq

    def _begin_fill(self) -> None:
        with self._lock:
            self._inflight += 1

    def _end_fill(self) -> None:
        with self._lock:
            self._inflight -= 1
            if not self._inflight:
                # A fill starting from now on reads at a seq at least as new as every
                # invalidation applied so far, so none of them can refuse it.
                self._invalidated.clear()


def _drop_older(cache: TTLCache, key, seq: int) -> int:
    """Drop the entry unless it was read at ``seq`` or later (then it already shows the
    change: a fetch past the cache for ``min_revision`` stays useful). Returns 1 if dropped."""
    entry = cache.get(key)
    if entry is None or entry.seq >= seq:
        return 0
    del cache[key]
    return 1


def _forget(key, seq) -> None:
    """No fill in flight: a later fill reads at a newer seq anyway."""


class _Fill:
    __slots__ = ("_cache",)

    def __init__(self, cache: DecisionCache):
        self._cache = cache

    def __enter__(self):
        self._cache._begin_fill()
        return self

    def __exit__(self, *exc):
        self._cache._end_fill()
        return False
