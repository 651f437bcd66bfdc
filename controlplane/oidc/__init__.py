"""The OpenID Connect provider (spec "OIDC provider"): one module per flow, each
readable beside the RFC it follows -- ``discovery``, ``authorize`` (RFC 6749 4.1.1,
OIDC Core 3.1.2), ``token`` (RFC 6749 4.1.3 and 6, OIDC Core 3.1.3), ``userinfo``
(OIDC Core 5.3, RFC 6750), ``revocation`` (RFC 7009), ``introspection`` (RFC 7662),
``logout`` (OIDC RP-Initiated Logout 1.0), with ``pkce`` (RFC 7636), client management
(``clients``) and OAuth connections (``connections``) beside them."""
