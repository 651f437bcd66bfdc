"""The one evaluator of ABAC conditions: a condition compiled once into a program, and the
program run per check.

A program is nested tuples of small integers, strings, numbers and other such tuples --
no functions, cells, lists, sets or dicts -- so the cyclic garbage collector stops
tracking it once it has seen it (a level of nesting per collection it survives): a
tenant at every cap leaves about two tracked objects a policy for a full collection to
walk (docs/performance.md, "Garbage collection pauses"). Building a program is linear in
the condition's nodes and runs no Python ``compile()``.

Nodes, by their first element (an opcode): ``(ALL, children)``, ``(ANY, children)``,
``(NOT, child)``, ``(MALFORMED,)``, ``(EXISTS, left, right)``, ``(GENERAL, op, left,
right)`` (any comparison, through ``language.COMPARISONS``), and the common comparisons of
an operand with a literal whose type is known when compiling, each giving exactly what
``COMPARISONS[op](value, literal) is True`` gives. Operands: ``(LITERAL, value)``, its
lists held as tuples (every comparison reads both as arrays; an object literal, which
validation refuses, stays a dict), or an attribute path of two, three or any other number
of names. A malformed node is found when evaluation reaches it, with the same
short-circuits as a walk of the tree. Pure: no I/O, no clock, no logging.
"""
from __future__ import annotations

import marshal
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType

from shared.abac.language import (
    COMPARISONS,
    MAX_CONDITION_DEPTH,
    MISSING,
    ORDERINGS,
    Malformed,
    address_in,
    is_number,
    networks,
)

(_MALFORMED, _ALL, _ANY, _NOT, _EXISTS, _GENERAL, _STR_EQ, _BOOL_EQ, _STARTS_WITH, _STR_CONTAINS, _IP_IN,
 _NUMBER_ORDER, _NUMBER_EQ, _STR_IN) = range(14)
_LITERAL, _PAIR, _TRIPLE, _PATH = range(4)

MALFORMED = (_MALFORMED,)
ALWAYS = (_ALL, ())  # a policy without a condition


def condition_environment(user_id: str, attributes: Mapping, resource, context) -> dict:
    """What a condition's ``attr`` operands read: the checked user, the check's resource
    and context (a non-object resource or context reads as empty)."""
    return {
        "user": {"id": user_id, "attributes": attributes},
        # type() first: a parsed body's objects are dicts, and the ABC check costs more
        "resource": resource if type(resource) is dict or isinstance(resource, Mapping) else {},
        "context": context if type(context) is dict or isinstance(context, Mapping) else {},
    }


# --- running a program ---------------------------------------------------------------------


def holds(program: tuple, environment) -> bool:
    """Whether the compiled condition holds for ``environment`` (``condition_environment``);
    raises ``Malformed`` when evaluation reaches a node outside the language."""
    return _RUN[program[0]](program, environment)


def evaluate_condition(condition, environment) -> bool:
    """Whether an ABAC condition holds for ``environment``. Bad or missing data makes a
    comparison false; it never raises. A condition that is not in the language
    (``controlplane/abac/conditions.py`` validates it on write) is false as a whole."""
    try:
        return holds(_compile(condition, 1), environment)  # once (the dry run's trace asks per node): not kept
    except Malformed:
        return False


def any_holds(tests: tuple, environment: dict, memo: dict | None, malformed: bool) -> bool:
    """Whether a program of ``tests`` (``(key, program)`` pairs, ``CompiledPolicies.effects``)
    holds; ``memo`` keeps each policy's answer for the rest of the check (a bulk check asks
    again per permission; None for a check of one permission, which asks once).
    ``malformed``: the answer for a condition outside the language (fail closed: True for
    denies, False for allows). This loop is most of a POST check's own work."""
    run = _RUN
    if memo is None:
        for _, program in tests:
            try:
                if run[program[0]](program, environment):
                    return True
            except Malformed:
                # Validation keeps these out of the store; should one slip through, fail closed.
                if malformed:
                    return True
        return False
    for key, program in tests:
        held = memo.get(key)
        if held is None:
            try:
                held = run[program[0]](program, environment)
            except Malformed:
                held = malformed
            memo[key] = held
        if held:
            return True
    return False


def _read(operand: tuple, environment):
    """The operand's value: its literal, or what its path reads (MISSING when absent)."""
    form = operand[0]
    if form == _PAIR:  # resource.X, context.X, user.id, through the plain dicts a check builds
        if type(environment) is dict:
            node = environment.get(operand[1])
            if type(node) is dict:
                return node.get(operand[2], MISSING)
    elif form == _LITERAL:
        return operand[1]
    elif form == _TRIPLE:  # user.attributes.X (a user's attributes are a read-only mapping)
        if type(environment) is dict:
            node = environment.get(operand[1])
            if type(node) is dict:
                node = node.get(operand[2])
                if type(node) is dict or type(node) is MappingProxyType:
                    return node.get(operand[3], MISSING)
    node = environment
    for key in operand[1:]:
        if type(node) is not dict and not isinstance(node, Mapping):
            return MISSING
        node = node.get(key, MISSING)
        if node is MISSING:
            return MISSING
    return node


def _run_malformed(node, environment):  # noqa: ARG001 -- every node runs as (node, environment)
    raise Malformed


def _run_all(node, environment) -> bool:
    run = _RUN
    for child in node[1]:
        if not run[child[0]](child, environment):
            return False
    return True


def _run_any(node, environment) -> bool:
    run = _RUN
    for child in node[1]:
        if run[child[0]](child, environment):
            return True
    return False


def _run_not(node, environment) -> bool:
    child = node[1]
    return not _RUN[child[0]](child, environment)


def _run_exists(node, environment) -> bool:
    value, wanted = _read(node[1], environment), _read(node[2], environment)
    if type(wanted) is not bool:  # an attribute operand can read a non-boolean
        raise Malformed
    return (value is not MISSING) == wanted


def _run_general(node, environment) -> bool:
    # reading an operand has no effect: both are read
    a, b = _read(node[2], environment), _read(node[3], environment)
    if a is MISSING or b is MISSING:
        return False
    op = node[1]
    if type(a) is str and type(b) is str and (op == "eq" or op == "ne"):
        # two strings (an owner and a user id, say), as json_equal compares them
        return (a == b) is (op == "eq")
    try:
        return COMPARISONS[op](a, b) is True
    except Exception:  # runtime data we cannot compare (e.g. absurdly deep) is simply false
        return False


def _run_str_eq(node, environment) -> bool:  # a string equals only a string
    left = node[1]
    a = (pair.get(left[2], MISSING) if left[0] == _PAIR and type(environment) is dict
         and type(pair := environment.get(left[1])) is dict else _read(left, environment))
    return a is not MISSING and (isinstance(a, str) and a == node[2]) is node[3]


def _run_bool_eq(node, environment) -> bool:
    left = node[1]
    a = (pair.get(left[2], MISSING) if left[0] == _PAIR and type(environment) is dict
         and type(pair := environment.get(left[1])) is dict else _read(left, environment))
    return a is not MISSING and (isinstance(a, bool) and a == node[2]) is node[3]


def _run_starts_with(node, environment) -> bool:
    left = node[1]
    a = (pair.get(left[2], MISSING) if left[0] == _PAIR and type(environment) is dict
         and type(pair := environment.get(left[1])) is dict else _read(left, environment))
    return isinstance(a, str) and a.startswith(node[2])


def _run_str_contains(node, environment) -> bool:
    a, literal = _read(node[1], environment), node[2]
    if isinstance(a, (list, tuple)):
        # what any(json_equal(e, literal) for e in a) gives: only a string equals a string
        return literal in a
    return isinstance(a, str) and literal in a


def _run_ip_in(node, environment) -> bool:
    return address_in(_read(node[1], environment), node[2])


def _run_number_order(node, environment) -> bool:
    left = node[1]
    a = (pair.get(left[2], MISSING) if left[0] == _PAIR and type(environment) is dict
         and type(pair := environment.get(left[1])) is dict else _read(left, environment))
    kind = type(a)
    return (kind is int or kind is float or is_number(a)) and ORDERINGS[node[2]](a, node[3])


def _run_number_eq(node, environment) -> bool:
    left = node[1]
    a = (pair.get(left[2], MISSING) if left[0] == _PAIR and type(environment) is dict
         and type(pair := environment.get(left[1])) is dict else _read(left, environment))
    return a is not MISSING and (is_number(a) and a == node[2]) is node[3]


def _run_str_in(node, environment) -> bool:
    left = node[1]
    a = (pair.get(left[2], MISSING) if left[0] == _PAIR and type(environment) is dict
         and type(pair := environment.get(left[1])) is dict else _read(left, environment))
    if a is MISSING:
        return False
    members = node[2]
    at = bisect_left(members, a) if isinstance(a, str) else len(members)
    return (at < len(members) and members[at] == a) is node[3]


# By opcode (the order of the constants above).
_RUN = (_run_malformed, _run_all, _run_any, _run_not, _run_exists, _run_general, _run_str_eq, _run_bool_eq,
        _run_starts_with, _run_str_contains, _run_ip_in, _run_number_order, _run_number_eq, _run_str_in)


# --- compiling a condition ----------------------------------------------------------------


def compile_condition(condition) -> tuple:
    """``condition`` as a program for :func:`holds`, kept by content: a policy set fetched
    again after a change compiles only the changed conditions."""
    try:
        key = content_key(condition)
    except RecursionError:  # absurdly deep: what evaluation refuses anyway
        return _compile(condition, 1)
    return compile_keyed(key, condition)


def compile_keyed(key, condition=None) -> tuple:
    """:func:`compile_condition` of ``condition`` whose ``content_key`` is ``key`` (None:
    the marshal bytes ``key`` decoded, when not compiled already)."""
    program = _PROGRAMS.get(key)
    if program is None:
        program = _compile(condition if condition is not None else marshal.loads(key), 1)
        _PROGRAMS.put(key, program, NODE_BYTES * _nodes(program))
    return program


def _compile(node, depth: int) -> tuple:
    if type(node) is not dict or depth > MAX_CONDITION_DEPTH:
        return MALFORMED
    if "op" in node:
        return _compile_comparison(node)
    for name in ("all", "any"):
        if name in node:
            children = node[name]
            if type(children) is not list:
                return MALFORMED
            return (_ALL if name == "all" else _ANY, tuple(_compile(child, depth + 1) for child in children))
    if "not" in node:
        return (_NOT, _compile(node["not"], depth + 1))
    return MALFORMED


def _compile_comparison(node: dict) -> tuple:
    op = node["op"]
    if "left" not in node:
        return MALFORMED
    left = _compile_operand(node["left"])
    if op == "exists":
        right = _compile_operand(node["right"]) if "right" in node else (_LITERAL, True)
        if left is None or right is None:
            return MALFORMED
        return (_EXISTS, left, right)
    if not isinstance(op, str) or op not in COMPARISONS or "right" not in node:
        return MALFORMED
    right = _compile_operand(node["right"])
    if left is None or right is None:
        return MALFORMED
    if "value" in node["right"]:
        special = _against_literal(op, left, node["right"]["value"])
        if special is not None:
            return special
    return (_GENERAL, op, left, right)


def _against_literal(op: str, left: tuple, literal) -> tuple | None:
    """The node for a common comparison of an operand with a literal, its type known now
    (tests/authz/test_compiled_conditions.py holds each to ``COMPARISONS[op]``); None when
    there is no such form."""
    if isinstance(literal, (str, bool)) and op in ("eq", "ne"):
        return (_BOOL_EQ if isinstance(literal, bool) else _STR_EQ, left, literal, op == "eq")
    if isinstance(literal, str):
        if op == "starts_with":
            return (_STARTS_WITH, left, literal)
        if op == "contains":
            return (_STR_CONTAINS, left, literal)
        if op == "ip_in_cidr":
            return (_IP_IN, left, networks(literal))
    elif is_number(literal):  # not a boolean
        if op in ORDERINGS:
            return (_NUMBER_ORDER, left, op, literal)
        if op in ("eq", "ne"):
            return (_NUMBER_EQ, left, literal, op == "eq")
    elif type(literal) is list and literal and all(type(element) is str for element in literal):
        if op in ("in", "not_in"):
            # sorted for a binary search: a set or a dict would keep the node tracked
            return (_STR_IN, left, tuple(sorted(set(literal))), op == "in")
        if op == "ip_in_cidr":
            return (_IP_IN, left, networks(literal))
    return None


def _compile_operand(operand) -> tuple | None:
    """The operand's node, or None when it is not an operand."""
    if type(operand) is not dict or len(operand) != 1:
        return None
    if "value" in operand:
        return (_LITERAL, _untracked(operand["value"]))
    path = operand.get("attr")
    if type(path) is not str:
        return None
    keys = tuple(path.split("."))
    return ((_PAIR if len(keys) == 2 else _TRIPLE if len(keys) == 3 else _PATH), *keys)


def _untracked(value):
    """A literal with its lists as tuples (every comparison reads both as arrays), which the
    collector stops tracking once they hold only atoms; as given if absurdly deep."""
    try:
        return _frozen(value)
    except RecursionError:
        return value


def _frozen(value):
    if type(value) is list:
        return tuple(map(_frozen, value))
    if type(value) is dict:
        return {key: _frozen(item) for key, item in value.items()}
    return value


def _nodes(program: tuple) -> int:
    """A program's nodes (what ``NODE_BYTES`` is per)."""
    code = program[0]
    if code == _ALL or code == _ANY:
        return 1 + sum(map(_nodes, program[1]))
    return 1 + _nodes(program[1]) if code == _NOT else 1


def content_key(value):
    """What the cache of programs is keyed by, and what a ``Policy`` keeps of its condition:
    the value's marshal bytes, whose types are spelled out (1, 1.0, True, a list and a tuple
    differ); the repr for what marshal does not take (not plain JSON data), which is then
    not kept as the condition."""
    try:
        return marshal.dumps(value, 2)  # version 2: no back-references, so no dependence on sharing
    except ValueError:
        return repr(value)


class CompiledCache:
    """Programs by content key, least recently used first, bounded by an estimate of their
    bytes rather than by their number: one entry can take a few hundred bytes or tens of
    kilobytes. An entry's estimate is its key's length plus the size given to ``put``; one
    larger than the whole bound is not kept. Asked only when a policy set's programs are
    first built (the first check of a permission after a change), not on every check; the
    lock is never held across a yield, so no greenlet waits on it."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict = OrderedDict()  # key -> (program, estimate)
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

    def put(self, key, program, size: int) -> None:
        estimate = len(key) + size
        if estimate > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self.bytes -= previous[1]
            self._entries[key] = (program, estimate)
            self.bytes += estimate
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped


_PROGRAMS = CompiledCache(16 * 1024 * 1024)
# A program's node (its tuples and operand tuples) with Python's overhead, measured with
# tracemalloc: 150 to 250 bytes; its literals are counted in the key, the condition's bytes.
NODE_BYTES = 256
