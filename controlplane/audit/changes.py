"""The ``data`` of an audit record that changed something: which fields changed and,
where their values are not secret, what they were and became (docs/audit.md, "Fields")."""
from __future__ import annotations

DISPLAY_MAX = 128  # what a caller typed (an unknown email) is kept this short


def changes(before: dict, after: dict, fields, *, hidden=()) -> dict:
    """``{"fields": [names], "before": {...}, "after": {...}}`` over ``fields`` whose value
    differs between ``before`` and ``after``; the ``hidden`` ones are named without their
    values (a webhook's URL may carry a token)."""
    changed = [name for name in fields if before.get(name) != after.get(name)]
    shown = [name for name in changed if name not in hidden]
    return {"fields": changed, "before": {name: before.get(name) for name in shown},
            "after": {name: after.get(name) for name in shown}}


def created(doc: dict, fields, *, hidden=()) -> dict:
    """``{"fields": [names], "after": {...}}`` of a new document's ``fields``."""
    fields = [name for name in fields if name in doc]
    return {"fields": fields, "after": {name: doc[name] for name in fields if name not in hidden}}


def typed(text: str | None) -> str | None:
    """A value the caller typed (an email that may match no account), cut short."""
    return text[:DISPLAY_MAX] if text else text
