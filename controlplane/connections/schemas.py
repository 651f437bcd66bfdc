"""Request validation and response shapes of connections (V1/connections,
docs/connections.md "Fields").  What needs the provider or other connections (the
preset's issuer, discovery, one active connection per email domain) is the service's."""
from __future__ import annotations

import re

from controlplane.connections.model import LINKING_MODES
from controlplane.connections.presets import PRESETS
from controlplane.webhooks.targets import URL_MAX
from shared.errors import ValidationFailed
from shared.validation import ID, NULLABLE_TIME, TIME, Bool, Invalid, List, Object, Schema, String, Url

NAME_MAX = 63
DISPLAY_NAME_MAX = 100
CLIENT_ID_MAX = 255
CLIENT_SECRET_MAX = 1024
SCOPES_MAX = 30
EMAIL_DOMAINS_MAX = 20
ROLE_RULES_MAX = 50
ATTRIBUTES_MAX = 50
CLAIM_MAX = 100

NAME = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
SCOPE = r"^[\x21\x23-\x5b\x5d-\x7e]+$"
# A DNS name of at least two labels, lower-case letters, digits and hyphens (IDNs as punycode).
DOMAIN = r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$"
ATTRIBUTE = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"

SUPPORTED_TYPES = ("oidc", "oauth2")


class ConnectionType(String):
    """``oidc`` or ``oauth2``; ``saml`` is named and refused: not supported yet."""

    def __init__(self, **kw):
        super().__init__(max_len=20, **kw)

    def clean(self, value):
        value = super().clean(value)
        if value == "saml":
            raise Invalid("saml is not supported yet; use an OpenID Connect (oidc) connection")
        if value not in SUPPORTED_TYPES:
            raise Invalid(f"must be one of {', '.join(SUPPORTED_TYPES)}")
        return value

    def schema(self):
        return {**super().schema(), "enum": list(SUPPORTED_TYPES)}


class Domain(String):
    def __init__(self, **kw):
        super().__init__(max_len=253, **kw)

    def clean(self, value):
        value = super().clean(value).lower().rstrip(".")
        if not re.match(DOMAIN, value):
            raise Invalid("must be a domain name such as example.com")
        return value

    def schema(self):
        return {**super().schema(), "pattern": DOMAIN}


class Attributes(Object):
    """ABAC user attribute -> upstream claim."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self._claim = String(min_len=1, max_len=CLAIM_MAX)

    def clean(self, value):
        value = super().clean(value)
        if len(value) > ATTRIBUTES_MAX:
            raise Invalid(f"must have at most {ATTRIBUTES_MAX} attributes")
        out = {}
        for key, claim in value.items():
            if not re.match(ATTRIBUTE, key):
                raise Invalid(f"has an invalid attribute name {key[:70]!r}")
            try:
                out[key] = self._claim.clean(claim)
            except Invalid as exc:
                raise Invalid(f"{key}: {exc}") from None
        return out

    def schema(self):
        return {**super().schema(), "additionalProperties": {"type": "string", "maxLength": CLAIM_MAX},
                "maxProperties": ATTRIBUTES_MAX}


def _claim(description, *, required=False):
    return String(required=required, min_len=1, max_len=CLAIM_MAX, description=description)


CLAIM_MAPPING = Schema({
    "email": _claim("the claim holding the email (default email)"),
    "email_verified": _claim("the claim saying the email is verified (default email_verified)"),
    "name": _claim("the claim holding the display name (default name)"),
    "picture": _claim("the claim holding the picture URL (default picture)"),
    "attributes": Attributes(description="ABAC user attribute name -> upstream claim"),
})

ROLE_RULE = Schema({
    "claim": _claim("the upstream claim, a string or a list of strings (e.g. groups)", required=True),
    "value": String(required=True, min_len=1, max_len=CLAIM_MAX, description="the value that grants the role"),
    "role": String(required=True, min_len=1, max_len=100, description="the role name in the application"),
})


class RoleRule(Object):
    def __init__(self, **kw):
        super().__init__(ROLE_RULE, **kw)

    def clean(self, value):
        if not isinstance(value, dict):
            raise Invalid("must be a JSON object")
        try:
            return ROLE_RULE.clean(value)
        except ValidationFailed as exc:  # one message for the list item, naming its fields
            raise Invalid("; ".join(f"{k} {v}" for k, v in exc.errors.items())) from None

    def schema(self):
        return ROLE_RULE.json_schema(partial=False)


def _fields(*, create: bool) -> dict:
    return {
        "name": String(min_len=1, max_len=NAME_MAX, pattern=NAME,
                       description="a slug (lower-case letters, digits, inner hyphens; at most 63 characters), "
                                   "unique in the application; default: the preset's name"),
        "display_name": String(min_len=1, max_len=DISPLAY_NAME_MAX,
                               description="the sign-in button's text; default: the preset's (Google...) or the name"),
        "issuer": Url(schemes=("https", "http"), max_len=URL_MAX,
                      description="the provider's issuer; its discovery document is fetched and its endpoints "
                                  "pinned. Fixed by the google, entra and github presets; gitlab's may name a "
                                  "self-managed instance"),
        "tenant": String(min_len=1, max_len=100, description="preset entra only: the directory (tenant) id, a UUID"),
        "client_id": String(required=create, min_len=1, max_len=CLIENT_ID_MAX),
        "client_secret": String(nullable=True, min_len=1, max_len=CLIENT_SECRET_MAX, strip=False,
                                description="write-only: stored encrypted, never returned (has_client_secret "
                                            "says whether one is set); null removes it"),
        "scopes": List(String(min_len=1, max_len=100, pattern=SCOPE), min_items=1, max_items=SCOPES_MAX,
                       description=f"at most {SCOPES_MAX}; openid is added to an oidc connection's when missing; "
                                   "default: the preset's, or openid email profile"),
        "claim_mapping": Object(CLAIM_MAPPING, description="fields left out keep their current (or default) claim"),
        "role_mapping": List(RoleRule(), max_items=ROLE_RULES_MAX, unique=False,
                             description=f"at most {ROLE_RULES_MAX} rules; replaces the list"),
        "linking": String(choices=LINKING_MODES, description="default none (docs/connections.md)"),
        "trusted": Bool(description="required for linking trusted_email; default false"),
        "jit": Bool(description="create a user at the first sign-in; default true"),
        "auto_update": Bool(description="refresh the mapped fields at each sign-in; default false"),
        "store_tokens": Bool(description="keep the upstream tokens, encrypted; default false"),
        "email_domains": List(Domain(), max_items=EMAIL_DOMAINS_MAX,
                              description=f"at most {EMAIL_DOMAINS_MAX}; a typed email of one of these domains "
                                          "goes to this connection. A domain belongs to one active connection"),
        "is_active": Bool(description="default true"),
    }


CREATE_CONNECTION = Schema({
    "type": ConnectionType(description="oidc (default), or oauth2 through the github preset; saml is not "
                                       "supported yet"),
    "preset": String(choices=tuple(PRESETS), description="fills the issuer, scopes and claim mapping"),
    **_fields(create=True),
})

UPDATE_CONNECTION = Schema(_fields(create=False), partial=True,
                           description="Fields left out stay as they are. Changing the issuer (or an entra "
                                       "tenant) fetches and pins discovery again.")


CONNECTION = {
    "type": "object",
    "properties": {
        "id": ID,
        "type": {"type": "string", "enum": list(SUPPORTED_TYPES)},
        "preset": {"type": ["string", "null"], "enum": [*PRESETS, None]},
        "name": {"type": "string"},
        "display_name": {"type": "string"},
        "issuer": {"type": "string", "format": "uri"},
        "client_id": {"type": "string"},
        "has_client_secret": {"type": "boolean", "description": "the secret itself is never returned"},
        "scopes": {"type": "array", "items": {"type": "string"}},
        "claim_mapping": {"type": "object", "properties": {
            **{name: {"type": "string"} for name in ("email", "email_verified", "name", "picture")},
            "attributes": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "role_mapping": {"type": "array", "items": {"type": "object", "properties": {
            name: {"type": "string"} for name in ("claim", "value", "role")}}},
        "linking": {"type": "string", "enum": list(LINKING_MODES)},
        **{name: {"type": "boolean"} for name in ("trusted", "jit", "auto_update", "store_tokens")},
        "email_domains": {"type": "array", "items": {"type": "string"}},
        "is_active": {"type": "boolean"},
        "endpoints": {"type": "object", "description": "pinned from discovery (oidc) or fixed by the preset",
                      "properties": {
                          **{name: {"type": ["string", "null"], "format": "uri"} for name in (
                              "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")},
                          "iss_parameter_supported": {"type": "boolean", "description": "RFC 9207"},
                          "fetched_at": NULLABLE_TIME}},
        "created_at": TIME,
        "updated_at": TIME,
    },
}


TEST_REPORT = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean", "description": "every check passed"},
        "checks": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "ok": {"type": "boolean"},
            "message": {"type": "string", "description": "what was found, in words"}}}},
        "checked_at": TIME,
    },
}
