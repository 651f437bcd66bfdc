"""The value at a dotted path (``address.country``) in nested mappings: how user
attributes, ABAC operands and upstream claims all name a nested value."""
from __future__ import annotations

from collections.abc import Mapping


def lookup(node, path: str, missing=None):
    """The value ``path`` names under ``node``, or ``missing`` where a step is not there
    or lands on something that is not a mapping."""
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return missing
        node = node[part]
    return node
