"""The event catalogue (shared/event_types.py) is the one list of kinds: the change log
refuses any other, and no code emits a kind that is not in it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shared.event_types import EVENT_TYPES, INTERNAL_EVENT_TYPES, PUBLIC_EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("controlplane", "decision", "shared")


def emitted_kinds() -> dict[str, list[str]]:
    """Kinds passed as a string literal to an ``.emit(app_id, kind, ...)`` call in the
    application code, with where each is emitted."""
    found: dict[str, list[str]] = {}
    for package in SOURCES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit"
                        and len(node.args) >= 2):
                    for kind in _literal_kinds(node.args[1], node, tree):
                        found.setdefault(kind, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _literal_kinds(argument, call, tree) -> list[str]:
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return [argument.value]
    # A kind taken from a loop over literal pairs: for kind, names in (("a.b", ...), ...)
    if isinstance(argument, ast.Name):
        for loop in ast.walk(tree):
            if (isinstance(loop, ast.For) and isinstance(loop.target, ast.Tuple) and isinstance(loop.iter, ast.Tuple)
                    and any(isinstance(t, ast.Name) and t.id == argument.id for t in loop.target.elts)
                    and loop.lineno <= call.lineno <= loop.end_lineno):
                position = [t.id if isinstance(t, ast.Name) else None for t in loop.target.elts].index(argument.id)
                return [item.elts[position].value for item in loop.iter.elts
                        if isinstance(item, ast.Tuple) and isinstance(item.elts[position], ast.Constant)]
    return []


def test_the_public_kinds_are_the_spec_table():
    assert len(PUBLIC_EVENT_TYPES) == 23
    assert not set(PUBLIC_EVENT_TYPES) & set(INTERNAL_EVENT_TYPES)
    assert set(EVENT_TYPES) == set(PUBLIC_EVENT_TYPES) | set(INTERNAL_EVENT_TYPES)
    assert all(isinstance(meaning, str) and meaning for meaning in EVENT_TYPES.values())


def test_every_kind_the_code_emits_is_in_the_catalogue():
    emitted = emitted_kinds()
    assert len(emitted) >= 20, "the scan found too few emits: has the emit call changed shape?"
    unknown = {kind: places for kind, places in emitted.items() if kind not in EVENT_TYPES}
    assert unknown == {}


def test_every_internal_kind_is_emitted_by_the_code():
    """Internal kinds exist for the control plane's own readers: one nothing emits goes."""
    assert set(INTERNAL_EVENT_TYPES) - set(emitted_kinds()) == set()


def test_the_change_log_refuses_a_kind_not_in_the_catalogue(ctx):
    head = ctx.events.head()
    with pytest.raises(ValueError, match="user.renamed"):
        ctx.events.emit("app-1", "user.renamed", {"user_id": "u1"})
    assert ctx.events.head() == head
    assert ctx.events.read_after(head) == []


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_the_change_log_takes_every_kind_of_the_catalogue(ctx, kind):
    seq = ctx.events.emit("app-1", kind, {})
    assert [event.type for event in ctx.events.read_after(seq - 1)] == [kind]
