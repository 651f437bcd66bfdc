"""MongoDB access for audit records: reads of the change log's ``events`` collection
(``controlplane.events`` owns and writes it), the indexes its queries need, and the rewrite of a
deleted user's personal values.

Every query is ``{scope: id, [one filter: equality], [range on at]}`` sorted newest first
by ``(at, seq)``; ``INDEXES`` declares, for both scopes (``app_id``, ``organization_id``),
one index per filter whose keys are the scope, the filter, then ``at`` and ``seq``, so
each filter alone or with a time range is read in index order.  The action prefix is a
range: it rides in the base index behind the sort keys.  A test in tests/audit
checks every query shape against these declarations.
"""
from __future__ import annotations

import re

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.errors import DuplicateKeyError

from controlplane.audit.chain import PERSONAL_DATA

SCOPES = ("app_id", "organization_id")
# Query filter -> the stored field it matches.
FILTER_FIELDS = {"actor_id": "actor.id", "target_id": "target.id", "result": "result.status", "ip": "ip"}
SORT = [("at", DESCENDING), ("seq", DESCENDING)]


def _indexes() -> list[IndexModel]:
    models = []
    for scope in SCOPES:
        models.append(IndexModel([(scope, ASCENDING), ("at", ASCENDING), ("seq", ASCENDING), ("action", ASCENDING)],
                                 name=f"audit_{scope}"))
        for name, field in FILTER_FIELDS.items():
            models.append(IndexModel([(scope, ASCENDING), (field, ASCENDING), ("at", ASCENDING), ("seq", ASCENDING)],
                                     name=f"audit_{scope}_{name}"))
    return models


INDEXES = {
    "events": _indexes() + [
        # The sealer's work list: partial, so it holds only the records not chained yet
        # (a record leaves it when sealed) and costs a write little. Then each chain in order.
        IndexModel([("seq", ASCENDING)], name="audit_unsealed", partialFilterExpression={"sealed": False}),
        IndexModel([("chain", ASCENDING), ("link", ASCENDING)], name="audit_chain"),
    ],
}
SEALER_LEASE = "sealer"


def query(scope: str, scope_id: str, filters: dict, after: tuple | None = None) -> dict:
    """The MongoDB filter of one listing: ``filters`` holds cleaned values (``action``
    a prefix, ``since``/``until`` datetimes, the others exact); ``after`` is the
    ``(at, seq)`` of the last record of the previous page."""
    spec: dict = {scope: scope_id}
    for name, field in FILTER_FIELDS.items():
        if filters.get(name) is not None:
            spec[field] = filters[name]
    if filters.get("action"):
        spec["action"] = {"$regex": "^" + re.escape(filters["action"])}
    at = {}
    if filters.get("since") is not None:
        at["$gte"] = filters["since"]
    if filters.get("until") is not None:
        at["$lt"] = filters["until"]
    if at:
        spec["at"] = at
    if after is not None:
        at_, seq = after
        # (at, seq) below the cursor's: older, or as old with a lower seq.
        spec = {"$and": [spec, {"$or": [{"at": {"$lt": at_}}, {"at": at_, "seq": {"$lt": seq}}]}]}
    return spec


def outside_query(chain_filter: dict, chain: str, start) -> dict:
    """The scope's records in no chain (or another scope's) that are not waiting to be
    sealed: every record a writer inserts carries ``sealed: false`` until the sealer
    chains it, so one that is marked sealed (or carries any other value) without being in
    the chain was put there by hand; and one without the field is from before the audit
    log only if it is older than the chain's first record (``start``; with no chain yet
    nothing tells, and those are left alone).  A rooted ``$or`` whose every branch leads
    with the scope's equality, so it is read through the scope's own index
    (``audit_<scope>``): a pass over the scope's records, as the chain's walk is.  No
    index of its own: every event written would pay for one, and ``audit verify`` is an
    operator's occasional check that reads the whole chain anyway."""
    outside = {**chain_filter, "chain": {"$ne": chain}}
    branches = [{**outside, "sealed": {"$nin": [False, None]}}]
    if start is not None:
        branches.append({**outside, "sealed": None, "at": {"$gte": start}})
    return {"$or": branches}


class AuditStore:
    def __init__(self, store, records):
        """``records``: the change log's collection (``EventLog.records``), which this
        store reads, indexes for the audit log's queries and seals, but does not open."""
        store.declare_indexes(INDEXES)
        self._events = records
        self._leases = store["audit_leases"]

    # ------------------------------------------------------------------ the chain

    def take_sealer_lease(self, holder: str, now, until) -> bool:
        """Hold (or renew) the one sealer lease until ``until``; False when another
        holder's has not expired."""
        try:
            self._leases.find_one_and_update(
                {"_id": SEALER_LEASE, "$or": [{"holder": holder}, {"expires_at": {"$lt": now}}]},
                {"$set": {"holder": holder, "expires_at": until}}, upsert=True)
        except DuplicateKeyError:  # the lease exists, held by another
            return False
        return True

    def settled(self, cutoff, limit: int, after: int | None = None) -> list[dict]:
        """The unsealed records written at ``cutoff`` or before (with a seq above
        ``after``, if given), in seq order, up to the first unsealed record written after
        it: a record with a lower seq whose insert is still in flight on another replica
        is sealed before the records after it."""
        window: dict = {"sealed": False}
        if after is not None:
            window["seq"] = {"$gt": after}
        young = self._events.find_one({**window, "at": {"$gt": cutoff}}, sort=[("seq", ASCENDING)],
                                      projection={"seq": 1})
        spec: dict = {**window, "at": {"$lte": cutoff}}
        if young is not None:
            spec["seq"] = {**window.get("seq", {}), "$lt": young["seq"]}
        return list(self._events.find(spec).sort("seq", ASCENDING).limit(limit))

    def chain_head(self, chain: str) -> dict | None:
        return self._events.find_one({"chain": chain}, sort=[("link", DESCENDING)], projection={"link": 1, "hash": 1})

    def seal(self, record_id: str, *, chain: str, link: int, prev_hash: str, hash_: str) -> None:
        self._events.update_one({"_id": record_id, "sealed": False}, {"$set": {
            "sealed": True, "chain": chain, "link": link, "prev_hash": prev_hash, "hash": hash_}})

    def chain(self, chain: str):
        """The chain's sealed records in order (a cursor read in batches)."""
        return self._events.find({"chain": chain}).sort("link", ASCENDING).batch_size(1000)

    def unsealed_count(self, chain_filter: dict) -> int:
        return self._events.count_documents({**chain_filter, "sealed": False})

    def outside_chain(self, chain_filter: dict, chain: str, start) -> tuple[int, dict | None]:
        """(how many, the first by seq) of the scope's records that are not in ``chain``
        and are not waiting to be sealed (``outside_query``).  One indexed count; the
        first is read only when there is one."""
        spec = outside_query(chain_filter, chain, start)
        count = self._events.count_documents(spec)
        if not count:
            return 0, None
        return count, self._events.find_one(spec, {"seq": 1, "link": 1, "sealed": 1}, sort=[("seq", ASCENDING)])

    def page(self, scope: str, scope_id: str, filters: dict, after: tuple | None, limit: int) -> list[dict]:
        return list(self._events.find(query(scope, scope_id, filters, after)).sort(SORT).limit(limit))

    def each(self, scope: str, scope_id: str, filters: dict, batch_size: int = 1000):
        """Every matching record, newest first, read in batches by one cursor."""
        return self._events.find(query(scope, scope_id, filters)).sort(SORT).batch_size(batch_size)

    def of_user(self, app_id: str, user_id: str):
        """The user's own records: those they did and those done to them, oldest first."""
        return self._events.find({"app_id": app_id, "$or": [{"actor.id": user_id}, {"target.id": user_id}]}
                                 ).sort([("at", ASCENDING), ("seq", ASCENDING)])

    def personal_events(self, app_id: str, user_id: str) -> list[int]:
        """The seqs of the user's own change events whose ``data`` holds their email or
        name (or, once forgotten, their id in place of either)."""
        found = self._events.find({"app_id": app_id, "subject.user_id": user_id,
                                   "$or": [{f"data.{key}": {"$exists": True}} for key in PERSONAL_DATA]},
                                  {"seq": 1})
        return [doc["seq"] for doc in found]

    def pseudonymize_user(self, app_id: str, user_id: str) -> None:
        """Replace the user's email and name in their records with their id."""
        for side in ("actor", "target"):
            self._events.update_many({"app_id": app_id, f"{side}.id": user_id},
                                     {"$set": {f"{side}.display": user_id}})
        self._events.update_many({"app_id": app_id, "subject.user_id": user_id, "data.email": {"$exists": True}},
                                 {"$set": {"data.email": user_id}})
        self._events.update_many({"app_id": app_id, "subject.user_id": user_id, "data.name": {"$exists": True}},
                                 {"$set": {"data.name": user_id}})
