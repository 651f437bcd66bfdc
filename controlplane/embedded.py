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
of the collection, and sweeps TTL indexes over every document at every access, so a lookup
by ``_id`` gets slower as a collection grows, where MongoDB's ``_id`` index keeps it flat
(a growing delivery log or change log made each webhook delivery cost tens of
milliseconds). The shortcuts give mongomock what MongoDB's indexes give: a filter with an
exact ``_id`` reads that one document, and a TTL sweep of a collection runs once a minute,
as MongoDB's TTL monitor runs (``ttlMonitorSleepSecs``; TTL only reclaims space: expiry is
checked in code), and then only after a hundred times as long as the collection's last
sweep took, and compares a field of datetimes in C (the change log's retention index is
swept over every event: at 20,000 events, four sweeps a second cost a tenth of a token
answer's CPU; at 10,000 they were nine tenths of an idle worker's Python). A third keeps
the scans that remain cheap: a filter made of plain fields compared with strings, integers
or datetimes (``{"seq": 5}``, mongomock's own unique-index check on every insert;
``{"seq": {"$gt": n}}``, the change-log tailer's poll), ``$in`` lists of them, ``$regex``
with no option or ``i``, and an ``$or`` of such filters (the users search: ``{"app_id",
"status": {"$in"}, "$or": [email, name regexes]}``) is judged a column at a time (each
field's values read into a list, tested with C loops), instead of by mongomock's general
matcher, which costs microseconds per document, under the one lock. A document whose value
has another type (an array, null, a float...) is handed to the general matcher, so the
answer is always the general matcher's. A sort whose keys' values are each of one such
type is done on those values (no BSON comparison objects), by the first key and then only
runs of equal values by the next; with a limit, only the documents up to the limit's last
value are sorted. ``test_column_filters_and_sorts_answer_like_mongomock_itself`` compares
both with mongomock's own matcher and sort. Last, mongomock copies every matching document
before it returns the first: a ``find_one`` (and so every ``find_one_and_update``: the
delivery queue's claim) or a ``limit(n)`` copies only what it returns, as MongoDB reads
only that, and the documents a ``skip`` passes over are not copied at all. And a cursor
given a ``batch_size`` is read a batch at a time, each batch under the lock, as MongoDB
returns batches: an export of every audit record holds one batch of copies, not the whole
result (the matching documents are still found and sorted at the first batch, as
references).

Single-field indexes. An index on one field (the change log's unique ``seq``, a
client's ``client_id``, a grant's ``token_digest``) is kept as MongoDB keeps it: a map
from value to documents, so the unique-index check at every insert into the change log,
the tailer's poll (``{"seq": {"$gt": n}}``) and a lookup by refresh-token digest read the
few documents they name, where a scan grows with the collection (the change log gains an
event at every token refresh). A range on a unique field beside other clauses (the audit
sealer's ``{"sealed": False, "seq": {"$gt": n}, "at": ...}``) hands the column scan only
the documents in the range, in that field's order, when it names at most half the
collection. Only str and int values are mapped (any other value in the field, an array
or a float, leaves that field to the scans); an equality that names more than one
document of a non-unique field, and ranges on one, are left to the scan too, which
returns them in the collection's order. Inserts and deletes (TTL sweeps included) keep
the map up to date; an update may change the documents it reads in place, so during one
the map is not used, the old values of what it reads are noted, and afterwards those
documents are mapped again; any other call (a drop, index changes) drops the map, to be
built on the next read. Every document the map names is checked
against the whole filter by mongomock's matcher.

Inserts. The unique-index check after an insert (every event appended to the change log)
counts the new document's value in the index map when every unique index of the
collection is mapped and the value is a str or int; otherwise, and during an update,
mongomock's query per index decides. The datetime patch every insert, update and query
makes of its document (naive UTC, milliseconds, tuples as lists) passes over plain values
without a call each, and so does the copy of every document a read returns.

Copies. mongomock copies every document it stores, and before each update the document
it updates (to roll it back), with ``copy.deepcopy``, whose bookkeeping per value made an
update cost grow with a long list in the document (a grant's spent refresh-token
digests). Its module's ``copy`` is given a copy for documents: dicts and lists copied,
the immutable values in them shared, as deepcopy shares strings.

Conditional updates. ``find_one_and_update`` asking for the document after the update
(the change log's counter at every event, a code's spend, a refresh token's rotation) was
three passes in mongomock: a copy of the document found, the general update (a deep copy
to roll back, every operator's machinery, a unique-index check) and a second read. When
the update is plain (``$set`` of plain values, ``$inc`` and ``$max`` of numbers, ``$push``
of one plain value, on top-level fields no unique index covers) and the document exists,
the shortcut changes it in place, as the general update does, and reads it once;
``update_one`` (the webhook dispatcher's cursor at every deliverable event, a grant's
``last_used_at``) does the same without the read. Any other update, an upsert that
inserts, a sort or the document as it was before goes the general way.

The shortcuts replace private methods of mongomock's classes (``PRIVATE_NAMES``), written
against mongomock 4.3.0. They are applied once, when the first embedded store is built,
and only if every one of those names is still there; otherwise the store refuses to start
and says which are gone (tests/core/test_embedded_store.py checks them on every run).
"""
from __future__ import annotations

import bisect
import copy
import functools
import heapq
import itertools
import operator
import re
import threading
import time
import types
from datetime import datetime, timedelta

import mongomock
import mongomock.collection
import mongomock.filtering
import mongomock.helpers
from mongomock.collection import Collection, Cursor
from mongomock.command_cursor import CommandCursor
from mongomock.filtering import filter_applies, resolve_sort_key
from mongomock.helpers import make_datetime_timezone_aware_in_document as make_aware
from mongomock.results import UpdateResult
from mongomock.store import CollectionStore
from pymongo import ReturnDocument

WRITTEN_AGAINST = "4.3.0"
# The private names the shortcuts replace or read: (class, attribute). The cursor's and the
# store's instance attributes are checked on a live cursor (``missing_private_names``).
PRIVATE_NAMES = (
    (Collection, "_iter_documents"), (Collection, "find_one"), (Collection, "_store"),
    (Collection, "find_one_and_update"), (Collection, "update_one"), (Collection, "_ensure_uniques"),
    (mongomock.helpers, "patch_datetime_awareness_in_document"),
    (CollectionStore, "_remove_expired_documents"), (CollectionStore, "_documents"),
    (CollectionStore, "_expire_documents"), (CollectionStore, "_value_meets_expiry"), (mongomock, "utcnow"),
    (Cursor, "_compute_results"), (Cursor, "_factory"), (Cursor, "_factory_last_generated_results"),
    (Cursor, "_skip"), (Cursor, "_limit"), (Cursor, "collection"), (Collection, "_get_dataset"),
    (Collection, "_copy_only_fields"), (mongomock.filtering, "resolve_sort_key"),
    (CollectionStore, "indexes"), (CollectionStore, "__setitem__"), (CollectionStore, "__delitem__"),
    (mongomock.collection, "copy"), (mongomock.helpers, "make_datetime_timezone_aware_in_document"),
    (mongomock.collection, "_copy_field"),
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
                 Cursor: cursor, mongomock: None, mongomock.collection: None, mongomock.helpers: None,
                 mongomock.filtering: None}
    return [f"{cls.__name__}.{name}" for cls, name in PRIVATE_NAMES
            if not (hasattr(cls, name) or hasattr(instances[cls], name))]


_TTL_SWEEP_EVERY = 60.0  # seconds: MongoDB's TTL monitor's default period
# A sweep waits this many times as long as the last one took: sweeps cost at most 1% of
# the time however large the collection grows (the change log keeps 90 days of events).
_TTL_SWEEP_SHARE = 100
_SIMPLE_TYPES = (str, int, datetime)  # datetimes as mongomock stores them: naive UTC
_RANGE = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _plan(filter) -> list | None:
    """The filter as clauses the scan can test over a whole column at once, or None
    when it needs mongomock's general matcher.  A clause is ``(field, kinds, test)``: for
    a value whose type is one of ``kinds``, ``test(value)`` gives MongoDB's answer
    (equality, ``$gt``/``$gte``/``$lt``/``$lte`` and ``$in`` against str, int or naive
    datetime operands; equality with a boolean; ``$regex`` with no option or ``i``
    against strings); or ``("$or", [plans])``.  A value of another type (an array, null, a float...) leaves
    its document to the general matcher."""
    plan = []
    for field, value in filter.items():
        if field == "$or" and type(value) is list and value and all(type(branch) is dict for branch in value):
            branches = [_plan(branch) for branch in value]
            if None in branches:
                return None
            plan.append(("$or", None, branches))
            continue
        if field.startswith("$") or "." in field:
            return None
        clauses = _clauses(value)
        if clauses is None:
            return None
        plan.extend((field, kinds, test) for kinds, test in clauses)
    return plan


def _clauses(value) -> list | None:
    if _simple(value) or type(value) is bool:  # a boolean equals only a boolean (not 0 or 1)
        return [(frozenset({type(value)}), value.__eq__)]
    if type(value) is not dict or not value:
        return None
    if value.keys() <= {"$regex", "$options"} and type(value.get("$regex")) is str \
            and value.get("$options", "") in ("", "i"):
        pattern = re.compile(value["$regex"], re.IGNORECASE if value.get("$options") else 0)
        return [(frozenset({str}), pattern.search)]
    clauses = []
    for op, operand in value.items():
        if op in _RANGE and _simple(operand):
            clauses.append((frozenset({type(operand)}), functools.partial(_compare, _RANGE[op], operand)))
        elif op == "$in" and type(operand) is list and operand and all(_simple(v) for v in operand):
            clauses.append((frozenset(map(type, operand)), frozenset(operand).__contains__))
        else:
            return None
    return clauses


def _compare(test, operand, value) -> bool:
    return test(value, operand)


def _simple(value) -> bool:
    return type(value) in _SIMPLE_TYPES and (type(value) is not datetime or value.tzinfo is None)


def _column(plan, docs) -> list:
    """Per document: True, False, or None (a value this plan cannot judge)."""
    columns = []
    for field, kinds, test in plan:
        if field == "$or":
            columns.append(_either([_column(branch, docs) for branch in test]))
            continue
        values = list(map(operator.methodcaller("get", field), docs))
        seen = set(map(type, values))
        if seen <= kinds and (datetime not in seen or all(
                value.tzinfo is None for value in values if type(value) is datetime)):
            columns.append(list(map(bool, map(test, values))))  # every value judged: C loops only
        else:
            columns.append([bool(test(value)) if type(value) in kinds and (
                type(value) is not datetime or value.tzinfo is None) else None for value in values])
    return _both(columns)


def _both(columns: list) -> list:
    """Three-valued AND of the columns: False wins, then None."""
    if len(columns) == 1:
        return columns[0]
    if not any(None in column for column in columns):
        return list(map(all, zip(*columns, strict=True)))
    return [False if False in answers else (None if None in answers else True)
            for answers in zip(*columns, strict=True)]


def _either(columns: list) -> list:
    """Three-valued OR of the columns: True wins, then None."""
    if not any(None in column for column in columns):
        return list(map(any, zip(*columns, strict=True)))
    return [True if True in answers else (None if None in answers else False)
            for answers in zip(*columns, strict=True)]


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
        found = select(self, filter)
        indexed = getattr(self._store, "_iamgate_index", None)
        # In a write, what it reads is what it may change: the map notes the old values.
        return indexed.recording(found) if type(indexed) is _Indexes and indexed.writing else found

    def select(self, filter):
        if type(filter) is not dict:
            return scan(self, filter)
        key = filter.get("_id")
        if type(key) is str:
            self._store._remove_expired_documents()
            doc = self._store._documents.get(key)
            return iter([doc] if doc is not None and filter_applies(filter, doc) else [])
        indexed = _Indexes.of(self._store)
        if indexed is not None:
            self._store._remove_expired_documents()
            found = indexed.lookup(filter)
            if found is not None:
                return found
        plan = _plan(filter)
        if not plan:  # other operators, sub-documents, ObjectIds, an empty filter...: the general path
            return scan(self, filter)
        self._store._remove_expired_documents()
        docs = indexed.narrowed(filter) if indexed is not None else None
        if docs is None:
            docs = list(self._store._documents.values())
        answers = _column(plan, docs)
        if None not in answers:
            return itertools.compress(docs, answers)
        return (doc for doc, answer in zip(docs, answers, strict=True)
                if answer or (answer is None and filter_applies(filter, doc)))

    def remove_expired_documents(self):
        now = time.monotonic()
        if now >= getattr(self, "_iamgate_sweep_due", float("-inf")):
            sweep(self)
            took = time.monotonic() - now
            self._iamgate_sweep_due = now + max(_TTL_SWEEP_EVERY, took * _TTL_SWEEP_SHARE)

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
            factory = self._factory
            first = self._skip + abs(self._limit)
            docs = itertools.islice(factory.func(*factory.args, skip=self._skip, first=first), abs(self._limit))
            if self.collection.codec_options.tz_aware:
                docs = [_aware(doc) for doc in docs]
            window = self._iamgate_window = (key, list(docs))
        return window[1]

    expire = CollectionStore._expire_documents

    def expire_documents(self, index):
        """mongomock's sweep of one TTL index, with the comparison of every document's
        value made in C when every value is a datetime as mongomock stores them (naive
        UTC); the few it finds due are confirmed by mongomock's own test.  Any other
        value in the field (null, a list, a string...) and the sweep is mongomock's."""
        key = list(index["key"])
        expiry = index.get("expireAfterSeconds")
        documents = self._documents
        if len(key) != 1 or type(expiry) is not int or not documents:
            return expire(self, index)
        docs = list(documents.values())
        values = list(map(operator.methodcaller("get", key[0][0]), docs))
        if set(map(type, values)) != {datetime} or any(map(operator.attrgetter("tzinfo"), values)):
            return expire(self, index)
        now = mongomock.utcnow()
        due = itertools.compress(docs, map(operator.le, values, itertools.repeat(now - timedelta(seconds=expiry))))
        for doc in [doc for doc in due if self._value_meets_expiry(doc[key[0][0]], expiry, now)]:
            del self[doc["_id"]]

    get_dataset = Collection._get_dataset

    def dataset(self, spec, sort, fields, as_class, skip=0, first=None):
        """mongomock's ``_get_dataset``, sorted by ``_sorted`` (only the ``first`` needed
        when a limit says how many), and the first ``skip`` passed over without copies."""
        keys = list(sort.items() if isinstance(sort, dict) else sort or ())
        if any(key.startswith("$") or "." in key for key, _ in keys):
            found = get_dataset(self, spec, sort, fields, as_class)
            return itertools.islice(found, skip, first)
        docs = _sorted(self._iter_documents(spec), keys, first) if keys else self._iter_documents(spec)
        return (self._copy_only_fields(doc, fields, as_class) for doc in itertools.islice(docs, skip, None))

    set_item, del_item = CollectionStore.__setitem__, CollectionStore.__delitem__

    def store_set(self, key, val):
        set_item(self, key, val)
        indexed = getattr(self, "_iamgate_index", None)
        if type(indexed) is _Indexes:
            indexed.add(val)

    def store_del(self, key):
        indexed, doc = getattr(self, "_iamgate_index", None), self._documents.get(key)
        del_item(self, key)
        if type(indexed) is _Indexes and doc is not None:
            indexed.discard(doc["_id"], indexed.values_of(doc))

    modify = Collection.find_one_and_update

    def find_one_and_update(self, filter, update, projection=None, sort=None, upsert=False,
                            return_document=ReturnDocument.BEFORE, **kwargs):
        changes = _plain_changes(update, _unique_fields(self._store))
        if changes is None or sort is not None or kwargs or return_document is not ReturnDocument.AFTER \
                or type(filter) is not dict:
            return modify(self, filter, update, projection, sort, upsert, return_document, **kwargs)
        # As mongomock's own first step (a find_one) reads: datetimes of the filter in naive UTC.
        doc = next(self._iter_documents(mongomock.helpers.patch_datetime_awareness_in_document(filter)), None)
        if doc is None:
            return modify(self, filter, update, projection, sort, upsert, return_document) if upsert else None
        if not _applies(changes, doc):
            return modify(self, filter, update, projection, sort, upsert, return_document)
        _apply(changes, doc)
        return self.find_one({"_id": doc["_id"]}, projection)

    update = Collection.update_one

    def update_one(self, filter, document, upsert=False, bypass_document_validation=False, collation=None,
                   array_filters=None, hint=None, session=None, let=None):
        changes = _plain_changes(document, _unique_fields(self._store))
        if changes is None or bypass_document_validation or collation or array_filters or hint or session \
                or let or type(filter) is not dict:
            return update(self, filter, document, upsert, bypass_document_validation, collation, array_filters,
                          hint, session, let)
        doc = next(self._iter_documents(mongomock.helpers.patch_datetime_awareness_in_document(filter)), None)
        if (doc is None and upsert) or (doc is not None and not _applies(changes, doc)):
            return update(self, filter, document, upsert)
        modified = doc is not None and _apply(changes, doc)
        return UpdateResult({"connectionId": self.database.client._id, "err": None, "n": int(doc is not None),
                             "nModified": int(modified), "ok": 1, "upserted": None,
                             "updatedExisting": doc is not None}, acknowledged=True)

    ensure_uniques = Collection._ensure_uniques

    def ensure_uniques_by_map(self, new_data):
        """mongomock's unique-index check after an insert (the new document is already
        stored and mapped), counted in the index map when every unique index is a mapped
        single field holding a str or int here; otherwise, and during an update (whose
        changes the map learns only at its end), mongomock's, a query per index."""
        indexed = getattr(self._store, "_iamgate_index", None)
        usable = type(indexed) is _Indexes and not indexed.writing
        counts = _unique_counts(self._store, indexed, new_data) if usable else None
        if counts is None:
            return ensure_uniques(self, new_data)
        if any(count > 1 for count in counts):
            raise mongomock.DuplicateKeyError("E11000 Duplicate Key Error", 11000)

    # (owner, name, shortcut).  mongomock's own stays reachable, for the tests that compare
    # the two, as ``_iamgate_general_<name>`` (the name without its outer underscores).
    for owner, name, shortcut in (
            (Collection, "_iter_documents", iter_documents), (Collection, "find_one", find_one),
            (Collection, "_get_dataset", dataset), (Collection, "find_one_and_update", find_one_and_update),
            (Collection, "update_one", update_one), (Collection, "_ensure_uniques", ensure_uniques_by_map),
            (Cursor, "_compute_results", compute_results),
            (CollectionStore, "_remove_expired_documents", remove_expired_documents),
            (CollectionStore, "_expire_documents", expire_documents),
            (CollectionStore, "__setitem__", store_set), (CollectionStore, "__delitem__", store_del),
            (mongomock.helpers, "patch_datetime_awareness_in_document", _patched),
            (mongomock.helpers, "make_datetime_timezone_aware_in_document", _aware),
            (mongomock.collection, "_copy_field", _copy_field),
            (mongomock.collection, "copy", types.SimpleNamespace(copy=copy.copy, deepcopy=_document_copy))):
        setattr(owner, "_iamgate_general_" + name.strip("_"), getattr(owner, name))
        setattr(owner, name, shortcut)
    Collection._iamgate_fast_paths = True


def _sorted(docs, keys, first: int | None = None) -> list:
    """``docs`` in the order of ``keys`` (``[(field, direction)]``), as mongomock orders
    them (a stable sort per key, the last key first), only the first ``first`` of them
    when given.  When every key's values are of one plain type (str, int or datetime; no
    field missing), which order as MongoDB orders them, the documents are sorted by the
    first key's values, and only each run of equal values by the next key; with
    ``first``, only the documents up to the ``first``-th value (ties included) are
    sorted.  Any other key: mongomock's BSON comparison, one pass per key."""
    docs = list(docs)
    columns = []
    for field, direction in keys:
        values = list(map(operator.methodcaller("get", field), docs))
        kinds = set(map(type, values))
        if len(kinds) != 1 or not kinds <= set(_SIMPLE_TYPES):
            return _bson_sorted(docs, keys)[:first]
        columns.append((values, direction < 0))
    try:
        order = _order(list(range(len(docs))), columns, first)
    except TypeError:  # naive beside aware datetimes: mongomock's comparison says how
        return _bson_sorted(docs, keys)[:first]
    return list(map(docs.__getitem__, order))


def _order(indices: list[int], columns: list, first: int | None) -> list[int]:
    (values, reverse), rest = columns[0], columns[1:]
    key = values.__getitem__
    if first is not None and first < len(indices) // 4:
        top = (heapq.nlargest if reverse else heapq.nsmallest)(first, indices, key=key)
        if not top:
            return []
        edge = values[top[-1]]
        indices = [i for i in indices if (values[i] >= edge if reverse else values[i] <= edge)]
    order = sorted(indices, key=key, reverse=reverse)
    if rest and len(set(map(key, order))) < len(order):  # ties: each run by the next key
        order = [i for _, run in itertools.groupby(order, key=key) for i in _order(list(run), rest, None)]
    return order[:first]


def _bson_sorted(docs: list, keys) -> list:
    for field, direction in reversed(keys):
        docs = sorted(docs, key=functools.partial(resolve_sort_key, field), reverse=direction < 0)
    return docs


_ATOMS = frozenset({str, int, float, bool, type(None), bytes, datetime})


def _document_copy(value, memo=None):
    """``copy.deepcopy`` for what a document holds: dicts and lists are copied, the
    immutable values they hold are shared (as deepcopy shares strings), anything else
    goes to deepcopy.  mongomock copies every document it stores and, before each
    update, the document updated (to roll it back): deepcopy's bookkeeping per value made
    that cost grow with a refresh-token grant's list of spent digests."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _document_copy(item) for key, item in value.items()}
    if kind is list:
        if set(map(type, value)) <= _ATOMS:  # a list of digests, of scopes: C loops only
            return list(value)
        return [_document_copy(item) for item in value]
    return copy.deepcopy(value, memo)


_PLAIN = _ATOMS - {datetime}


def _aware(value):
    """mongomock's ``make_datetime_timezone_aware_in_document`` (a copy of the document
    with every datetime in UTC, as ``tz_aware=True`` returns them) that passes over
    what holds no datetime without a call per value: a list of digests, a string field."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _PLAIN else _aware(item) for key, item in value.items()}
    if kind is list:
        return list(value) if set(map(type, value)) <= _PLAIN else [_aware(item) for item in value]
    return make_aware(value)  # datetimes, tuples, subclasses: mongomock's own, which recurses through this


_NUMBERS = (int, float)
_PLAIN_OPERATORS = frozenset({"$set", "$inc", "$max", "$push", "$setOnInsert"})


def _plain_changes(update, unique_fields) -> list | None:
    """``[(operator, field, value)]`` of an update made of ``$set`` of plain values,
    ``$inc`` and ``$max`` of numbers and ``$push`` of one plain value, on top-level fields that no
    unique index covers (``$setOnInsert`` is ignored: the shortcut updates only a
    document that exists), values as mongomock stores them; None for any other update,
    which mongomock's general path applies."""
    if type(update) is not dict or not update or not set(update) <= _PLAIN_OPERATORS:
        return None
    changes = []
    for operator_, fields in update.items():
        if type(fields) is not dict or not fields:
            return None
        if operator_ == "$setOnInsert":
            continue
        for field, value in fields.items():
            if type(field) is not str or field.startswith("$") or "." in field or field == "_id" \
                    or field in unique_fields:
                return None
            if type(value) is datetime:
                value = mongomock.helpers.patch_datetime_awareness_in_document(value)  # naive UTC, milliseconds
            elif type(value) not in _PLAIN or (operator_ in ("$inc", "$max") and type(value) not in _NUMBERS) \
                    or type(value) is bytes:
                return None
            changes.append((operator_, field, value))
    return changes


def _applies(changes, doc) -> bool:
    """The shortcut can apply ``changes`` to ``doc`` as mongomock would: each ``$inc`` and
    ``$max`` on a number or a missing field, each ``$push`` on a list or a missing field."""
    return all(op == "$set" or field not in doc
               or (type(doc[field]) is list if op == "$push" else type(doc[field]) in _NUMBERS)
               for op, field, _ in changes)


def _apply(changes, doc) -> bool:
    """Apply ``changes`` to the stored ``doc`` in place, as mongomock's updaters do;
    whether the document changed (mongomock's ``nModified``)."""
    modified = False
    for operator_, field, value in changes:
        old = doc.get(field, _MISSING)
        if operator_ == "$push":
            if old is _MISSING:
                doc[field] = [value]
            else:
                old.append(value)
            modified = True
            continue
        if operator_ == "$set":
            new = value
        elif old is _MISSING:
            new = value
        else:
            new = old + value if operator_ == "$inc" else max(old, value)
        doc[field] = new
        modified = modified or old is _MISSING or old != new
    return modified


_MISSING = object()


def _unique_fields(store) -> set:
    """Every field a unique index of the collection covers (``_id`` included)."""
    return {"_id", *(field for index in store.indexes.values() if index.get("unique")
                     for field, _ in index["key"])}


_INDEXED_TYPES = (str, int)


def _unique_counts(store, indexed, doc) -> list | None:
    """How many stored documents hold ``doc``'s value of each unique index, from the map;
    None when one index is not a mapped single field or the value is not a str or int
    (null and missing values match each other: mongomock's query decides)."""
    counts = []
    for index in store.indexes.values():
        if not index.get("unique"):
            continue
        key = list(index["key"])
        field = key[0][0]
        values = indexed._maps.get(field)
        value = doc.get(field)
        if len(key) != 1 or values is None or type(value) not in _INDEXED_TYPES or index.get("sparse") \
                or index.get("partialFilterExpression"):
            return None
        counts.append(len(values.get(value, ())))
    return counts


_PATCH = mongomock.helpers.patch_datetime_awareness_in_document
_COPY_FIELD = mongomock.collection._copy_field


def _copy_field(value, container):
    """mongomock's ``_copy_field`` (the copy of every document a read returns: lists and
    dicts copied, as ``container`` for dicts, ``copy.copy`` of anything else) that shares
    the immutable values instead of a ``copy.copy`` call each."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict and container is dict:
        return {key: item if type(item) in _ATOMS else _copy_field(item, container) for key, item in value.items()}
    if kind is list:
        return list(value) if set(map(type, value)) <= _ATOMS else [_copy_field(item, container) for item in value]
    return _COPY_FIELD(value, container)  # other containers, subclasses, other types: mongomock's own


def _patched(value):
    """mongomock's ``patch_datetime_awareness_in_document`` (the copy of a document as it
    stores it: datetimes in naive UTC to the millisecond, tuples as lists) that passes over
    plain values without a call each: every insert, update and query patches its document."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _PLAIN else _patched(item) for key, item in value.items()}
    if kind is list:
        return list(value) if set(map(type, value)) <= _PLAIN else [_patched(item) for item in value]
    return _PATCH(value)  # datetimes, tuples, OrderedDicts, timestamps, subclasses: mongomock's own


# How a collection call treats the index map: during reads and inserts it answers (an
# insert keeps it up to date itself); a write of single documents may change the ones
# it reads in place, so during one the map is not used and afterwards it re-reads them;
# any other call (a drop, a rename, index changes) drops the map, to be built again.
_READS = frozenset({"find", "find_one", "count_documents", "estimated_document_count", "distinct",
                    "insert_one", "insert_many", "list_indexes", "index_information"})
_DOCUMENT_WRITES = frozenset({"update_one", "update_many", "replace_one", "delete_one", "delete_many",
                              "find_one_and_update", "find_one_and_replace", "find_one_and_delete"})
# A non-unique value held by more documents than this is left to the scan, which returns
# them in the collection's order.
_MAX_CANDIDATES = 1


class _Indexes:
    """The single-field indexes of one collection: field -> {value: {_id}}, and for a
    range filter on a unique field its values in order (built when one is asked for)."""

    def __init__(self, store, fields, unique):
        self._store = store
        self._maps = {field: {} for field in fields}
        self._unique = unique
        self._ordered = {}
        self._touched = None  # _id -> the values it had, while a write runs
        for doc in store._documents.values():
            self.add(doc)

    @classmethod
    def of(cls, store) -> _Indexes | None:
        """The collection's map, built on first use; None while a write runs, or when the
        collection has no index to map."""
        if not getattr(store, "_iamgate_map_usable", False):
            return None
        indexed = getattr(store, "_iamgate_index", None)
        if indexed is None:
            keys = [(list(index["key"]), index) for index in store.indexes.values()]
            usable = [(key[0][0], bool(index.get("unique"))) for key, index in keys
                      if len(key) == 1 and "." not in key[0][0] and key[0][0] != "_id"
                      and index.get("expireAfterSeconds") is None
                      and not index.get("partialFilterExpression") and not index.get("collation")]
            indexed = store._iamgate_index = (cls(store, [field for field, _ in usable],
                                                  {field for field, unique in usable if unique})
                                              if usable else _NO_INDEX)
        return indexed if indexed is not _NO_INDEX else None

    @property
    def writing(self) -> bool:
        return self._touched is not None

    def begin_write(self) -> None:
        self._touched = {}

    def end_write(self) -> None:
        """Re-read what the write read: its old values leave the map, its new ones enter."""
        touched, self._touched = self._touched, None
        for _id, values in touched.items():
            self.discard(_id, values)
            doc = self._store._documents.get(_id)
            if doc is not None:
                self.add(doc)

    def recording(self, docs):
        for doc in docs:
            self._touched.setdefault(doc["_id"], self.values_of(doc))
            yield doc

    def values_of(self, doc) -> dict:
        return {field: doc.get(field) for field in self._maps if type(doc.get(field)) in _INDEXED_TYPES}

    def add(self, doc) -> None:
        for field, values in list(self._maps.items()):
            value = doc.get(field)
            if value is None:
                continue
            if type(value) not in _INDEXED_TYPES:  # an array, a float...: MongoDB's rules, by scan
                del self._maps[field]
                self._ordered.pop(field, None)
                continue
            ids = values.get(value)
            if ids is None:
                ids = values[value] = set()
                ordered = self._ordered.get(field)
                if ordered is not None:
                    if ordered and type(ordered[0]) is not type(value):
                        del self._ordered[field]  # mixed types: ranges go to the scan
                    else:
                        bisect.insort(ordered, value)
            ids.add(doc["_id"])

    def discard(self, _id, values: dict) -> None:
        for field, value in values.items():
            ids = self._maps.get(field, {}).get(value)
            if ids is None:
                continue
            ids.discard(_id)
            if not ids:
                del self._maps[field][value]
                ordered = self._ordered.get(field)
                if ordered is not None:
                    del ordered[bisect.bisect_left(ordered, value)]

    def lookup(self, filter):
        """The documents matching ``filter`` found through the map (an equality on an
        indexed field, or one range on a unique one), or None when the map cannot answer."""
        for field, operand in filter.items():
            values = self._maps.get(field)
            if values is None:
                continue
            if type(operand) in _INDEXED_TYPES:
                ids = values.get(operand, ())
                if len(ids) > _MAX_CANDIDATES and field not in self._unique:
                    continue
                return self._documents(ids, filter)
            if len(filter) == 1:
                ids = self._range_ids(field, operand)
                if ids is not None:
                    return self._documents(ids, filter)
        return None

    def narrowed(self, filter) -> list | None:
        """The documents in a range on a unique field that ``filter`` holds beside other
        clauses (the sealer's ``{"sealed": False, "seq": {"$gt": n}, "at": ...}``), in that
        field's order, for the column scan to test instead of every document; None when
        there is no such range or it names more than half the collection."""
        documents = self._store._documents
        for field, operand in filter.items():
            ids = self._range_ids(field, operand)
            if ids is not None and len(ids) <= len(documents) // 2:
                return [documents[_id] for _id in ids if _id in documents]
        return None

    def _range_ids(self, field, operand) -> list | None:
        """The ids a range (``$gt``/``$gte``/``$lt``/``$lte`` of mapped values) on a unique
        field names, in the field's order; None when ``operand`` is no such range."""
        values = self._maps.get(field)
        if values is None or field not in self._unique or type(operand) is not dict or not operand or not all(
                op in _RANGE and type(v) in _INDEXED_TYPES for op, v in operand.items()):
            return None
        keys = self._in_range(field, values, operand)
        return None if keys is None else [_id for key in keys for _id in values[key]]

    def _in_range(self, field, values, operand):
        ordered = self._ordered.get(field)
        if ordered is None:
            if len({type(value) for value in values}) > 1:
                return None
            ordered = self._ordered[field] = sorted(values)
        if ordered and any(type(v) is not type(ordered[0]) for v in operand.values()):
            return None
        low, high = 0, len(ordered)
        for op, v in operand.items():
            if op == "$gt":
                low = max(low, bisect.bisect_right(ordered, v))
            elif op == "$gte":
                low = max(low, bisect.bisect_left(ordered, v))
            elif op == "$lt":
                high = min(high, bisect.bisect_left(ordered, v))
            else:
                high = min(high, bisect.bisect_right(ordered, v))
        return ordered[low:high]

    def _documents(self, ids, filter):
        documents = self._store._documents
        found = [documents.get(_id) for _id in ids]
        return iter([doc for doc in found if doc is not None and filter_applies(filter, doc)])


_NO_INDEX = object()


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
        reads, writes_documents = name in _READS, name in _DOCUMENT_WRITES

        def call(*args, **kwargs):
            with self._lock:
                store = self._collection._store
                indexed = getattr(store, "_iamgate_index", None)
                store._iamgate_map_usable = reads
                if writes_documents and type(indexed) is _Indexes:
                    indexed.begin_write()
                try:
                    result = attr(*args, **kwargs)
                finally:
                    if writes_documents and type(indexed) is _Indexes:
                        indexed.end_write()
                    elif not (reads or writes_documents):
                        store._iamgate_index = None
                    store._iamgate_map_usable = True
            if isinstance(result, _CURSOR_TYPES):
                return _SerialisedCursor(result, self._lock)
            return result

        return call

    def __getitem__(self, name):
        return _SerialisedCollection(self._collection[name], self._lock)


class _SerialisedDatabase:
    def __init__(self, database, lock):
        self._database, self._lock = database, lock
        self._collections: dict[str, _SerialisedCollection] = {}

    def __getitem__(self, name):
        """One collection object per name: mongomock makes a new one at each access (a
        copy through ``with_options``), which the change log's counter paid at every
        event.  A collection finds its documents by name at each call, so a dropped and
        re-created collection is the same object's."""
        collection = self._collections.get(name)
        if collection is None:
            collection = self._collections[name] = _SerialisedCollection(self._database[name], self._lock)
        return collection

    def __getattr__(self, name):
        attr = getattr(self._database, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            with self._lock:
                return attr(*args, **kwargs)

        return call
