"""The embedded ``memory://`` store: mongomock inside the process, made to keep MongoDB's
guarantees and, for the few queries iamgate sends most, its speed. Imported only by
``controlplane.store.Store("memory://")``: mongomock is the ``embedded`` extra, for
development (``make run``) and tests.

One lock. MongoDB applies each single-document operation atomically (``$inc`` in
find_one_and_update, an insert against a unique index...). mongomock implements them as
read-modify-write in Python, which real threads can interleave, so two parallel requests
could both pass a rate limit or share a seq. Every collection operation therefore runs
under one lock per store: the same guarantees as MongoDB, at the price of no
parallelism, which an in-process store does not need. Cursors are read out under the
lock too, so no operation sees another half-done.

Shortcuts (``apply_shortcuts``). mongomock answers every query by testing every document
of the collection, and sweeps TTL indexes over every document at every access, so a
lookup by ``_id`` gets slower as a collection grows, where MongoDB's ``_id`` index keeps it
flat (a growing delivery log or change log made each webhook delivery cost tens of
milliseconds). The shortcuts give mongomock what MongoDB's indexes give: a filter with an
exact ``_id`` reads that one document, and a TTL sweep runs at most every
``_TTL_SWEEP_EVERY`` seconds per collection (TTL only reclaims space: expiry is checked in
code). A third keeps the scans that remain cheap: a filter made only of plain fields
compared with strings, integers or datetimes (``{"seq": 5}``, mongomock's own unique-index
check on every insert; ``{"seq": {"$gt": n}}``, the change-log tailer's poll) is tested
with Python comparisons instead of mongomock's general matcher, which costs microseconds
per document, under the one lock, at every insert into the change log. A document whose
value has another type (an array, null, a float...) is handed to the general matcher, so
the answer is always the general matcher's. Last, mongomock copies every matching
document before it returns the first: a ``find_one`` (and so every
``find_one_and_update``: the delivery queue's claim) or a ``limit(n)`` copies only what it
returns, as MongoDB reads only that. And a cursor given a ``batch_size`` is read a batch
at a time, each batch under the lock, as MongoDB returns batches: an export of every
audit record holds one batch of copies, not the whole result (the matching documents are
still found and sorted at the first batch, as references).

The shortcuts replace private methods of mongomock's classes (``PRIVATE_NAMES``), written
against mongomock 4.3.0. They are applied once, when the first embedded store is built,
and only if every one of those names is still there; otherwise the store refuses to start
and says which are gone (tests/core/test_embedded_store.py checks them on every run).
"""
from __future__ import annotations

import itertools
import operator
import threading
import time
from datetime import datetime

import mongomock
from mongomock.collection import Collection, Cursor
from mongomock.command_cursor import CommandCursor
from mongomock.filtering import filter_applies
from mongomock.helpers import make_datetime_timezone_aware_in_document as make_aware
from mongomock.store import CollectionStore

WRITTEN_AGAINST = "4.3.0"
# The private names the shortcuts replace or read: (class, attribute). The cursor's and the
# store's instance attributes are checked on a live cursor (``missing_private_names``).
PRIVATE_NAMES = (
    (Collection, "_iter_documents"), (Collection, "find_one"), (Collection, "_store"),
    (CollectionStore, "_remove_expired_documents"), (CollectionStore, "_documents"),
    (Cursor, "_compute_results"), (Cursor, "_factory"), (Cursor, "_factory_last_generated_results"),
    (Cursor, "_skip"), (Cursor, "_limit"), (Cursor, "collection"),
)


def connect(database: str):
    """(mongomock client, the database behind the one lock), shortcuts applied."""
    apply_shortcuts()
    client = mongomock.MongoClient(tz_aware=True)
    return client, _SerialisedDatabase(client[database], threading.RLock())


def missing_private_names() -> list[str]:
    """The names of ``PRIVATE_NAMES`` this mongomock no longer has, read on a live
    collection and cursor (instance attributes included)."""
    collection = mongomock.MongoClient()["probe"]["probe"]
    cursor = collection.find({})
    instances = {Collection: collection, CollectionStore: getattr(collection, "_store", None),
                 Cursor: cursor}
    return [f"{cls.__name__}.{name}" for cls, name in PRIVATE_NAMES
            if not (hasattr(cls, name) or hasattr(instances[cls], name))]


_TTL_SWEEP_EVERY = 0.25
_SIMPLE_TYPES = (str, int, datetime)  # datetimes as mongomock stores them: naive UTC
_RANGE = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _simple_plan(filter) -> list | None:
    """``[(field, test, operand)]`` for a filter of plain fields compared with ``str``,
    ``int`` or naive ``datetime`` operands (equality or ``$gt``/``$gte``/``$lt``/``$lte``),
    else None."""
    plan = []
    for field, value in filter.items():
        if field.startswith("$") or "." in field:
            return None
        if _simple(value):
            plan.append((field, None, value))
        elif type(value) is dict and value and all(op in _RANGE and _simple(v) for op, v in value.items()):
            plan.extend((field, _RANGE[op], v) for op, v in value.items())
        else:
            return None
    return plan


def _simple(value) -> bool:
    return type(value) in _SIMPLE_TYPES and (type(value) is not datetime or value.tzinfo is None)


def _simple_match(plan, filter, doc, filter_applies) -> bool:
    for field, test, operand in plan:
        value = doc.get(field)
        if type(value) is not type(operand) or (type(value) is datetime and value.tzinfo is not None):
            return filter_applies(filter, doc)  # arrays, null, other types: MongoDB's rules
        if not (value == operand if test is None else test(value, operand)):
            return False
    return True


def apply_shortcuts() -> None:
    """Replace mongomock's private methods with the shortcuts, once per process."""
    if getattr(Collection, "_iamgate_fast_paths", False):
        return
    missing = missing_private_names()
    if missing:
        raise RuntimeError(f"mongomock {mongomock.__version__} no longer has {', '.join(missing)}: "
                           f"controlplane/embedded.py was written against mongomock {WRITTEN_AGAINST}; "
                           "update its shortcuts (or pin mongomock)")

    scan, sweep = Collection._iter_documents, CollectionStore._remove_expired_documents
    compute = Cursor._compute_results

    def iter_documents(self, filter):
        if type(filter) is not dict:
            return scan(self, filter)
        key = filter.get("_id")
        if type(key) is str:
            self._store._remove_expired_documents()
            doc = self._store._documents.get(key)
            return iter([doc] if doc is not None and filter_applies(filter, doc) else [])
        plan = _simple_plan(filter)
        if not plan:  # operators, sub-documents, ObjectIds, an empty filter...: the general path
            return scan(self, filter)
        self._store._remove_expired_documents()
        docs = list(self._store._documents.values())
        if len(plan) == 1 and type(plan[0][2]) is not datetime:
            # One comparison (the unique-index check, the tailer's poll): one pass in a
            # comprehension; only values of another type go to the general matcher.
            field, test, operand = plan[0]
            kind, test = type(operand), test or operator.eq
            values = list(map(operator.methodcaller("get", field), docs))
            if set(map(type, values)) == {kind}:  # every value comparable: C loops only
                return itertools.compress(docs, map(test, values, itertools.repeat(operand)))
            return (doc for doc in [doc for doc in docs if type(doc.get(field)) is not kind
                                    or test(doc[field], operand)]
                    if type(doc.get(field)) is kind or filter_applies(filter, doc))
        return (doc for doc in docs if _simple_match(plan, filter, doc, filter_applies))

    def remove_expired_documents(self):
        now = time.monotonic()
        if now - getattr(self, "_iamgate_swept", float("-inf")) >= _TTL_SWEEP_EVERY:
            self._iamgate_swept = now
            sweep(self)

    def find_one(self, filter=None, *args, **kwargs):
        if filter is None:
            filter = {}
        if not isinstance(filter, dict):
            filter = {"_id": filter}
        try:
            return next(self.find(filter, *args, **kwargs).limit(1))
        except StopIteration:
            return None

    def compute_results(self, with_limit_and_skip=False):
        if not (with_limit_and_skip and self._limit) or self._factory_last_generated_results is self._factory:
            return compute(self, with_limit_and_skip)  # everything asked for, or computed already
        key = (self._factory, self._skip, self._limit)
        window = getattr(self, "_iamgate_window", None)
        if window is None or window[0][0] is not key[0] or window[0][1:] != key[1:]:
            docs = itertools.islice(self._factory(), self._skip + abs(self._limit))
            if self.collection.codec_options.tz_aware:
                docs = [make_aware(doc) for doc in docs]
            window = self._iamgate_window = (key, list(docs)[self._skip:])
        return window[1]

    Collection._iter_documents = iter_documents
    Collection.find_one = find_one
    Cursor._compute_results = compute_results
    CollectionStore._remove_expired_documents = remove_expired_documents
    Collection._iamgate_fast_paths = True


_CURSOR_TYPES = (Cursor, CommandCursor)


class _SerialisedCursor:
    _CHAINING = frozenset({"sort", "limit", "skip", "batch_size", "max_time_ms", "hint", "collation", "allow_disk_use"})

    def __init__(self, cursor, lock):
        self._cursor, self._lock, self._items = cursor, lock, None
        self._batch: int | None = None

    def batch_size(self, size: int):
        self._batch = size or None
        return self

    def __getattr__(self, name):
        attr = getattr(self._cursor, name)
        if name in self._CHAINING:
            def chain(*args, **kwargs):
                with self._lock:
                    attr(*args, **kwargs)
                return self
            return chain
        if callable(attr):
            def call(*args, **kwargs):
                with self._lock:
                    return attr(*args, **kwargs)
            return call
        return attr

    def _materialise(self):
        if self._items is None:
            if self._batch is not None:
                self._items = self._batches(self._batch)
            else:
                with self._lock:
                    self._items = iter(list(self._cursor))
        return self._items

    def _batches(self, size: int):
        """The results, copied ``size`` at a time under the lock (mongomock's dataset
        generator yields references in order and copies each as it yields it)."""
        cursor = self._cursor
        limit = abs(cursor._limit) if cursor._limit else None
        documents = itertools.islice(cursor._factory(), cursor._skip, None if limit is None else cursor._skip + limit)
        aware = cursor.collection.codec_options.tz_aware
        while True:
            with self._lock:
                batch = list(itertools.islice(documents, size))
            if not batch:
                return
            yield from (make_aware(doc) for doc in batch) if aware else batch

    def __iter__(self):
        return self._materialise()

    def __next__(self):
        return next(self._materialise())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _SerialisedCollection:
    def __init__(self, collection, lock):
        self._collection, self._lock = collection, lock

    def __getattr__(self, name):
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            with self._lock:
                result = attr(*args, **kwargs)
            if isinstance(result, _CURSOR_TYPES):
                return _SerialisedCursor(result, self._lock)
            return result

        return call

    def __getitem__(self, name):
        return _SerialisedCollection(self._collection[name], self._lock)


class _SerialisedDatabase:
    def __init__(self, database, lock):
        self._database, self._lock = database, lock

    def __getitem__(self, name):
        return _SerialisedCollection(self._database[name], self._lock)

    def __getattr__(self, name):
        attr = getattr(self._database, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            with self._lock:
                return attr(*args, **kwargs)

        return call
