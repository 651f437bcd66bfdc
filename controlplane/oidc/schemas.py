"""Validation of OIDC client management (V1/oidc/clients) and the response shapes."""
from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from controlplane.applications.schemas import IMAGE_URL
from shared.validation import NULLABLE_TIME, TIME, Bool, Int, Invalid, List, Schema, String, Url, object_schema

# The scopes the provider knows (discovery's scopes_supported).  offline_access changes
# nothing (a refresh token is always issued) but may be listed, as relying parties ask for it.
SUPPORTED_SCOPES = ("openid", "profile", "email", "offline_access")
DEFAULT_SCOPES = ("openid", "profile", "email")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")
DEFAULT_GRANT_TYPES = ("authorization_code", "refresh_token")
# RFC 7591 2: how the client authenticates at the token endpoint; "none" is a public
# client (a browser or native app, which cannot keep a secret).  A confidential client
# may use either secret method whichever it registered.
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
NO_CLIENT_AUTH = "none"  # a public client
MAX_URIS = 50
# The longest a replaced client secret may go on authenticating the client (rotate-secret's
# previous_secret_valid_for): a rollover takes hours, and an old secret should not outlive it.
MAX_SECRET_GRACE = 7 * 24 * 3600
# RFC 8252 7.3: native and development clients listen on the loopback interface.
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# RFC 8252 7.3: a redirect to a loopback IP literal matches whatever port the app opened.
_LOOPBACK_IPS = ("127.0.0.1", "::1")
# RFC 8252 7.1: a native app's private-use URI scheme is a reverse domain name it
# controls (``com.example.app:/cb``), so it has at least one dot.
_PRIVATE_USE_SCHEME = re.compile(r"[a-z][a-z0-9+-]*(?:\.[a-z0-9+-]+)+")
# RFC 1123 2.1 host names: letters, digits and hyphens, 1 to 63 per label.  An IDN host
# is accepted in its ASCII (punycode, "xn--") form only, which is also what browsers send.
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
# RFC 3986 2: a URI is printable ASCII; anything else must be percent-encoded.
_URI_CHARACTERS = re.compile(r"[\x21-\x7e]+")
# RFC 6454 6.2: an origin's serialization leaves out its scheme's default port.
_DEFAULT_PORTS = {"https": 443, "http": 80}


def is_private_use(uri: str) -> bool:
    """RFC 8252 7.1: the URI has a private-use (reverse domain name) scheme.  Without
    its ":" a reverse domain name is no scheme (``evil.example.com``), and the URI is
    not absolute (RFC 6749 3.1.2)."""
    scheme, separator, _ = uri.partition(":")
    return bool(separator) and bool(_PRIVATE_USE_SCHEME.fullmatch(scheme))


def redirect_uri_registered(uri: str, registered, *, native: bool) -> bool:
    """RFC 6749 3.1.2.3: ``uri`` is one of ``registered``, compared as strings, except
    that for a ``native`` (public) client a loopback IP redirect (``http://127.0.0.1`` or
    ``http://[::1]``) matches on any port (RFC 8252 7.3: the app opens whatever port is
    free).  A confidential client runs on a server whose port is known: exact match
    (OAuth 2.0 Security BCP, RFC 9700 4.1.3)."""
    if uri in registered:
        return True
    if not native:
        return False
    portless = _loopback_without_port(uri)
    return portless is not None and any(_loopback_without_port(other) == portless for other in registered)


def _loopback_without_port(uri: str) -> tuple | None:
    try:
        parts = urlsplit(uri)
    except ValueError:
        return None  # (a port out of range matches, and redirect_uri_problem refuses it)
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK_IPS or parts.username or parts.password:
        return None
    return parts.hostname, parts.path, parts.query


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI (RFC 6749 3.1.2), or None when it can: a
    private-use scheme URI without fragment (RFC 8252 7.1; public clients only, which the
    client service checks), or an absolute https URL (http only on localhost, 127.0.0.1
    or [::1], RFC 8252 7.3) of printable ASCII, without fragment or user information,
    whose host is a DNS name of letters, digits and hyphens (an IDN in punycode) or an IP
    literal, and whose port, if any, is 1 to 65535.  Registration refuses such URIs, and
    authorize refuses one stored before this rule, rather than fail on it."""
    if not _URI_CHARACTERS.fullmatch(uri):
        return "must be printable ASCII (an IDN host in punycode, other characters percent-encoded)"
    try:
        parts = urlsplit(uri)
    except ValueError:  # a bracketed host that is no IP address
        return "must have a host name of letters, digits, hyphens and dots (an IDN in punycode) or an IP address"
    if is_private_use(uri):
        return "must not contain a fragment" if parts.fragment or "#" in uri else None
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
        return "must be an https URL (http only for localhost, 127.0.0.1 or [::1])"
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
        if is_private_use(value):  # not an http(s) URL, which Url checks
            return String.clean(self, value)
        return super().clean(value)

    def schema(self):
        schema = {key: value for key, value in super().schema().items() if key != "pattern"}
        return {**schema, "description": "absolute https URL of printable ASCII without fragment or user "
                                                   "information; host a DNS name (IDN in punycode) or an IP "
                                                   "address, port 1-65535; http only for localhost, 127.0.0.1 and "
                                                   "[::1] (for a public client a loopback IP matches on any "
                                                   "port); or, for public clients, a private-use scheme such as "
                                                   "com.example.app:/cb"}


def origin_problem(origin: str) -> str | None:
    """Why ``origin`` cannot be a CORS origin, or None.  The browser's ``Origin`` header,
    which it is compared with as a string, is the origin's RFC 6454 6.2 serialization: an
    http(s) scheme and the host in lower case, the port only when it is not the scheme's
    default, each as the URL Standard writes it (no empty port or leading zeros, an IPv6
    address compressed, an IPv4 one in dotted decimal).  Written any other way, an origin
    would never match, so it must be exactly that, of a URL ``redirect_uri_problem``
    accepts."""
    parts = urlsplit(origin) if _URI_CHARACTERS.fullmatch(origin) else None
    if parts is None or f"{parts.scheme}://{parts.netloc}" != origin or origin != origin.lower():
        return "must be an origin: scheme://host[:port] in lower case, without path, query or fragment"
    if parts.scheme not in _DEFAULT_PORTS:
        return "must be an https origin (http only for localhost, 127.0.0.1 or [::1]), not a private-use scheme"
    problem = redirect_uri_problem(origin)
    if problem is not None:
        return problem
    _, colon, port = parts.netloc.rpartition("]")[2].partition(":")  # the port follows an IPv6 host's "]"
    if colon and not port:
        return "must not end in ':' (an empty port): write the port or leave it out"
    if port and parts.port == _DEFAULT_PORTS[parts.scheme]:
        return f"drop the default port :{port} (browsers leave it out of the Origin header, so it would never match)"
    host = parts.hostname
    if ":" in host:
        host = f"[{ipaddress.IPv6Address(host).compressed}]"
    elif _ends_in_a_number(host) and not _is_dotted_decimal(host):
        return "must write an IPv4 address in dotted decimal, as browsers send it (127.0.0.1)"
    serialized = f"{parts.scheme}://{host}" + (f":{parts.port}" if port else "")
    if serialized != origin:
        return f"must be written as browsers send it: {serialized}"
    return None


def _ends_in_a_number(host: str) -> bool:
    """The URL Standard's "ends in a number" (3.5): browsers read such a host as an IPv4
    address, in any of its forms (``127.1``, ``0x7f.0.0.1``), and send it in dotted decimal."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    return last.isdigit() or (last.startswith("0x") and all(c in "0123456789abcdef" for c in last[2:]))


def _is_dotted_decimal(host: str) -> bool:
    """Four decimal numbers without leading zeros (``ipaddress`` refuses any other form)."""
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


class Origin(String):
    """An origin a browser app runs on (``allowed_origins``)."""

    def clean(self, value):
        value = super().clean(value)
        problem = origin_problem(value)
        if problem is not None:
            raise Invalid(problem)
        return value

    def schema(self):
        return {**super().schema(), "description": "an origin as browsers send it: https://host[:port] in lower "
                                                   "case, without the default port (http only for localhost, "
                                                   "127.0.0.1 and [::1])"}


BACKCHANNEL_URI = ("where back-channel logout tokens are POSTed (OIDC Back-Channel Logout 1.0): an absolute https "
                   "URL without fragment whose host is not, and does not resolve to, a private, loopback or local "
                   "address (the webhook target rules); http only for a loopback host with "
                   "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS")


def _uris(**kw):
    return List(RedirectUri(), max_items=MAX_URIS, **kw)


CREATE_CLIENT = Schema({
    "name": String(required=True, min_len=1, max_len=255),
    "description": String(nullable=True, max_len=1000, default=None),
    "logo_url": Url(nullable=True, default=None, **IMAGE_URL),
    "redirect_uris": _uris(required=True, min_items=1),
    "post_logout_redirect_uris": _uris(default=list),
    "allowed_scopes": List(String(choices=SUPPORTED_SCOPES), min_items=1, default=lambda: list(DEFAULT_SCOPES)),
    # PKCE S256 is required by default; a confidential client of a relying party that
    # cannot send it (OIDC Core does not) may turn it off.
    "require_pkce": Bool(default=True),
    "grant_types": List(String(choices=GRANT_TYPES), min_items=1, default=lambda: list(DEFAULT_GRANT_TYPES)),
    "token_endpoint_auth_method": String(choices=AUTH_METHODS, default="client_secret_basic"),
    "backchannel_logout_uri": Url(nullable=True, default=None, description=BACKCHANNEL_URI),
    "allowed_origins": List(Origin(max_len=300), max_items=MAX_URIS, default=list),
})

UPDATE_CLIENT = Schema({
    "name": String(min_len=1, max_len=255),
    "description": String(nullable=True, max_len=1000),
    "logo_url": Url(nullable=True, **IMAGE_URL),
    "redirect_uris": _uris(min_items=1),
    "post_logout_redirect_uris": _uris(),
    "allowed_scopes": List(String(choices=SUPPORTED_SCOPES), min_items=1),
    "require_pkce": Bool(),
    "grant_types": List(String(choices=GRANT_TYPES), min_items=1),
    "backchannel_logout_uri": Url(nullable=True, description=BACKCHANNEL_URI),
    "allowed_origins": List(Origin(max_len=300), max_items=MAX_URIS),
    "is_active": Bool(),
}, partial=True)

ROTATE_SECRET = Schema({
    "previous_secret_valid_for": Int(min=0, max=MAX_SECRET_GRACE, default=0,
                                     description="seconds the secret being replaced still authenticates the client "
                                                 "(0: it stops at once)"),
})

_STRINGS = {"type": "array", "items": {"type": "string"}}
CLIENT = object_schema({
    "id": {"type": "string", "format": "uuid"},
    "client_id": {"type": "string"},
    "name": {"type": "string"},
    "description": {"type": ["string", "null"]},
    "logo_url": {"type": ["string", "null"]},
    "redirect_uris": _STRINGS,
    "post_logout_redirect_uris": _STRINGS,
    "allowed_scopes": _STRINGS,
    "require_pkce": {"type": "boolean"},
    "grant_types": {"type": "array", "items": {"type": "string", "enum": list(GRANT_TYPES)}},
    "token_endpoint_auth_method": {"type": "string", "enum": list(AUTH_METHODS)},
    "backchannel_logout_uri": {"type": ["string", "null"]},
    "allowed_origins": _STRINGS,
    "is_active": {"type": "boolean"},
    "previous_secret_expires_at": {**NULLABLE_TIME, "description": "until when the secret replaced by the last "
                                                                   "rotation still authenticates the client (a past "
                                                                   "time: no longer); null when it stopped at once "
                                                                   "or was never rotated"},
    "created_at": TIME,
    "updated_at": TIME,
}, required=())
CLIENT_WITH_SECRET = {**CLIENT, "properties": {**CLIENT["properties"], "client_secret": {"type": "string"}}}
