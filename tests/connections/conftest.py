"""Fixtures of the connections area: connections built as model objects (for the store
and the services that read them), and the real upstream providers (``upstreams``,
tests/connections/upstream.py)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from controlplane.connections.model import ClaimMapping, Connection, Endpoints
from shared.ids import new_id
from tests.connections.upstream import add_connection, hosted_app, local_idp, upstreams  # noqa: F401  (fixtures)
from tests.oidc.conftest import oidc_client  # noqa: F401  (fixture)


@pytest.fixture
def make_connection(clock):
    """``make_connection(app_id, **fields)`` -> an unsaved oidc ``Connection``."""

    def make(app_id: str, **fields) -> Connection:
        issuer = fields.pop("issuer", "https://idp.example.com")
        now = clock().replace(microsecond=clock().microsecond // 1000 * 1000)  # what MongoDB keeps
        connection = Connection(
            id=new_id(), application_id=app_id, type="oidc", preset=None, name="acme", display_name="Acme",
            issuer=issuer, client_id="client-1", client_secret_enc=None, scopes=("openid", "email"),
            claim_mapping=ClaimMapping(), role_mapping=(), linking="none", trusted=False, jit=True,
            auto_update=False, store_tokens=False, email_domains=(), is_active=True,
            endpoints=Endpoints(issuer=issuer, authorization_endpoint=f"{issuer}/authorize",
                                token_endpoint=f"{issuer}/token", userinfo_endpoint=None,
                                jwks_uri=f"{issuer}/jwks", iss_parameter_supported=False, fetched_at=now),
            created_at=now, updated_at=now,
        )
        return replace(connection, **fields)

    return make
