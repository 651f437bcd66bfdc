"""The provider keys an ID Token is checked with: the JWKS fetched from the connection's
pinned ``jwks_uri``, kept in MongoDB (``connection_jwks``) so every replica checks with
the same set and a sign-in does not fetch it each time.

Fetched on first use, again when a token names a key the set does not hold
(``idtoken.verify_id_token`` asks once per token: a rotation at the provider is picked up,
and a token with a made-up ``kid`` costs one fetch, never more), and again once the set
is ``LIFETIME`` old: a provider that withdraws a key (a leaked one) must be heard, or
tokens signed with it would pass for as long as the stored set lived.  A set the
provider no longer serves is never used past its lifetime: the sign-in fails with the
provider's error, as its token endpoint's would.
"""
from __future__ import annotations

from pymongo import ReturnDocument

from controlplane.collection import Collection
from controlplane.connections.discovery import fetch_jwks
from shared.timeutil import Clock, aware, seconds

INDEXES = {"connection_jwks": []}
LIFETIME = 3600  # seconds a fetched set is trusted before it is fetched again


class JwksCache(Collection):
    name, indexes = "connection_jwks", INDEXES

    def __init__(self, store, http, clock: Clock):
        super().__init__(store)
        self.http = http
        self.clock = clock

    def keys(self, connection) -> dict:
        """The stored set of the connection's current ``jwks_uri``, fetched when missing
        or older than ``LIFETIME``."""
        doc = self._docs.find_one({"_id": connection.id, "app_id": connection.application_id})
        if (doc is not None and doc.get("jwks_uri") == connection.endpoints.jwks_uri
                and self.clock() - aware(doc["fetched_at"]) < seconds(LIFETIME)):
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
