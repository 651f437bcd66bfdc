"""The embedded store's shortcuts (controlplane/embedded.py): an exact ``_id`` read touches
one document, a filter of plain str/int comparisons skips mongomock's general matcher, a
single-field index is a map from value to documents, and documents are copied without
``copy.deepcopy``; each answers as a full scan (and mongomock's own copies) would."""
from __future__ import annotations

import copy
import statistics
import subprocess
import sys
import time
import types
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from mongomock.collection import Collection
from mongomock.filtering import filter_applies, resolve_sort_key
from pymongo import IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane import embedded
from controlplane.store import Store

ROOT = Path(__file__).resolve().parents[2]


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


def test_simple_filters_answer_like_the_general_matcher():
    """Plain fields against str/int operands (and equality with a boolean) take the shortcut; every other value type
    in a document (arrays, null, floats, booleans, a missing field) gets MongoDB's rules."""
    values = [1, 2, 3, 2.0, 2.5, True, False, None, "2", "b", "a", [2], [1, 3], ["b"], {"x": 2}, []]
    docs = [{"_id": f"d{i}", "v": v, "w": i % 3} for i, v in enumerate(values)] + [{"_id": "missing", "w": 0}]
    coll = Store("memory://")["things"]
    coll.insert_many([dict(d) for d in docs])
    filters = [{"v": 2}, {"v": "b"}, {"v": 1, "w": 1}, {"v": {"$gt": 1}}, {"v": {"$gte": 2, "$lt": 3}},
               {"v": {"$lte": "b"}}, {"v": {"$gt": "a"}}, {"w": {"$lt": 1}}, {"v": 0}, {"w": 2, "v": {"$gt": 0}},
               {"v": False}, {"v": True}, {"v": 1}, {"v": False, "w": 0}]
    for f in filters:
        expected = sorted(d["_id"] for d in docs if filter_applies(f, d))
        assert sorted(d["_id"] for d in coll.find(f)) == expected, f
        assert coll.count_documents(f) == len(expected), f


def test_a_unique_index_still_refuses_duplicates():
    store = Store("memory://")
    store.declare_indexes({"log": [IndexModel([("seq", 1)], unique=True)]})
    store.ensure_indexes()
    store["log"].insert_many([{"_id": f"e{i}", "seq": i} for i in range(1, 20)])
    with pytest.raises(DuplicateKeyError):
        store["log"].insert_one({"_id": "again", "seq": 7})
    store["log"].insert_one({"_id": "float", "seq": 20.5})
    with pytest.raises(DuplicateKeyError):
        store["log"].insert_one({"_id": "same-number", "seq": 20.5})
    assert store["log"].count_documents({}) == 20


def test_find_one_and_limits_answer_like_the_whole_result():
    coll = Store("memory://")["queue"]
    base = datetime(2026, 1, 1, tzinfo=UTC)
    coll.insert_many([{"_id": f"q{i}", "due_at": base + timedelta(seconds=(i * 7) % 20), "n": i} for i in range(20)])
    first = coll.find_one({"due_at": {"$lte": base + timedelta(seconds=10)}}, sort=[("due_at", 1), ("n", -1)])
    assert first["_id"] == "q0" and first["due_at"] == base
    claimed = coll.find_one_and_update({"due_at": {"$lte": base + timedelta(seconds=30)}}, {"$set": {"n": -1}},
                                       sort=[("due_at", -1)], return_document=ReturnDocument.AFTER)
    assert claimed["due_at"] == base + timedelta(seconds=19) and claimed["n"] == -1
    everything = list(coll.find({}).sort("n", 1))
    assert [d["_id"] for d in coll.find({}).sort("n", 1).skip(3).limit(4)] == [d["_id"] for d in everything[3:7]]
    cursor = coll.find({"n": {"$gte": 5}}).sort("n", 1).limit(2)
    assert [d["n"] for d in cursor] == [5, 6]
    assert coll.find_one({"due_at": {"$gt": base + timedelta(days=1)}}) is None
    assert coll.find_one("q3")["n"] == 3


def test_mongomock_still_has_what_the_shortcuts_replace():
    """The shortcuts replace mongomock's private methods: a mongomock without one of
    them fails here by name, not as a wrong answer somewhere else."""
    assert embedded.missing_private_names() == [], (
        f"controlplane/embedded.py was written against mongomock {embedded.WRITTEN_AGAINST}")


def test_a_mongomock_without_them_refuses_to_start(monkeypatch):
    from mongomock.collection import Collection

    monkeypatch.setattr(embedded, "PRIVATE_NAMES", embedded.PRIVATE_NAMES + ((Collection, "_renamed"),))
    monkeypatch.setattr(Collection, "_iamgate_fast_paths", False)
    with pytest.raises(RuntimeError, match=r"no longer has Collection\._renamed: .*written against mongomock"):
        Store("memory://")


def test_only_the_embedded_store_loads_mongomock(tmp_path):
    """A MongoDB store leaves mongomock's classes as they are: nothing embedded is loaded."""
    script = ("import sys\n"
              "from controlplane.store import Store\n"
              "Store('mongodb://127.0.0.1:1/iamgate')\n"
              "assert 'mongomock' not in sys.modules and 'controlplane.embedded' not in sys.modules\n"
              "Store('memory://')\n"
              "assert 'controlplane.embedded' in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=60)


def _unique_log(store_uri="memory://"):
    store = Store(store_uri)
    store.declare_indexes({"log": [IndexModel([("seq", 1)], unique=True)]})
    store.ensure_indexes()
    return store["log"]


def _warm(coll, reads=20):
    """Enough reads for the embedded store to build its map of the unique index."""
    for _ in range(reads):
        coll.find_one({"seq": 1})


def test_a_unique_index_answers_like_a_scan_through_writes():
    """The map of a unique single-field index answers equality and range filters as the
    general matcher does, after inserts, in-place updates of the indexed field, deletes
    and a value the map cannot hold (a float): every answer is checked against a scan."""
    coll = _unique_log()
    coll.insert_many([{"_id": f"e{i}", "seq": i, "kind": "even" if i % 2 == 0 else "odd"} for i in range(1, 60)])

    def agrees():
        docs = list(coll.find({}))
        for f in ({"seq": 7}, {"seq": 7, "kind": "odd"}, {"seq": 7, "kind": "even"}, {"seq": 1000},
                  {"seq": {"$gt": 50}}, {"seq": {"$gte": 10, "$lt": 13}}, {"seq": {"$lte": 2}}, {"seq": "7"},
                  {"seq": {"$gt": 50}, "kind": "odd"}, {"seq": {"$gte": 10, "$lt": 13}, "kind": {"$in": ["even"]}},
                  {"kind": "even", "seq": {"$lt": 5}}, {"seq": {"$gt": 2}, "kind": "odd"}):
            expected = sorted(d["_id"] for d in docs if filter_applies(f, d))
            assert sorted(d["_id"] for d in coll.find(f)) == expected, f
        assert [d["seq"] for d in coll.find({"seq": {"$gt": 55}}).sort("seq", 1)] == \
            sorted(d["seq"] for d in docs if d["seq"] > 55)

    _warm(coll)
    agrees()
    coll.insert_one({"_id": "e60", "seq": 60, "kind": "even"})
    agrees()
    coll.update_one({"_id": "e7"}, {"$set": {"seq": 700}})
    _warm(coll)
    assert coll.find_one({"seq": 7}) is None and coll.find_one({"seq": 700})["_id"] == "e7"
    agrees()
    coll.delete_many({"seq": {"$lt": 5}})
    _warm(coll)
    agrees()
    coll.insert_one({"_id": "float", "seq": 61.5, "kind": "odd"})
    _warm(coll)
    agrees()


def test_a_range_on_a_unique_index_narrows_the_scan_of_the_other_clauses(monkeypatch):
    """The sealer's work list (``{"sealed": False, "seq": {"$gt": n}, "at": ...}``) reads
    the documents after ``n``, not the whole log; a range naming most of it is a scan."""
    coll = _unique_log()
    coll.insert_many([{"_id": f"e{i}", "seq": i, "sealed": i > 990} for i in range(1, 1001)])
    _warm(coll)
    scanned, column = [], embedded._column
    monkeypatch.setattr(embedded, "_column", lambda plan, docs: scanned.append(len(docs)) or column(plan, docs))
    found = coll.find({"sealed": False, "seq": {"$gt": 980}}).sort("seq", 1)
    assert [d["seq"] for d in found] == list(range(981, 991))
    assert scanned == [20]
    assert len(list(coll.find({"sealed": False, "seq": {"$gt": 10}}))) == 980
    assert scanned[-1] == 1000


def test_a_unique_index_still_refuses_duplicates_once_mapped():
    coll = _unique_log()
    coll.insert_many([{"_id": f"e{i}", "seq": i} for i in range(1, 30)])
    _warm(coll)
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": "again", "seq": 7})
    assert coll.find_one({"_id": "again"}) is None and [d["_id"] for d in coll.find({"seq": 7})] == ["e7"]
    with pytest.raises(DuplicateKeyError):
        coll.update_one({"_id": "e8"}, {"$set": {"seq": 9}})
    _warm(coll)
    assert coll.find_one({"seq": 8})["_id"] == "e8" and coll.find_one({"seq": 9})["_id"] == "e9"
    coll.insert_one({"_id": "e30", "seq": 30})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": "e30-again", "seq": 30})
    assert coll.count_documents({}) == 30


def test_a_collection_without_a_unique_index_takes_upserts_after_reads():
    """The store remembers that a collection has no unique index to map; an upsert after
    many reads still writes (the rate limiter's counters)."""
    coll = Store("memory://")["counters"]
    for _ in range(20):
        coll.find_one({"name": "x"})
    for _ in range(3):
        doc = coll.find_one_and_update({"_id": "k"}, {"$inc": {"n": 1}}, upsert=True,
                                       return_document=ReturnDocument.AFTER)
    assert doc["n"] == 3


def test_an_insert_into_a_long_change_log_costs_what_one_into_a_short_one():
    """The unique-index check of an insert reads the documents with the new value, not
    the whole collection: 200 inserts after 20,000 events take about as long as after
    200 (a scan would take some 100 times as long; bound: 5 times, best of 3)."""

    def inserts_after(existing: int) -> float:
        coll = _unique_log()
        coll.insert_many([{"_id": f"e{i}", "seq": i} for i in range(existing)])
        _warm(coll)
        best = float("inf")
        for attempt in range(3):
            started = time.perf_counter()
            for i in range(200):
                coll.insert_one({"_id": f"n{attempt}-{i}", "seq": existing + attempt * 1000 + i})
            best = min(best, time.perf_counter() - started)
        return best

    assert inserts_after(20_000) < 5 * inserts_after(200)


def test_a_non_unique_index_answers_like_a_scan_through_updates():
    """A plain single-field index (a grant's token digest, rotated in place at every
    refresh) is mapped too and stays right through updates, rolled-back updates, upserts
    and deletes; a value several documents share is answered by the scan, in order."""
    store = Store("memory://")
    store.declare_indexes({"grants": [IndexModel([("token", 1)]), IndexModel([("n", 1)], unique=True)]})
    store.ensure_indexes()
    coll = store["grants"]
    coll.insert_many([{"_id": f"g{i}", "token": f"t{i}", "n": i, "group": i % 3} for i in range(40)])

    def agrees():
        docs = list(coll.find({}))
        for f in ({"token": "t5"}, {"token": "t5", "group": 2}, {"token": "t5", "group": 0}, {"token": "shared"},
                  {"token": "t100"}, {"token": "t5-next"}):
            expected = [d["_id"] for d in docs if filter_applies(f, d)]
            assert [d["_id"] for d in coll.find(f)] == expected, f

    _warm(coll)
    agrees()
    for step in range(3):
        coll.find_one_and_update({"token": f"t5{'-next' * step}"}, {"$set": {"token": f"t5{'-next' * (step + 1)}"}})
        agrees()
    coll.update_many({"group": 1}, {"$set": {"token": "shared"}})
    agrees()
    with pytest.raises(DuplicateKeyError):
        coll.update_one({"_id": "g2"}, {"$set": {"token": "t2-new", "n": 3}})
    assert coll.find_one({"token": "t2"})["_id"] == "g2" and coll.find_one({"token": "t2-new"}) is None
    agrees()
    coll.update_one({"_id": "g99"}, {"$set": {"token": "t99", "n": 99}}, upsert=True)
    coll.delete_one({"token": "t3"})
    coll.replace_one({"_id": "g6"}, {"token": "t6-replaced", "n": 6})
    assert coll.find_one({"token": "t99"})["_id"] == "g99" and coll.find_one({"token": "t3"}) is None
    assert coll.find_one({"token": "t6"}) is None and coll.find_one({"token": "t6-replaced"})["_id"] == "g6"
    agrees()


def test_stored_documents_are_copies():
    """The store keeps its own copy of what it is given and hands out copies: nested
    lists and dicts included, and a failed update leaves the stored document whole."""
    coll = _unique_log()
    given = {"_id": "g", "seq": 1, "spent": ["a", "b"], "sub": {"scopes": ["openid"], "at": datetime(2026, 1, 1)}}
    coll.insert_one(given)
    given["spent"].append("changed")
    given["sub"]["scopes"].append("changed")
    read = coll.find_one({"_id": "g"})
    assert read["spent"] == ["a", "b"] and read["sub"]["scopes"] == ["openid"]
    read["spent"].append("changed")
    coll.insert_one({"_id": "h", "seq": 2})
    with pytest.raises(DuplicateKeyError):
        coll.update_one({"_id": "g"}, {"$push": {"spent": "c"}, "$set": {"seq": 2}})
    stored = coll.find_one({"_id": "g"})
    assert stored["spent"] == ["a", "b"] and stored["seq"] == 1
    assert stored["sub"]["at"] == datetime(2026, 1, 1, tzinfo=UTC)


def test_datetimes_come_back_in_utc_wherever_they_are():
    coll = Store("memory://")["things"]
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    coll.insert_one({"_id": "d", "at": at, "list": [at, "x", {"at": at}], "sub": {"at": at, "n": 1}, "plain": ["a"]})
    for doc in (coll.find_one({"_id": "d"}), list(coll.find({}))[0]):
        assert doc == {"_id": "d", "at": at, "list": [at, "x", {"at": at}], "sub": {"at": at, "n": 1}, "plain": ["a"]}
        assert doc["list"][0].tzinfo is not None and doc["list"][2]["at"].tzinfo is not None


def test_an_update_does_not_cost_a_deep_copy_of_a_long_list():
    """mongomock copies the document before an update (to roll it back); a grant's list
    of spent refresh-token digests grows at every refresh. An update of a document
    holding 2,000 digests costs less than half of ``copy.deepcopy`` of it (it cost more
    than one: median of 5 rounds of 50)."""
    coll = Store("memory://")["grants"]
    coll.insert_one({"_id": "g", "token": "t", "spent": [f"digest-{i:06d}-{'x' * 36}" for i in range(2000)]})
    stored = coll.find_one({"_id": "g"})
    updates, copies = [], []
    for round_ in range(5):
        started = time.process_time()
        for n in range(50):
            coll.update_one({"_id": "g"}, {"$push": {"spent": f"new-{round_}-{n}"}, "$set": {"token": f"t{n}"}})
        updates.append(time.process_time() - started)
        started = time.process_time()
        for _ in range(50):
            copy.deepcopy(stored)
        copies.append(time.process_time() - started)
    assert statistics.median(updates) < 0.5 * statistics.median(copies)


def _two_stores():
    """Two embedded stores holding the same documents and indexes: (shortcut, general)."""
    stores = []
    for _ in range(2):
        store = Store("memory://")
        store.declare_indexes({"things": [IndexModel([("key", 1)], unique=True), IndexModel([("tag", 1)])]})
        store.ensure_indexes()
        coll = store["things"]
        when = datetime(2100, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        coll.insert_many([{"_id": f"id{i}", "key": f"k{i}", "tag": "even" if i % 2 == 0 else "odd", "n": i,
                           "x": 1.5, "flag": True, "text": "t", "list": ["a"], "at": when, "none": None}
                          for i in range(6)])
        stores.append(coll)
    return stores


NOW = datetime(2100, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
FIND_ONE_AND_UPDATE_CASES = [
    # (filter, update, keyword arguments): shortcut-shaped ones, then the general path's
    ({"_id": "id1"}, {"$inc": {"n": 1}}, {}),
    ({"_id": "id1"}, {"$inc": {"n": 2, "x": 0.5, "new": 3}, "$set": {"text": "u", "at": NOW}}, {}),
    ({"_id": "id1"}, {"$set": {"none": None, "flag": False, "later": NOW + timedelta(days=1)}}, {}),
    ({"_id": "id2", "tag": "even", "at": {"$gt": NOW}}, {"$set": {"used": NOW, "grant": "g"}}, {}),
    ({"_id": "id2", "used": None}, {"$set": {"used": NOW}}, {}),  # spent already: no match
    ({"key": "k3"}, {"$push": {"list": "b"}, "$set": {"tag": "other"}}, {}),  # a non-unique indexed field
    ({"key": "k3"}, {"$push": {"fresh": "b"}}, {}),
    ({"tag": "odd"}, {"$set": {"n": -1}}, {"projection": {"list": 0}}),
    ({"_id": "id4"}, {"$inc": {"n": 1}, "$setOnInsert": {"epoch": "e"}}, {"upsert": True}),
    ({"_id": "id9"}, {"$inc": {"n": 1}, "$setOnInsert": {"epoch": "e"}}, {"upsert": True}),
    ({"_id": "id8"}, {"$inc": {"n": 1}}, {}),  # no such document
    ({"_id": "id0"}, {"$inc": {"text": 1}}, {}),  # $inc on a string: mongomock's error
    ({"_id": "id0"}, {"$push": {"n": 1}}, {}),  # $push on a number: mongomock's error
    ({"_id": "id0"}, {"$set": {"key": "k5"}}, {}),  # a unique field: DuplicateKeyError
    ({"_id": "id0"}, {"$set": {"a.b": 1, "list": ["x", "y"]}}, {}),
    ({"_id": "id0"}, {"$set": {"n": 7}}, {"return_document": ReturnDocument.BEFORE}),
    ({"tag": "even"}, {"$set": {"n": 8}}, {"sort": [("n", -1)]}),
    ({"_id": "id5"}, {"$inc": {"flag": 1}}, {}),
    ({"_id": "id5"}, {"$max": {"n": 3, "x": 9, "fresh_max": 2}}, {}),
    ({"_id": "id5"}, {"$max": {"n": 100}, "$set": {"n2": 5}}, {}),
    ({"_id": "id5"}, {"$set": {"n2": 5.0}}, {}),  # equal: not modified
    ({"_id": "id5"}, {"$max": {"text": 1}}, {}),  # $max on a string: mongomock's rules
    ({"_id": "id4"}, {"$set": {"none": None}}, {}),  # unchanged
]


@pytest.mark.parametrize("filter, update, kwargs", FIND_ONE_AND_UPDATE_CASES)
def test_find_one_and_update_answers_as_mongomock_does(filter, update, kwargs, monkeypatch):
    """The shortcut for plain $set/$inc/$push on a document that exists returns and stores
    what mongomock's general path does (after every earlier case, so the documents and the
    index map have been through the writes), raises what it raises, and the index map
    still answers like a scan."""
    fast, general = _two_stores()
    kwargs = {"return_document": ReturnDocument.AFTER, **kwargs}
    for case_filter, case_update, case_kwargs in FIND_ONE_AND_UPDATE_CASES:
        case_kwargs = {"return_document": ReturnDocument.AFTER, **case_kwargs}
        answers = []
        for coll, shortcut in ((fast, True), (general, False)):
            with monkeypatch.context() as patch:
                if not shortcut:
                    patch.setattr(Collection, "find_one_and_update", Collection._iamgate_general_find_one_and_update)
                try:
                    answers.append(("returned", coll.find_one_and_update(
                        copy.deepcopy(case_filter), copy.deepcopy(case_update), **case_kwargs)))
                except Exception as exc:  # the same error type, whatever it says
                    answers.append(("raised", type(exc)))
        assert answers[0] == answers[1], (case_filter, case_update)
        assert list(fast.find({}).sort("_id", 1)) == list(general.find({}).sort("_id", 1))
        if (case_filter, case_update, case_kwargs) == (filter, update, kwargs):
            break
    for probe in ({"key": "k3"}, {"tag": "other"}, {"tag": "even"}, {"key": "k5"}):
        assert list(fast.find(probe)) == list(general.find(probe)) == [d for d in general.find({}) if
                                                                       filter_applies(probe, d)]


@pytest.mark.parametrize("filter, update, kwargs", [case for case in FIND_ONE_AND_UPDATE_CASES
                                                    if set(case[2]) <= {"upsert"}])
def test_update_one_answers_as_mongomock_does(filter, update, kwargs, monkeypatch):
    """The same for ``update_one``: its result (matched, modified, upserted: mongomock's
    raw result whole), the stored documents, its errors."""
    fast, general = _two_stores()
    for case_filter, case_update, case_kwargs in FIND_ONE_AND_UPDATE_CASES:
        if not set(case_kwargs) <= {"upsert"}:
            continue
        answers = []
        for coll, shortcut in ((fast, True), (general, False)):
            with monkeypatch.context() as patch:
                if not shortcut:
                    patch.setattr(Collection, "update_one", Collection._iamgate_general_update_one)
                try:
                    result = coll.update_one(copy.deepcopy(case_filter), copy.deepcopy(case_update), **case_kwargs)
                    raw = {k: v for k, v in result.raw_result.items() if k != "connectionId"}  # the store's own
                    answers.append(("returned", raw, result.matched_count, result.modified_count, result.upserted_id))
                except Exception as exc:
                    answers.append(("raised", type(exc)))
        assert answers[0] == answers[1], (case_filter, case_update)
        assert list(fast.find({}).sort("_id", 1)) == list(general.find({}).sort("_id", 1))
        if (case_filter, case_update, case_kwargs) == (filter, update, kwargs):
            break
    for probe in ({"key": "k3"}, {"tag": "other"}, {"tag": "even"}):
        assert list(fast.find(probe)) == list(general.find(probe))


def test_find_one_and_update_takes_the_shortcut_for_a_counter_and_a_spend(monkeypatch):
    """The change log's counter (``$inc`` by ``_id``, upsert) and a code's spend (``$set``
    on a filtered ``_id``) do not reach mongomock's general update once the document
    exists."""
    coll = Store("memory://")["things"]
    coll.insert_one({"_id": "events", "seq": 1})
    general = []
    monkeypatch.setattr(type(coll._collection), "_update", lambda *a, **k: general.append(a))
    assert coll.find_one_and_update({"_id": "events"}, {"$inc": {"seq": 1}, "$setOnInsert": {"epoch": "e"}},
                                    upsert=True, return_document=ReturnDocument.AFTER)["seq"] == 2
    assert coll.find_one_and_update({"_id": "events", "used_at": None, "seq": {"$gt": 1}},
                                    {"$set": {"used_at": NOW}}, return_document=ReturnDocument.AFTER)["used_at"] \
        == NOW.replace(microsecond=123000)
    assert general == []


@pytest.mark.parametrize("values", [
    "datetimes",  # the shortcut: every value a datetime
    "mixed",  # null, lists, strings, a missing field: mongomock's own sweep
])
def test_a_ttl_sweep_removes_what_mongomocks_own_sweep_removes(values):
    now = datetime.now(UTC).replace(tzinfo=None)
    ages = [-3600, -1, 0, 59, 60, 61, 3600, 10 ** 7]  # seconds before now; the index expires after 60
    docs = [{"_id": f"d{i}-{offset}", "at": now - timedelta(seconds=age, microseconds=offset)}
            for i, age in enumerate(ages) for offset in (0, 1, 999)]
    if values == "mixed":
        docs += [{"_id": "none", "at": None}, {"_id": "missing"}, {"_id": "text", "at": "2000-01-01"},
                 {"_id": "list", "at": [now - timedelta(days=1), now]}, {"_id": "empty", "at": []}]
    remaining = []
    for general in (False, True):
        store = Store("memory://")
        store.declare_indexes({"things": [IndexModel([("at", 1)], expireAfterSeconds=60)]})
        store.ensure_indexes()
        store["things"].insert_many(copy.deepcopy(docs))
        collection_store = store["things"]._collection._store
        for index in list(collection_store._ttl_indexes.values()):
            (collection_store._iamgate_general_expire_documents if general
             else collection_store._expire_documents)(index)
        remaining.append(sorted(collection_store._documents))
    assert remaining[0] == remaining[1]
    assert "d0-0" in remaining[0] and "d6-0" not in remaining[0]  # something kept, something swept


@pytest.mark.parametrize("took, wait", [(0.0001, 60.0), (1.0, 100.0)])
def test_a_ttl_sweep_waits_a_minute_or_a_hundred_times_as_long_as_the_last_one_took(monkeypatch, took, wait):
    """A collection is swept once a minute, as MongoDB's TTL monitor sweeps; however large
    it grows, its sweeps cost at most 1% of the time."""
    store = Store("memory://")
    store.declare_indexes({"things": [IndexModel([("at", 1)], expireAfterSeconds=60)]})
    store.ensure_indexes()
    collection_store = store["things"]._collection._store
    clock, sweeps = [1000.0], []

    def expire(self, index):  # a sweep that takes ``took`` seconds
        sweeps.append(clock[0])
        clock[0] += took

    monkeypatch.setattr(embedded, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(type(collection_store), "_expire_documents", expire)
    collection_store._remove_expired_documents()
    assert sweeps == [1000.0]
    clock[0] = 1000.0 + wait * 0.99
    collection_store._remove_expired_documents()
    assert len(sweeps) == 1
    clock[0] = 1000.0 + wait
    collection_store._remove_expired_documents()
    assert len(sweeps) == 2


def test_a_collection_is_one_object_that_outlives_a_drop():
    store = Store("memory://")
    counters = store.db["counters"]
    assert store.db["counters"] is counters
    counters.insert_one({"_id": "events", "seq": 5})
    store.db.drop_collection("counters")
    assert counters.find_one({"_id": "events"}) is None
    assert store.next_seq("events") == 1 and counters.find_one({"_id": "events"})["seq"] == 1
    store.db["counters"].drop()
    assert store.current_seq("events") == 0 and counters.count_documents({}) == 0


def test_a_unique_check_by_the_map_refuses_what_mongomocks_refuses(monkeypatch):
    """Inserts against a mapped unique index (str and int values, and the null, missing,
    float and list values the map leaves to mongomock's query) refuse and keep the same
    documents as mongomock's own check, a query per index."""
    inserts = [{"_id": "a", "key": "k"}, {"_id": "b", "key": "k"}, {"_id": "c", "key": 1}, {"_id": "d", "key": 1},
               {"_id": "e", "key": "K"}, {"_id": "f"}, {"_id": "g", "key": None}, {"_id": "h", "key": 2.0},
               {"_id": "i", "key": 2}, {"_id": "j", "key": ["k"]}, {"_id": "k", "key": "k2"},
               {"_id": "a", "key": "fresh"}]
    outcomes = []
    for general in (False, True):
        store = Store("memory://")
        store.declare_indexes({"things": [IndexModel([("key", 1)], unique=True)]})
        store.ensure_indexes()
        coll = store["things"]
        coll.find_one({"key": "warm"})  # the map is built at the first read
        with monkeypatch.context() as patch:
            if general:
                patch.setattr(Collection, "_ensure_uniques", Collection._iamgate_general_ensure_uniques)
            answers = []
            for doc in inserts:
                try:
                    coll.insert_one(dict(doc))
                    answers.append("inserted")
                except DuplicateKeyError:
                    answers.append("duplicate")
            for key in ("k", 1, "k2", None, 2):
                answers.append(sorted(d["_id"] for d in coll.find({"key": key})))
        outcomes.append((answers, list(coll.find({}).sort("_id", 1))))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][:5] == ["inserted", "duplicate", "inserted", "duplicate", "inserted"]


@pytest.mark.parametrize("value", [
    {"a": 1, "b": "x", "c": None, "d": True, "e": 1.5, "f": b"raw"},
    {"at": datetime(2100, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "naive": datetime(2100, 1, 2, 3, 4, 5, 999999)},
    {"nested": {"list": [1, "a", datetime(2100, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)], "tuple": (1, 2)},
     "digests": ["a", "b"], "empty": [], "deep": [{"x": (datetime(2100, 1, 1),)}]},
    [1, ("a", "b"), {"k": datetime(2100, 1, 1, tzinfo=timezone(timedelta(hours=2)))}],
    datetime(2100, 1, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5))),
    "plain",
])
def test_documents_are_patched_as_mongomock_patches_them(value):
    """Every insert, update and query passes its document through mongomock's datetime
    patch; the faster one returns the same values of the same types."""
    ours, theirs = embedded._patched(copy.deepcopy(value)), embedded._PATCH(copy.deepcopy(value))

    def shape(item):
        if isinstance(item, dict):
            return (type(item), {key: shape(inner) for key, inner in item.items()})
        if isinstance(item, (list, tuple)):
            return (type(item), [shape(inner) for inner in item])
        return (type(item), item, getattr(item, "tzinfo", None))

    assert shape(ours) == shape(theirs)


@pytest.mark.parametrize("value", [
    {"_id": "a", "n": 1, "x": 1.5, "b": b"raw", "none": None, "flag": False, "at": datetime(2100, 1, 1)},
    {"list": ["a", "b"], "mixed": [1, {"k": [2, 3]}, (4, 5)], "tuple": (1, [2]), "set": {1, 2}, "empty": {}},
    [{"a": [1]}, "b", None],
    "plain",
])
@pytest.mark.parametrize("container", [dict, __import__("collections").OrderedDict])
def test_documents_read_are_copied_as_mongomock_copies_them(value, container):
    """The copy a read returns: equal values of the same types, no container shared with
    what is stored."""
    ours, theirs = embedded._copy_field(copy.deepcopy(value), container), embedded._COPY_FIELD(value, container)

    def shape(item):
        if isinstance(item, dict):
            return (type(item), {key: shape(inner) for key, inner in item.items()})
        if isinstance(item, (list, tuple)):
            return (type(item), [shape(inner) for inner in item])
        return (type(item), item)

    assert shape(ours) == shape(theirs)
    original = copy.deepcopy(value)
    copied = embedded._copy_field(original, container)
    if isinstance(original, dict):
        assert copied is not original and all(copied[k] is not v for k, v in original.items()
                                               if isinstance(v, (list, dict)))


def test_column_filters_and_sorts_answer_like_mongomock_itself():
    """``$in``, ``$or`` and case-insensitive ``$regex`` filters are judged a column at a
    time, and sorts by plain values skip the BSON comparison (the console's users list
    over 100,000 users); each answers exactly as mongomock's general matcher and sort,
    whatever mix of types the documents hold."""
    base = datetime(2026, 1, 1)
    odd = [None, 2.5, True, ["Ada"], {"x": 1}, base]
    docs = [{"_id": f"d{i:03d}", "app": "a" if i % 4 else "b", "status": ("active", "suspended", "deleted")[i % 3],
             "email": f"user-{i % 37}@Example.com", "name": ("Ada Lovelace", "Grace Hopper", "alan")[i % 3],
             "n": i % 7, "at": base + timedelta(minutes=i % 11)} for i in range(120)]
    for i, value in enumerate(odd):  # values only the general matcher and the BSON order judge
        docs[i * 17]["name"] = value
        docs[i * 17 + 1]["n"] = value
    del docs[5]["email"]
    coll = Store("memory://")["things"]
    coll.insert_many([dict(d) for d in docs])
    filters = [
        {"app": "a", "status": {"$in": ["active", "suspended"]}},
        {"app": "a", "status": {"$in": ["active"]}, "$or": [{"email": {"$regex": "USER-1", "$options": "i"}},
                                                             {"name": {"$regex": "love", "$options": "i"}}]},
        {"name": {"$regex": "^a"}}, {"n": {"$in": [2, 3]}}, {"n": {"$in": [2, "x"]}, "at": {"$gte": base}},
        {"$or": [{"n": 1}, {"name": "alan"}]}, {"email": {"$regex": "example", "$options": "i"}},
    ]
    sorts = [[("at", -1), ("_id", 1)], [("n", 1), ("_id", -1)], [("name", 1)], [("status", -1), ("at", 1)]]
    for f in filters:
        matching = [d for d in docs if filter_applies(f, d)]  # mongomock's general matcher
        assert [d["_id"] for d in coll.find(f)] == [d["_id"] for d in matching], f
        assert coll.count_documents(f) == len(matching), f
        for sort in sorts:
            ordered = matching
            for field, direction in reversed(sort):  # mongomock's own sort: BSON order, a pass per key
                ordered = sorted(ordered, key=lambda d, field=field: resolve_sort_key(field, d), reverse=direction < 0)
            whole = [d["_id"] for d in ordered]
            assert [d["_id"] for d in coll.find(f).sort(sort)] == whole, (f, sort)
            for skip, limit in ((0, 5), (3, 4), (0, 1), (max(0, len(whole) - 2), 5)):
                page = [d["_id"] for d in coll.find(f).sort(sort).skip(skip).limit(limit)]
                assert page == whole[skip:skip + limit], (f, sort, skip, limit)
