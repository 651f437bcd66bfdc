"""A connection: one upstream identity provider of an application (docs/connections.md).

Plain frozen dataclasses, read from and written to their MongoDB documents here and
nowhere else (``Connection.from_document`` / ``Connection.to_document``).

The document keeps the protocol's own settings (issuer, client, scopes, pinned
endpoints) in a sub-document named by the connection's ``type``: ``{"type": "oidc",
"oidc": {...}}``.  A later protocol (``"saml"``: entity id, certificates...) adds a key of
its own beside them, so the documents written today never need rewriting.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from shared.crypto import SecretBox

CONNECTION_TYPES = ("oidc", "oauth2")   # "saml" is reserved: the document keys protocol
                                        # settings by type so it can be added without a migration
LINKING_MODES = ("none", "verify", "trusted_email")

SECRET_PURPOSE = "iamgate-connections"  # the SecretBox purpose of client secrets and upstream tokens


def secret_box(secret_key: str) -> SecretBox:
    """The box that encrypts this area's secrets at rest (a key of its own, by HKDF purpose)."""
    return SecretBox(secret_key, purpose=SECRET_PURPOSE)


@dataclass(frozen=True, slots=True)
class ClaimMapping:
    """Which upstream claim fills each field of the local user."""

    email: str = "email"
    email_verified: str = "email_verified"
    name: str = "name"
    picture: str = "picture"
    # ABAC user attribute -> upstream claim; read-only, and left out of the hash (a mapping has none)
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))

    @classmethod
    def from_document(cls, doc: Mapping) -> ClaimMapping:
        return cls(email=doc["email"], email_verified=doc["email_verified"], name=doc["name"],
                   picture=doc["picture"], attributes=dict(doc.get("attributes") or {}))

    def to_document(self) -> dict:
        return {"email": self.email, "email_verified": self.email_verified, "name": self.name,
                "picture": self.picture, "attributes": dict(self.attributes)}


@dataclass(frozen=True, slots=True)
class RoleRule:
    """An upstream claim value that grants a role of the application."""

    claim: str        # e.g. "groups" (a string or a list claim)
    value: str        # the value that grants the role
    role: str         # the role NAME in the application

    @classmethod
    def from_document(cls, doc: Mapping) -> RoleRule:
        return cls(claim=doc["claim"], value=doc["value"], role=doc["role"])

    def to_document(self) -> dict:
        return {"claim": self.claim, "value": self.value, "role": self.role}


@dataclass(frozen=True, slots=True)
class Endpoints:
    """The provider's endpoints, pinned from discovery (oidc) or from the preset (oauth2)."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str | None
    jwks_uri: str | None                      # None for oauth2
    iss_parameter_supported: bool             # RFC 9207 authorization_response_iss_parameter_supported
    fetched_at: datetime | None               # None: fixed by a preset, never fetched

    @classmethod
    def from_document(cls, doc: Mapping) -> Endpoints:
        return cls(issuer=doc["issuer"], authorization_endpoint=doc["authorization_endpoint"],
                   token_endpoint=doc["token_endpoint"], userinfo_endpoint=doc.get("userinfo_endpoint"),
                   jwks_uri=doc.get("jwks_uri"), iss_parameter_supported=bool(doc.get("iss_parameter_supported")),
                   fetched_at=doc.get("fetched_at"))

    def to_document(self) -> dict:
        return {"issuer": self.issuer, "authorization_endpoint": self.authorization_endpoint,
                "token_endpoint": self.token_endpoint, "userinfo_endpoint": self.userinfo_endpoint,
                "jwks_uri": self.jwks_uri, "iss_parameter_supported": self.iss_parameter_supported,
                "fetched_at": self.fetched_at}


@dataclass(frozen=True, slots=True)
class Connection:
    id: str
    application_id: str
    type: str                  # "oidc" | "oauth2"
    preset: str | None         # "google" | "entra" | "github" | "gitlab" | None
    name: str                  # slug, unique per application
    display_name: str          # the button text
    issuer: str
    client_id: str
    client_secret_enc: str | None      # never leaves the store in clear; see client_secret()
    scopes: tuple[str, ...]
    claim_mapping: ClaimMapping
    role_mapping: tuple[RoleRule, ...]
    linking: str
    trusted: bool              # required (with the rest) for linking "trusted_email"
    jit: bool
    auto_update: bool
    store_tokens: bool
    email_domains: tuple[str, ...]     # lower-case
    is_active: bool
    endpoints: Endpoints
    created_at: datetime
    updated_at: datetime

    def client_secret(self, box: SecretBox) -> str | None:
        """The client secret in clear, for a call to the provider's token endpoint."""
        return box.decrypt(self.client_secret_enc).decode("utf-8") if self.client_secret_enc else None

    @classmethod
    def from_document(cls, doc: Mapping) -> Connection:
        protocol = doc[doc["type"]]
        return cls(
            id=doc["_id"], application_id=doc["app_id"], type=doc["type"], preset=doc.get("preset"),
            name=doc["name"], display_name=doc["display_name"],
            issuer=protocol["issuer"], client_id=protocol["client_id"],
            client_secret_enc=protocol.get("client_secret"), scopes=tuple(protocol["scopes"]),
            claim_mapping=ClaimMapping.from_document(doc["claim_mapping"]),
            role_mapping=tuple(RoleRule.from_document(rule) for rule in doc.get("role_mapping") or ()),
            linking=doc["linking"], trusted=bool(doc["trusted"]), jit=bool(doc["jit"]),
            auto_update=bool(doc["auto_update"]), store_tokens=bool(doc["store_tokens"]),
            email_domains=tuple(doc.get("email_domains") or ()), is_active=bool(doc["is_active"]),
            endpoints=Endpoints.from_document(protocol["endpoints"]),
            created_at=doc["created_at"], updated_at=doc["updated_at"],
        )

    def to_document(self) -> dict:
        """The stored document; ``app_id`` like every tenant document, so deleting the
        application deletes its connections with the rest."""
        return {
            "_id": self.id, "app_id": self.application_id, "type": self.type, "preset": self.preset,
            "name": self.name, "display_name": self.display_name,
            self.type: {
                "issuer": self.issuer, "client_id": self.client_id, "client_secret": self.client_secret_enc,
                "scopes": list(self.scopes), "endpoints": self.endpoints.to_document(),
            },
            "claim_mapping": self.claim_mapping.to_document(),
            "role_mapping": [rule.to_document() for rule in self.role_mapping],
            "linking": self.linking, "trusted": self.trusted, "jit": self.jit, "auto_update": self.auto_update,
            "store_tokens": self.store_tokens, "email_domains": list(self.email_domains),
            "is_active": self.is_active, "created_at": self.created_at, "updated_at": self.updated_at,
        }
