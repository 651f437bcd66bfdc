"""ABAC policies, and the active policies of an application indexed for checks: the
policies covering one permission as one set of programs (``CompiledPolicies.effects``),
which ``shared.authorization`` evaluates. Pure: no I/O, no clock, no logging."""
from __future__ import annotations

import marshal
from collections.abc import Iterable, Mapping

from shared.abac.evaluator import ALWAYS, compile_condition, compile_keyed, content_key
from shared.rbac import covering_patterns, has_wildcard, is_valid_permission, overlaps

ALLOW = "allow"
DENY = "deny"


class Policy:
    """An ABAC policy, an immutable value. ``condition`` None holds unconditionally.

    Once held by ``CompiledPolicies`` (what the caches of both services hold) or compared,
    a policy keeps its condition only as its marshal bytes, the key of its program, and
    drops the parsed document: bytes are one object the garbage collector does not track,
    where a document of 32 nodes is some 36 tracked dicts and lists -- a tenant at every
    cap kept 36,000 of them in each process holding its policies, and a full collection
    walks them all (docs/performance.md, "Garbage collection pauses"). ``condition`` then
    decodes a fresh copy; a policy only read and sent on (the internal API) keeps its
    document and costs nothing more."""

    __slots__ = ("id", "name", "effect", "permissions", "is_active", "_document", "_key", "_program")
    id: str
    name: str
    effect: str
    permissions: tuple[str, ...]
    is_active: bool
    _document: dict | None
    _key: object  # the condition's content key: bytes, or an object equal to no other
    _program: tuple | None

    def __init__(self, id: str, name: str, effect: str, permissions, condition: dict | None = None,  # noqa: A002
                 is_active: bool = True):
        if effect not in (ALLOW, DENY):
            raise ValueError(f"policy effect must be 'allow' or 'deny', not {effect!r}")
        setattr_ = object.__setattr__
        setattr_(self, "id", id)
        setattr_(self, "name", name)
        setattr_(self, "effect", effect)
        setattr_(self, "permissions", tuple(permissions))
        setattr_(self, "is_active", is_active)
        setattr_(self, "_document", condition)
        setattr_(self, "_key", None)
        setattr_(self, "_program", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Policy is immutable; cannot set {name!r}")

    @property
    def condition(self) -> dict | None:
        document = self._document
        return document if document is not None or type(self._key) is not bytes else marshal.loads(self._key)

    def _content(self):
        """The condition's content key (``content_key``), computed once; the document is
        dropped once its bytes hold it."""
        key = self._key
        if key is None and self._document is not None:
            try:
                key = content_key(self._document)
            except RecursionError:  # absurdly deep: equal to no other policy's
                key = object()
            object.__setattr__(self, "_key", key)
            if type(key) is bytes:
                object.__setattr__(self, "_document", None)
        return key

    def compact(self) -> Policy:
        """This policy, keeping its condition as bytes only from now on."""
        self._content()
        return self

    def __eq__(self, other):
        return (type(other) is Policy and self.id == other.id and self.name == other.name
                and self.effect == other.effect and self.permissions == other.permissions
                and self.is_active == other.is_active and self._content() == other._content())

    def __hash__(self):
        return hash((self.id, self.name, self.effect, self.permissions, self.is_active))

    def __repr__(self):
        return (f"Policy(id={self.id!r}, name={self.name!r}, effect={self.effect!r}, "
                f"permissions={self.permissions!r}, condition={self.condition!r}, is_active={self.is_active!r})")

    @property
    def program(self) -> tuple:
        """The condition compiled (``shared.abac.evaluator``): once per policy object, and
        kept on it in place of the document."""
        program = self._program
        if program is None:
            document = self._document
            if document is None and self._key is None:
                program = ALWAYS
            else:
                key = self._content()
                if type(key) is bytes:
                    program = compile_keyed(key, document)
                else:  # not plain data that marshal takes: kept as given
                    program = compile_condition(document)
            object.__setattr__(self, "_program", program)
        return program

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "effect": self.effect,
            "permissions": list(self.permissions),
            "condition": self.condition,
            "is_active": self.is_active,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Policy:
        return cls(
            id=data["id"],
            name=data["name"],
            effect=data["effect"],
            permissions=tuple(data.get("permissions", ())),
            condition=data.get("condition"),
            is_active=data.get("is_active", True),
        )


class CompiledPolicies:
    """Active policies indexed by permission pattern, so finding those covering a
    permission is four dictionary lookups (for a wildcard permission, a pass over the
    patterns for the denies that overlap it). Build once per policy set and reuse."""

    __slots__ = ("policies", "_by_pattern", "_covering", "_effects")
    _COVERING_CACHE_SIZE = 4096

    def __init__(self, policies: Iterable[Policy]):
        self.policies: tuple[Policy, ...] = tuple(policy.compact() for policy in policies if policy.is_active)
        by_pattern: dict[str, list[int]] = {}
        for index, policy in enumerate(self.policies):
            for pattern in set(policy.permissions):
                if is_valid_permission(pattern):
                    by_pattern.setdefault(pattern, []).append(index)
        self._by_pattern = {pattern: tuple(indexes) for pattern, indexes in by_pattern.items()}
        # An application checks a bounded set of permission names, so remembering the answer
        # per name turns the lookups into one; the bound only guards against junk names.
        self._covering: dict[str, tuple[Policy, ...]] = {}
        self._effects: dict[str, tuple] = {}

    def __len__(self) -> int:
        return len(self.policies)

    def patched(self, policy_ids, changed: Iterable[Policy]) -> CompiledPolicies:
        """These policies with those of ``policy_ids`` replaced by ``changed`` (what a read
        of just those ids found active: one not there was deleted or deactivated, one new
        goes last). Unchanged policies stay the same objects, so their compiled
        conditions are reused; the index is rebuilt (linear in the count) only when a
        policy came, went or changed its permissions."""
        fresh_by_id = {policy.id: policy for policy in changed}
        policy_ids = set(policy_ids)
        kept = []
        reindex = False
        for policy in self.policies:
            if policy.id not in policy_ids:
                kept.append(policy)
            elif policy.id in fresh_by_id:
                fresh = fresh_by_id.pop(policy.id)
                reindex = reindex or fresh.permissions != policy.permissions
                kept.append(policy if fresh == policy else fresh.compact())
            else:
                reindex = True
        if fresh_by_id or reindex:
            return CompiledPolicies([*kept, *fresh_by_id.values()])
        patched = CompiledPolicies(())
        patched.policies, patched._by_pattern = tuple(kept), self._by_pattern  # same places, same patterns
        return patched

    def covering(self, permission: str) -> tuple[Policy, ...]:
        """Active policies that bear on a check of ``permission``, in input order: those
        with a pattern that covers it, and for a wildcard (``posts:*``, which asks about
        every name it covers) also the denies with a pattern that overlaps it
        (``posts:delete``): a deny of one of the actions denies "every action"."""
        covering = self._covering.get(permission)
        if covering is not None:
            return covering
        if not self._by_pattern or not is_valid_permission(permission):
            return ()
        found: set[int] = set()
        for pattern in covering_patterns(permission):
            indexes = self._by_pattern.get(pattern)
            if indexes:
                found.update(indexes)
        if has_wildcard(permission):
            for pattern, indexes in self._by_pattern.items():
                if overlaps(pattern, permission):
                    found.update(index for index in indexes if self.policies[index].effect == DENY)
        covering = tuple(self.policies[index] for index in sorted(found))
        if len(self._covering) >= self._COVERING_CACHE_SIZE:
            self._covering.clear()
        self._covering[permission] = covering
        return covering

    def effects(self, permission: str) -> tuple[int, tuple, tuple]:
        """(how many active policies cover ``permission``, their deny programs, their allow
        programs): each ``(key, program)`` for ``shared.abac.evaluator.any_holds``, the key
        an integer, so the whole is data the garbage collector stops tracking."""
        effects = self._effects.get(permission)
        if effects is None:
            covering = self.covering(permission)
            effects = (len(covering),
                       tuple((id(policy), policy.program) for policy in covering if policy.effect == DENY),
                       tuple((id(policy), policy.program) for policy in covering if policy.effect == ALLOW))
            if len(self._effects) >= self._COVERING_CACHE_SIZE:
                self._effects.clear()
            self._effects[permission] = effects
        return effects


def compile_policies(policies: Iterable[Policy] | CompiledPolicies) -> CompiledPolicies:
    return policies if isinstance(policies, CompiledPolicies) else CompiledPolicies(policies)
