"""The provider keys an ID Token is checked with: the JWKS fetched from the connection's
pinned ``jwks_uri``, kept in MongoDB (``connection_jwks``) so every replica checks with
the same set and a sign-in does not fetch it each time.

Fetched on first use and again only when a token names a key the set does not hold
(``idtoken.verify_id_token`` asks once per token): a rotation at the provider is picked up,
and a token with a made-up ``kid`` costs one fetch, never more.
"""
from __future__ import annotations

from pymongo import ReturnDocument

from controlplane.collection import Collection
from controlplane.connections.discovery import fetch_jwks
from shared.timeutil import Clock

INDEXES = {"connection_jwks": []}


class JwksCache(Collection):
    name, indexes = "connection_jwks", INDEXES

    def __init__(self, store, http, clock: Clock):
        super().__init__(store)
        self.http = http
        self.clock = clock

    def keys(self, connection) -> dict:
        """The stored set of the connection's current ``jwks_uri``, fetched when missing."""
        doc = self._docs.find_one({"_id": connection.id, "app_id": connection.application_id})
        if doc is not None and doc.get("jwks_uri") == connection.endpoints.jwks_uri:
            return doc["jwks"]
        return self.refresh(connection)

    def refresh(self, connection) -> dict:
        """Fetch the set again and keep it (raises the provider error when it fails)."""
        jwks = fetch_jwks(self.http, connection.endpoints.jwks_uri)
        self._docs.find_one_and_update(
            {"_id": connection.id},
            {"$set": {"app_id": connection.application_id, "jwks_uri": connection.endpoints.jwks_uri,
                      "jwks": jwks, "fetched_at": self.clock()}},
            upsert=True, return_document=ReturnDocument.AFTER)
        return jwks
