"""A MongoDB that starts late, two ways, for the start-up tests.

``LateStore``: a store that refuses to answer until a file exists, as the gunicorn app
``tests.deploy.late_store:create()`` (the control plane's own ``create`` with this store).
It is the embedded store underneath, but not flagged as embedded, so the control plane
treats it as MongoDB (start-up in the background, retried).

``LateMongoDB``: a real port for processes that build their own store from
``IAMGATE_MONGODB_URI`` (the webhook worker, ``keys rotate``, the launcher's processes):
closed at first, so pymongo's server selection fails as against a MongoDB still starting,
until ``open()`` starts tests/mongo_wire.py on it.
"""
from __future__ import annotations

import os
import secrets

from pymongo.errors import ServerSelectionTimeoutError

from controlplane.store import Store

GATE_VARIABLE = "LATE_STORE_GATE"  # path of the file whose existence means "MongoDB is up"


class LateStore(Store):
    def __init__(self, gate: str):
        super().__init__("memory://")
        self.uri = "mongodb://late.invalid/iamgate"
        self.gate = gate

    def _refuse_until_up(self):
        if not os.path.exists(self.gate):
            raise ServerSelectionTimeoutError("late.invalid:27017: [Errno 111] Connection refused")

    def ensure_indexes(self) -> None:
        self._refuse_until_up()
        super().ensure_indexes()

    def ping(self) -> bool:
        if not os.path.exists(self.gate):
            return False
        return super().ping()


def create():
    from controlplane import wsgi

    return wsgi.create(store=LateStore(os.environ[GATE_VARIABLE]))


class LateMongoDB:
    def __init__(self):
        from tests.e2e.processes import free_port

        self.port = free_port()
        self.uri = f"mongodb://127.0.0.1:{self.port}/iamgate_late_{secrets.token_hex(4)}"
        self.server = None

    def open(self) -> None:
        from tests.mongo_wire import WireServer

        self.server = WireServer(port=self.port).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
