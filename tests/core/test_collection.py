"""controlplane.collection's ``insert_unique``: a unique index's refusal is the area's
error, and the refused document is not stored."""
from __future__ import annotations

import pytest

from controlplane.collection import insert_unique


class NameTaken(Exception):
    """Stands for an area's error (a plain exception: no code joins the error catalogue)."""


def test_a_refused_insert_raises_the_areas_error_and_stores_nothing(ctx):
    names = ctx.store["test_unique_names"]
    names.create_index("name", unique=True)
    insert_unique(names, {"_id": "first", "name": "taken"}, NameTaken)

    with pytest.raises(NameTaken) as raised:
        insert_unique(names, {"_id": "second", "name": "taken"}, NameTaken)

    assert raised.value.__suppress_context__  # the driver's error stays out of the log's trace
    assert [doc["_id"] for doc in names.find()] == ["first"]
