"""Linked identities: a user's accounts at upstream providers (docs/connections.md,
"Sign-in").

An identity is ``(connection, issuer, sub)`` and nothing else: the email an upstream
sends is stored as seen, but never used to find an identity again.  A person whose
upstream email changes keeps the same identity and the same local user; a second
upstream account claiming the same email is a different identity, which ``linking``
judges.

Collection ``identities``: unique ``(app_id, connection_id, issuer, sub)``; the upstream
tokens of connections with ``store_tokens`` live in the same document, encrypted
(``upstream_tokens.py``).  Linking and unlinking emit ``connection.created`` and
``connection.revoked`` with ``data.kind: "upstream"``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane.abac.errors import AttributeKeyConflict, AttributeLimitReached
from controlplane.collection import AppCollection
from controlplane.connections import linking, mapping
from controlplane.connections.errors import (
    ConnectionCallbackInvalid,
    ConnectionEmailExists,
    ConnectionInactive,
    ConnectionStateInvalid,
    IdentityLastSignIn,
    IdentityNotFound,
)
from controlplane.connections.linking import PendingLinkStore
from controlplane.events import EventLog
from controlplane.roles.errors import RoleAlreadyAssigned, RoleNotFound
from controlplane.users import claim
from controlplane.users.directory import UserDirectory
from controlplane.users.errors import AccountSuspended, EmailAlreadyRegistered, UserNotFound
from shared.ids import is_uuid, new_id
from shared.stamps import stamped_since
from shared.timeutil import Clock, isoformat

log = logging.getLogger("iamgate.connections")

INDEXES = {
    "identities": [
        IndexModel([("app_id", ASCENDING), ("connection_id", ASCENDING), ("issuer", ASCENDING), ("sub", ASCENDING)],
                   unique=True),
        IndexModel([("app_id", ASCENDING), ("user_id", ASCENDING)]),
    ],
}


@dataclass(frozen=True, slots=True)
class UpstreamIdentity:
    """Who the provider says signed in, once every check of the callback passed."""

    issuer: str
    sub: str
    claims: dict
    profile: mapping.Profile


@dataclass(frozen=True, slots=True)
class Resolution:
    """The local account of a sign-in: ``user`` (with its ``identity``), or a pending link."""

    user: dict | None = None
    identity: dict | None = None
    pending: linking.PendingLink | None = None


class IdentityStore(AppCollection):
    name, indexes = "identities", INDEXES

    def by_subject(self, app_id: str, connection_id: str, issuer: str, sub: str) -> dict | None:
        return self._docs.find_one({"app_id": app_id, "connection_id": connection_id, "issuer": issuer, "sub": sub})

    def for_user(self, app_id: str, user_id: str) -> list[dict]:
        return list(self._docs.find({"app_id": app_id, "user_id": user_id}).sort([("created_at", ASCENDING),
                                                                                   ("_id", ASCENDING)]))

    def of_user(self, app_id: str, user_id: str, identity_id: str) -> dict | None:
        return self._docs.find_one({"_id": identity_id, "app_id": app_id, "user_id": user_id})

    def count_for_user(self, app_id: str, user_id: str) -> int:
        return self._docs.count_documents({"app_id": app_id, "user_id": user_id})

    def record_sign_in(self, app_id: str, identity_id: str, changes: dict) -> dict | None:
        return self._docs.find_one_and_update({"_id": identity_id, "app_id": app_id}, {"$set": changes},
                                              return_document=ReturnDocument.AFTER)

    def delete_of_user(self, app_id: str, user_id: str, identity_id: str) -> dict | None:
        """Remove the identity; the document removed (None when it was not there)."""
        return self._docs.find_one_and_delete({"_id": identity_id, "app_id": app_id, "user_id": user_id})

    def delete_for_user(self, app_id: str, user_id: str) -> None:
        self._docs.delete_many({"app_id": app_id, "user_id": user_id})

    def take_of_connection(self, app_id: str, connection_id: str) -> Iterator[dict]:
        """Remove the connection's identities one by one, each with its stored tokens,
        yielding each document removed: a removal that stops part way leaves whole
        identities, never half of one."""
        return self._take({"app_id": app_id, "connection_id": connection_id})

    def take_of_user(self, app_id: str, user_id: str) -> Iterator[dict]:
        """Remove the user's identities one by one, as ``take_of_connection``."""
        return self._take({"app_id": app_id, "user_id": user_id})

    def _take(self, match: dict) -> Iterator[dict]:
        while (doc := self._docs.find_one_and_delete(match)) is not None:
            yield doc

    def forget_tokens_of_connection(self, app_id: str, connection_id: str) -> None:
        """Drop the upstream tokens kept on the connection's identities."""
        self._docs.update_many({"app_id": app_id, "connection_id": connection_id, "tokens": {"$ne": None}},
                               {"$unset": {"tokens": ""}})

    def set_tokens(self, app_id: str, identity_id: str, tokens: dict | None, *, expected: str | None = None) -> bool:
        """Replace the stored tokens; with ``expected`` (the ciphertext read) only if no
        one replaced them since (one refresh wins)."""
        query = {"_id": identity_id, "app_id": app_id}
        if expected is not None:
            query["tokens.ciphertext"] = expected
        return self._docs.update_one(query, {"$set": {"tokens": tokens}}).modified_count == 1


def revoked(identity: dict, reason: str) -> dict:
    """The data of ``connection.revoked`` for an identity removed (docs/events.md)."""
    return {"kind": "upstream", "connection_id": identity["connection_id"], "identity_id": identity["_id"],
            "user_id": identity["user_id"], "reason": reason}


def serialize_identity(doc: dict) -> dict:
    return {"id": doc["_id"], "connection_id": doc["connection_id"], "issuer": doc["issuer"], "sub": doc["sub"],
            "email": doc.get("email"), "email_verified": bool(doc.get("email_verified")),
            "tokens_stored": bool(doc.get("tokens")), "created_at": isoformat(doc["created_at"]),
            "last_sign_in_at": isoformat(doc.get("last_sign_in_at"))}


def export_of_user(identities: IdentityStore, connections, app_id: str, user_id: str) -> list[dict]:
    """A user's linked identities for the GDPR export (docs/selfservice.md), oldest
    first: what identifies each and when it was used, with its connection's name; never
    the upstream tokens or the claims.  ``connections``: ``UpstreamConnectionService``."""
    names = {connection.id: connection.name for connection in connections.list(app_id)}
    return [{"id": doc["_id"], "connection_id": doc["connection_id"],
             "connection_name": names.get(doc["connection_id"]), "issuer": doc["issuer"], "sub": doc["sub"],
             "email": doc.get("email"),
             "email_verified": bool(doc.get("email_verified")), "linked_at": isoformat(doc["created_at"]),
             "last_sign_in_at": isoformat(doc.get("last_sign_in_at"))}
            for doc in identities.for_user(app_id, user_id)]


@dataclass(eq=False)
class IdentityService:
    """Finds or makes the local account of an upstream identity, applies the claim and
    role mapping, and lists and unlinks a user's identities."""

    identities: IdentityStore
    links: PendingLinkStore
    users: UserDirectory
    # ``create_external(app, *, email, name, email_verified, avatar_url)``: a JIT user,
    # counted against the tier limit like a registration (``RegistrationService``).
    create_user: Callable[..., dict]
    set_attribute: Callable[[str, str, str, object], dict]     # AbacService.set_attribute
    roles: object                                              # RoleService: resolve, assign
    passkey_count: Callable[[str, str], int]
    events: EventLog
    clock: Clock
    # ConnectionStore.is_active(app_id, connection_id): checked after a link is stored.
    connection_active: Callable[[str, str], bool]

    # ------------------------------------------------------------------ sign-in

    def resolve(self, app: dict, connection, upstream: UpstreamIdentity, *, binding: str,
                stored_tokens: dict | None) -> Resolution:
        """The local user of ``upstream``: the linked one, a linked existing account
        (``linking``), a new one (``jit``), or a pending link to prove.  ``stored_tokens``:
        the encrypted tokens to keep on the identity (None: keep none, and drop any kept
        while the connection stored tokens)."""
        app_id, now = app["_id"], self.clock()
        identity = self.identities.by_subject(app_id, connection.id, upstream.issuer, upstream.sub)
        if identity is not None:
            user = self._live_user(app_id, identity["user_id"])
            changes = {"email": upstream.profile.email, "email_verified": upstream.profile.email_verified,
                       "tokens": stored_tokens, "last_sign_in_at": now}
            identity = self.identities.record_sign_in(app_id, identity["_id"], changes)
            if identity is None:  # unlinked since it was found (by the user, or a hand-over)
                raise ConnectionCallbackInvalid("No account is linked to this identity any more; sign in again.",
                                                details={"reason": "no_account"})
            if connection.auto_update:
                user = self.apply_mapping(app, connection, user, upstream)
            return Resolution(user=user, identity=identity)
        email = upstream.profile.email
        if not email:
            raise ConnectionCallbackInvalid("The provider did not give an email address, which a new link needs.",
                                            details={"reason": "no_email"})
        local = self.users.by_email(app_id, email)
        if local is not None and local.get("status") == "deleted":
            raise ConnectionEmailExists(details={"email": email})  # a deleted user keeps its email
        decision = linking.decide(connection, upstream_email_verified=upstream.profile.email_verified,
                                  upstream_email_as_sent=upstream.profile.email_as_sent, local_user=local)
        if decision == linking.REFUSE:
            raise ConnectionEmailExists(details={"email": email})
        if decision == linking.VERIFY:
            pending = self.links.create(application_id=app_id, user_id=local["_id"], email=local["email"],
                                        connection_id=connection.id, binding=binding, now=now,
                                        identity=self._identity_fields(upstream, stored_tokens))
            return Resolution(pending=pending)
        if decision == linking.LINK:
            self._live_user(app_id, local["_id"])
            identity = self.link(app, connection.id, local["_id"], self._identity_fields(upstream, stored_tokens))
            if connection.auto_update:
                local = self.apply_mapping(app, connection, local, upstream)
            return Resolution(user=local, identity=identity)
        if not connection.jit:
            raise ConnectionCallbackInvalid("No account is linked to this identity, and this connection does not "
                                            "create accounts.", details={"reason": "no_account"})
        profile = upstream.profile
        # The upstream's word verifies the local email only when the connection is trusted:
        # otherwise a later trusted_email connection could merge on an address no one proved.
        try:
            user = self.create_user(app, email=email, name=profile.name or email.split("@")[0],
                                    email_verified=profile.email_verified and connection.trusted,
                                    avatar_url=profile.picture)
        except EmailAlreadyRegistered:  # registered between the lookup and the insert
            raise ConnectionEmailExists(details={"email": email}) from None
        identity = self.link(app, connection.id, user["_id"], self._identity_fields(upstream, stored_tokens))
        user = self.apply_mapping(app, connection, user, upstream, created=True)
        return Resolution(user=user, identity=identity)

    @staticmethod
    def _identity_fields(upstream: UpstreamIdentity, stored_tokens: dict | None) -> dict:
        return {"issuer": upstream.issuer, "sub": upstream.sub, "email": upstream.profile.email,
                "email_verified": upstream.profile.email_verified, "tokens": stored_tokens,
                "claims": upstream.claims}

    def link(self, app: dict, connection_id: str, user_id: str, fields: dict, *, holder: dict | None = None) -> dict:
        """Store the identity for the user and emit connection.created.  The unique
        index makes a second link of the same identity (a racing callback) fail here.
        ``holder``: the account as read before the person proved it; one handed over to
        its email's owner since (``users.claim``) is not linked (CONNECTION_STATE_INVALID)."""
        now = self.clock()
        doc = {"_id": new_id(), "app_id": app["_id"], "user_id": user_id, "connection_id": connection_id,
               "issuer": fields["issuer"], "sub": fields["sub"], "email": fields.get("email"),
               "email_verified": bool(fields.get("email_verified")), "tokens": fields.get("tokens"),
               "created_at": now, "last_sign_in_at": now}
        try:
            self.identities.insert(doc)
        except DuplicateKeyError:
            raise ConnectionCallbackInvalid("This identity was linked by another sign-in at the same moment; "
                                            "sign in again.", details={"reason": "already_linked"}) from None
        # Checked after the insert: a connection deleted (made inactive first) while this
        # sign-in was at the provider either sweeps this identity or is seen here.
        if not self.connection_active(app["_id"], connection_id):
            self.identities.delete_of_user(app["_id"], user_id, doc["_id"])
            raise ConnectionInactive(connection_id)
        # Checked after the insert too: a hand-over removes identities after its stamp.
        if holder is not None and stamped_since(holder, self.users.get(app["_id"], user_id)):
            self.identities.delete_of_user(app["_id"], user_id, doc["_id"])
            raise ConnectionStateInvalid("The account's password was reset, or the account handed over to its "
                                         "email's owner, meanwhile; sign in again.", details={"reason": "link"})
        self.events.emit(app["_id"], "connection.created", {
            "kind": "upstream", "connection_id": connection_id, "identity_id": doc["_id"], "user_id": user_id,
        }, subject={"user_id": user_id})
        return doc

    def apply_mapping(self, app: dict, connection, user: dict, upstream: UpstreamIdentity, *,
                      created: bool = False) -> dict:
        """The claim mapping (name, picture, ABAC attributes) and the role mapping; the
        user as it is after them.  Roles are added, never taken away: a role an
        administrator removed comes back only if the upstream still grants it.  The email
        is the local account's: a sign-in never rewrites it."""
        app_id, user_id, profile = app["_id"], user["_id"], upstream.profile
        if not created:
            changes = {name: value for name, value in (("name", profile.name), ("avatar_url", profile.picture))
                       if value is not None and user.get(name) != value}
            if changes:
                self.users.update_profile(app_id, user_id, changes, self.clock())
                self.events.emit(app_id, "user.updated", {"user_id": user_id, "changed": sorted(changes)},
                                 subject={"user_id": user_id})
                user = {**user, **changes}
        for key, value in profile.attributes.items():
            try:
                self.set_attribute(app_id, user_id, key, value)
            except (AttributeKeyConflict, AttributeLimitReached) as exc:
                log.warning("connection attribute not mapped: %s", exc.message,
                            extra={"app_id": app_id, "user_id": user_id, "connection_id": connection.id})
        for role_name in mapping.roles_granted(upstream.claims, connection.role_mapping):
            try:
                role = self.roles.resolve(app_id, role_name)
                self.roles.assign(app_id, user_id, {"role_id": role["_id"]})
            except RoleAlreadyAssigned:
                pass
            except RoleNotFound:
                log.warning("connection role mapping names an unknown role",
                            extra={"app_id": app_id, "connection_id": connection.id, "role": role_name})
        return user

    def _live_user(self, app_id: str, user_id: str) -> dict:
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") == "deleted":
            raise ConnectionCallbackInvalid("The account linked to this identity no longer exists.",
                                            details={"reason": "user_deleted"})
        if user.get("status") == "suspended":
            raise AccountSuspended()
        return user

    # ------------------------------------------------------------------ management

    def list(self, app_id: str, user_id: str) -> list[dict]:
        self._require_user(app_id, user_id)
        return [serialize_identity(doc) for doc in self.identities.for_user(app_id, user_id)]

    def get(self, app_id: str, user_id: str, identity_id: str) -> dict:
        identity = self.identities.of_user(app_id, user_id, identity_id) if is_uuid(identity_id) else None
        if identity is None:
            raise IdentityNotFound(identity_id)
        return identity

    def unlink(self, app: dict, user_id: str, identity_id: str) -> None:
        """Remove a linked identity while another way in remains (a password, a passkey
        or another identity): 409 IDENTITY_LAST_SIGN_IN otherwise.  Checked after the
        removal, so two identities unlinked at once cannot both go: the one that finds
        none left is put back."""
        app_id = app["_id"]
        user = self._require_user(app_id, user_id)
        self.get(app_id, user_id, identity_id)
        removed = self.identities.delete_of_user(app_id, user_id, identity_id)
        if removed is None:
            raise IdentityNotFound(identity_id)
        if not user.get("password_hash") and not self.passkey_count(app_id, user_id) \
                and not self.identities.count_for_user(app_id, user_id):
            self.identities.insert(removed)
            raise IdentityLastSignIn(identity_id)
        self.events.emit(app_id, "connection.revoked", revoked(removed, "unlinked"), subject={"user_id": user_id})

    def on_claim(self, app_id: str, user_id: str) -> None:
        """An unverified account handed to its mailbox's owner (``users.claim``): the
        identities linked to it are unlinked (connection.revoked, reason
        ``account_claimed``)."""
        for removed in self.identities.take_of_user(app_id, user_id):
            self.events.emit(app_id, "connection.revoked", revoked(removed, claim.REASON),
                             subject={"user_id": user_id})

    def on_event(self, event) -> None:
        """Listener of the change log: a deleted user's identities (and the upstream
        tokens kept with them) go with it; the deletion's own event says it."""
        if event.type == "user.deleted" and event.app_id and event.subject.get("user_id"):
            self.identities.delete_for_user(event.app_id, event.subject["user_id"])

    def _require_user(self, app_id: str, user_id: str) -> dict:
        user = self.users.get(app_id, user_id) if is_uuid(user_id) else None
        if user is None or user.get("status") == "deleted":
            raise UserNotFound(user_id)
        return user

