"""Attribute-based access control: policies and the condition language they hold.

Pure functions over plain data, shared by the control plane and the decision service.
Nothing here does I/O, reads the clock or logs.

The language (docs/authorization.md, "Conditions and their validation"): a condition is ``{"all": [...]}``,
``{"any": [...]}``, ``{"not": c}`` or ``{"op": OPERATOR, "left": OPERAND, "right":
OPERAND}``, an operand ``{"attr": "user.id" | "user.attributes.X" | "resource.X" |
"context.X"}`` or ``{"value": literal}``; a missing attribute makes the comparison false.
How policies combine with RBAC is ``shared.authorization``.
"""
from __future__ import annotations

import ipaddress
import marshal
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from shared.rbac import covering_patterns, is_valid_permission

ALLOW = "allow"
DENY = "deny"

# Evaluation refuses (as false) anything nested deeper; policies are validated on write
# (controlplane/abac/conditions.py) to a stricter depth.
MAX_CONDITION_DEPTH = 10

# Policies covering one permission are written out as one Python function only while
# their conditions hold at most this many nodes together: Python's compile() costs ~15 µs
# a node and holds the interpreter throughout, so a larger set would stall every other
# request of the process. A larger set is evaluated policy by policy through closures,
# which cost ~1 µs a node to build (docs/authorization.md, "Limits").
FUSE_MAX_NODES = 128


# --- policies ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """An ABAC policy. ``condition`` None holds unconditionally."""

    id: str
    name: str
    effect: str
    permissions: tuple[str, ...]
    condition: dict | None = field(default=None, hash=False)
    is_active: bool = True

    def __post_init__(self):
        if self.effect not in (ALLOW, DENY):
            raise ValueError(f"policy effect must be 'allow' or 'deny', not {self.effect!r}")
        object.__setattr__(self, "permissions", tuple(self.permissions))

    @property
    def test(self):
        """The condition compiled (``compile_condition``): once per policy object, which is
        an immutable value, and kept on it."""
        test = self.__dict__.get("_test")
        if test is None:
            test = _always if self.condition is None else compile_condition(self.condition)
            object.__setattr__(self, "_test", test)
        return test

    @property
    def closures(self):
        """The condition as closures (``compile_closures``): what a set too large to write
        out evaluates; kept on the policy like ``test``."""
        test = self.__dict__.get("_closures")
        if test is None:
            test = _always if self.condition is None else compile_closures(self.condition)
            object.__setattr__(self, "_closures", test)
        return test

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
    permission is four dictionary lookups. Build once per policy set and reuse."""

    __slots__ = ("policies", "_by_pattern", "_covering", "_effects", "_deciders")
    _COVERING_CACHE_SIZE = 4096

    def __init__(self, policies: Iterable[Policy]):
        self.policies: tuple[Policy, ...] = tuple(policy for policy in policies if policy.is_active)
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
        self._deciders: dict[str, tuple] = {}

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
                kept.append(policy if fresh == policy else fresh)
            else:
                reindex = True
        if fresh_by_id or reindex:
            return CompiledPolicies([*kept, *fresh_by_id.values()])
        patched = CompiledPolicies(())
        patched.policies, patched._by_pattern = tuple(kept), self._by_pattern  # same places, same patterns
        return patched

    def covering(self, permission: str) -> tuple[Policy, ...]:
        """Active policies with a pattern that matches ``permission``, in input order."""
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
        covering = tuple(self.policies[index] for index in sorted(found))
        if len(self._covering) >= self._COVERING_CACHE_SIZE:
            self._covering.clear()
        self._covering[permission] = covering
        return covering


    def effects(self, permission: str) -> tuple[int, tuple, tuple]:
        """(how many active policies cover ``permission``, their deny tests, their allow
        tests): a test is ``(key, compiled condition)`` for :func:`any_holds`."""
        effects = self._effects.get(permission)
        if effects is None:
            covering = self.covering(permission)
            # Written out while small enough to write out at once (FUSE_MAX_NODES), else closures.
            compiled = "test" if _fusable(covering) else "closures"
            effects = (len(covering),
                       tuple((id(policy), getattr(policy, compiled)) for policy in covering if policy.effect == DENY),
                       tuple((id(policy), getattr(policy, compiled)) for policy in covering if policy.effect == ALLOW))
            if len(self._effects) >= self._COVERING_CACHE_SIZE:
                self._effects.clear()
            self._effects[permission] = effects
        return effects

    def decider(self, permission: str) -> tuple[int, Callable[..., bool] | None]:
        """(how many active policies cover ``permission``, ``decide``): ``decide(user_id,
        attributes, resource, context, rbac_allows)`` is whether an active user is allowed
        (``fuse_policies``), or None when the policies are not written out (too many nodes
        or absurdly deep): the caller then evaluates them policy by policy (``effects``)."""
        found = self._deciders.get(permission)
        if found is None:
            covering = self.covering(permission)
            found = (len(covering), fuse_policies(covering) if covering else None)
            if len(self._deciders) >= self._COVERING_CACHE_SIZE:
                self._deciders.clear()
            self._deciders[permission] = found
        return found


def any_holds(tests: tuple, environment: dict, memo: dict | None, malformed: bool) -> bool:
    """Whether a condition of ``tests`` (``CompiledPolicies.effects``) holds; ``memo`` keeps
    each policy's answer for the rest of the check (a bulk check asks again per permission;
    None for a check of one permission, which asks once).
    ``malformed``: the answer for a condition outside the language (fail closed: True for
    denies, False for allows). This loop is most of a POST check's own work."""
    if memo is None:
        for _, test in tests:
            try:
                if test(environment):
                    return True
            except _Malformed:
                # Validation keeps these out of the store; should one slip through, fail closed.
                if malformed:
                    return True
        return False
    for key, test in tests:
        held = memo.get(key)
        if held is None:
            try:
                held = test(environment)
            except _Malformed:
                # Validation keeps these out of the store; should one slip through, fail closed.
                held = malformed
            memo[key] = held
        if held:
            return True
    return False


def compile_policies(policies: Iterable[Policy] | CompiledPolicies) -> CompiledPolicies:
    return policies if isinstance(policies, CompiledPolicies) else CompiledPolicies(policies)


def condition_environment(user_id: str, attributes: Mapping, resource, context) -> dict:
    """What a condition's ``attr`` operands read: the checked user, the check's resource
    and context (a non-object resource or context reads as empty)."""
    return {
        "user": {"id": user_id, "attributes": attributes},
        # type() first: a parsed body's objects are dicts, and the ABC check costs more
        "resource": resource if type(resource) is dict or isinstance(resource, Mapping) else {},
        "context": context if type(context) is dict or isinstance(context, Mapping) else {},
    }


# --- conditions --------------------------------------------------------------------------
#
# A condition is compiled once into nested closures (``compile_condition``) and the closure
# runs per check: walking the dictionaries of the language on every check cost most of a
# POST check with a score of policies (benchmarks/NOTES.md). A malformed node compiles to a
# closure that raises ``_Malformed`` when it is reached, so what is malformed is found at
# the same moment, and with the same short-circuits, as a walk of the tree would find it.


class _Malformed(Exception):
    """The condition itself (not the data it reads) is not in the condition language."""


_MISSING = object()


def evaluate_condition(condition, env: Mapping) -> bool:
    """Whether an ABAC condition holds for ``env`` ({"user": {"id", "attributes"}, "resource",
    "context"}). Bad or missing data makes a comparison false; it never raises. A condition
    that is not in the language (``controlplane/abac/conditions.py`` validates it on write) is false as a whole."""
    try:
        return _compile(condition, 1)(env)  # once (the dry run's trace asks per node): no source to write
    except _Malformed:
        return False


def compile_condition(condition):
    """``condition`` as a function of the environment returning a bool, or raising
    ``_Malformed`` when evaluation reaches a node outside the language."""
    try:
        key = _content_key(condition)
        test = _GENERATED.get(key)
        if test is None:
            source = _Source(_compile(condition, 1))
            test = source.function(condition)
            _GENERATED.put(key, test, source.size)
        return test
    except RecursionError:  # absurdly deep: the closures alone
        return _compile(condition, 1)


def compile_closures(condition):
    """``condition`` as closures (``_compile``): built in time linear in its nodes (~1 µs
    each, no compile()), kept by content as ``compile_condition`` keeps what it writes, so
    a policy set fetched again after a change rebuilds only the changed conditions."""
    try:
        key = _content_key(condition)
    except RecursionError:  # absurdly deep: what evaluation refuses anyway
        return _compile(condition, 1)
    test = _CLOSURES.get(key)
    if test is None:
        test = _compile(condition, 1)
        _CLOSURES.put(key, test, _CLOSURE_BYTES * condition_nodes(condition))
    return test


def _content_key(value):
    """What the caches of compiled conditions are keyed by: the value's marshal bytes,
    whose types are spelled out (1, 1.0, True, a list and a tuple differ) and which take a
    fifth of the time of its repr -- every condition of a policy set fetched again is
    keyed again; the repr for what marshal does not take (not plain JSON data)."""
    try:
        return marshal.dumps(value, 2)  # version 2: no back-references, so no dependence on sharing
    except ValueError:
        return repr(value)


def condition_nodes(condition, limit: int | None = None) -> int:
    """How many nodes a condition has: each ``all``, ``any``, ``not`` and comparison counts
    one (operands are part of their comparison). What it costs to write out or evaluate is
    linear in this number; the control plane caps it per policy. Anything that is not a
    node counts one and is not walked into; nothing is walked below MAX_CONDITION_DEPTH.
    With ``limit``, the count stops once past it (a number above ``limit``)."""
    count, pending = 0, [(condition, 1)]
    while pending:
        node, depth = pending.pop()
        count += 1
        if limit is not None and count > limit:
            break
        if type(node) is not dict or "op" in node or depth >= MAX_CONDITION_DEPTH:
            continue
        for name in ("all", "any"):
            if type(node.get(name)) is list:
                pending.extend((child, depth + 1) for child in node[name])
                break
        else:
            if "not" in node:
                pending.append((node["not"], depth + 1))
    return count


def _fusable(policies: tuple) -> bool:
    """Whether the conditions of ``policies`` hold at most FUSE_MAX_NODES nodes together,
    counted only as far as that."""
    budget = FUSE_MAX_NODES
    for policy in policies:
        if policy.condition is not None:
            budget -= condition_nodes(policy.condition, budget)
            if budget < 0:
                return False
    return True


class _CompiledCache:
    """Compiled conditions or policy sets by content key, least recently used first,
    bounded by an estimate of their bytes rather than by their number: one entry can take
    a few hundred bytes or hundreds of kilobytes. An entry's estimate is its key's length
    plus the size its compiler gives (``_Source.size``, ``_CLOSURE_BYTES`` a node); one
    larger than the whole bound is not kept. Asked only when a policy set's functions are
    first built (the first check of a permission after a change), not on every check; the
    lock is never held across a yield, so no greenlet waits on it."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict = OrderedDict()  # key -> (compiled, estimate)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key):
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key, compiled, size: int) -> None:
        estimate = len(key) + size
        if estimate > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self.bytes -= previous[1]
            self._entries[key] = (compiled, estimate)
            self.bytes += estimate
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped


# Conditions written out as functions, by content (``_content_key``): a policy set fetched
# again after a change is mostly the same conditions, and writing one out costs ~15 µs a node.
_GENERATED = _CompiledCache(16 * 1024 * 1024)
_CLOSURES = _CompiledCache(16 * 1024 * 1024)
# A node's closures (function, cells, operand readers) with their Python overhead, measured
# with tracemalloc: 300 to 500 bytes.
_CLOSURE_BYTES = 512


# --- conditions as one Python function ------------------------------------------------
#
# The closures above cost a Python call per node and per operand. ``_Source`` writes a
# condition out as one function over an environment of plain dictionaries (what a check
# builds): each attribute path read once into a local, the common comparisons against a
# literal written inline as the special forms above compute them, ``all``/``any``/``not``
# as Python's own short-circuiting ``and``/``or``/``not``, and every other node a call of a
# function over the operands' values: a general comparison ``_compare`` (what its closure
# computes), ``exists`` ``_exists``, a malformed node one that raises ``_Malformed``; so a
# node is evaluated, or found malformed, exactly when the walk would reach it (reading a
# path has no effect, so reading them all first changes nothing). ``_PolicySource`` writes
# all the policies covering a permission as one function the same way (a check of one
# permission runs it). Only generated names and fixed text go into the source: every
# literal and path key is a value in the function's namespace, never text.

# (kind of literal, op) -> the comparison of local ``a`` with the literal ``c``: what the
# special form of ``_against_literal`` for that pair returns. M is _MISSING, N _is_number,
# A _address_in.
_INLINE = {
    ("str", "eq"): "(isinstance({a}, str) and {a} == {c})",
    ("str", "ne"): "({a} is not M and not (isinstance({a}, str) and {a} == {c}))",
    ("str", "starts_with"): "(isinstance({a}, str) and {a}.startswith({c}))",
    ("str", "contains"): "({c} in {a} if isinstance({a}, (list, tuple)) else (isinstance({a}, str) and {c} in {a}))",
    ("str", "ip_in_cidr"): "A({a}, {c})",
    ("bool", "eq"): "({a} is {c})",
    ("bool", "ne"): "({a} is not M and {a} is not {c})",
    ("number", "gt"): "((type({a}) is int or type({a}) is float or N({a})) and {a} > {c})",
    ("number", "gte"): "((type({a}) is int or type({a}) is float or N({a})) and {a} >= {c})",
    ("number", "lt"): "((type({a}) is int or type({a}) is float or N({a})) and {a} < {c})",
    ("number", "lte"): "((type({a}) is int or type({a}) is float or N({a})) and {a} <= {c})",
    ("number", "eq"): "((type({a}) is int or type({a}) is float or N({a})) and {a} == {c})",
    ("number", "ne"): "({a} is not M and not ((type({a}) is int or type({a}) is float or N({a})) and {a} == {c}))",
    ("strings", "in"): "(isinstance({a}, str) and {a} in {c})",
    ("strings", "not_in"): "({a} is not M and not (isinstance({a}, str) and {a} in {c}))",
    ("strings", "ip_in_cidr"): "A({a}, {c})",
}


def _literal_kind(literal) -> tuple[str, Any] | None:
    """(kind, the value the inline form compares with), as ``_against_literal`` classifies."""
    if isinstance(literal, str):
        return "str", literal
    if isinstance(literal, bool):
        return "bool", literal
    if _is_number(literal):
        return "number", literal
    if type(literal) is list and literal and all(type(element) is str for element in literal):
        return "strings", literal
    return None


class _Source:
    """Writes conditions out as Python text. ``function`` writes one condition as a function
    of an environment dict (``Policy.test``); ``_PolicySource`` writes all the policies
    covering a permission as one function of the check's values. Every comparison is
    written out, a general one as a call of ``_compare`` (what its closure computes), so no
    node needs the environment but through its paths' reads."""

    def __init__(self, closures=None):
        self.namespace = {"M": _MISSING, "N": _is_number, "A": _address_in, "R": _resolve, "P": MappingProxyType,
                          "G": _compare, "E": _exists, "X": _raise_malformed, "slow": closures}
        self.reads: list[str] = []  # the reads of paths not read before, since the last take_reads
        self.paths: dict[tuple, str] = {}
        self.raises = False  # whether text written since it was last cleared can raise _Malformed
        self.size = 0  # the estimated bytes of what ``function`` or ``decider`` wrote (``_CompiledCache``)

    def function(self, condition):
        body = self.node(condition, 1)
        source = "\n".join(["def test(env):",
                             "    if type(env) is not dict:",
                             "        return slow(env)",
                             *self.take_reads(),
                             f"    return {body}"])
        return self.define(source, "test", "<condition>")

    def define(self, source: str, name: str, filename: str):
        """Run ``source`` into the namespace and give the function ``name`` it defines.
        ``size``: a function written out takes 8 to 12 times its source's characters
        (measured with tracemalloc, the closures of ``slow`` included), plus its values."""
        exec(compile(source, filename, "exec"), self.namespace)
        self.size = 12 * len(source) + 64 * len(self.namespace)
        return self.namespace[name]

    def take_reads(self) -> list[str]:
        reads, self.reads = self.reads, []
        return reads

    def value(self, value) -> str:
        name = f"c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def node(self, node, depth: int) -> str:
        if type(node) is not dict or depth > MAX_CONDITION_DEPTH:
            return self.malformed()
        if "op" in node:
            return self.comparison(node)
        for name in ("all", "any"):
            if name in node:
                children = node[name]
                if type(children) is not list:
                    return self.malformed()
                if not children:
                    return "True" if name == "all" else "False"
                joined = (" and " if name == "all" else " or ").join(self.node(child, depth + 1) for child in children)
                return f"({joined})"
        if "not" in node:
            return f"(not {self.node(node['not'], depth + 1)})"
        return self.malformed()

    def malformed(self) -> str:
        self.raises = True
        return "X()"

    def comparison(self, node: dict) -> str:
        """The comparison as its closure (``_compile_comparison``) computes it: the special
        form's inline text for a comparison with a literal that has one, else ``_compare``
        or ``_exists`` over the operands' values."""
        if _compile_comparison(node) is _malformed:
            return self.malformed()
        op, left = node["op"], self.operand(node["left"])
        if op == "exists":
            self.raises = True  # an attribute that reads a non-boolean is malformed
            wanted = self.operand(node["right"]) if "right" in node else "True"
            return f"E({left}, {wanted})"
        right = node["right"]
        kind = _literal_kind(right["value"]) if "value" in right else None
        form = _INLINE.get((kind[0], op)) if kind is not None else None
        if kind is None or form is None:
            right = self.operand(right)
            general = f"G({self.value(_COMPARISONS[op])}, {left}, {right})"
            if op in ("eq", "ne"):
                # two strings (an owner and a user id, say) compared as _json_equal compares them
                equal = "==" if op == "eq" else "!="
                return f"(({left} {equal} {right}) if type({left}) is str and type({right}) is str else {general})"
            return general
        literal = kind[1]
        if form.startswith("A("):
            literal = _networks(literal)
        elif kind[0] == "strings":
            literal = frozenset(literal)
        return form.format(a=left, c=self.value(literal))

    def operand(self, operand: dict) -> str:
        """A well-formed operand (``_compile_operand`` took it): its literal or its path's local."""
        if "value" in operand:
            return self.value(operand["value"])
        return self.read(tuple(operand["attr"].split(".")))

    def read(self, keys: tuple) -> str:
        """A local holding the path's value (``_MISSING`` when absent), read as
        ``_compile_operand``'s resolvers read it."""
        local = self.paths.get(keys)
        if local is None:
            local = self.paths[keys] = f"v{len(self.paths)}"
            whole = self.value(keys)
            if len(keys) not in (2, 3):
                self.reads.append(f"    {local} = R(env, {whole})")
                return local
            names = [self.value(key) for key in keys]
            self.reads.append(f"    n = env.get({names[0]})")
            if len(keys) == 3:
                self.reads.append(f"    n = n.get({names[1]}) if type(n) is dict else M")
            last = "type(n) is dict or type(n) is P" if len(keys) == 3 else "type(n) is dict"  # user.attributes
            self.reads.append(f"    {local} = n.get({names[-1]}, M) if {last} else R(env, {whole})")
        return local


class _PolicySource(_Source):
    """All the active policies covering one permission written out as one function:

        decide(user_id, attributes, resource, context, rbac_allows) -> allowed

    what ``any_holds`` over the denies, then RBAC, then ``any_holds`` over the allows give,
    from the check's values without an environment dict: each path is read once, before
    the first policy whose condition reads it (as that policy's own function would read
    it), from the value ``condition_environment`` would put at the path's root. A
    condition that can meet a malformed node is evaluated in ``try``: a deny holds, an
    allow does not (fail closed), as in ``any_holds``."""

    def __init__(self):
        super().__init__()
        self.namespace["Mapping"] = Mapping
        self.namespace["Malformed"] = _Malformed
        self.namespace["U"] = _user_node
        self.roots: dict[str, str] = {}  # local -> the value it holds

    def decider(self, denies: Iterable, allows: Iterable):
        lines = ["def decide(user_id, attributes, resource, context, rbac_allows):"]
        for condition in denies:
            lines += self.policy(condition, "return False", "return False")
        lines += ["    if rbac_allows:", "        return True"]
        for condition in allows:
            lines += self.policy(condition, "return True", "pass")
        lines.append("    return False")
        return self.define("\n".join(lines), "decide", "<policies>")

    def policy(self, condition, held: str, malformed: str) -> list[str]:
        self.raises = False
        body = "True" if condition is None else self.node(condition, 1)
        lines = self.take_reads()
        if not self.raises:
            return lines + [f"    if {body}:", f"        {held}"]
        return lines + ["    try:", f"        if {body}:", f"            {held}",
                        "    except Malformed:", f"        {malformed}"]

    def read(self, keys: tuple) -> str:
        local = self.paths.get(keys)
        if local is None:
            local = self.paths[keys] = f"v{len(self.paths)}"
            root, rest = keys[0], keys[1:]
            base = "M"
            if root in ("resource", "context"):
                base = self.root(root, root[0])
            elif root == "user":
                if not rest:
                    base = "U(user_id, attributes)"
                elif rest[0] == "id":
                    base, rest = "user_id", rest[1:]
                elif rest[0] == "attributes":
                    base, rest = ("attributes", ()) if len(rest) == 1 else (self.root("attributes", "t"), rest[1:])
            if base == "M" or not rest:  # a root other than the user's, the resource and the context is missing
                self.reads.append(f"    {local} = {base}")
            elif len(rest) == 1 and base != "user_id":  # r, c and t are mappings: get is what R reads
                self.reads.append(f"    {local} = {base}.get({self.value(rest[0])}, M)")
            else:
                self.reads.append(f"    {local} = R({base}, {self.value(rest)})")
        return local

    def root(self, name: str, local: str) -> str:
        """The resource or context as ``condition_environment`` holds it (an empty dict when
        not a mapping), or the user's attributes read as ``_resolve`` reads them, in the local
        ``r``, ``c`` or ``t``, assigned before its first read."""
        if local not in self.roots:
            self.roots[local] = name
            self.reads.append(f"    {local} = {name} if type({name}) is dict or type({name}) is P"
                              f" or isinstance({name}, Mapping) else {{}}")
        return local


def fuse_policies(policies: Iterable[Policy]):
    """The function ``_PolicySource.decider`` writes for ``policies`` (those covering one
    permission, in order), or None when they are not written out: more than
    FUSE_MAX_NODES nodes together, or absurdly deep."""
    policies = tuple(policies)
    if not _fusable(policies):
        return None
    denies = tuple(policy.condition for policy in policies if policy.effect == DENY)
    allows = tuple(policy.condition for policy in policies if policy.effect == ALLOW)
    try:
        key = _content_key((denies, allows))
    except RecursionError:
        return None
    decide = _FUSED.get(key)
    if decide is None:
        source = _PolicySource()
        decide = source.decider(denies, allows)
        _FUSED.put(key, decide, source.size)
    return decide


# Policies written out, by their conditions' content: as ``_GENERATED``, a policy set
# fetched again after a change is mostly the same policies.
_FUSED = _CompiledCache(16 * 1024 * 1024)


def _compare(comparison, a, b) -> bool:
    """A general comparison of two operands' values (``_COMPARISONS[op]``): false when
    either is missing or they cannot be compared."""
    if a is _MISSING or b is _MISSING:
        return False
    try:
        return comparison(a, b) is True
    except Exception:  # runtime data we cannot compare (e.g. absurdly deep) is simply false
        return False


def _exists(value, wanted) -> bool:
    """``exists``: whether the left operand's attribute is there, as the right operand
    (a boolean) wants it."""
    if type(wanted) is not bool:  # an attribute operand can read a non-boolean
        raise _Malformed
    return (value is not _MISSING) == wanted


def _raise_malformed():
    raise _Malformed


def _user_node(user_id, attributes) -> dict:
    return {"id": user_id, "attributes": attributes}


def _always(_env):
    return True


def _malformed(_env):
    raise _Malformed


def _compile(node, depth: int):
    if type(node) is not dict or depth > MAX_CONDITION_DEPTH:
        return _malformed
    if "op" in node:
        return _compile_comparison(node)
    for name in ("all", "any"):
        if name in node:
            children = node[name]
            if type(children) is not list:
                return _malformed
            tests = tuple(_compile(child, depth + 1) for child in children)
            return _all(tests) if name == "all" else _any(tests)
    if "not" in node:
        test = _compile(node["not"], depth + 1)
        return lambda env: not test(env)
    return _malformed


# Each node's function keeps what it reads (the tests below it, the operand readers, the
# literal) in its defaults, not in closure cells: a tuple of atoms drops out of the cyclic
# garbage collector's tracking, a cell never does, and a tenant at the caps compiles tens
# of thousands of nodes whose number a full collection's pause grows with.
def _all(tests):
    def all_hold(env, tests=tests):
        for test in tests:
            if not test(env):
                return False
        return True
    return all_hold


def _any(tests):
    def any_holds(env, tests=tests):
        for test in tests:
            if test(env):
                return True
        return False
    return any_holds


def _compile_comparison(node: dict):
    op = node["op"]
    if "left" not in node:
        return _malformed
    left = _compile_operand(node["left"])
    if op == "exists":
        right = _compile_operand(node["right"]) if "right" in node else (lambda _env: True)
        if left is _malformed or right is _malformed:
            return _malformed

        def exists(env):
            return _exists(left(env), right(env))
        return exists
    comparison = _COMPARISONS.get(op) if isinstance(op, str) else None
    if comparison is None or "right" not in node:
        return _malformed
    right = _compile_operand(node["right"])
    if left is _malformed or right is _malformed:
        return _malformed
    literal = node["right"]["value"] if "value" in node["right"] else _MISSING
    special = _against_literal(op, left, literal) if literal is not _MISSING else None
    if special is not None:
        return special

    # reading an operand has no effect: both are read, as the written-out form does
    def compare(env, comparison=comparison, left=left, right=right):
        return _compare(comparison, left(env), right(env))
    return compare


def _against_literal(op: str, left, literal):
    """The common comparisons of an operand with a literal, with the literal's type known at
    compile time; each gives exactly what ``_COMPARISONS[op](value, literal) is True``
    gives (tests/authz/test_engine.py checks them against it). None: no special form."""
    if isinstance(literal, (str, bool)) and op in ("eq", "ne"):
        kind, equal = bool if isinstance(literal, bool) else str, op == "eq"

        # a string (or boolean) equals only a string (or boolean)
        def typed_eq(env, left=left, kind=kind, literal=literal, equal=equal):
            a = left(env)
            return a is not _MISSING and (isinstance(a, kind) and a == literal) is equal
        return typed_eq
    if isinstance(literal, str):
        if op == "starts_with":
            return lambda env: isinstance(a := left(env), str) and a.startswith(literal)
        if op == "contains":
            def str_contains(env):
                a = left(env)
                if isinstance(a, (list, tuple)):
                    # what any(isinstance(e, str) and e == literal for e in a) gives: only a
                    # string equals a string
                    return literal in a
                return isinstance(a, str) and literal in a
            return str_contains
        if op == "ip_in_cidr":
            networks = _networks(literal)
            return lambda env: _address_in(left(env), networks)
    elif _is_number(literal):  # not a boolean
        if op in _ORDERINGS:
            order = _ORDERINGS[op]

            def number_order(env):
                a = left(env)
                kind = type(a)
                return (kind is int or kind is float or _is_number(a)) and order(a, literal)
            return number_order
        if op in ("eq", "ne"):
            equal = op == "eq"

            def number_eq(env):
                a = left(env)
                return a is not _MISSING and (_is_number(a) and a == literal) is equal
            return number_eq
    elif type(literal) is list and literal and all(type(element) is str for element in literal):
        if op in ("in", "not_in"):
            members = frozenset(literal)
            inside = op == "in"

            def str_in(env, left=left, members=members, inside=inside):
                a = left(env)
                return a is not _MISSING and (isinstance(a, str) and a in members) is inside
            return str_in
        if op == "ip_in_cidr":
            networks = _networks(literal)
            return lambda env: _address_in(left(env), networks)
    return None


def _compile_operand(operand):
    """A function of the environment giving the operand's value (``_MISSING`` for an
    attribute that is not there), or ``_malformed``."""
    if type(operand) is not dict or len(operand) != 1:
        return _malformed
    if "value" in operand:
        value = operand["value"]
        return lambda _env: value
    path = operand.get("attr")
    if type(path) is not str:
        return _malformed
    keys = tuple(path.split("."))
    # The usual operands, through plain dictionaries (what a check's environment holds);
    # anything else the general walk.
    if len(keys) == 2:  # resource.X, context.X, user.id
        first, second = keys

        def resolve_two(env, first=first, second=second, keys=keys):
            if type(env) is dict:
                node = env.get(first)
                if type(node) is dict:
                    return node.get(second, _MISSING)
            return _resolve(env, keys)
        return resolve_two
    if len(keys) == 3:  # user.attributes.X (a user's attributes are a read-only mapping)
        first, second, third = keys

        def resolve_three(env, first=first, second=second, third=third, keys=keys):
            if type(env) is dict:
                node = env.get(first)
                if type(node) is dict:
                    node = node.get(second)
                    if type(node) is dict or type(node) is MappingProxyType:
                        return node.get(third, _MISSING)
            return _resolve(env, keys)
        return resolve_three
    return lambda env: _resolve(env, keys)


def _resolve(env, keys):
    node = env
    for key in keys:
        if type(node) is not dict and not isinstance(node, Mapping):
            return _MISSING
        node = node.get(key, _MISSING)
        if node is _MISSING:
            return _MISSING
    return node


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_equal(a, b) -> bool:
    """Equality as JSON means it: true is not 1, 1 equals 1.0, containers compare deeply."""
    if type(a) is str and type(b) is str:  # the common case, decided as below
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[key], b[key]) for key in a)
    return False


def _ordered(a, b) -> bool:
    """gt/gte/lt/lte compare two numbers or two strings, nothing else."""
    return (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))


def _member(item, collection) -> bool:
    return isinstance(collection, (list, tuple)) and any(_json_equal(item, element) for element in collection)


def _contains(left, right) -> bool:
    if isinstance(left, (list, tuple)):
        return _member(right, left)
    return isinstance(left, str) and isinstance(right, str) and right in left


# Addresses and networks as integers: ``address in network`` of ipaddress (same version,
# ``address & netmask == network address``) is ``first <= address <= last`` over the
# network's range, without its Python-level method calls on every check.


@lru_cache(maxsize=4096)
def _address_keys(text: str) -> tuple:
    """``((version, integer), ...)`` for an IP address -- an IPv4-mapped IPv6 address also
    as the IPv4 address it maps (``::ffff:10.0.0.1`` is 10.0.0.1) -- or () if not one."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return ()
    keys: tuple[tuple[int, int], ...] = ((address.version, int(address)),)
    if address.version == 6 and address.ipv4_mapped is not None:
        keys += ((4, int(address.ipv4_mapped)),)
    return keys


@lru_cache(maxsize=1024)
def _network(text: str):
    """``(version, first, last)`` of a CIDR (host bits ignored), or None."""
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    return network.version, int(network.network_address), int(network.broadcast_address)


def _ip_in_cidr(left, right) -> bool:
    return _address_in(left, _networks(right))


def _networks(right) -> tuple:
    """The valid networks of an ``ip_in_cidr`` right operand (a CIDR or a list of them), as
    ``_network`` gives them."""
    cidrs = (right,) if isinstance(right, str) else right if isinstance(right, (list, tuple)) else ()
    networks = (_network(cidr) if isinstance(cidr, str) else None for cidr in cidrs)
    return tuple(network for network in networks if network is not None)


def _address_in(left, networks: tuple) -> bool:
    if not networks or not isinstance(left, str):
        return False
    for version, number in _address_keys(left):
        for network_version, first, last in networks:
            if version == network_version and first <= number <= last:
                return True
    return False


_ORDERINGS = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}

_COMPARISONS = {
    "eq": _json_equal,
    "ne": lambda a, b: not _json_equal(a, b),
    "gt": lambda a, b: _ordered(a, b) and a > b,
    "gte": lambda a, b: _ordered(a, b) and a >= b,
    "lt": lambda a, b: _ordered(a, b) and a < b,
    "lte": lambda a, b: _ordered(a, b) and a <= b,
    "in": _member,
    "not_in": lambda a, b: isinstance(b, (list, tuple)) and not _member(a, b),
    "contains": _contains,
    "starts_with": lambda a, b: isinstance(a, str) and isinstance(b, str) and a.startswith(b),
    "ip_in_cidr": _ip_in_cidr,
}
