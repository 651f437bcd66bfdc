"""The audit records' hash chain (docs/audit.md, "Integrity").

Each application's records form one chain (dashboard actions outside any application,
one per organization): ``hash = SHA-256(prev_hash || canonical(record))``, where
``prev_hash`` is the hash of the chain's previous record (``GENESIS`` for the first) and
``link`` numbers the record in its chain.  Editing, inserting or removing a sealed
record inside a chain changes a hash the next record holds: ``verify`` names the first
record whose link does not hold.  A record slipped in beside the chain instead (no link,
yet not waiting to be sealed) changes no hash: ``verify`` asks the store for those too
(``outside``), and names the first.

Sealing happens after the write, by one ``Sealer`` at a time (a lease in the store), in
``seq`` order: writers on any number of replicas only insert (the change log's hot path
gains no read and no lock), and the sealer chains what they wrote.  It seals a record
only once it is ``settle`` seconds old, so an insert still in flight with a lower seq
(allocated earlier, written later by another replica) is sealed before the records after
it.  A record later still (a writer paused longer than that) is sealed when it shows
up, after the records already sealed: the chain follows ``link``, and such a record's
``seq`` is below its predecessor's; ``verify`` reports it, but as late, not as a break.

The canonical form leaves out the values account deletion rewrites (``actor.display``,
``target.display``, and ``data.email`` and ``data.name`` of an event about a user):
forgetting a person does not break the chain, and those values are not protected by it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, timedelta

from shared.ids import new_id

log = logging.getLogger("iamgate.audit")

GENESIS = "0" * 64
PERSONAL_DATA = ("email", "name")
# The stored fields a hash covers (personal values aside); anything else (sealing's own
# fields, MongoDB's) is not part of the record.
COVERED = ("_id", "seq", "app_id", "organization_id", "type", "action", "at", "result", "actor", "target",
           "subject", "data", "user_ids", "request_id", "ip", "user_agent")


def chain_of(doc: dict) -> str:
    """The chain a record belongs to: its application's, else its organization's."""
    if doc.get("app_id"):
        return doc["app_id"]
    return f"organization:{doc.get('organization_id')}"


def _at(value) -> int:
    """Milliseconds since the epoch: the precision MongoDB stores."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def canonical(doc: dict) -> bytes:
    content = {key: doc.get(key) for key in COVERED}
    content["at"] = _at(doc["at"])
    for side in ("actor", "target"):
        if isinstance(content[side], dict):
            content[side] = {k: v for k, v in content[side].items() if k != "display"}
    subject = content["subject"] if isinstance(content["subject"], dict) else {}
    if subject.get("user_id") and isinstance(content["data"], dict):  # a user's own change: see forget_user
        content["data"] = {k: v for k, v in content["data"].items() if k not in PERSONAL_DATA}
    return json.dumps(content, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False).encode()


def link_hash(prev_hash: str, doc: dict) -> str:
    return hashlib.sha256(prev_hash.encode() + canonical(doc)).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """``verify``'s answer: how many sealed records checked out, the first broken one
    (``break_at``: its id, seq and why), the records sealed late, those not sealed yet,
    and those of the scope in no chain that are not waiting to be sealed either
    (``outside``: slipped into the log; the first of them is the break when the chain
    itself holds)."""

    checked: int
    break_at: dict | None
    late: list
    unsealed: int
    outside: int

    @property
    def intact(self) -> bool:
        return self.break_at is None


def verify(records, unsealed: int, outside) -> Verdict:
    """Walk one chain's sealed records in ``link`` order (``records``, an iterable) and
    check every link: the numbering, the previous hash and the record's own hash.

    ``outside(start)``: (how many, the first) of the scope's records that are in no chain
    and not waiting to be sealed, ``start`` being when the chain's first kept record was
    written (None: the chain is empty), since records older than that may predate the
    audit log.  The walk cannot see them: no link holds their hash."""
    prev_hash, expected, checked, late, last_seq, start = None, None, 0, [], None, None
    for doc in records:
        if start is None:
            start = doc["at"]
        why = None
        if expected is not None and doc.get("link") != expected:
            why = f"link {doc.get('link')} where {expected} was expected (a record was removed or added)"
        elif prev_hash is not None and doc.get("prev_hash") != prev_hash:
            why = "prev_hash is not the previous record's hash"
        elif doc.get("hash") != link_hash(doc.get("prev_hash") or "", doc):
            why = "the record's content does not match its hash (edited)"
        if why is not None:
            return Verdict(checked, _break(doc, why), late, unsealed, outside(start)[0])
        if last_seq is not None and doc["seq"] < last_seq:
            late.append(doc["_id"])
        last_seq = max(last_seq or 0, doc["seq"])
        # The oldest records may have expired (retention): the chain starts at the first kept.
        prev_hash, expected, checked = doc["hash"], doc["link"] + 1, checked + 1
    count, first = outside(start)
    if first is not None:
        return Verdict(checked, _break(first, _why_outside(first)), late, unsealed, count)
    return Verdict(checked, None, late, unsealed, count)


def _break(doc: dict, why: str) -> dict:
    return {"id": doc["_id"], "seq": doc.get("seq"), "link": doc.get("link"), "reason": why}


def _why_outside(doc: dict) -> str:
    if doc.get("sealed") is not None:
        return "marked sealed but not in this chain (inserted beside it, or its link removed)"
    return ("not sealed and not waiting to be sealed, yet written after the chain began "
            "(inserted to look older than the audit log)")


class Sealer:
    """Chains unsealed records, one sealer at a time across every process (a lease).

    The head of each chain (its last link and hash) is read from the records once, then
    carried from pass to pass while this sealer holds the lease without a gap: no other
    sealer can have extended a chain meanwhile.  A lapsed lease or a failed pass forgets
    them, and the next pass reads them again.

    So is the seq of the last record it sealed (``_floor``): the next pass reads only the
    records after it, not every unsealed record of the log again (the store's unsealed
    set is an index on MongoDB; on ``memory://`` it was a scan of the whole log every
    second).  Below the floor only a record written late can be unsealed, so a pass from
    the start of the log runs every ``full_pass`` seconds and seals those; the floor
    outlives that pass."""

    def __init__(self, store, clock, *, settle: float = 5.0, lease_seconds: float = 30.0, batch: int = 1000,
                 full_pass: float = 60.0):
        self._store = store
        self._clock = clock
        self._settle = timedelta(seconds=settle)
        self._lease = timedelta(seconds=lease_seconds)
        self._batch = batch
        self._full_pass = timedelta(seconds=full_pass)
        self._holder = new_id()
        self._heads: dict[str, tuple[int, str]] = {}
        self._held_until = None  # the end of the lease this sealer holds; None: not held
        self._floor: int | None = None  # every record up to this seq is sealed, but late ones
        self._full_pass_due = None

    def seal_once(self) -> int:
        """Seal what has settled, up to one batch; the number sealed (0 without the lease)."""
        now = self._clock()
        if not self._store.take_sealer_lease(self._holder, now, now + self._lease):
            self._held_until = None
            return 0
        if self._held_until is None or now >= self._held_until:
            # The lease lapsed (or was never held): another may have sealed since.
            self._heads, self._floor = {}, None
        self._held_until = now + self._lease
        full = self._floor is None or now >= self._full_pass_due
        if full:
            self._full_pass_due = now + self._full_pass
        try:
            records = self._store.settled(now - self._settle, self._batch, after=None if full else self._floor)
            sealed = self._seal(records)
        except BaseException:
            self._held_until = None  # a seal may or may not have landed: read the heads again
            raise
        if records:
            last = records[-1]["seq"]
            # A full pass cut short by the batch goes on from where it stopped; one that read
            # to the end keeps the floor (what it sealed below the floor was written late).
            self._floor = last if full and len(records) >= self._batch else max(self._floor or 0, last)
        return sealed

    def _seal(self, records) -> int:
        sealed = 0
        for doc in records:
            chain = chain_of(doc)
            if chain not in self._heads:
                head = self._store.chain_head(chain)
                self._heads[chain] = (head["link"], head["hash"]) if head else (0, GENESIS)
            link, prev_hash = self._heads[chain]
            digest = link_hash(prev_hash, doc)
            self._store.seal(doc["_id"], chain=chain, link=link + 1, prev_hash=prev_hash, hash_=digest)
            self._heads[chain] = (link + 1, digest)
            sealed += 1
        return sealed

    def run(self, stop, interval: float = 1.0) -> None:
        """Seal every ``interval`` seconds until ``stop`` (a threading.Event) is set."""
        while not stop.is_set():
            try:
                while self.seal_once() >= self._batch:
                    pass
            except Exception:
                log.exception("audit sealing failed; trying again")
                time.sleep(interval)
            stop.wait(interval)
