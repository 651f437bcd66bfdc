"""A store that refuses to answer until a file exists: a MongoDB that starts late.

Only the start-up tests use it, as the gunicorn app
``tests.deploy.late_store:create()``: the control plane's own ``create`` with this store.
It is the embedded store underneath, but not flagged as embedded, so the control plane
treats it as MongoDB (start-up in the background, retried).
"""
from __future__ import annotations

import os

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
