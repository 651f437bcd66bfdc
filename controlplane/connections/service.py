"""Connections of an application (docs/connections.md): reading them for the sign-in
flow and the hosted pages, managing them under V1/connections, and the "test
connection" report.

An OpenID Connect connection's discovery document is fetched when it is created, and
again when its issuer is set (even to the same value), and its endpoints are pinned in
the document: a sign-in uses what was checked then, never a document fetched on the way.
A provider that cannot be reached, or that names another issuer, fails the write with
502 CONNECTION_PROVIDER_ERROR and nothing is stored.

The client secret is encrypted with the area's ``SecretBox`` (purpose
"iamgate-connections") and never answered; ``has_client_secret`` says whether one is set.

Each change is an audit record ``upstream_connection.*`` (docs/audit.md) naming the
fields changed, with their values except the client secret's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from controlplane.audit.changes import changes as changed_fields
from controlplane.audit.changes import created
from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.connections import discovery
from controlplane.connections.errors import (
    ConnectionChangedConcurrently,
    ConnectionLimitExceeded,
    ConnectionNotFound,
    ConnectionProviderError,
)
from controlplane.connections.http import ProviderError, ProviderHttp, refusal
from controlplane.connections.identities import IdentityStore, revoked
from controlplane.connections.linking import PendingLinkStore
from controlplane.connections.model import ClaimMapping, Connection, Endpoints, RoleRule
from controlplane.connections.presets import PRESETS, Preset
from controlplane.connections.store import ConnectionStore
from controlplane.events import EventLog
from controlplane.webhooks.errors import WebhookTargetForbidden
from shared.crypto import SecretBox
from shared.errors import ValidationFailed
from shared.ids import is_uuid, new_id
from shared.timeutil import Clock, isoformat

CONNECTIONS_MAX = 20  # per application: each is a button on the sign-in page
DEFAULT_SCOPES = ("openid", "email", "profile")
_AUDITED = ("type", "preset", "name", "display_name", "issuer", "client_id", "client_secret", "scopes",
            "claim_mapping", "role_mapping", "linking", "trusted", "jit", "auto_update", "store_tokens",
            "email_domains", "is_active")
_HIDDEN = ("client_secret",)
_SETTINGS = ("linking", "trusted", "jit", "auto_update", "store_tokens", "is_active")


@dataclass(eq=False)
class UpstreamConnectionService:
    """The connections of applications (named apart from ``controlplane.oidc.connections``,
    which are the OIDC grants iamgate itself gives its clients)."""

    store: ConnectionStore
    box: SecretBox  # purpose "iamgate-connections" (model.secret_box)
    http: ProviderHttp
    identities: IdentityStore  # removed with their connection
    links: PendingLinkStore
    events: EventLog
    audit: AuditLog
    clock: Clock

    def get(self, app_id: str, connection_id: str) -> Connection:
        """The application's connection; 404 CONNECTION_NOT_FOUND for any other id."""
        connection = self.store.get(app_id, connection_id.lower()) if is_uuid(connection_id) else None
        if connection is None:
            raise ConnectionNotFound(connection_id)
        return connection

    def list(self, app_id: str, *, active_only: bool = False) -> list[Connection]:
        return self.store.list(app_id, active_only=active_only)

    def create(self, app_id: str, values: dict) -> Connection:
        """A new connection from cleaned ``schemas.CREATE_CONNECTION`` values."""
        preset = PRESETS.get(values.get("preset"))
        type_ = self._type(values.get("type"), preset)
        issuer = self._issuer(preset, values)
        name = values.get("name") or (preset.name if preset else None)
        if name is None:
            raise ValidationFailed({"name": "is required without a preset"})
        linking, trusted = values.get("linking", "none"), values.get("trusted", False)
        _check_linking(linking, trusted)
        if self.store.count(app_id) >= CONNECTIONS_MAX:
            raise ConnectionLimitExceeded(CONNECTIONS_MAX)
        email_domains, is_active = tuple(values.get("email_domains") or ()), values.get("is_active", True)
        now, connection_id = self.clock(), new_id()
        claimed = email_domains if is_active else ()
        self.store.claim_domains(app_id, connection_id, claimed, now)
        try:
            connection = Connection(
                id=connection_id, application_id=app_id, type=type_, preset=preset.name if preset else None,
                name=name, display_name=values.get("display_name") or (preset.display_name if preset else name),
                issuer=issuer, client_id=values["client_id"],
                client_secret_enc=self._encrypt(values.get("client_secret")),
                scopes=_scopes(type_, values.get("scopes") or (preset.scopes if preset else DEFAULT_SCOPES)),
                claim_mapping=_mapping(preset.claim_mapping if preset else ClaimMapping(),
                                       values.get("claim_mapping")),
                role_mapping=_rules(values.get("role_mapping") or ()), linking=linking, trusted=trusted,
                jit=values.get("jit", True), auto_update=values.get("auto_update", False),
                store_tokens=values.get("store_tokens", False), email_domains=email_domains, is_active=is_active,
                endpoints=self._endpoints(type_, issuer, preset), created_at=now, updated_at=now,
            )
            self.store.insert(connection)
            if self.store.count(app_id) > CONNECTIONS_MAX:
                # Creates racing past the check above: each withdraws its own, so the cap holds.
                self.store.delete(app_id, connection_id)
                raise ConnectionLimitExceeded(CONNECTIONS_MAX)
        except Exception:
            self.store.release_domains(app_id, connection_id, claimed)
            raise
        self._record("upstream_connection.created", connection,
                     created(_audit_view(connection), _AUDITED, hidden=_HIDDEN))
        return connection

    def update(self, app_id: str, connection_id: str, values: dict) -> Connection:
        """PATCH: the fields sent (cleaned ``schemas.UPDATE_CONNECTION``) replace theirs;
        setting the issuer (or an entra tenant) pins discovery anew.

        ``store_tokens: false`` drops the upstream tokens kept on the connection's
        identities and pending links, once the connection is written: an update refused
        keeps them.  From that write on they are no longer served (``upstream_tokens``),
        so a drop that fails part way leaves tokens no one reads, and sending the same
        PATCH again drops them."""
        current = self.get(app_id, connection_id)
        preset = PRESETS.get(current.preset)
        changes: dict = {name: values[name] for name in ("name", "display_name", "client_id", *_SETTINGS)
                         if name in values}
        if "issuer" in values or "tenant" in values:
            changes["issuer"] = self._issuer(preset, values)
        if "client_secret" in values:
            changes["client_secret_enc"] = self._encrypt(values["client_secret"])
        if "scopes" in values:
            changes["scopes"] = _scopes(current.type, values["scopes"])
        if "claim_mapping" in values:
            changes["claim_mapping"] = _mapping(current.claim_mapping, values["claim_mapping"])
        if "role_mapping" in values:
            changes["role_mapping"] = _rules(values["role_mapping"])
        if "email_domains" in values:
            changes["email_domains"] = tuple(values["email_domains"])
        if not changes:
            return current
        updated_at = self._later(current)
        updated = replace(current, **changes, updated_at=updated_at)
        _check_linking(updated.linking, updated.trusted)
        before = set(current.email_domains if current.is_active else ())
        after = set(updated.email_domains if updated.is_active else ())
        added = [domain for domain in updated.email_domains if domain in after - before]
        self.store.claim_domains(app_id, current.id, added, updated_at)
        try:
            if "issuer" in changes:
                updated = replace(updated, endpoints=self._endpoints(updated.type, updated.issuer, preset))
            self._replace(current, updated)
        except Exception:
            self.store.release_domains(app_id, current.id, added)
            raise
        self.store.release_domains(app_id, current.id, before - after)
        self._record("upstream_connection.updated", updated,
                     changed_fields(_audit_view(current), _audit_view(updated), _AUDITED, hidden=_HIDDEN))
        if values.get("store_tokens") is False:
            self.identities.forget_tokens_of_connection(app_id, current.id)
            self.links.forget_tokens_of_connection(app_id, current.id)
        return updated

    def delete(self, app_id: str, connection_id: str) -> None:
        """Delete the connection with its identities (their stored upstream tokens with
        them), its pending links and its email-domain claims; ``connection.revoked``
        (reason ``connection_deleted``) for each identity removed.  The users stay.

        The connection is made inactive first, so no sign-in starts or finishes through
        it while its identities go; a delete that fails part way leaves an inactive
        connection and whole identities, and a retry finishes it."""
        connection = self.get(app_id, connection_id)
        if connection.is_active:
            self._replace(connection, replace(connection, is_active=False, updated_at=self._later(connection)))
        removed = self._revoke_identities(connection)
        if not self.store.delete(app_id, connection.id):
            raise ConnectionNotFound(connection_id)
        removed += self._revoke_identities(connection)  # a sign-in that was finishing meanwhile
        self.store.release_domains(app_id, connection.id)
        self._record("upstream_connection.deleted", connection, {"identities_removed": removed})

    def _revoke_identities(self, connection: Connection) -> int:
        app_id = connection.application_id
        self.links.delete_for_connection(app_id, connection.id)
        count = 0
        for identity in self.identities.take_of_connection(app_id, connection.id):
            self.events.emit(app_id, "connection.revoked", revoked(identity, "connection_deleted"),
                             subject={"user_id": identity["user_id"]})
            count += 1
        return count

    def _later(self, current: Connection):
        """Later than the stored updated_at, always: the store's compare-and-set compares it."""
        return max(self.clock(), current.updated_at + timedelta(milliseconds=1))

    def _replace(self, current: Connection, updated: Connection) -> None:
        if not self.store.replace(updated, expected_updated_at=current.updated_at):
            if self.store.get(current.application_id, current.id) is None:
                raise ConnectionNotFound(current.id)
            raise ConnectionChangedConcurrently(current.id)

    def test(self, app_id: str, connection_id: str) -> dict:
        """The "test connection" report: discovery and JWKS fetched now and checked, in
        words (``discovery.connection_report``); it changes nothing."""
        connection = self.get(app_id, connection_id)
        checks = discovery.connection_report(self.http, connection)
        return {"ok": all(check.ok for check in checks),
                "checks": [{"name": c.name, "ok": c.ok, "message": c.message} for c in checks],
                "checked_at": isoformat(self.clock())}

    # --- rules

    @staticmethod
    def _type(requested: str | None, preset: Preset | None) -> str:
        if preset is not None:
            if requested is not None and requested != preset.type:
                raise ValidationFailed({"type": f"preset {preset.name} is of type {preset.type}"})
            return preset.type
        if requested == "oauth2":
            raise ValidationFailed({"type": "oauth2 (without OpenID Connect) is only available through the github "
                                            "preset; other providers use oidc"})
        return requested or "oidc"

    def _issuer(self, preset: Preset | None, values: dict) -> str:
        if preset is not None:
            issuer = preset.issuer_for(issuer=values.get("issuer"), tenant=values.get("tenant"))
            if issuer == preset.issuer or preset.needs_tenant:
                return issuer  # the preset's own, public
        else:
            if "tenant" in values:
                raise ValidationFailed({"tenant": "is only for preset entra"})
            issuer = values.get("issuer")
            if issuer is None:
                raise ValidationFailed({"issuer": "is required without a preset"})
        try:
            self.http.check_url(issuer)
        except (ValidationFailed, WebhookTargetForbidden) as exc:
            raise ValidationFailed({"issuer": refusal(issuer, exc)}) from None
        return issuer

    def _endpoints(self, type_: str, issuer: str, preset: Preset | None) -> Endpoints:
        """Pinned from discovery now (oidc), or the preset's fixed ones (oauth2)."""
        if type_ == "oauth2":
            return preset.endpoints
        try:
            return discovery.fetch_endpoints(self.http, issuer, now=self.clock())
        except ProviderError as exc:
            raise ConnectionProviderError(exc.reason) from None

    def _encrypt(self, secret: str | None) -> str | None:
        return self.box.encrypt(secret) if secret else None

    def _record(self, action: str, connection: Connection, data: dict) -> None:
        self.audit.record(action, result=success(), target=actor("upstream_connection", connection.id, connection.name),
                          application_id=connection.application_id, data=data)


def _check_linking(linking: str, trusted: bool) -> None:
    if linking == "trusted_email" and not trusted:
        raise ValidationFailed({"linking": "trusted_email links accounts by email automatically, so it needs "
                                           "trusted: true (docs/connections.md, linking modes)"})


def _scopes(type_: str, scopes) -> tuple[str, ...]:
    """An OpenID Connect request without ``openid`` is plain OAuth 2.0 (OIDC Core 3.1.2.1):
    the scope is added first when missing."""
    scopes = tuple(dict.fromkeys(scopes))
    if type_ == "oidc" and "openid" not in scopes:
        scopes = ("openid", *scopes)
    return scopes


def _mapping(base: ClaimMapping, given: dict | None) -> ClaimMapping:
    if not given:
        return base
    fields = {**base.to_document(), **given}
    return ClaimMapping.from_document(fields)


def _rules(rules) -> tuple[RoleRule, ...]:
    return tuple(RoleRule.from_document(rule) for rule in rules)


def serialize(connection: Connection) -> dict:
    """A connection as V1/connections answers it: never the client secret."""
    endpoints = connection.endpoints
    return {
        "id": connection.id, "type": connection.type, "preset": connection.preset, "name": connection.name,
        "display_name": connection.display_name, "issuer": connection.issuer, "client_id": connection.client_id,
        "has_client_secret": connection.client_secret_enc is not None, "scopes": list(connection.scopes),
        "claim_mapping": connection.claim_mapping.to_document(),
        "role_mapping": [rule.to_document() for rule in connection.role_mapping],
        **{name: getattr(connection, name) for name in _SETTINGS},
        "email_domains": list(connection.email_domains),
        "endpoints": {"authorization_endpoint": endpoints.authorization_endpoint,
                      "token_endpoint": endpoints.token_endpoint, "userinfo_endpoint": endpoints.userinfo_endpoint,
                      "jwks_uri": endpoints.jwks_uri, "iss_parameter_supported": endpoints.iss_parameter_supported,
                      "fetched_at": isoformat(endpoints.fetched_at)},
        "created_at": isoformat(connection.created_at), "updated_at": isoformat(connection.updated_at),
    }


def _audit_view(connection: Connection) -> dict:
    """What audit records compare: the answer, and the secret's ciphertext (named when
    it changes, never shown)."""
    view = serialize(connection)
    if connection.client_secret_enc is not None:
        view["client_secret"] = connection.client_secret_enc
    return view
