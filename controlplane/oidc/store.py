"""MongoDB access of the OIDC provider.  Every collection is prefixed ``oidc_``, every
document carries ``app_id``, and every secret is stored as its SHA-256 digest.

- ``oidc_clients``: {_id (the client's id), app_id, client_id (globally unique: the
  token endpoint finds the application from it), secret_digest, previous_secret_digest +
  previous_secret_expires_at (the secret the last rotation replaced and the end of its
  grace; None when it had none), name, description, logo_url, redirect_uris,
  post_logout_redirect_uris, allowed_scopes, grant_types, token_endpoint_auth_method,
  backchannel_logout_uri, allowed_origins, connected_at (the first client credentials
  token), is_active, created_at, updated_at}.
- ``oidc_codes``: {_id: digest(code), app_id, client_id, user_id, session_id,
  redirect_uri, scopes, nonce, code_challenge, auth_time, amr (the hosted login's; None
  otherwise), created_at, expires_at, used_at, grant_id, replayed_at}; single use
  (``consume`` is one conditional write).
- ``oidc_refresh_tokens``: one document per grant (refresh-token family) {_id: grant
  id, app_id, client_id, user_id, session_id, scopes, auth_time, amr, token_digest (the live
  token), previous_digest + rotated_at (the token rotated last), spent_digests (every
  older one, for reuse detection), created_at, last_used_at, expires_at, revoked_at,
  revoked_reason}.
- ``oidc_consents``: one per (application, user, client) {_id, app_id, user_id,
  client_id, scopes, granted_at, withdrawn_at, connected_at}; ``connected_at`` is set
  by the first code exchange under the consent (``connection.created``).

- ``oidc_browser_sessions``: the hosted login's browser sessions {_id: digest(cookie
  token), app_id, user_id, session_id (the V1 session the login started), auth_time,
  amr (how the user signed in), auth_proven (False: a connection's sign-in that proved
  no time, which meets no ``max_age``), created_at, expires_at}; TTL at expiry.
- ``oidc_pending_requests``: authorization requests in progress in the hosted login
  {_id: digest(handle), app_id, client_id, params (the query as received), binding
  (digest of the browser's CSRF cookie), stage (login, link, mfa, passkey_offer, consent,
  done), user_id, session_id, auth_time, amr, mfa_challenge (SecretBox-encrypted),
  first_factor (the ``amr`` before the MFA step: ``pwd``, or ``fed`` after a connection),
  first_factor_auth_time (after a connection: its provider's ``auth_time``, the
  sign-in's once the MFA step is passed; None otherwise), link (a connection's pending
  link: its id SecretBox-encrypted, the account's email, the connection's display name,
  code_sent, auth_time (the provider's)), created_at, expires_at}; TTL at expiry.

Expiry is decided in code against the caller's ``now``; TTL indexes only reclaim space
(codes at once, refresh tokens when they expire).  Consents do not expire: the GDPR
export lists withdrawn ones too.
"""
from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument

from controlplane.collection import AppCollection, Collection

INDEXES = {
    "oidc_clients": [
        IndexModel([("client_id", ASCENDING)], unique=True),
        IndexModel([("app_id", ASCENDING), ("created_at", ASCENDING)]),
        IndexModel([("allowed_origins", ASCENDING)]),  # CORS: is an origin registered?
    ],
    "oidc_codes": [
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
        IndexModel([("app_id", ASCENDING), ("session_id", ASCENDING)]),
    ],
    "oidc_refresh_tokens": [
        IndexModel([("token_digest", ASCENDING)]),
        IndexModel([("previous_digest", ASCENDING)]),
        IndexModel([("spent_digests", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING)]),
        IndexModel([("app_id", ASCENDING), ("session_id", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
    "oidc_browser_sessions": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
    "oidc_pending_requests": [
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ],
    "oidc_consents": [
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING), ("client_id", ASCENDING)], unique=True),
    ],
}


class ClientStore(AppCollection):
    name, indexes = "oidc_clients", INDEXES

    def get(self, app_id: str, ref: str) -> dict | None:
        """The client whose id or client_id is ``ref``, in this application."""
        return self._docs.find_one({"app_id": app_id, "$or": [{"_id": ref}, {"client_id": ref}]})

    def by_client_id(self, client_id: str) -> dict | None:
        """Any application's client (the token endpoint learns the application from it)."""
        return self._docs.find_one({"client_id": client_id})

    def applications_with_origin(self, origin: str) -> list[str]:
        """The applications with an active client that lists ``origin`` (CORS): one
        indexed read, each application once."""
        return self._docs.distinct("app_id", {"allowed_origins": origin, "is_active": True})

    def replace_secret(self, app_id: str, doc_id: str, current_digest: str, changes: dict) -> dict | None:
        """``$set`` the changes of a secret rotation when the client's secret is still
        ``current_digest`` (the one the rotation read): of racing rotations one wins at a
        time, and none is lost.  The document after them, or None."""
        return self._docs.find_one_and_update({"_id": doc_id, "app_id": app_id, "secret_digest": current_digest},
                                              {"$set": changes}, return_document=ReturnDocument.AFTER)

    def mark_connected(self, client_id: str, now) -> bool:
        """Record the client's first client credentials token; True only for the first."""
        return self._docs.find_one_and_update({"client_id": client_id, "connected_at": None},
                                              {"$set": {"connected_at": now}}) is not None


class CodeStore(Collection):
    name, indexes = "oidc_codes", INDEXES

    def consume(self, code_digest: str, client_id: str, grant_id: str, now, *, with_verifier: bool) -> dict | None:
        """The one write that uses a code, and the one read of a code exchanged as it
        should be: only the first of racing exchanges gets the document back, and only
        when the code is this client's, unexpired and, for a request without a
        ``code_verifier``, issued without a challenge (so neither another client nor a
        request missing its verifier can burn it).  It also names the grant the exchange
        is about to create, so a replay can find and revoke it."""
        match = {"_id": code_digest, "client_id": client_id, "used_at": None, "expires_at": {"$gt": now}}
        if not with_verifier:
            match["code_challenge"] = None
        return self._docs.find_one_and_update(match, {"$set": {"used_at": now, "grant_id": grant_id}},
                                              return_document=ReturnDocument.AFTER)

    def delete_unused_for_session(self, app_id: str, user_id: str, session_id: str) -> None:
        """Drop the codes of one login session not exchanged yet (RP-initiated logout)."""
        self._docs.delete_many({"app_id": app_id, "user_id": user_id, "session_id": session_id, "used_at": None})

    def mark_replayed(self, code_digest: str, now) -> dict | None:
        return self._docs.find_one_and_update({"_id": code_digest}, {"$set": {"replayed_at": now}},
                                              return_document=ReturnDocument.AFTER)


class GrantStore(Collection):
    """The refresh-token families (``oidc_refresh_tokens``)."""

    name, indexes = "oidc_refresh_tokens", INDEXES

    @staticmethod
    def _live(client_id: str, presented: str, now) -> dict:
        return {"client_id": client_id, "token_digest": presented, "revoked_at": None, "expires_at": {"$gt": now}}

    def live_by_token(self, client_id: str, presented: str, now) -> dict | None:
        """The live grant of this client whose live token is ``presented``, unchanged: the
        refresh grant checks the request against it before ``rotate``.  Without
        ``spent_digests``, which grows by one a rotation and nothing here reads."""
        return self._docs.find_one(self._live(client_id, presented, now), {"spent_digests": 0})

    def rotate(self, grant: dict, presented: str, successor: str, now) -> dict | None:
        """The atomic swap: when ``presented`` is still the live token of ``grant`` (as
        ``live_by_token`` read it), ``successor`` becomes the live one and ``presented``
        the one rotated last (the one before it joins ``spent_digests``).  None when a
        racing refresh or a revocation came first.  Returned without ``spent_digests``,
        as ``live_by_token`` reads it: the list grows by one a rotation and the answer
        does not need it."""
        update = {"$set": {"token_digest": successor, "previous_digest": presented, "rotated_at": now,
                           "last_used_at": now}}
        if grant.get("previous_digest"):
            update["$push"] = {"spent_digests": grant["previous_digest"]}
        return self._docs.find_one_and_update({**self._live(grant["client_id"], presented, now), "_id": grant["_id"]},
                                              update, {"spent_digests": 0}, return_document=ReturnDocument.AFTER)

    def state(self, grant_id: str) -> dict | None:
        """What an access token's check needs of its grant: who it belongs to, whether it
        was revoked and when it expires."""
        return self._docs.find_one({"_id": grant_id},
                                   {"app_id": 1, "user_id": 1, "client_id": 1, "revoked_at": 1, "expires_at": 1})

    def by_token(self, token_digest: str) -> dict | None:
        """The grant whose live, rotated-last or spent token has this digest."""
        return self._docs.find_one({"$or": [{"token_digest": token_digest}, {"previous_digest": token_digest},
                                            {"spent_digests": token_digest}]})

    def touch(self, grant_id: str, now) -> None:
        self._docs.update_one({"_id": grant_id}, {"$set": {"last_used_at": now}})

    def revoke(self, grant_id: str, now, reason: str) -> dict | None:
        """Revoke one live grant; the grant as revoked, or None when it already was."""
        return self._docs.find_one_and_update({"_id": grant_id, "revoked_at": None},
                                              {"$set": {"revoked_at": now, "revoked_reason": reason}},
                                              return_document=ReturnDocument.AFTER)

    def live(self, app_id: str, now, **match) -> list[dict]:
        """Live grants (neither revoked nor expired) of the application matching ``match``
        (user_id, session_id...)."""
        return list(self._docs.find(_live_grants(app_id, now, match), {"client_id": 1, "user_id": 1, "session_id": 1}))

    def revoke_many(self, app_id: str, now, reason: str, **match) -> int:
        """Revoke the live grants ``live`` gives; an expired one is over already (the TTL
        index removes it within a minute or so) and stays as it ended."""
        result = self._docs.update_many(_live_grants(app_id, now, match),
                                        {"$set": {"revoked_at": now, "revoked_reason": reason}})
        return result.modified_count


def _live_grants(app_id: str, now, match: dict) -> dict:
    return {"app_id": app_id, "revoked_at": None, "expires_at": {"$gt": now}, **match}


class ConsentStore(Collection):
    name, indexes = "oidc_consents", INDEXES

    def get(self, app_id: str, user_id: str, client_id: str) -> dict | None:
        return self._docs.find_one({"app_id": app_id, "user_id": user_id, "client_id": client_id})

    def grant(self, app_id: str, user_id: str, client_id: str, scopes: list[str], consent_id: str, now) -> dict | None:
        """Record (or widen, or renew after a withdrawal) the user's consent to the client;
        the document as it was before, None when there was none.  One upsert against the
        unique (application, user, client) index."""
        return self._docs.find_one_and_update(
            {"app_id": app_id, "user_id": user_id, "client_id": client_id},
            {"$set": {"scopes": scopes, "granted_at": now, "withdrawn_at": None},
             "$setOnInsert": {"_id": consent_id, "connected_at": None}},
            upsert=True, return_document=ReturnDocument.BEFORE,
        )

    def mark_connected(self, app_id: str, user_id: str, client_id: str, now) -> bool:
        """True for the first code exchange under the consent in force (it creates the
        OAuth connection); False afterwards, or when the consent was withdrawn."""
        result = self._docs.update_one(
            {"app_id": app_id, "user_id": user_id, "client_id": client_id, "withdrawn_at": None, "connected_at": None},
            {"$set": {"connected_at": now}})
        return result.modified_count == 1

    def of_user(self, app_id: str, user_id: str) -> list[dict]:
        cursor = self._docs.find({"app_id": app_id, "user_id": user_id}) \
            .sort([("granted_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor)

    def live_clients(self, app_id: str, user_id: str) -> list[str]:
        cursor = self._docs.find({"app_id": app_id, "user_id": user_id, "withdrawn_at": None}, {"client_id": 1})
        return sorted({doc["client_id"] for doc in cursor if doc.get("client_id")})

    def withdraw_all(self, app_id: str, user_id: str, now) -> int:
        """Withdraw every consent still in force; how many this call withdrew."""
        result = self._docs.update_many({"app_id": app_id, "user_id": user_id, "withdrawn_at": None},
                                        {"$set": {"withdrawn_at": now, "connected_at": None}})
        return result.modified_count


class BrowserSessionStore(Collection):
    """``oidc_browser_sessions``: the hosted login's browser sessions."""

    name, indexes = "oidc_browser_sessions", INDEXES

    def delete(self, token_digest: str) -> bool:
        return self._docs.delete_one({"_id": token_digest}).deleted_count == 1

    def live_for_session(self, app_id: str, user_id: str, session_id: str, now) -> bool:
        """Whether a browser session signed in with the V1 session ``session_id`` is live."""
        return self._docs.find_one({"app_id": app_id, "user_id": user_id, "session_id": session_id,
                                    "expires_at": {"$gt": now}}, {"_id": 1}) is not None

    def delete_for_session(self, app_id: str, user_id: str, session_id: str) -> int:
        """End every browser session signed in with the V1 session ``session_id``."""
        return self._docs.delete_many({"app_id": app_id, "user_id": user_id, "session_id": session_id}).deleted_count


class PendingRequestStore(Collection):
    """``oidc_pending_requests``: authorization requests between the hosted pages."""

    name, indexes = "oidc_pending_requests", INDEXES

    def advance(self, handle_digest: str, stage: str, changes: dict, now) -> dict | None:
        """Move a live request out of ``stage`` with ``changes`` (which set the next
        stage) in one conditional write: of two racing posts of one page only the first
        gets the document back, so a handle yields at most one code."""
        return self._docs.find_one_and_update(
            {"_id": handle_digest, "stage": stage, "expires_at": {"$gt": now}}, {"$set": changes},
            return_document=ReturnDocument.AFTER)

    def delete(self, handle_digest: str) -> None:
        self._docs.delete_one({"_id": handle_digest})
