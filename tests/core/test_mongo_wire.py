"""tests/mongo_wire.py, the test-only MongoDB wire-protocol server, answers pymongo as
a standalone mongod would for what the code uses, and names what it does not support."""
from __future__ import annotations

from datetime import UTC, datetime

import pymongo
import pytest
from pymongo import IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError, OperationFailure

from tests.mongo_wire import WireServer


@pytest.fixture(scope="module")
def db():
    server = WireServer().start()
    client = pymongo.MongoClient(server.uri + "wire_test", tz_aware=True, serverSelectionTimeoutMS=5000)
    yield client.get_default_database()
    client.close()
    server.stop()


def test_handshake_and_unknown_commands(db):
    hello = db.client.admin.command("hello")
    assert hello["isWritablePrimary"] and "setName" not in hello and hello["logicalSessionTimeoutMinutes"]
    assert db.client.admin.command("ping")["ok"] == 1
    with pytest.raises(OperationFailure) as failure:
        db.command("frobnicate")
    assert failure.value.code == 59


def test_writes_reads_and_duplicate_keys(db):
    things = db["things"]
    things.create_indexes([IndexModel([("n", 1)], unique=True), IndexModel([("at", 1)], expireAfterSeconds=3600)])
    assert {i["name"] for i in things.list_indexes()} == {"_id_", "n_1", "at_1"}
    now = datetime.now(UTC).replace(microsecond=0)
    things.insert_many([{"_id": f"t{i}", "n": i, "at": now} for i in range(250)])  # kind-1 document sequence
    with pytest.raises(DuplicateKeyError):
        things.insert_one({"_id": "again", "n": 7})
    assert things.count_documents({}) == 250 and things.count_documents({"n": {"$gte": 200}}) == 50
    assert [d["n"] for d in things.find({}, {"n": 1}).sort("n", -1).limit(3)] == [249, 248, 247]
    assert len(list(things.find({}).batch_size(40))) == 250  # getMore
    assert things.find_one({"_id": "t5"})["at"] == now
    assert things.update_many({"n": {"$lt": 10}}, {"$inc": {"n": 1000}}).modified_count == 10
    assert things.delete_many({"n": {"$gte": 1000}}).deleted_count == 10
    assert sorted(things.distinct("n"))[:2] == [10, 11]


def test_find_and_modify_and_upserts(db):
    counters = db["counters"]
    doc = counters.find_one_and_update({"_id": "seq"}, {"$inc": {"n": 1}, "$setOnInsert": {"epoch": "e"}},
                                       upsert=True, return_document=ReturnDocument.AFTER)
    assert doc == {"_id": "seq", "n": 1, "epoch": "e"}
    assert counters.find_one_and_update({"_id": "seq"}, {"$inc": {"n": 1}})["n"] == 1  # the document before
    assert counters.update_one({"_id": "other"}, {"$set": {"n": 5}}, upsert=True).upserted_id == "other"
    assert counters.find_one_and_delete({"_id": "other"})["n"] == 5
    assert counters.find_one({"_id": "other"}) is None
