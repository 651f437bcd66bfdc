"""Validation of OIDC client management (V1/oidc/clients) and the response shapes."""
from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from shared.validation import TIME, Bool, Invalid, List, Schema, String, Url

from controlplane.applications.schemas import IMAGE_URL

SCOPES = ("openid", "profile", "email")
MAX_URIS = 50
# RFC 8252 7.3: native and development clients listen on the loopback interface.
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1")
# RFC 1123 2.1 host names: letters, digits and hyphens, 1 to 63 per label.  An IDN host
# is accepted in its ASCII (punycode, "xn--") form only, which is also what browsers send.
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
# RFC 3986 2: a URI is printable ASCII; anything else must be percent-encoded.
_URI_CHARACTERS = re.compile(r"[\x21-\x7e]+")


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI (RFC 6749 3.1.2), or None when it can: an
    absolute https URL (http only on localhost or 127.0.0.1, RFC 8252 7.3) of printable
    ASCII, without fragment or user information, whose host is a DNS name of letters,
    digits and hyphens (an IDN in punycode) or an IP literal, and whose port, if any, is
    1 to 65535.  Registration refuses such URIs, and authorize refuses one stored before
    this rule, rather than fail on it."""
    if not _URI_CHARACTERS.fullmatch(uri):
        return "must be printable ASCII (an IDN host in punycode, other characters percent-encoded)"
    try:
        parts = urlsplit(uri)
    except ValueError:  # a bracketed host that is no IP address
        return "must have a host name of letters, digits, hyphens and dots (an IDN in punycode) or an IP address"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an absolute https URL"
    if parts.fragment or "#" in uri:
        return "must not contain a fragment"
    if parts.username is not None or parts.password is not None:
        return "must not contain user information"
    if not _is_host(parts.hostname):
        return "must have a host name of letters, digits, hyphens and dots (an IDN in punycode) or an IP address"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "must have a port from 1 to 65535"
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
        return "must be an https URL (http only for localhost or 127.0.0.1)"
    return None


def _is_host(host: str) -> bool:
    """A DNS name of LDH labels, or an IPv4 address, or an IPv6 literal (urlsplit's
    ``hostname`` is lower-cased and without the brackets)."""
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    labels = host.split(".")
    return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in labels)


class RedirectUri(Url):
    """A redirect URI a client may register: ``redirect_uri_problem`` finds none."""

    def clean(self, value):
        problem = redirect_uri_problem(value) if isinstance(value, str) else None
        if problem is not None:
            raise Invalid(problem)
        return super().clean(value)

    def schema(self):
        return {**super().schema(), "description": "absolute https URL of printable ASCII without fragment or user "
                                                   "information; host a DNS name (IDN in punycode) or an IP "
                                                   "address, port 1-65535; http only for localhost and 127.0.0.1"}


def _uris(**kw):
    return List(RedirectUri(), max_items=MAX_URIS, **kw)


CREATE_CLIENT = Schema({
    "name": String(required=True, min_len=1, max_len=255),
    "description": String(nullable=True, max_len=1000, default=None),
    "logo_url": Url(nullable=True, default=None, **IMAGE_URL),
    "redirect_uris": _uris(required=True, min_items=1),
    "post_logout_redirect_uris": _uris(default=list),
    "allowed_scopes": List(String(choices=SCOPES), min_items=1, default=lambda: list(SCOPES)),
})

UPDATE_CLIENT = Schema({
    "name": String(min_len=1, max_len=255),
    "description": String(nullable=True, max_len=1000),
    "logo_url": Url(nullable=True, **IMAGE_URL),
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
