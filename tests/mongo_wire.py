"""A test-only MongoDB server: the MongoDB wire protocol in front of mongomock.

No MongoDB server can be installed on the machines the suite runs on (Debian packages
none; the PyPI and npm wrappers download ``mongod`` at run time), yet some tests need
one store shared by several processes (a webhook worker killed mid-delivery and a second
one taking over, tests/webhooks/test_worker_processes.py), and the pymongo code path of
``controlplane/store.py`` deserves the same tests as the embedded one.  This module
serves one mongomock client over TCP to any number of pymongo clients:

- OP_MSG only (https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/):
  pymongo 4.x speaks it from the handshake on (``hello_cmd`` in pymongo/pool_shared.py).
  Kind-1 sections (document sequences of batched writes) are folded into the command.
- A standalone server (no ``setName``): no change streams, no transactions, no
  retryable writes, as with a standalone ``mongod``.  It advertises sessions
  (``logicalSessionTimeoutMinutes``) so that the driver's implicit sessions work; ``lsid``
  and the other driver fields are accepted and ignored.
- One lock around every command, so each command is atomic as a single-document
  operation is on ``mongod`` (mongomock's read-modify-write is not thread-safe).
- The commands pymongo sends for the collection methods the code uses (the table
  ``COMMANDS``); any other command gets ``CommandNotFound`` (59), and what mongomock does
  not implement gets ``CommandNotSupported`` (115), so a gap shows up as a failure
  naming it rather than as a wrong answer.

    python -m tests.mongo_wire --port 27017        # a standalone server for a shell
    IAMGATE_TEST_MONGODB_URI=wire make test         # the suite over it (tests/mongodb.py)

What it is not: durable, fast (every command scans, as mongomock does), or a model of
MongoDB's concurrency beyond "one command at a time".
"""
from __future__ import annotations

import argparse
import itertools
import logging
import socket
import socketserver
import struct
import sys
import threading
from datetime import UTC, datetime

import bson
import mongomock
from bson.int64 import Int64
from pymongo import ReturnDocument

log = logging.getLogger("tests.mongo_wire")

OP_MSG = 2013
OP_QUERY = 2004
_CHECKSUM_PRESENT = 1
_MORE_TO_COME = 1 << 1
_HEADER = struct.Struct("<iiii")
MAX_WIRE_VERSION = 21  # MongoDB 7.0; pymongo 4.20 accepts 9 to 29


class CommandError(Exception):
    def __init__(self, code: int, name: str, message: str):
        super().__init__(message)
        self.code, self.name = code, name


class MongoWire:
    """The command layer: ``run(db, command)`` answers one command document."""

    def __init__(self):
        from controlplane.embedded import apply_shortcuts

        apply_shortcuts()  # the same shortcuts as the embedded store (an _id lookup reads one document)
        self.client = mongomock.MongoClient()
        self.lock = threading.Lock()
        self._cursors: dict[int, tuple[str, list]] = {}
        self._cursor_ids = itertools.count(1)
        self._connection_ids = itertools.count(1)
        self.commands_served = 0

    # --- dispatch

    def run(self, db: str, cmd: dict, connection_id: int = 0) -> dict:
        name = next(iter(cmd))
        handler = COMMANDS.get(name) or COMMANDS.get(name.lower())
        try:
            if handler is None:
                raise CommandError(59, "CommandNotFound", f"no such command: '{name}'")
            with self.lock:
                self.commands_served += 1
                reply = handler(self, db, cmd, connection_id)
        except CommandError as exc:
            return {"ok": 0.0, "errmsg": str(exc), "code": exc.code, "codeName": exc.name}
        except NotImplementedError as exc:
            return {"ok": 0.0, "errmsg": f"mongomock does not implement this: {exc}", "code": 115,
                    "codeName": "CommandNotSupported"}
        except mongomock.DuplicateKeyError as exc:
            return {"ok": 0.0, "errmsg": f"E11000 duplicate key error: {exc}", "code": 11000,
                    "codeName": "DuplicateKey"}
        except mongomock.OperationFailure as exc:
            return {"ok": 0.0, "errmsg": str(exc), "code": exc.code or 2, "codeName": "BadValue"}
        except (TypeError, ValueError, KeyError) as exc:
            log.warning("bad command %s: %r", name, exc)
            return {"ok": 0.0, "errmsg": f"{type(exc).__name__}: {exc}", "code": 2, "codeName": "BadValue"}
        reply.setdefault("ok", 1.0)
        return reply

    def _collection(self, db: str, cmd: dict, name: str):
        collection = cmd[name]
        if not isinstance(collection, str):
            raise CommandError(73, "InvalidNamespace", f"collection name must be a string, not {collection!r}")
        return self.client[db][collection]

    def _cursor_reply(self, ns: str, docs: list, batch_size: int | None, single_batch: bool = False) -> dict:
        if batch_size is None or single_batch or len(docs) <= batch_size:
            return {"cursor": {"id": Int64(0), "ns": ns, "firstBatch": docs}}
        cursor_id = next(self._cursor_ids)
        self._cursors[cursor_id] = (ns, docs[batch_size:])
        return {"cursor": {"id": Int64(cursor_id), "ns": ns, "firstBatch": docs[:batch_size]}}


# ------------------------------------------------------------------ commands


def _hello(server, db, cmd, connection_id):
    reply = {
        "isWritablePrimary": True, "ismaster": True, "helloOk": True,
        "maxBsonObjectSize": 16 * 1024 * 1024, "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "localTime": datetime.now(UTC), "logicalSessionTimeoutMinutes": 30,
        "connectionId": connection_id, "minWireVersion": 0, "maxWireVersion": MAX_WIRE_VERSION, "readOnly": False,
    }
    return reply


def _ping(server, db, cmd, connection_id):
    return {}


def _build_info(server, db, cmd, connection_id):
    return {"version": "7.0.0", "versionArray": [7, 0, 0, 0], "gitVersion": "mongomock", "bits": 64,
            "maxBsonObjectSize": 16 * 1024 * 1024, "storageEngines": ["mongomock"]}


def _end_sessions(server, db, cmd, connection_id):
    return {}


def _list_collections(server, db, cmd, connection_id):
    names = server.client[db].list_collection_names(filter=cmd.get("filter") or None)
    docs = [{"name": n, "type": "collection", "options": {}, "info": {"readOnly": False}} for n in sorted(names)]
    if cmd.get("nameOnly"):
        docs = [{"name": d["name"], "type": "collection"} for d in docs]
    return server._cursor_reply(f"{db}.$cmd.listCollections", docs, (cmd.get("cursor") or {}).get("batchSize"))


def _list_databases(server, db, cmd, connection_id):
    names = server.client.list_database_names()
    return {"databases": [{"name": n, "sizeOnDisk": 0, "empty": False} for n in names], "totalSize": 0}


def _create(server, db, cmd, connection_id):
    if cmd["create"] in server.client[db].list_collection_names():
        raise CommandError(48, "NamespaceExists", f"Collection {db}.{cmd['create']} already exists.")
    server.client[db].create_collection(cmd["create"])
    return {}


def _drop(server, db, cmd, connection_id):
    server.client[db].drop_collection(cmd["drop"])
    return {"ns": f"{db}.{cmd['drop']}", "nIndexesWas": 0}


def _drop_database(server, db, cmd, connection_id):
    server.client.drop_database(db)
    return {"dropped": db}


_INDEX_OPTIONS = ("unique", "sparse", "expireAfterSeconds", "partialFilterExpression")


def _create_indexes(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "createIndexes")
    before = len(collection.index_information())
    for spec in cmd["indexes"]:
        unknown = set(spec) - {"key", "name", "background", "v", *_INDEX_OPTIONS}
        if unknown:
            raise NotImplementedError(f"index options {sorted(unknown)}")
        options = {k: spec[k] for k in _INDEX_OPTIONS if k in spec}
        try:
            collection.create_index(list(spec["key"].items()), name=spec["name"], **options)
        except mongomock.DuplicateKeyError:
            raise
        except mongomock.OperationFailure as exc:
            raise CommandError(86, "IndexKeySpecsConflict", str(exc)) from exc
    after = len(collection.index_information())
    return {"numIndexesBefore": before, "numIndexesAfter": after, "createdCollectionAutomatically": before == 0}


def _list_indexes(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "listIndexes")
    if cmd["listIndexes"] not in server.client[db].list_collection_names():
        raise CommandError(26, "NamespaceNotFound", f"ns does not exist: {db}.{cmd['listIndexes']}")
    docs = list(collection.list_indexes())
    return server._cursor_reply(f"{db}.{cmd['listIndexes']}", docs, (cmd.get("cursor") or {}).get("batchSize"))


def _drop_indexes(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "dropIndexes")
    index = cmd["index"]
    if index == "*":
        collection.drop_indexes()
    else:
        try:
            collection.drop_index(index if isinstance(index, str) else list(index.items()))
        except mongomock.OperationFailure as exc:
            raise CommandError(27, "IndexNotFound", str(exc)) from exc
    return {}


def _write_error(index: int, exc: Exception) -> dict:
    if isinstance(exc, mongomock.DuplicateKeyError):
        return {"index": index, "code": 11000, "errmsg": f"E11000 duplicate key error: {exc}"}
    if isinstance(exc, NotImplementedError):
        return {"index": index, "code": 115, "errmsg": f"mongomock does not implement this: {exc}"}
    return {"index": index, "code": getattr(exc, "code", None) or 2, "errmsg": str(exc)}


_WRITE_ERRORS = (mongomock.OperationFailure, NotImplementedError, TypeError, ValueError)


def _insert(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "insert")
    n, errors = 0, []
    for i, doc in enumerate(cmd.get("documents", [])):
        try:
            collection.insert_one(doc)
            n += 1
        except _WRITE_ERRORS as exc:
            errors.append(_write_error(i, exc))
            if cmd.get("ordered", True):
                break
    return {"n": n, **({"writeErrors": errors} if errors else {})}


def _is_replacement(update) -> bool:
    return isinstance(update, dict) and not any(key.startswith("$") for key in update)


def _update(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "update")
    n = modified = 0
    upserted, errors = [], []
    for i, spec in enumerate(cmd.get("updates", [])):
        try:
            extra = {"array_filters": spec["arrayFilters"]} if spec.get("arrayFilters") else {}
            if _is_replacement(spec["u"]):
                result = collection.replace_one(spec["q"], spec["u"], upsert=spec.get("upsert", False))
            elif spec.get("multi"):
                result = collection.update_many(spec["q"], spec["u"], upsert=spec.get("upsert", False), **extra)
            else:
                result = collection.update_one(spec["q"], spec["u"], upsert=spec.get("upsert", False), **extra)
        except _WRITE_ERRORS as exc:
            errors.append(_write_error(i, exc))
            if cmd.get("ordered", True):
                break
            continue
        n += result.matched_count
        modified += result.modified_count
        if result.upserted_id is not None:
            n += 1
            upserted.append({"index": i, "_id": result.upserted_id})
    reply = {"n": n, "nModified": modified}
    if upserted:
        reply["upserted"] = upserted
    if errors:
        reply["writeErrors"] = errors
    return reply


def _delete(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "delete")
    n, errors = 0, []
    for i, spec in enumerate(cmd.get("deletes", [])):
        try:
            if spec.get("limit", 0) == 1:
                n += collection.delete_one(spec["q"]).deleted_count
            else:
                n += collection.delete_many(spec["q"]).deleted_count
        except _WRITE_ERRORS as exc:
            errors.append(_write_error(i, exc))
            if cmd.get("ordered", True):
                break
    return {"n": n, **({"writeErrors": errors} if errors else {})}


def _sort(spec) -> list | None:
    return list(spec.items()) if spec else None


def _find(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "find")
    limit = abs(cmd.get("limit", 0) or 0)
    docs = list(collection.find(cmd.get("filter") or {}, cmd.get("projection") or None, skip=cmd.get("skip", 0) or 0,
                                limit=limit, sort=_sort(cmd.get("sort"))))
    return server._cursor_reply(f"{db}.{cmd['find']}", docs, cmd.get("batchSize"), cmd.get("singleBatch", False))


def _get_more(server, db, cmd, connection_id):
    cursor_id = int(cmd["getMore"])
    if cursor_id not in server._cursors:
        raise CommandError(43, "CursorNotFound", f"cursor id {cursor_id} not found")
    ns, docs = server._cursors.pop(cursor_id)
    size = cmd.get("batchSize") or len(docs)
    batch, rest = docs[:size], docs[size:]
    if rest:
        server._cursors[cursor_id] = (ns, rest)
    return {"cursor": {"id": Int64(cursor_id if rest else 0), "ns": ns, "nextBatch": batch}}


def _kill_cursors(server, db, cmd, connection_id):
    killed, missing = [], []
    for cursor_id in cmd.get("cursors", []):
        (killed if server._cursors.pop(int(cursor_id), None) is not None else missing).append(cursor_id)
    return {"cursorsKilled": killed, "cursorsNotFound": missing, "cursorsAlive": [], "cursorsUnknown": []}


def _aggregate(server, db, cmd, connection_id):
    if not isinstance(cmd["aggregate"], str):
        raise NotImplementedError("database-level aggregate")
    collection = server._collection(db, cmd, "aggregate")
    docs = list(collection.aggregate(cmd["pipeline"]))
    return server._cursor_reply(f"{db}.{cmd['aggregate']}", docs, (cmd.get("cursor") or {}).get("batchSize"))


def _count(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "count")
    options = {k: cmd[k] for k in ("skip", "limit") if cmd.get(k)}
    return {"n": collection.count_documents(cmd.get("query") or {}, **options)}


def _distinct(server, db, cmd, connection_id):
    collection = server._collection(db, cmd, "distinct")
    return {"values": collection.distinct(cmd["key"], cmd.get("query") or None)}


def _find_and_modify(server, db, cmd, connection_id):
    name = next(iter(cmd))
    collection = server._collection(db, cmd, name)
    query, sort, fields = cmd.get("query") or {}, _sort(cmd.get("sort")), cmd.get("fields") or None
    if cmd.get("arrayFilters"):
        raise NotImplementedError("findAndModify with arrayFilters")
    if cmd.get("remove"):
        value = collection.find_one_and_delete(query, projection=fields, sort=sort)
        return {"value": value, "lastErrorObject": {"n": int(value is not None)}}
    update, upsert = cmd["update"], cmd.get("upsert", False)
    existed = collection.find_one(query, {"_id": 1}, sort=sort)
    returned = ReturnDocument.AFTER if cmd.get("new") else ReturnDocument.BEFORE
    if _is_replacement(update):
        value = collection.find_one_and_replace(query, update, projection=fields, sort=sort, upsert=upsert,
                                                return_document=returned)
    else:
        value = collection.find_one_and_update(query, update, projection=fields, sort=sort, upsert=upsert,
                                               return_document=returned)
    last = {"n": int(existed is not None or upsert), "updatedExisting": existed is not None}
    if existed is None and upsert:
        created = collection.find_one(query, {"_id": 1})
        if created is not None:
            last["upserted"] = created["_id"]
    return {"value": value, "lastErrorObject": last}


COMMANDS = {
    "hello": _hello, "ismaster": _hello, "isMaster": _hello,
    "ping": _ping, "buildinfo": _build_info, "buildInfo": _build_info, "endSessions": _end_sessions,
    "listCollections": _list_collections, "listDatabases": _list_databases, "create": _create,
    "drop": _drop, "dropDatabase": _drop_database,
    "createIndexes": _create_indexes, "listIndexes": _list_indexes, "dropIndexes": _drop_indexes,
    "insert": _insert, "update": _update, "delete": _delete,
    "find": _find, "getMore": _get_more, "killCursors": _kill_cursors, "aggregate": _aggregate,
    "count": _count, "distinct": _distinct, "findAndModify": _find_and_modify, "findandmodify": _find_and_modify,
}

# ------------------------------------------------------------------ the wire

_DRIVER_FIELDS = ("$db", "lsid", "$readPreference", "$clusterTime", "txnNumber", "autocommit", "startTransaction",
                  "readConcern", "writeConcern", "apiVersion", "apiStrict", "apiDeprecationErrors", "comment",
                  "maxTimeMS", "bypassDocumentValidation", "let", "backpressure")


def parse_op_msg(payload: bytes) -> tuple[int, dict]:
    """The flag bits and the command of an OP_MSG body (after the 16-byte header), with
    every kind-1 document sequence added to the command under its identifier."""
    (flags,) = struct.unpack_from("<I", payload, 0)
    end = len(payload) - (4 if flags & _CHECKSUM_PRESENT else 0)
    pos, command, sequences = 4, None, {}
    while pos < end:
        kind = payload[pos]
        pos += 1
        if kind == 0:
            (size,) = struct.unpack_from("<i", payload, pos)
            command = bson.decode(payload[pos:pos + size])
            pos += size
        elif kind == 1:
            (size,) = struct.unpack_from("<i", payload, pos)
            section_end = pos + size
            name_end = payload.index(b"\x00", pos + 4)
            identifier = payload[pos + 4:name_end].decode()
            sequences[identifier] = bson.decode_all(payload[name_end + 1:section_end])
            pos = section_end
        else:
            raise ValueError(f"unknown OP_MSG section kind {kind}")
    if command is None:
        raise ValueError("OP_MSG without a body section")
    command.update(sequences)
    return flags, command


def op_msg(request_id: int, response_to: int, doc: dict) -> bytes:
    body = struct.pack("<I", 0) + b"\x00" + bson.encode(doc)
    return _HEADER.pack(16 + len(body), request_id, response_to, OP_MSG) + body


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks, remaining = [], n
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


class _Connection(socketserver.BaseRequestHandler):
    server: WireServer

    def setup(self):
        self.server.clients.add(self.request)

    def finish(self):
        self.server.clients.discard(self.request)

    def handle(self):
        sock = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wire = self.server.wire
        connection_id = next(wire._connection_ids)
        replies = itertools.count(1)
        while True:
            header = _read_exactly(sock, 16)
            if header is None:
                return
            length, request_id, _, opcode = _HEADER.unpack(header)
            payload = _read_exactly(sock, length - 16)
            if payload is None:
                return
            if opcode != OP_MSG:
                log.warning("opcode %d is not supported; closing the connection", opcode)
                return
            try:
                flags, cmd = parse_op_msg(payload)
            except Exception as exc:  # a malformed message: tell the client, as mongod would
                reply = {"ok": 0.0, "errmsg": f"malformed OP_MSG: {exc}", "code": 9, "codeName": "FailedToParse"}
                flags = 0
            else:
                db = cmd.get("$db", "admin")
                for key in _DRIVER_FIELDS:
                    cmd.pop(key, None)
                reply = wire.run(db, cmd, connection_id)
            if flags & _MORE_TO_COME:
                continue  # an unacknowledged write (w=0): no reply
            sock.sendall(op_msg(next(replies), request_id, reply))


class WireServer(socketserver.ThreadingTCPServer):
    """A threaded TCP server on ``host:port`` (port 0: a free one); ``uri`` names it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0, wire: MongoWire | None = None):
        self.wire = wire or MongoWire()
        self.clients: set[socket.socket] = set()  # open client connections, closed by ``stop``
        super().__init__((host, port), _Connection)

    def handle_error(self, request, client_address):
        # A client (a killed worker process, a closed pool) that went away is not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def uri(self) -> str:
        host, port = self.server_address[:2]
        return f"mongodb://{host}:{port}/"

    def start(self) -> WireServer:
        threading.Thread(target=self.serve_forever, name="mongo-wire", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection: a MongoDB that went down."""
        self.shutdown()
        self.server_close()
        for sock in list(self.clients):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mongo_wire", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=27017)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    server = WireServer(args.host, args.port)
    print(f"serving {server.uri}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
