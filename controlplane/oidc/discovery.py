"""OpenID Provider metadata: OpenID Connect Discovery 1.0 section 3, RFC 8414 section 2.

Every key the spec lists, plus grant_types_supported, claims_supported,
revocation_endpoint and introspection_endpoint (RFC 8414), and both client
authentication methods the token endpoint accepts.  The issuer is IAMGATE_PUBLIC_URL.
"""
from __future__ import annotations

from controlplane.oidc.authorize import RESPONSE_MODES
from controlplane.oidc.schemas import SUPPORTED_SCOPES
from shared.jwts import ALGORITHM

CLIENT_AUTH_METHODS = ["client_secret_post", "client_secret_basic"]
# A public client ("none") names itself at the token and revocation endpoints only.
PUBLIC_CLIENT_AUTH_METHODS = [*CLIENT_AUTH_METHODS, "none"]
CLAIMS = ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "sid", "amr", "email", "email_verified",
          "name", "picture"]


def provider_metadata(issuer: str) -> dict:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oidc/authorize",
        "token_endpoint": f"{issuer}/oidc/token",
        "userinfo_endpoint": f"{issuer}/oidc/userinfo",
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
        "end_session_endpoint": f"{issuer}/oidc/logout",
        "revocation_endpoint": f"{issuer}/oidc/revoke",
        "introspection_endpoint": f"{issuer}/oidc/introspect",
        "response_types_supported": ["code"],
        "response_modes_supported": list(RESPONSE_MODES),
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": [ALGORITHM],
        "scopes_supported": list(SUPPORTED_SCOPES),
        "claims_supported": list(CLAIMS),
        "token_endpoint_auth_methods_supported": list(PUBLIC_CLIENT_AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(PUBLIC_CLIENT_AUTH_METHODS),
        "introspection_endpoint_auth_methods_supported": list(CLIENT_AUTH_METHODS),
        "code_challenge_methods_supported": ["S256"],
        "prompt_values_supported": ["none", "login", "consent"],
        # OIDC Core 6: request objects are not supported (authorize answers
        # request_not_supported and request_uri_not_supported).
        "request_parameter_supported": False,
        "request_uri_parameter_supported": False,
        # OIDC Back-Channel Logout 1.0 (controlplane/oidc/backchannel.py), sid included.
        "backchannel_logout_supported": True,
        "backchannel_logout_session_supported": True,
    }
