"""MongoDB access for connections.

Collections (every document carries ``app_id``; every query filters by it):

- ``connections``: one document per connection (``model.Connection.to_document``); the
  name is unique per application (a unique index on ``(app_id, name)``).
- ``connection_email_domains``: who holds each email domain, {_id: "<app_id>:<domain>",
  app_id, domain, connection_id, claimed_at}.  An active connection claims its domains
  here before it is written, so two writes racing for one domain cannot both win: the
  ``_id`` is unique.  The connection documents stay the truth: a claim whose connection
  does not hold the domain (a write that failed, or a process that died, between the
  claim and the write) is taken over once it is ``STALE_CLAIM`` old.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from pymongo import ASCENDING, IndexModel
from pymongo.errors import DuplicateKeyError

from controlplane.collection import AppCollection, insert_unique
from controlplane.connections.errors import ConnectionEmailDomainTaken, ConnectionNameTaken
from controlplane.connections.model import Connection

INDEXES = {
    "connections": [
        IndexModel([("app_id", ASCENDING), ("name", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("email_domains", ASCENDING)]),
    ],
    "connection_email_domains": [
        IndexModel([("app_id", ASCENDING), ("connection_id", ASCENDING)]),
    ],
}

# Longer than any write between a claim and its connection document (a discovery fetch
# is at most IAMGATE_CONNECTION_HTTP_TIMEOUT, at most 60 seconds).
STALE_CLAIM = timedelta(minutes=5)


class ConnectionStore(AppCollection):
    name, indexes = "connections", INDEXES

    def __init__(self, store):
        super().__init__(store)
        self._domains = store["connection_email_domains"]

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

    def is_active(self, application_id: str, connection_id: str) -> bool:
        return self._docs.count_documents({"_id": connection_id, "app_id": application_id, "is_active": True}) == 1

    def count(self, application_id: str) -> int:
        return self._docs.count_documents({"app_id": application_id})

    def for_email_domain(self, application_id: str, domain: str) -> Connection | None:
        """The active connection that claims ``domain`` (lower-cased here), if any."""
        doc = self._docs.find_one({"app_id": application_id, "email_domains": domain.lower(), "is_active": True})
        return Connection.from_document(doc) if doc else None

    def insert(self, connection: Connection) -> None:
        insert_unique(self._docs, connection.to_document(), lambda: ConnectionNameTaken(connection.name))

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

    # --- email domains

    def claim_domains(self, application_id: str, connection_id: str, domains, now) -> None:
        """Claim ``domains`` for the connection, all or none: 409
        CONNECTION_EMAIL_DOMAIN_TAKEN (and the claims of this call released) when another
        active connection holds one."""
        made: list[str] = []
        try:
            for domain in domains:
                if self._claim(application_id, connection_id, domain, now):
                    made.append(domain)
        except ConnectionEmailDomainTaken:
            self.release_domains(application_id, connection_id, made)
            raise

    def release_domains(self, application_id: str, connection_id: str, domains=None) -> None:
        """Give up the connection's claims of ``domains`` (None: all of them)."""
        query: dict = {"app_id": application_id, "connection_id": connection_id}
        if domains is not None:
            query["domain"] = {"$in": list(domains)}
        self._domains.delete_many(query)

    def _claim(self, application_id: str, connection_id: str, domain: str, now) -> bool:
        """True when this call made the claim, False when the connection held it already."""
        key = f"{application_id}:{domain}"
        claim = {"_id": key, "app_id": application_id, "domain": domain, "connection_id": connection_id,
                 "claimed_at": now}
        for _ in range(3):
            try:
                self._domains.insert_one(claim)
                return True
            except DuplicateKeyError:
                held = self._domains.find_one({"_id": key})
            if held is None:
                continue  # released meanwhile: claim it afresh
            if held["connection_id"] == connection_id:
                return False
            owner = self._docs.find_one({"_id": held["connection_id"], "app_id": application_id})
            backed = owner is not None and owner["is_active"] and domain in owner["email_domains"]
            if backed or held["claimed_at"] > now - STALE_CLAIM:
                raise ConnectionEmailDomainTaken(domain, owner["name"] if owner else "(being saved)")
            taken = self._domains.update_one({"_id": key, "connection_id": held["connection_id"]},
                                             {"$set": {"connection_id": connection_id, "claimed_at": now}})
            if taken.modified_count == 1:
                return True
        raise ConnectionEmailDomainTaken(domain, "(being saved)")
