"""The embedded store's shortcuts (controlplane/store.py): an exact ``_id`` read touches
one document and answers as a full scan would."""
from __future__ import annotations

from pymongo import ReturnDocument

from controlplane.store import Store


def test_exact_id_filters_answer_like_a_scan():
    coll = Store("memory://")["things"]
    coll.insert_many([{"_id": f"id{i}", "n": i, "tag": "even" if i % 2 == 0 else "odd"} for i in range(50)])
    assert coll.find_one({"_id": "id7"})["n"] == 7
    assert coll.find_one({"_id": "id7", "tag": "odd"})["n"] == 7
    assert coll.find_one({"_id": "id7", "tag": "even"}) is None
    assert coll.find_one({"_id": "missing"}) is None
    assert coll.update_one({"_id": "id8", "tag": "odd"}, {"$set": {"n": -1}}).modified_count == 0
    doc = coll.find_one_and_update({"_id": "id8", "tag": "even"}, {"$inc": {"n": 1}},
                                   return_document=ReturnDocument.AFTER)
    assert doc["n"] == 9
    assert coll.delete_one({"_id": "id9", "n": {"$gt": 100}}).deleted_count == 0
    assert coll.delete_one({"_id": "id9"}).deleted_count == 1 and coll.count_documents({}) == 49
    assert [d["_id"] for d in coll.find({"_id": {"$in": ["id1", "id2"]}})] == ["id1", "id2"]  # operators: a scan
