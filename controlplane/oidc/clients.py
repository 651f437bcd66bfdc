"""OIDC clients: the spec's "OIDC client management" (V1/oidc/clients, oidc:manage) and
client authentication at the token, revocation and introspection endpoints.

- ``client_id`` is random and globally unique (the token endpoint learns the
  application from it); the secret is random, shown once, stored as its SHA-256 digest.
- PUT replaces the lists it is given; DELETE removes the client.  Tokens issued to it
  stay valid until they expire (spec); its refresh tokens can no longer be redeemed,
  because nobody can authenticate as a deleted client.
- An inactive client fails authorize with invalid_client (spec, states table) and
  cannot authenticate at the token endpoint either.
- ``token_endpoint_auth_method`` is set at registration and never changes.  A public
  client (``none``, RFC 6749 2.1) gets no secret and names itself with ``client_id``
  alone at the token and revocation endpoints; PKCE binds its codes to the app that
  asked for them, and it may not use client_credentials (nothing would authenticate it).
- ``grant_types`` are the grants the token endpoint lets the client use;
  ``client_credentials`` only for a confidential client.
- ``rotate-secret`` replaces a confidential client's secret (the new one shown once);
  the one it replaces goes on authenticating the client for the grace the caller gives
  (``previous_secret_valid_for``, 0 to 7 days; 0: it stops at once), so a deployment can
  roll over without downtime.  Only the secret replaced last is kept: a second rotation
  ends the first one's grace.
- ``backchannel_logout_uri`` must pass ``backchannel.uri_problem`` (https, no fragment,
  the webhook target rules), at registration and at every update that sets it.
- The token endpoint reads a client from a per-worker copy (``controlplane.lookup_cache``):
  every change is an ``oidc_clients.changed`` event, which drops the copy in this process
  before the change's response is sent and in every other worker at its change-log
  tailer's next poll; every copy expires after ``CLIENT_CACHE_TTL`` whatever happens.
"""
from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from controlplane.audit.changes import changes, created
from controlplane.audit.context import act_as, actor
from controlplane.events import EventLog
from controlplane.lookup_cache import LookupCache
from controlplane.oidc import backchannel
from controlplane.oidc.errors import ClientIsPublic, ClientNotFound, InvalidRequest
from controlplane.oidc.schemas import DEFAULT_GRANT_TYPES, NO_CLIENT_AUTH, is_private_use
from controlplane.oidc.store import ClientStore
from controlplane.webhooks.targets import TargetPolicy
from shared.errors import Conflict, ValidationFailed
from shared.ids import digest, new_id, random_token
from shared.timeutil import Clock, aware, isoformat, seconds, seconds_of

CLIENT_ID_PREFIX = "oc_"

# How long a worker may authenticate a client from its copy: a change reaches every
# worker through the change log (oidc_clients.changed) well before.
CLIENT_CACHE_TTL = 2.0
CLIENT_CACHE_SIZE = 10_000
# Racing rotations of one client take turns (each reads the secret it replaces); past
# this many lost turns the caller is told to retry.
ROTATION_ATTEMPTS = 3


def serialize_client(client: dict, secret: str | None = None) -> dict:
    """The spec's OIDC client, plus post_logout_redirect_uris, previous_secret_expires_at
    and updated_at; the secret (``client_secret``) only in the create and rotate responses."""
    out = {
        "id": client["_id"],
        "client_id": client["client_id"],
        "name": client["name"],
        "description": client.get("description"),
        "logo_url": client.get("logo_url"),
        "redirect_uris": list(client.get("redirect_uris") or []),
        "post_logout_redirect_uris": list(client.get("post_logout_redirect_uris") or []),
        "allowed_scopes": list(client.get("allowed_scopes") or []),
        "require_pkce": client.get("require_pkce") is not False,
        "grant_types": grant_types(client),
        "token_endpoint_auth_method": client.get("token_endpoint_auth_method") or "client_secret_basic",
        "backchannel_logout_uri": client.get("backchannel_logout_uri"),
        "allowed_origins": list(client.get("allowed_origins") or []),
        "is_active": bool(client.get("is_active")),
        "previous_secret_expires_at": isoformat(client.get("previous_secret_expires_at")),
        "created_at": isoformat(client["created_at"]),
        "updated_at": isoformat(client.get("updated_at") or client["created_at"]),
    }
    return out if secret is None else {**out, "client_secret": secret}


def is_public(client: dict) -> bool:
    """RFC 6749 2.1: the client cannot keep a secret (token_endpoint_auth_method none)."""
    return client.get("token_endpoint_auth_method") == NO_CLIENT_AUTH


def grant_types(client: dict) -> list[str]:
    """The grant types the client may use (clients registered before the field: the
    code and refresh grants)."""
    return list(client.get("grant_types") or DEFAULT_GRANT_TYPES)


def scopes_allowed(client: dict) -> set[str]:
    """The scopes the client may be granted: its ``allowed_scopes``, and
    ``offline_access`` always (discovery advertises it)."""
    return set(client.get("allowed_scopes") or ()) | {"offline_access"}


def _check_client_type(public: bool, values: dict) -> None:
    """What only a public client, or only a confidential one, may register."""
    if public and values.get("require_pkce") is False:
        # RFC 9700 2.1.1: PKCE is what binds a public client's code to the app that asked.
        raise ValidationFailed({"require_pkce": "a public client (token_endpoint_auth_method none) always "
                                                "uses PKCE"})
    if public and "client_credentials" in (values.get("grant_types") or ()):
        raise ValidationFailed({"grant_types": "client_credentials needs a confidential client "
                                               "(token_endpoint_auth_method other than none)"})
    for field in ("redirect_uris", "post_logout_redirect_uris"):
        if not public and any(is_private_use(uri) for uri in values.get(field) or ()):
            # RFC 8252 8.6: any app can claim a private-use scheme, so it proves nothing.
            raise ValidationFailed({field: "private-use scheme redirect URIs are for public clients "
                                           "(token_endpoint_auth_method none)"})


@dataclass(eq=False)
class ClientService:
    """Registration and authentication of an application's OIDC clients; a change is an
    ``oidc_clients.changed`` event, audited as ``oidc_client.*`` with the fields changed,
    never the secret."""

    store: ClientStore
    clock: Clock
    targets: TargetPolicy  # the webhook target rules, which a backchannel_logout_uri must pass
    events: EventLog
    # The live application of an id, or None (``ApplicationService.live``): a client of an
    # application being deleted (its purge may run late, or be cut short) gets nothing.
    live_application: Callable[[str], dict | None]

    def __post_init__(self):
        self._by_client_id = LookupCache(ttl=CLIENT_CACHE_TTL, maxsize=CLIENT_CACHE_SIZE,
                                         timer=seconds_of(self.clock))

    def apply_event(self, event) -> None:
        """Change-log consumer (this process's events and the tailer's): a changed or
        deleted client, or every client of a deleted application, leaves the cache."""
        if event.type == "oidc_clients.changed":
            self._by_client_id.drop(event.data.get("client_id"))
        elif event.type == "application.deleted":
            self._by_client_id.drop_where(lambda client: client["app_id"] == event.app_id)

    # ------------------------------------------------------------------ management

    def create(self, app_id: str, values: dict) -> tuple[dict, str | None]:
        """A new active client and its secret (returned this once; None for a public client)."""
        public = values.get("token_endpoint_auth_method") == NO_CLIENT_AUTH
        _check_client_type(public, values)
        self._check_backchannel_uri(values)
        secret, now = (None if public else random_token(32)), self.clock()
        client = {
            "_id": new_id(), "app_id": app_id, "client_id": CLIENT_ID_PREFIX + random_token(18),
            "secret_digest": None if public else digest(secret), **values, "is_active": True,
            "created_at": now, "updated_at": now,
        }
        self.store.insert(client)
        self._record("created", client, created(client, values))
        return client, secret

    def _check_backchannel_uri(self, values: dict) -> None:
        uri = values.get("backchannel_logout_uri")
        problem = None if uri is None else backchannel.uri_problem(uri, self.targets)
        if problem is not None:
            raise ValidationFailed({"backchannel_logout_uri": problem})

    def list(self, app_id: str) -> list[dict]:
        return self.store.list(app_id)

    def get(self, app_id: str, ref: str) -> dict:
        """The client whose id (or client_id) is ``ref``; 404 OIDC_CLIENT_NOT_FOUND."""
        client = self.store.get(app_id, ref)
        if client is None:
            raise ClientNotFound(ref)
        return client

    def update(self, app_id: str, ref: str, values: dict) -> dict:
        """Set the fields given; lists replace the stored ones.  404 OIDC_CLIENT_NOT_FOUND."""
        client = self.get(app_id, ref)
        _check_client_type(is_public(client), values)
        self._check_backchannel_uri(values)
        updated = self.store.update(app_id, client["_id"], {**values, "updated_at": self.clock()})
        if updated is None:
            raise ClientNotFound(ref)
        self._record("updated", updated, changes(client, updated, values))
        return updated

    def delete(self, app_id: str, ref: str) -> None:
        """Remove the client; tokens already issued stay valid.  404 OIDC_CLIENT_NOT_FOUND."""
        client = self.get(app_id, ref)
        if not self.store.delete(app_id, client["_id"]):
            raise ClientNotFound(ref)
        self._record("deleted", client, {})

    def rotate_secret(self, app_id: str, ref: str, previous_secret_valid_for: int = 0) -> tuple[dict, str]:
        """A new secret for a confidential client, returned this once; the secret it
        replaces authenticates the client for ``previous_secret_valid_for`` more seconds
        (0: it stops at once), and one a rotation before replaced stops.  404
        OIDC_CLIENT_NOT_FOUND, 409 OIDC_CLIENT_PUBLIC (no secret to rotate)."""
        secret = random_token(32)
        for _ in range(ROTATION_ATTEMPTS):
            client = self.get(app_id, ref)
            if is_public(client):
                raise ClientIsPublic(client["client_id"])
            now, kept = self.clock(), previous_secret_valid_for > 0
            updated = self.store.replace_secret(app_id, client["_id"], client["secret_digest"], {
                "secret_digest": digest(secret),
                "previous_secret_digest": client["secret_digest"] if kept else None,
                "previous_secret_expires_at": now + seconds(previous_secret_valid_for) if kept else None,
                "updated_at": now,
            })
            if updated is not None:
                self._record("secret_rotated", updated, {"fields": ["client_secret"],
                                                         "previous_secret_valid_for": previous_secret_valid_for})
                return updated, secret
        raise Conflict()

    def _record(self, action: str, client: dict, data: dict) -> None:
        """The change's event (its audit record is ``oidc_client.<action>``); this
        worker's copy of the client is dropped by it before the response is sent."""
        self.events.emit(client["app_id"], "oidc_clients.changed",
                         {"client_id": client["client_id"], "action": action, **data},
                         target=actor("client", client["client_id"], client.get("name")))

    # ------------------------------------------------------------------ the OAuth endpoints

    def active(self, client_id: str | None) -> dict | None:
        """The active client with this client_id, in any live application, or None
        (through the per-worker copies of clients and applications; the document is
        shared: callers must not modify it)."""
        if not client_id:
            return None
        client = self._by_client_id.get(client_id, lambda: self.store.by_client_id(client_id))
        if client is None or not client.get("is_active") or self.live_application(client["app_id"]) is None:
            return None
        return client

    def by_client_id(self, client_id: str) -> dict | None:
        """The client with this client_id, active or not, in any application."""
        return self.store.by_client_id(client_id)

    def origin_registered(self, origin: str) -> bool:
        """CORS: an active client of a live application lists ``origin`` in its
        allowed_origins.  A client of an application being deleted authenticates nowhere
        (``active``), so it opens no origin either; whichever other application lists the
        origin still does.  The applications are read through their per-worker copy
        (``live_application``), as for every request, so a preflight costs one read."""
        return any(self.live_application(app_id) is not None
                   for app_id in self.store.applications_with_origin(origin))

    def mark_connected(self, client: dict) -> bool:
        """The client's first client credentials token (its connection is created).  A
        client read with ``connected_at`` set had its first before: no write, which
        would change nothing."""
        if client.get("connected_at") is not None:
            return False
        first = self.store.mark_connected(client["client_id"], self.clock())
        self._by_client_id.drop(client["client_id"])  # the next read carries connected_at
        return first

    def authenticate_request(self, params: dict, basic: tuple[str, str] | None, *, failure: type,
                             missing: type = InvalidRequest, public: bool = False) -> dict:
        """RFC 6749 2.3.1: the client authenticated by ``client_secret_basic`` (``basic``,
        from the Authorization header) or ``client_secret_post`` (``params``), never both
        (2.3).  Raises ``failure`` for a wrong secret or an unknown or inactive client, and
        ``missing`` for a request without a client id and secret (RFC 6749 5.2 makes that
        ``invalid_client``; the token endpoint, whose client_id and client_secret the
        interface specification lists as required fields, keeps ``invalid_request``).
        Where ``public``, a public client names itself by ``client_id`` alone (3.2.1)."""
        if public and basic is None and params.get("client_secret") is None:
            client = self.active(params.get("client_id"))
            if client is not None and is_public(client):
                act_as(actor("client", client["client_id"]))
                return client
        if basic is not None:
            if params.get("client_secret") is not None:
                raise InvalidRequest("Use client_secret_basic or client_secret_post, not both.")
            if params.get("client_id") not in (None, basic[0]):
                raise InvalidRequest("client_id differs from the authenticated client.")
            client_id, secret = basic
        else:
            client_id, secret = params.get("client_id"), params.get("client_secret")
        if not client_id or not secret:
            raise missing("Client authentication is required (client_secret_basic or client_secret_post).")
        client = self.authenticate(client_id, secret)
        if client is None:
            raise failure("Invalid client credentials.")
        act_as(actor("client", client["client_id"]))  # what the request records, it records as the client's
        return client

    def authenticate(self, client_id: str | None, secret: str | None) -> dict | None:
        """RFC 6749 2.3.1: the active client whose secret this is, or None: its current
        secret, or the one its last rotation replaced until ``previous_secret_expires_at``.
        Both digest comparisons are made, constant-time, whatever the first finds; an
        unknown client costs the same digests."""
        client = self.active(client_id)
        client = None if client is not None and is_public(client) else client
        presented = digest(secret or "")
        current = client["secret_digest"] if client else digest("")
        previous = client.get("previous_secret_digest") if client else None
        expires = client.get("previous_secret_expires_at") if client else None
        matches_current = hmac.compare_digest(current, presented)
        matches_previous = hmac.compare_digest(previous or current, presented)
        in_grace = previous is not None and expires is not None and self.clock() < aware(expires)
        matches = matches_current or (matches_previous and in_grace)
        return client if client is not None and secret and matches else None
