"""Connections of an application (docs/connections.md): reading them for the sign-in
flow and the hosted pages, and managing them under V1/connections."""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.connections.errors import ConnectionNotFound
from controlplane.connections.model import Connection
from controlplane.connections.store import ConnectionStore
from shared.crypto import SecretBox
from shared.ids import is_uuid


@dataclass(eq=False)
class UpstreamConnectionService:
    """The connections of applications (named apart from ``controlplane.oidc.connections``,
    which are the OIDC grants iamgate itself gives its clients)."""

    store: ConnectionStore
    box: SecretBox  # purpose "iamgate-connections" (model.secret_box)

    def get(self, app_id: str, connection_id: str) -> Connection:
        """The application's connection; 404 CONNECTION_NOT_FOUND for any other id."""
        connection = self.store.get(app_id, connection_id.lower()) if is_uuid(connection_id) else None
        if connection is None:
            raise ConnectionNotFound(connection_id)
        return connection

    def list(self, app_id: str, *, active_only: bool = False) -> list[Connection]:
        return self.store.list(app_id, active_only=active_only)
