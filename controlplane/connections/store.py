"""MongoDB access for connections.

Collection ``connections``: one document per connection (``model.Connection.to_document``),
carrying ``app_id`` like every tenant document; every query filters by it.  The name is
unique per application (a unique index on ``(app_id, name)``).
"""
from __future__ import annotations

from datetime import datetime

from pymongo import ASCENDING, IndexModel
from pymongo.errors import DuplicateKeyError

from controlplane.collection import AppCollection
from controlplane.connections.errors import ConnectionNameTaken
from controlplane.connections.model import Connection

INDEXES = {
    "connections": [
        IndexModel([("app_id", ASCENDING), ("name", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("email_domains", ASCENDING)]),
    ],
}


class ConnectionStore(AppCollection):
    name, indexes = "connections", INDEXES

    def get(self, application_id: str, connection_id: str) -> Connection | None:
        doc = self._docs.find_one({"_id": connection_id, "app_id": application_id})
        return Connection.from_document(doc) if doc else None

    def list(self, application_id: str, *, active_only: bool = False) -> list[Connection]:
        """The application's connections in creation order."""
        query: dict = {"app_id": application_id}
        if active_only:
            query["is_active"] = True
        cursor = self._docs.find(query).sort([("created_at", ASCENDING), ("_id", ASCENDING)])
        return [Connection.from_document(doc) for doc in cursor]

    def count(self, application_id: str) -> int:
        return self._docs.count_documents({"app_id": application_id})

    def for_email_domain(self, application_id: str, domain: str) -> Connection | None:
        """The active connection that claims ``domain`` (lower-cased here), if any."""
        doc = self._docs.find_one({"app_id": application_id, "email_domains": domain.lower(), "is_active": True})
        return Connection.from_document(doc) if doc else None

    def insert(self, connection: Connection) -> None:
        try:
            self._docs.insert_one(connection.to_document())
        except DuplicateKeyError:
            raise ConnectionNameTaken(connection.name) from None

    def replace(self, connection: Connection, *, expected_updated_at: datetime) -> bool:
        """Write ``connection`` over the stored one if nobody changed it since it was read
        (compare-and-set on ``updated_at``); False on a race or when it is gone."""
        try:
            result = self._docs.replace_one({"_id": connection.id, "app_id": connection.application_id,
                                             "updated_at": expected_updated_at}, connection.to_document())
        except DuplicateKeyError:
            raise ConnectionNameTaken(connection.name) from None
        return result.matched_count == 1

    def delete(self, application_id: str, connection_id: str) -> bool:
        return self._docs.delete_one({"_id": connection_id, "app_id": application_id}).deleted_count == 1
