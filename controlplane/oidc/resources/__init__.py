"""HTTP resources of the OIDC provider, one module per flow, beside the service each
calls (``clients``, ``discovery``, ``authorize``, ``hosted``, ``token``, ``userinfo``,
``revocation``, ``introspection``, ``logout``).

Client management (V1/oidc/clients, permission oidc:manage) answers in the spec's
envelope.  The protocol endpoints (/.well-known/*, /oidc/*) are public to the
authentication middleware and authenticate their callers themselves, as their RFCs
say (a user JWT at authorize, client credentials at token, revoke and introspect, the
OIDC access token at userinfo); their errors are RFC 6749 bodies (``wire``) and every
answer carries ``Cache-Control: no-store``.
"""
