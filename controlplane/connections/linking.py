"""Linking an upstream identity to an existing account (docs/connections.md, "Linking
modes and their risks").

An identity is ``(connection, issuer, sub)``; an email is only a hint of which local
account the person might also own.  When a first sign-in's email is an existing user's,
the connection's ``linking`` decides:

- ``none``: refused (409 CONNECTION_EMAIL_EXISTS); the person signs in to the account and
  links from there, or uses another email upstream;
- ``verify``: a pending link (409 CONNECTION_LINK_REQUIRED) that the person completes by
  proving the existing account (its password, one of its passkeys, or a code mailed to
  its address); only then is the identity linked.  The code proves the mailbox, not the
  account: an unverified account is handed over first (``users.claim``);
- ``trusted_email``: linked at once ONLY when the connection is ``trusted``, the upstream
  says ``email_verified: true``, the address it sent is the local one up to case (its
  normalisation changed nothing else) AND the local account's email is verified;
  otherwise it behaves as ``verify``.  An upstream that lets anyone claim any email
  (nOAuth) fails the first two; a look-alike address that normalisation folds into
  another (U+212A KELVIN SIGN for "k") fails the third: the provider verified the
  mailbox it was given, not the one it is folded into; an account someone
  pre-registered with the victim's address and never verified fails the fourth, so it
  is never merged into.

A pending link is one ``connection_links`` document: single use (taken by an atomic
``find_one_and_delete`` on completion), bound to the browser binding of the sign-in that
made it, expiring after ``LINK_TTL_SECONDS``, with a bounded number of wrong answers.
"""
from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from pymongo import ASCENDING, IndexModel, ReturnDocument

from controlplane.collection import Collection
from shared.errors import RateLimited
from shared.ids import digest, random_token
from shared.timeutil import aware, seconds

CREATE, LINK, REFUSE, VERIFY = "create", "link", "refuse", "verify"
LINK_TTL_SECONDS = 600
CODE_TTL_SECONDS = 600
MAX_LINK_ATTEMPTS = 5
# Codes mailed per pending link: the mailbox is the existing account's, not the asker's.
MAX_LINK_CODES = 3

INDEXES = {
    "connection_links": [IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)],
}


def decide(connection, *, upstream_email_verified: bool, upstream_email_as_sent: bool,
           local_user: dict | None) -> str:
    """What a first sign-in through ``connection`` does about the local account that has
    the upstream email (``local_user``, None when no account has it).
    ``upstream_email_as_sent``: normalising the provider's address only lower-cased it
    (``mapping.Profile.email_as_sent``)."""
    if local_user is None:
        return CREATE
    if connection.linking == "none":
        return REFUSE
    if connection.linking == "trusted_email" and connection.trusted and upstream_email_verified \
            and upstream_email_as_sent and local_user.get("email_verified") is True:
        return LINK
    return VERIFY


@dataclass(frozen=True, slots=True)
class PendingLink:
    """A link waiting for proof: ``link_id`` is the secret handle the person holds."""

    link_id: str
    user_id: str
    email: str


class PendingLinkStore(Collection):
    """Pending links by the digest of their handle."""

    name, indexes = "connection_links", INDEXES

    def create(self, *, application_id: str, user_id: str, email: str, connection_id: str, identity: dict,
               binding: str, now) -> PendingLink:
        """``identity``: what linking will store (issuer, sub, the upstream profile and
        tokens, already encrypted)."""
        link_id = random_token()
        self._docs.insert_one({
            "_id": digest(link_id), "app_id": application_id, "user_id": user_id, "email": email,
            "connection_id": connection_id, "identity": identity, "binding_hash": digest(binding),
            "code_digest": None, "code_expires_at": None, "codes_sent": 0, "attempts": 0,
            "created_at": now, "expires_at": now + seconds(LINK_TTL_SECONDS),
        })
        return PendingLink(link_id=link_id, user_id=user_id, email=email)

    def live(self, application_id: str, link_id: str, binding: str, now) -> dict | None:
        """The pending link of this handle and binding, while it lasts and has attempts left."""
        doc = self._docs.find_one({"_id": digest(link_id), "app_id": application_id})
        if doc is None or aware(doc["expires_at"]) <= now or doc["attempts"] >= MAX_LINK_ATTEMPTS \
                or not hmac.compare_digest(doc["binding_hash"], digest(binding)):
            return None
        return doc

    def set_code(self, application_id: str, link_id: str, now) -> str | None:
        """A fresh 6-digit code for the link (a new one replaces the last); None once
        ``MAX_LINK_CODES`` were sent for it."""
        code = f"{secrets.randbelow(10 ** 6):06d}"
        result = self._docs.update_one(
            {"_id": digest(link_id), "app_id": application_id, "codes_sent": {"$lt": MAX_LINK_CODES}},
            {"$set": {"code_digest": digest(code), "code_expires_at": now + seconds(CODE_TTL_SECONDS)},
             "$inc": {"codes_sent": 1}})
        return code if result.modified_count == 1 else None

    def count_attempt(self, application_id: str, link_id: str, now) -> dict | None:
        """Count one answer before it is checked (parallel guesses cannot exceed the
        bound); the link as it is now, or None once it is spent or expired."""
        return self._docs.find_one_and_update(
            {"_id": digest(link_id), "app_id": application_id, "expires_at": {"$gt": now},
             "attempts": {"$lt": MAX_LINK_ATTEMPTS}},
            {"$inc": {"attempts": 1}}, return_document=ReturnDocument.AFTER)

    def delete_for_connection(self, application_id: str, connection_id: str) -> None:
        self._docs.delete_many({"app_id": application_id, "connection_id": connection_id})

    def forget_tokens_of_connection(self, application_id: str, connection_id: str) -> None:
        """Drop the upstream tokens the connection's pending links would store."""
        self._docs.update_many({"app_id": application_id, "connection_id": connection_id},
                               {"$unset": {"identity.tokens": ""}})

    def take(self, application_id: str, link_id: str) -> dict | None:
        """Remove the link: the one completion that wins."""
        return self._docs.find_one_and_delete({"_id": digest(link_id), "app_id": application_id})


class LinkCodesLimited(RateLimited, message="Enough codes were sent for this link; use the last one, or sign in "
                                             "again."):
    """More codes asked for one pending link than ``MAX_LINK_CODES``."""


def code_matches(link: dict, code: str, now) -> bool:
    expires = link.get("code_expires_at")
    return bool(link.get("code_digest")) and expires is not None and aware(expires) > now \
        and hmac.compare_digest(link["code_digest"], digest(code))
