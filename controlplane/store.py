"""The one small layer over MongoDB.

``memory://`` gives mongomock inside the process (the embedded default: nothing
persists; ``controlplane.embedded``, imported only for it); ``mongodb://`` a real MongoDB
through pymongo.  Both are used through the
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

import logging
import time
from urllib.parse import parse_qsl, urlsplit

import pymongo
from pymongo import IndexModel, ReturnDocument
from pymongo.errors import (
    ConnectionFailure,
    DuplicateKeyError,  # also re-exported for stores
    OperationFailure,
)

from shared import tracing
from shared.config import EMBEDDED_STORE_MISSING, ConfigError
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


class StoreUnavailable(ServiceUnavailable, message="The data store does not answer. Try again in a few seconds."):
    """The store did not answer within its server selection timeout, or dropped the
    connection: 503, and the caller retries after ``retry_after`` seconds."""

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


# MongoDB's IndexOptionsConflict and IndexKeySpecsConflict: an index exists with these keys
# (or this name) and other options.
_INDEX_OPTIONS_CONFLICT = (85, 86)


class Store:
    def __init__(self, uri: str = "memory://"):
        self.uri = uri
        if uri == "memory://":
            try:
                from controlplane import embedded
            except ImportError:  # mongomock, the ``embedded`` extra, is not installed
                raise ConfigError(EMBEDDED_STORE_MISSING) from None
            self.client, self.db = embedded.connect("iamgate")
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
                try:
                    self.db[collection].create_indexes(list(models.values()))
                except OperationFailure as exc:
                    if exc.code not in _INDEX_OPTIONS_CONFLICT:
                        raise
                    self._retime_ttl_indexes(collection, models.values())
                    self.db[collection].create_indexes(list(models.values()))

    def _retime_ttl_indexes(self, collection: str, models) -> None:
        """A TTL index declared with another expiry than it was created with (a changed
        IAMGATE_AUDIT_RETENTION_DAYS): MongoDB refuses to create it again, and ``collMod``
        changes the expiry in place, without rebuilding the index."""
        for model in models:
            document = model.document
            if "expireAfterSeconds" in document:
                self.db.command("collMod", collection, index={
                    "keyPattern": dict(document["key"]), "expireAfterSeconds": document["expireAfterSeconds"]})

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
