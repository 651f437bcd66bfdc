r"""A real MongoDB for the tests when one is available.

Set ``IAMGATE_TEST_MONGODB_URI`` to a replica set (change streams need one), e.g.

    docker run -d --name iamgate-mongo -p 27017:27017 mongo:7 --replSet rs0 --bind_ip_all
    docker exec iamgate-mongo mongosh --quiet \
        --eval 'rs.initiate({_id: "rs0", members: [{_id: 0, host: "127.0.0.1:27017"}]})'
    IAMGATE_TEST_MONGODB_URI='mongodb://127.0.0.1:27017/?replicaSet=rs0' make test

and the app fixtures (tests/conftest.py) and the e2e processes (tests/e2e/processes.py)
each get a database of their own on it, dropped afterwards. Unset, they use the embedded
store (``memory://``, mongomock). The pytest header says which.

``IAMGATE_TEST_MONGODB_URI=wire`` starts tests/mongo_wire.py (the wire protocol over
mongomock, a standalone server) inside the test process on a free port and uses it:
the pymongo code path, and several processes sharing one store, without a MongoDB.
``wire_server()`` starts one for a test that needs it whatever the variable says.
"""
from __future__ import annotations

import os
import secrets
from urllib.parse import urlsplit, urlunsplit

# Tests are not the application: the test store is chosen here, not in shared/config.py.
TEST_MONGODB_URI = os.environ.get("IAMGATE_TEST_MONGODB_URI") or None

_wire = None


def wire_server():
    """The in-process wire server (tests/mongo_wire.py), started on first use."""
    global _wire
    if _wire is None:
        from tests.mongo_wire import WireServer

        _wire = WireServer().start()
    return _wire


if TEST_MONGODB_URI == "wire":
    TEST_MONGODB_URI = wire_server().uri


def describe() -> str:
    if TEST_MONGODB_URI is None:
        return "store: embedded (memory://, mongomock); set IAMGATE_TEST_MONGODB_URI for a real MongoDB"
    if _wire is not None and TEST_MONGODB_URI == _wire.uri:
        return (f"store: tests/mongo_wire.py (mongomock over the wire protocol) at {_wire.uri} "
                "(IAMGATE_TEST_MONGODB_URI=wire)")
    parts = urlsplit(TEST_MONGODB_URI)
    return f"store: MongoDB at {parts.hostname}:{parts.port or 27017} (IAMGATE_TEST_MONGODB_URI)"


def fresh_database_uri(prefix: str = "iamgate_test") -> str | None:
    """The test server's URI naming a database of its own, or None without one."""
    if TEST_MONGODB_URI is None:
        return None
    parts = urlsplit(TEST_MONGODB_URI)
    return urlunsplit(parts._replace(path=f"/{prefix}_{secrets.token_hex(6)}"))


def shared_database_uri(prefix: str = "iamgate_test") -> str:
    """A database of its own that several processes can share: on the test MongoDB when
    there is one, else on the in-process wire server (``wire_server``)."""
    uri = fresh_database_uri(prefix)
    if uri is not None:
        return uri
    parts = urlsplit(wire_server().uri)
    return urlunsplit(parts._replace(path=f"/{prefix}_{secrets.token_hex(6)}"))


def drop_database(uri: str | None) -> None:
    if uri is None:
        return
    import pymongo

    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
    try:
        client.drop_database(client.get_default_database().name)
    finally:
        client.close()
