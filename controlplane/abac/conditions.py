"""The ABAC condition language: validation with a report anyone can act on, and the
trace of an evaluation for the dry run.

Pure functions over plain JSON: no I/O, no clock, no logging.

The language (docs/authorization.md, "Conditions and their validation"):

- a condition is ``{"all": [c, ...]}``, ``{"any": [c, ...]}``, ``{"not": c}`` or a
  comparison ``{"op": OP, "left": OPERAND, "right": OPERAND}``;
- OP is one of the engine's ``shared.abac.OPERATORS`` (``eq ne gt gte lt lte in not_in contains
  starts_with exists ip_in_cidr``);
- an operand is ``{"attr": PATH}`` with PATH ``user.id``, ``user.attributes.X``,
  ``resource.X`` or ``context.X`` (X may go deeper with dots), or ``{"value": literal}``;
- ``exists`` takes only ``left`` (an attribute); a ``right`` of ``{"value": true|false}``
  asks for presence or absence.

What validation adds to the grammar, each refusal naming the JSON path of the bad node:

- nesting at most :data:`MAX_DEPTH` condition nodes deep (the root is depth 1);
- the application's caps on size (:func:`too_large`, checked first, its own error):
  IAMGATE_MAX_CONDITION_BYTES bytes of compact JSON and IAMGATE_MAX_CONDITION_NODES
  nodes, which bound what one condition costs to compile and evaluate;
- ``in``/``not_in`` literals on the right are arrays; ``ip_in_cidr`` literals are
  networks (a CIDR string or a non-empty array of them); ``gt``/``gte``/``lt``/``lte``
  literals are numbers or strings; ``starts_with`` literals are strings;
- literals are JSON scalars or arrays of scalars (what attributes hold and MongoDB stores
  as given); numbers are finite and integers fit in 64 bits.

Evaluation itself belongs to the engine (``shared.abac.evaluate_condition``), which
the control plane and the decision service share; :func:`trace` asks it for the value of
every node, so the trace cannot disagree with the decision.
"""
from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping

from shared import dotted
from shared.abac import OPERATORS, condition_nodes, evaluate_condition
from shared.validation import INT64

MAX_DEPTH = 8
MAX_PATH_LENGTH = 255

_GROUPS = ("all", "any", "not")
_ATTR_ROOTS = ("user", "resource", "context")
_ATTR_SHAPE = "must be user.id, user.attributes.<key>, resource.<key> or context.<key>"


def too_large(condition, *, max_bytes: int, max_nodes: int) -> dict | None:
    """``{"bytes", "max_bytes"}`` or ``{"nodes", "max_nodes"}`` when ``condition`` is over
    a cap, else None. Checked before the language (:func:`validate`), so an oversized
    condition costs no more than measuring it (nodes are counted once the bytes passed)."""
    try:
        size = len(json.dumps(condition, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError):
        size = 0  # not JSON, or absurdly deep: validate says where
    if size > max_bytes:
        return {"bytes": size, "max_bytes": max_bytes}
    nodes = condition_nodes(condition)
    if nodes > max_nodes:
        return {"nodes": nodes, "max_nodes": max_nodes}
    return None


def validate(condition, path: str = "condition") -> dict[str, str]:
    """Check ``condition`` against the language (its size is :func:`too_large`'s).

    Returns ``{}`` when it is valid, else ``{json_path: reason}`` for every problem found,
    in document order, e.g. ``{"condition.all[2].op": "unknown operator 'equals'; ..."}``.
    """
    errors: dict[str, str] = {}
    _node(condition, path, 1, errors)
    return errors


def _node(node, path: str, depth: int, errors: dict) -> None:
    if depth > MAX_DEPTH:
        errors[path] = f"is nested deeper than {MAX_DEPTH} levels (all, any and not each add one)"
        return
    if not isinstance(node, dict):
        errors[path] = 'must be an object: {"all": [...]}, {"any": [...]}, {"not": {...}} or {"op": ..., ...}'
        return
    kinds = [key for key in (*_GROUPS, "op") if key in node]
    if len(kinds) != 1:
        errors[path] = ("must have exactly one of all, any, not, op" if kinds else
                        "must have one of all, any, not, op")
        return
    kind = kinds[0]
    allowed = {"op", "left", "right"} if kind == "op" else {kind}
    unknown = sorted(str(key) for key in node if key not in allowed)
    if unknown:
        errors[path] = f"unknown key(s) {', '.join(unknown)}; " + (
            "a comparison has op, left and right" if kind == "op" else f"a {kind} node has only {kind}")
    if kind == "op":
        _comparison(node, path, errors)
    elif kind == "not":
        _node(node["not"], f"{path}.not", depth + 1, errors)
    else:
        children = node[kind]
        if not isinstance(children, list) or not children:
            errors[f"{path}.{kind}"] = "must be a non-empty array of conditions"
            return
        for index, child in enumerate(children):
            _node(child, f"{path}.{kind}[{index}]", depth + 1, errors)


def _comparison(node: dict, path: str, errors: dict) -> None:
    op = node["op"]
    if op not in OPERATORS:
        shown = repr(op) if isinstance(op, (str, int, float, bool)) or op is None else "this value"
        errors[f"{path}.op"] = f"unknown operator {shown}; use one of {', '.join(OPERATORS)}"
        return
    if "left" not in node:
        errors[f"{path}.left"] = "is required"
        left_ok = False
    else:
        left_ok = _operand(node["left"], f"{path}.left", errors)
    if op == "exists":
        if left_ok and "attr" not in node["left"]:
            errors[f"{path}.left"] = 'exists needs an attribute: {"attr": "user.attributes.<key>"}'
        if "right" in node and not (isinstance(node["right"], dict) and set(node["right"]) == {"value"}
                                    and isinstance(node["right"]["value"], bool)):
            errors[f"{path}.right"] = 'exists takes no right, or {"value": true} (present) or {"value": false} (absent)'
        return
    if "right" not in node:
        errors[f"{path}.right"] = f"is required for {op}"
        return
    if not _operand(node["right"], f"{path}.right", errors):
        return
    if left_ok and op == "ip_in_cidr" and "value" in node["left"]:
        value = node["left"]["value"]
        if not (isinstance(value, str) and _is_ip(value)):
            errors[f"{path}.left.value"] = "ip_in_cidr needs an IP address on the left"
    right = node["right"]
    if "value" not in right:
        return  # read at check time: a value of the wrong type makes the comparison false
    reason = _literal_problem(op, right["value"])
    if reason:
        errors[f"{path}.right.value"] = reason


def _literal_problem(op: str, value) -> str | None:
    if op in ("in", "not_in") and not isinstance(value, list):
        return f"{op} needs an array on the right"
    if op in ("gt", "gte", "lt", "lte") and not (_is_number(value) or isinstance(value, str)):
        return f"{op} compares numbers or strings"
    if op == "starts_with" and not isinstance(value, str):
        return "starts_with needs a string"
    if op == "ip_in_cidr":
        networks = [value] if isinstance(value, str) else value if isinstance(value, list) else None
        if not networks:
            return "ip_in_cidr needs a network such as \"10.0.0.0/8\" or a non-empty array of them"
        bad = [n for n in networks if not (isinstance(n, str) and _is_network(n))]
        if bad:
            return f"not a network: {', '.join(repr(n) if isinstance(n, str) else 'a non-string' for n in bad)}"
    return None


def _operand(operand, path: str, errors: dict) -> bool:
    if not isinstance(operand, dict) or len(operand) != 1 or not ({"attr", "value"} & set(operand)):
        errors[path] = 'must be {"attr": "<path>"} or {"value": <literal>}'
        return False
    if "value" in operand:
        reason = _value_problem(operand["value"])
        if reason:
            errors[f"{path}.value"] = reason
            return False
        return True
    reason = attr_problem(operand["attr"])
    if reason:
        errors[f"{path}.attr"] = reason
        return False
    return True


def attr_problem(attr) -> str | None:
    """Why ``attr`` is not an operand path a condition may read, or None."""
    if not isinstance(attr, str):
        return _ATTR_SHAPE
    if len(attr) > MAX_PATH_LENGTH:
        return f"must be at most {MAX_PATH_LENGTH} characters"
    parts = attr.split(".")
    if any(not part for part in parts) or parts[0] not in _ATTR_ROOTS or len(parts) < 2:
        return _ATTR_SHAPE
    if parts[0] == "user" and not (parts[1:] == ["id"] or (parts[1] == "attributes" and len(parts) >= 3)):
        return _ATTR_SHAPE
    return None


def _value_problem(value) -> str | None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            reason = _scalar_problem(item)
            if reason:
                return f"item {index} {reason}"
        return None
    return _scalar_problem(value)


def _scalar_problem(value) -> str | None:
    """Why ``value`` is not a storable JSON scalar, or None."""
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, int):
        return None if INT64[0] <= value <= INT64[1] else "is an integer beyond 64 bits"
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be a finite number"
    return "must be a JSON scalar (string, number, boolean, null) or an array of them"


def scalar_or_scalars_problem(value) -> str | None:
    """Why ``value`` is not a JSON scalar or an array of scalars (user attribute values)."""
    return _value_problem(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_network(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)  # the engine reads host bits the same way
    except ValueError:
        return False
    return True


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# --- the dry run's trace ---------------------------------------------------------------------


_MISSING = object()


def trace(condition, env: Mapping, path: str = "condition") -> dict:
    """Every node of a (valid) condition with its value for ``env``.

    ``{"path", "value"}`` plus, for groups, ``"children"`` (``"child"`` for not) and, for
    comparisons, ``"op"`` and the resolved ``"left"``/``"right"`` operands
    (``{"attr", "value"}`` or ``{"attr", "missing": true}``, ``{"value"}`` for literals).
    A missing attribute or a type mismatch makes a comparison false, never an error.
    """
    out: dict = {"path": path, "value": evaluate_condition(condition, env)}
    if "op" in condition:
        out["op"] = condition["op"]
        for side in ("left", "right"):
            if side in condition:
                out[side] = _resolved(condition[side], env)
    elif "not" in condition:
        out["child"] = trace(condition["not"], env, f"{path}.not")
    else:
        kind = "all" if "all" in condition else "any"
        out["children"] = [trace(child, env, f"{path}.{kind}[{index}]")
                           for index, child in enumerate(condition[kind])]
    return out


def _resolved(operand: dict, env: Mapping) -> dict:
    if "value" in operand:
        return {"value": operand["value"]}
    value = dotted.lookup(env, operand["attr"], _MISSING)
    if value is _MISSING:
        return {"attr": operand["attr"], "missing": True}
    return {"attr": operand["attr"], "value": value}
