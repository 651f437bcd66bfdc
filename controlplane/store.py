"""The one small layer over MongoDB.

``memory://`` gives mongomock inside the process (the embedded default: nothing
persists; mongomock is the ``embedded`` extra, imported only here); ``mongodb://`` a
real MongoDB through pymongo.  Both are used through the
same pymongo API, so domain stores never branch on the backend.

Indexes: a class that owns collections declares their indexes when it is built
(``store.declare_indexes(INDEXES)`` in its ``__init__``, ``INDEXES`` beside it);
``create_app`` then calls ``Store.ensure_indexes`` once, which creates them idempotently.

A MongoDB that does not answer (down, unreachable, failing over) raises one of pymongo's
``ConnectionFailure`` errors (``ServerSelectionTimeoutError``, ``AutoReconnect``,
``NetworkTimeout``): ``UNREACHABLE``.  Domain stores let it rise; the app answers it in one
place as ``StoreUnavailable`` (503 ``SERVICE_UNAVAILABLE`` with ``Retry-After``).  A
request waits at most ``serverSelectionTimeoutMS`` for a server: ``CLIENT_DEFAULTS`` says
2 s unless the URI names its own, and every option the URI names wins over these defaults.
"""
from __future__ import annotations

import functools
import itertools
import logging
import operator
import threading
import time
from datetime import datetime
from urllib.parse import parse_qsl, urlsplit

import pymongo
from pymongo import IndexModel, ReturnDocument
from pymongo.errors import ConnectionFailure
from pymongo.errors import DuplicateKeyError  # also re-exported for stores

from shared.config import EMBEDDED_STORE_MISSING, ConfigError
from shared import tracing
from shared.errors import ServiceUnavailable
from shared.ids import new_id

log = logging.getLogger("iamgate.store")

UNREACHABLE = ConnectionFailure
# pymongo's keyword arguments override the URI's options: only those the URI leaves out
# are given. Two seconds: a request while MongoDB is down fails well before a client's or
# a proxy's own timeout, and a primary election (a few seconds at most) costs a retry.
CLIENT_DEFAULTS = {"serverSelectionTimeoutMS": 2000, "appname": "iamgate"}
PING_TIMEOUT = 0.5  # seconds a readiness ping may take, server selection included
RECHECK_TIMEOUT = 0.05  # the same, when the driver knows no server it could use
RETRY_AFTER = 5  # seconds a caller is asked to wait when the store does not answer


class StoreUnavailable(ServiceUnavailable):
    """The store did not answer within its server selection timeout, or dropped the
    connection: 503, and the caller retries after ``retry_after`` seconds."""

    message = "The data store does not answer. Try again in a few seconds."
    retry_after = RETRY_AFTER


_WARN_EVERY = 10.0  # seconds between two "does not answer" warnings: an outage fails every request
_warned_at = float("-inf")


def unavailable(exc: ConnectionFailure) -> StoreUnavailable:
    """The domain error a request answers when pymongo raised ``exc`` (one of
    ``UNREACHABLE``); the outage is logged, at most once every ``_WARN_EVERY`` seconds."""
    global _warned_at
    now = time.monotonic()
    if now - _warned_at >= _WARN_EVERY:
        _warned_at = now
        log.warning("the store does not answer; requests are answered 503", extra={"error": one_line(exc)})
    return StoreUnavailable()


def one_line(exc: BaseException) -> str:
    """``Type: message``, first line only, at most 500 characters (pymongo's messages
    carry the whole topology description)."""
    text = f"{type(exc).__name__}: {exc}"
    return text.splitlines()[0][:500]


def client_options(uri: str) -> dict:
    """``CLIENT_DEFAULTS`` less the options ``uri`` sets itself (names are case-insensitive)."""
    named = {name.lower() for name, _ in parse_qsl(urlsplit(uri).query, keep_blank_values=True)}
    return {name: value for name, value in CLIENT_DEFAULTS.items() if name.lower() not in named}


class Store:
    def __init__(self, uri: str = "memory://"):
        self.uri = uri
        if uri == "memory://":
            try:
                import mongomock
            except ImportError:
                raise ConfigError(EMBEDDED_STORE_MISSING) from None
            _embedded_fast_paths()
            self.client = mongomock.MongoClient(tz_aware=True)
            self.db = _SerialisedDatabase(self.client["iamgate"], threading.RLock())
        else:
            self.client = pymongo.MongoClient(uri, tz_aware=True, event_listeners=tracing.store_listeners(),
                                              **client_options(uri))
            self.db = self.client.get_default_database("iamgate")
        self._indexes: dict[str, dict[str, IndexModel]] = {}

    @property
    def is_memory(self) -> bool:
        return self.uri == "memory://"

    def __getitem__(self, name: str):
        return self.db[name]

    def declare_indexes(self, indexes: dict[str, list[IndexModel]]) -> None:
        """Remember ``{collection: [IndexModel]}``; declaring one index twice is harmless."""
        for collection, models in indexes.items():
            declared = self._indexes.setdefault(collection, {})
            for model in models:
                declared[model.document["name"]] = model

    def ensure_indexes(self) -> None:
        for collection, models in self._indexes.items():
            if models:
                self.db[collection].create_indexes(list(models.values()))

    def ping(self, timeout: float = PING_TIMEOUT) -> bool:
        """Whether the store answers a ``ping`` within ``timeout`` seconds (pymongo's
        client-side timeout, which bounds the server selection too). pymongo waits for a
        server in half-second steps, so when its monitor already found no usable server
        the ping is given only ``RECHECK_TIMEOUT``: enough to ask the monitor to look
        again (the next readiness probe sees a store that came back), not to wait."""
        if isinstance(self.client, pymongo.MongoClient) and not self.client.topology_description.has_readable_server():
            timeout = min(timeout, RECHECK_TIMEOUT)
        try:
            with pymongo.timeout(timeout):
                self.client.admin.command("ping")
        except Exception as exc:  # any driver failure means "not ready"
            log.warning("store ping failed", extra={"error": one_line(exc)})
            return False
        return True

    def next_seq(self, name: str) -> int:
        """A strictly increasing counter (atomic ``$inc`` on one document)."""
        doc = self.db["counters"].find_one_and_update(
            {"_id": name}, {"$inc": {"seq": 1}, "$setOnInsert": {"epoch": new_id()}},
            upsert=True, return_document=ReturnDocument.AFTER
        )
        return doc["seq"]

    def current_seq(self, name: str) -> int:
        doc = self.db["counters"].find_one({"_id": name})
        return doc["seq"] if doc else 0

    def counter_epoch(self, name: str) -> str:
        """The id of this incarnation of counter ``name``: fixed when its document is
        created, so it changes only when the counter starts over (a new or wiped store),
        never while the counter lives.  Readers that remember seqs compare it to tell a
        counter that moved on from one that was replaced (a restarted ``memory://`` store).

        Safe when several replicas call it at once: whichever upsert creates the document
        (this one or ``next_seq``'s) sets the epoch with ``$setOnInsert``, and every other
        caller reads that one.
        """
        counters = self.db["counters"]
        doc = counters.find_one({"_id": name}, {"epoch": 1})
        if doc is None:
            try:
                doc = counters.find_one_and_update(
                    {"_id": name}, {"$setOnInsert": {"seq": 0, "epoch": new_id()}}, projection={"epoch": 1},
                    upsert=True, return_document=ReturnDocument.AFTER,
                )
            except DuplicateKeyError:  # a concurrent upsert created it first
                doc = counters.find_one({"_id": name}, {"epoch": 1})
        return doc["epoch"]

    def supports_change_streams(self) -> bool:
        if self.is_memory:
            return False
        try:
            return bool(self.client.admin.command("hello").get("setName"))
        except Exception:
            return False


# ---------------------------------------------------------------- embedded store
#
# MongoDB applies each single-document operation atomically (``$inc`` in
# find_one_and_update, an insert against a unique index...).  mongomock implements them
# as read-modify-write in Python, which real threads can interleave, so two parallel
# requests could both pass a rate limit or share a seq.  The embedded store therefore
# runs every collection operation under one process-wide lock: the same guarantees as
# MongoDB, at the price of no parallelism, which an in-process test store does not need.
# Cursors are read out under the lock too, so no operation sees another half-done.


#
# mongomock also answers every query by testing every document of the collection, and
# sweeps TTL indexes over every document at every access, so a lookup by ``_id`` gets
# slower as a collection grows, where MongoDB's ``_id`` index keeps it flat (a growing
# delivery log or change log made each webhook delivery cost tens of milliseconds).
# ``_embedded_fast_paths`` gives mongomock the two shortcuts MongoDB's indexes give:
# a filter with an exact ``_id`` reads that one document, and a TTL sweep runs at most
# every ``_TTL_SWEEP_EVERY`` seconds per collection (TTL only reclaims space: expiry is
# checked in code).  A third keeps the scans that remain cheap: a filter made only of
# plain fields compared with strings, integers or datetimes (``{"seq": 5}``, mongomock's own
# unique-index check on every insert; ``{"seq": {"$gt": n}}``, the change-log tailer's
# poll) is tested with Python comparisons instead of mongomock's general matcher, which
# costs microseconds per document, under the store's one lock, at every insert into the
# change log.  A document whose value has another type (an array, null, a float...) is
# handed to the general matcher, so the answer is always the general matcher's.
# Last, mongomock copies every matching document before it returns the first: a
# ``find_one`` (and so every ``find_one_and_update``: the delivery queue's claim) or a
# ``limit(n)`` copies only what it returns, as MongoDB reads only that.

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


def _embedded_fast_paths() -> None:
    from mongomock.collection import Collection, Cursor
    from mongomock.filtering import filter_applies
    from mongomock.store import CollectionStore

    if getattr(Collection, "_iamgate_fast_paths", False):
        return
    from mongomock.helpers import make_datetime_timezone_aware_in_document as make_aware

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


@functools.cache
def _cursor_types() -> tuple[type, ...]:
    from mongomock.collection import Cursor
    from mongomock.command_cursor import CommandCursor

    return Cursor, CommandCursor


class _SerialisedCursor:
    _CHAINING = frozenset({"sort", "limit", "skip", "batch_size", "max_time_ms", "hint", "collation", "allow_disk_use"})

    def __init__(self, cursor, lock):
        self._cursor, self._lock, self._items = cursor, lock, None

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
            with self._lock:
                self._items = iter(list(self._cursor))
        return self._items

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
            if isinstance(result, _cursor_types()):
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
