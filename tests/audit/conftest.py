"""Fixtures of the audit tests: the OIDC and MFA areas' helpers (a relying party's flow,
a user with TOTP on), shared rather than copied."""
from __future__ import annotations

from tests.mfa.conftest import enable_mfa, start_login, verify  # noqa: F401  (fixtures)
from tests.oidc.conftest import authorize, exchange, oidc_client, refresh_grant  # noqa: F401  (fixtures)
