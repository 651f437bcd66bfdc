"""Authorization checks of the control plane and the permission gates of V1 routes.

Answers come from the pure authorization code (``shared.rbac``, ``shared.abac``,
``shared.authorization``) over a per-process cache of each user's grants (the spec's
"permission check cache": 1 hour, ``IAMGATE_AUTHZ_CACHE_TTL``), keyed by (application,
user), and of each application's active ABAC policies.

Invalidation is the rule the decision service applies too (``shared.invalidation``): the
users an event affects lose their grants, application.deleted drops everything of the
application, and a policy event marks the policies it names (``changed_policies``) in
the application's cached set: the next check reads just those by id and patches them in
(``CompiledPolicies.patched``), so an edit costs what changed, not the whole set; a policy
event naming none, or more than MAX_PATCHED_POLICIES pending, drops the set (read whole
again).  Events of this process arrive synchronously (``EventLog.listen``: applied before
the write's response is sent), those of other replicas through the tailer.

No stale re-fill: a fill records the log head it read BEFORE its data; it is stored only
if no invalidation of that key (or its application, or everything) newer than that head
has been applied meanwhile -- otherwise it serves its one answer and is discarded, so a
read racing a write can never keep the pre-write answer cached.  A patch is stored only
in place of the very entry it patched (``SeqCache.swap``): an event applied while it read
marked that entry again, and the next check patches once more.  A patched set claims the
seq through which it shows every change: its base's, or the head read before the patch
if every event up to it has been applied here (``AppliedSeqs``), so ``min_revision`` is
never answered from a set that may miss a write another replica made.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from controlplane.abac.service import PolicyReader
from controlplane.events import EventLog, Tailer
from controlplane.lookup_cache import TtlDict
from controlplane.roles.service import RoleService
from shared.abac import CompiledPolicies
from shared.authorization import decide_compiled, rbac_decision
from shared.concurrency import yield_to_others
from shared.errors import RevisionAhead
from shared.hotmetrics import HotCounter
from shared.invalidation import APPLICATION_KINDS, MAX_PATCHED_POLICIES, POLICY_KINDS, affected_users, changed_policies
from shared.rbac import compile_grants, resolve_scope
from shared.timeutil import Clock, seconds_of

GRANTS_CACHE_SIZE = 100_000
POLICIES_CACHE_SIZE = 10_000
# Remembered invalidation seqs; when one is forgotten, every fill older than it is refused.
INVALIDATION_MARKS = 100_000
# Compiled answers kept per cached user: one per scope checked recently.
SCOPES_PER_USER = 32

_APP = object()  # marks an application-wide invalidation in SeqCache


class SeqCache:
    """A TTL cache of (app_id, ...) keys whose fills obey the no-stale-re-fill rule.

    ``hits`` and ``misses`` count the lookups its reader answered from it or not (plain
    integers, added to the metrics when they are read: ``export_cache_counts``)."""

    def __init__(self, *, ttl: int, maxsize: int, timer):
        self.hits = 0
        self.misses = 0
        self._data = TtlDict(ttl=ttl, maxsize=maxsize, timer=timer) if ttl > 0 else None
        self._marks: OrderedDict = OrderedDict()  # key or (_APP, app_id) -> seq of the last invalidation
        self._floor = 0
        self._lock = threading.Lock()

    def get(self, key):
        """The cached value of ``key`` or None; no lock (``TtlDict.get``)."""
        return None if self._data is None else self._data.get(key)

    def put(self, key, value, seq: int) -> bool:
        """Store ``value`` read at ``seq`` unless an invalidation newer than ``seq`` was applied."""
        if self._data is None:
            return False
        with self._lock:
            newest = max(self._floor, self._marks.get(key, 0), self._marks.get((_APP, key[0]), 0))
            if seq < newest:
                return False
            self._data[key] = value
            return True

    def amend(self, key, seq: int, amend) -> None:
        """An invalidation of ``key`` at ``seq`` (as ``invalidate``) that keeps its value as
        ``amend(value)`` -- a value that knows what to read again -- with its expiry; an
        ``amend`` answering None drops it."""
        with self._lock:
            if self._data is not None:
                value = self._data.get(key)
                if value is not None:
                    amended = amend(value)
                    if amended is None:
                        self._data.pop(key, None)
                    else:
                        self._data.replace(key, amended)
            self._mark(key, seq)

    def swap(self, key, old, new) -> bool:
        """Store ``new`` (keeping the expiry) in place of ``old`` only if ``key`` still holds
        ``old``: nothing invalidated or replaced it meanwhile."""
        if self._data is None:
            return False
        with self._lock:
            if self._data.get(key) is not old:
                return False
            self._data.replace(key, new)
            return True

    def invalidate(self, key, seq: int) -> None:
        with self._lock:
            if self._data is not None:
                self._data.pop(key, None)
            self._mark(key, seq)

    def invalidate_app(self, app_id: str, seq: int) -> None:
        with self._lock:
            if self._data is not None:
                self._data.drop_where(lambda key, _value: key[0] == app_id)
            self._mark((_APP, app_id), seq)

    def clear(self, seq: int) -> None:
        with self._lock:
            if self._data is not None:
                self._data.clear()
            self._floor = max(self._floor, seq)
            self._marks.clear()

    def _mark(self, key, seq: int) -> None:
        if seq > self._marks.get(key, 0):
            self._marks[key] = seq
        self._marks.move_to_end(key)
        while len(self._marks) > INVALIDATION_MARKS:
            _, forgotten = self._marks.popitem(last=False)
            self._floor = max(self._floor, forgotten)


class _CachedGrants:
    """A user's grants plus their compiled forms per scope (recompiled once an
    assignment in them expires)."""

    __slots__ = ("grants", "compiled")

    def __init__(self, grants):
        self.grants = grants
        self.compiled = {}

    @property
    def seq(self) -> int:
        return self.grants.seq

    def at(self, scope, now):
        compiled = self.compiled.get(scope)
        if compiled is None or (compiled.valid_until is not None and now >= compiled.valid_until):
            compiled = compile_grants(self.grants, scope, now)
            if len(self.compiled) >= SCOPES_PER_USER:
                self.compiled.clear()
            self.compiled[scope] = compiled
        return compiled


class _CachedPolicies:
    """An application's active policies as read at ``seq``, with the ids of the policies
    changed since (``stale``), to be read again and patched in before the next use."""

    __slots__ = ("policies", "seq", "stale")

    def __init__(self, policies: CompiledPolicies, seq: int, stale: frozenset = frozenset()):
        self.policies = policies
        self.seq = seq
        self.stale = stale

    def marked(self, policy_ids):
        """This set, ``policy_ids`` to be patched too; None (read it whole) when they are
        unknown or too many."""
        if policy_ids is None:
            return None
        stale = self.stale.union(policy_ids)
        return _CachedPolicies(self.policies, self.seq, stale) if len(stale) <= MAX_PATCHED_POLICIES else None


class AppliedSeqs:
    """Every change event up to ``through()`` has been applied to this process's caches.

    The tailer applies events in seq order before it moves ``last_seq``; this process's
    own events are applied synchronously, ahead of it (``note``), and carry the mark on
    while their seqs follow it without a hole."""

    MAX_AHEAD = 10_000

    def __init__(self, tailer):
        self._tailer = tailer
        self._ahead: set[int] = set()
        self._lock = threading.Lock()

    def note(self, seq: int) -> None:
        with self._lock:
            if len(self._ahead) >= self.MAX_AHEAD:  # the tailer is not moving: forget (only delays)
                self._ahead.clear()
            self._ahead.add(seq)

    def through(self) -> int:
        mark = self._tailer.last_seq or 0
        with self._lock:
            self._ahead = {seq for seq in self._ahead if seq > mark}
            while mark + 1 in self._ahead:
                mark += 1
        return mark


@dataclass(eq=False)
class AuthzService:
    """The checks and the permission gate over the two caches (built from the fields in
    ``__post_init__``, which also subscribes the invalidation to the change log)."""

    roles: RoleService  # a user's grants
    policy_reader: PolicyReader  # the active ABAC policies
    events: EventLog
    tailer: Tailer
    clock: Clock
    cache_ttl: int

    def __post_init__(self):
        timer = seconds_of(self.clock)  # tests move the clock
        self.grants_cache = SeqCache(ttl=self.cache_ttl, maxsize=GRANTS_CACHE_SIZE, timer=timer)
        self.policies_cache = SeqCache(ttl=self.cache_ttl, maxsize=POLICIES_CACHE_SIZE, timer=timer)
        self.applied = AppliedSeqs(self.tailer)
        self.events.listen(self._apply_own_event)
        self.tailer.subscribe(self.apply_event)

    # --- invalidation --------------------------------------------------------------------

    def apply_event(self, event) -> None:
        """Drop what ``event`` may have made wrong (see the module docstring)."""
        if event.app_id is None:
            return
        if event.type in APPLICATION_KINDS:
            self.grants_cache.invalidate_app(event.app_id, event.seq)
            self.policies_cache.invalidate_app(event.app_id, event.seq)
            return
        if event.type in POLICY_KINDS:
            policy_ids = changed_policies(event)
            self.policies_cache.amend((event.app_id,), event.seq, lambda entry: entry.marked(policy_ids))
        for user_id in affected_users(event):
            self.grants_cache.invalidate((event.app_id, user_id), event.seq)

    def _apply_own_event(self, event) -> None:
        self.apply_event(event)
        self.applied.note(event.seq)

    # --- reads through the cache ---------------------------------------------------------

    def require_known_revision(self, min_revision: int | None) -> None:
        """400 AUTHZ_REVISION_AHEAD for a ``min_revision`` above the change-log head: an
        X-Iamgate-Revision the caller was given is never above it, and an absurd one
        would make every check skip the cache."""
        if min_revision is not None:
            head = self.events.head()
            if min_revision > head:
                raise RevisionAhead(min_revision, head)

    def compiled_grants(self, app_id: str, user_id: str, scope: str | None, *, min_revision: int | None = None):
        """(CompiledGrants at ``scope``, whether the grants came from the cache).  A cached
        entry read before ``min_revision`` is bypassed (read-your-writes)."""
        key = (app_id, user_id)
        cache = self.grants_cache
        entry = cache.get(key)
        cached = entry is not None and (min_revision is None or entry.seq >= min_revision)
        if cached:
            cache.hits += 1
        else:
            cache.misses += 1
            entry = _CachedGrants(self.roles.grants(app_id, user_id))
            cache.put(key, entry, entry.seq)
        return entry.at(scope, self.clock()), cached

    def policies(self, app_id: str, *, min_revision: int | None = None):
        """(CompiledPolicies of the application's active policies, whether cached): the
        cached set, patched first when policies of it changed (see the module docstring)."""
        key = (app_id,)
        cache = self.policies_cache
        entry = cache.get(key)
        if entry is not None:
            if entry.stale:
                # Both read before the policies, as a whole read takes the head first.
                seq = max(entry.seq, min(self.applied.through(), self.events.head()))
                if min_revision is None or seq >= min_revision:
                    cache.misses += 1
                    changed = self.policy_reader.active_by_ids(app_id, sorted(entry.stale))
                    patched = _CachedPolicies(entry.policies.patched(entry.stale, changed), seq)
                    cache.swap(key, entry, patched)
                    return patched.policies, False
            elif min_revision is None or entry.seq >= min_revision:
                cache.hits += 1
                return entry.policies, True
        cache.misses += 1
        seq = self.events.head()  # before the read, as for grants
        entry = _CachedPolicies(CompiledPolicies(self.policy_reader.active(app_id)), seq)
        cache.put(key, entry, seq)
        return entry.policies, False

    def permission_resolver(self, app_id: str, user_id: str, permission: str) -> bool:
        """The permission gate of V1 routes for end users: RBAC over the user's unscoped
        assignments, evaluated live through the same cache as the checks."""
        compiled, _ = self.compiled_grants(app_id, user_id, None)
        return rbac_decision(compiled, permission).allowed

    # --- checks --------------------------------------------------------------------------

    def check(self, app_id: str, values: dict) -> dict:
        """GET V1/authz/check: plain RBAC.  {allowed, permission, cached}."""
        self.require_known_revision(values.get("min_revision"))
        scope = resolve_scope(values.get("scope"), None)
        compiled, cached = self.compiled_grants(app_id, values["user_id"], scope,
                                                min_revision=values.get("min_revision"))
        permission = values["permission"]
        return {"allowed": rbac_decision(compiled, permission).allowed, "permission": permission, "cached": cached}

    def check_abac(self, app_id: str, values: dict) -> dict:
        """POST V1/authz/check: RBAC plus the active ABAC policies covering the permission
        (a matching deny denies; else RBAC allows; else a matching allow allows)."""
        permission = values["permission"]
        decisions, cached = self._decide_abac(app_id, values, (permission,))
        decision = decisions[permission]
        return {
            "allowed": decision.allowed,
            "permission": permission,
            "cached": cached,
            "abac_evaluated": decision.abac_evaluated,
            "policies_checked": decision.policies_checked,
        }

    def check_bulk(self, app_id: str, values: dict) -> dict:
        """POST V1/authz/check-bulk: {user_id, results: {permission: allowed}}."""
        decisions, _ = self._decide_abac(app_id, values, values["permissions"])
        return {"user_id": values["user_id"],
                "results": {permission: decision.allowed for permission, decision in decisions.items()}}

    def _decide_abac(self, app_id: str, values: dict, permissions) -> tuple[dict, bool]:
        """RBAC plus ABAC for each of ``permissions`` (``decide_compiled``), and whether
        both the grants and the policies came from the cache."""
        context = values.get("context")
        min_revision = values.get("min_revision")
        self.require_known_revision(min_revision)
        compiled, grants_cached = self.compiled_grants(
            app_id, values["user_id"], resolve_scope(values.get("scope"), context), min_revision=min_revision)
        policies, policies_cached = self.policies(app_id, min_revision=min_revision)
        decisions = decide_compiled(compiled, permissions, policies=policies, resource=values.get("resource"),
                                    context=context, pause=yield_to_others)
        return decisions, grants_cached and policies_cached


def export_cache_counts(metrics, authz: AuthzService) -> None:
    """``iamgate_authz_cache_hits_total{kind}`` and ``iamgate_authz_cache_misses_total{kind}``
    (kind: grants, policies; the decision service's ``iamgate_decision_cache_*`` name the
    same lookups). The check counts in plain integers, under the GIL (a greenlet is never
    switched out within ``+=``); they are added to the counters whenever the metrics are
    read (``HttpMetrics.before_collect``), so the check takes no lock for them."""
    hits = metrics.add_hot(HotCounter("iamgate_authz_cache_hits", "Authorization lookups answered from the cache",
                                      ("kind",)))
    misses = metrics.add_hot(HotCounter("iamgate_authz_cache_misses", "Authorization lookups read from the store",
                                        ("kind",)))
    pairs = [(cache, (kind,), [0, 0]) for kind, cache in (("grants", authz.grants_cache),
                                                         ("policies", authz.policies_cache))]
    for _, labels, _ in pairs:  # each kind's series from the start, at 0
        hits.inc(labels, 0)
        misses.inc(labels, 0)
    lock = threading.Lock()

    def add_what_waits():
        with lock:  # two readers never add the same counts
            for cache, labels, added in pairs:
                now = cache.hits, cache.misses
                if now[0] > added[0]:
                    hits.inc(labels, now[0] - added[0])
                if now[1] > added[1]:
                    misses.inc(labels, now[1] - added[1])
                added[:] = now

    metrics.before_collect(add_what_waits)
