"""Validation of OIDC client management (V1/oidc/clients) and the response shapes."""
from __future__ import annotations

from urllib.parse import urlsplit

from shared.validation import TIME, Bool, Invalid, List, Schema, String, Url

SCOPES = ("openid", "profile", "email")
MAX_URIS = 50
# RFC 8252 7.3: native and development clients listen on the loopback interface.
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1")


class RedirectUri(Url):
    """A redirect URI a client may register (RFC 6749 3.1.2): absolute, no fragment,
    https -- or http on localhost / 127.0.0.1 for development."""

    def clean(self, value):
        value = super().clean(value)
        parts = urlsplit(value)
        if "#" in value:
            raise Invalid("must not contain a fragment")
        if parts.username is not None or parts.password is not None:
            raise Invalid("must not contain user information")
        if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
            raise Invalid("must be an https URL (http only for localhost or 127.0.0.1)")
        return value

    def schema(self):
        return {**super().schema(), "description": "absolute https URL without fragment; http only for localhost "
                                                   "and 127.0.0.1"}


def _uris(**kw):
    return List(RedirectUri(), max_items=MAX_URIS, **kw)


CREATE_CLIENT = Schema({
    "name": String(required=True, min_len=1, max_len=255),
    "description": String(nullable=True, max_len=1000, default=None),
    "logo_url": Url(nullable=True, default=None),
    "redirect_uris": _uris(required=True, min_items=1),
    "post_logout_redirect_uris": _uris(default=list),
    "allowed_scopes": List(String(choices=SCOPES), min_items=1, default=lambda: list(SCOPES)),
})

UPDATE_CLIENT = Schema({
    "name": String(min_len=1, max_len=255),
    "description": String(nullable=True, max_len=1000),
    "logo_url": Url(nullable=True),
    "redirect_uris": _uris(min_items=1),
    "post_logout_redirect_uris": _uris(),
    "allowed_scopes": List(String(choices=SCOPES), min_items=1),
    "is_active": Bool(),
}, partial=True)

_STRINGS = {"type": "array", "items": {"type": "string"}}
CLIENT = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "client_id": {"type": "string"},
        "name": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "logo_url": {"type": ["string", "null"]},
        "redirect_uris": _STRINGS,
        "post_logout_redirect_uris": _STRINGS,
        "allowed_scopes": _STRINGS,
        "is_active": {"type": "boolean"},
        "created_at": TIME,
        "updated_at": TIME,
    },
}
CLIENT_WITH_SECRET = {**CLIENT, "properties": {**CLIENT["properties"], "client_secret": {"type": "string"}}}
CLIENT_LIST = {"type": "array", "items": CLIENT}
