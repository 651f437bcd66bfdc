"""Which webhook URLs the service may call: the SSRF defence (spec "Webhooks": "HTTPS,
private IPs and localhost rejected"; docs/webhooks.md, "Targets": 400 WEBHOOK_TARGET_FORBIDDEN).

Pure apart from name resolution, which is a constructor argument (``resolver(host, port)
-> [address strings]``), so tests use a fake resolver and no test hook lives here.

A URL is checked twice:

- at creation and update (``TargetPolicy.check``): https only, at most 2048 characters,
  a host that is neither a ``localhost`` name nor a forbidden literal address, and whose
  DNS answers (when it has any yet) are all allowed;
- at every send (``TargetPolicy.pin``): the name is resolved again, every answer must be
  allowed, and the caller connects to the returned address only.  A name that answered a
  public address at creation and a private one later (DNS rebinding) is refused then.

Forbidden addresses: everything ``ipaddress`` does not call global (loopback, RFC 1918
private, link-local, CGNAT 100.64/10, unspecified, documentation, reserved, ULA fc00::/7...),
multicast, the IPv6 ranges that are local by definition although Python 3.11's
``ipaddress`` calls them global (``_LOCAL_IPV6``: site-local ``fec0::/10``, local-use
NAT64 ``64:ff9b:1::/48``, IPv4-translated ``::ffff:0:0:0/96``), and IPv6 forms that embed
a forbidden IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``,
NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``).  IPv4 literals are read the way ``inet_aton`` and browsers read
them (RFC 3986 section 7.4 warns about it): ``2130706433``, ``0177.0.0.1``,
``0x7f.1`` all name 127.0.0.1.

``allow_private`` (IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS, development only) accepts
http:// and every address.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from controlplane.webhooks.errors import WebhookTargetForbidden
from shared.errors import ValidationFailed

URL_MAX = 2048

_NUMERIC_PART = re.compile(r"^(?:0[xX][0-9a-fA-F]*|[0-9]+)$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")
_COMPATIBLE = ipaddress.ip_network("::/96")
# Reached only through a router or translator of the local network, never on the Internet.
_LOCAL_IPV6 = (
    (ipaddress.ip_network("fec0::/10"), "site-local"),                     # RFC 3879 (deprecated, still routed locally)
    (ipaddress.ip_network("64:ff9b:1::/48"), "local-use NAT64"),           # RFC 8215
    (ipaddress.ip_network("::ffff:0:0:0/96"), "IPv4-translated"),          # RFC 2765 section 2.1 (SIIT)
)


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for ``host`` (A and AAAA)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


@dataclass(frozen=True)
class Target:
    """A parsed webhook URL: ``host`` as it will be named in Host and TLS SNI."""

    url: str
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line
    literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None


@dataclass(frozen=True)
class Pinned:
    """A target and the one checked address the request must connect to."""

    target: Target
    address: str


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host spells in any ``inet_aton`` form (decimal, octal, hex,
    one to four parts), None when the host is not numeric.  A numeric host that is not a
    valid address is invalid (browsers refuse it too: WHATWG URL "ends in a number")."""
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts.pop()  # a trailing dot is still the same address
    if not parts or not _NUMERIC_PART.match(parts[-1]):
        return None
    if len(parts) > 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        raise ValueError("not a valid IPv4 address")
    values = []
    for part in parts:
        if part[:2].lower() == "0x":
            values.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            values.append(int(part, 8))  # ValueError for 08, 09: invalid, as inet_aton says
        else:
            values.append(int(part))
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        raise ValueError("not a valid IPv4 address")
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def forbidden_reason(address) -> str | None:
    """Why the service must not connect to ``address``, or None when it may."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "scoped IPv6 address"
        for network, reason in _LOCAL_IPV6:
            if ip in network:
                return reason
        embedded = ip.ipv4_mapped
        if embedded is None and (ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1)):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is None and ip in _SIXTOFOUR:
            embedded = ip.sixtofour
        if embedded is not None:
            reason = forbidden_reason(embedded)
            if reason:
                return f"IPv6 form of a {reason} IPv4 address"
    for attribute, reason in (("is_unspecified", "unspecified"), ("is_loopback", "loopback"),
                              ("is_link_local", "link-local"), ("is_multicast", "multicast"),
                              ("is_private", "private")):
        if getattr(ip, attribute):
            return reason
    if not ip.is_global:
        return "non-public (reserved or shared)"  # CGNAT 100.64/10, benchmarking, reserved...
    return None


def is_localhost_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost") or name in ("localhost.localdomain", "ip6-localhost",
                                                                           "ip6-loopback")


class TargetPolicy:
    """The rules above, with a resolver and the development switch."""

    def __init__(self, *, allow_private: bool = False, resolver=system_resolver):
        self.allow_private = allow_private
        self._resolve = resolver

    def parse(self, url: str) -> Target:
        """Syntax: https (http too when private targets are allowed), a host, at most
        2048 characters; 400 VALIDATION_INVALID_FORMAT otherwise (spec "Errors")."""
        if len(url) > URL_MAX:
            raise ValidationFailed({"url": f"must be at most {URL_MAX} characters"})
        schemes = ("https", "http") if self.allow_private else ("https",)
        try:
            parts = urlsplit(url)
            port = parts.port
            host = parts.hostname
        except ValueError:
            raise ValidationFailed({"url": "must be a valid URL"}) from None
        if parts.scheme not in schemes:
            raise ValidationFailed({"url": "must be an https URL"})
        if not host or any(c.isspace() for c in url) or parts.username is not None or parts.password is not None:
            raise ValidationFailed({"url": "must be a valid URL with a host and no credentials"})
        if parts.fragment:
            raise ValidationFailed({"url": "must not contain a fragment"})
        if "%" in host:
            raise WebhookTargetForbidden(host, "scoped or percent-encoded host")
        try:
            literal = ipaddress.ip_address(host) if ":" in host else parse_ipv4(host)
        except ValueError:
            raise ValidationFailed({"url": "has an invalid IP address as host"}) from None
        if literal is None:
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                raise ValidationFailed({"url": "has an invalid host name"}) from None
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        port = port or (443 if parts.scheme == "https" else 80)
        return Target(url, parts.scheme, host, port, path, literal)

    def check(self, url: str) -> Target:
        """Creation-time check: 400 WEBHOOK_TARGET_FORBIDDEN for a forbidden literal,
        a localhost name, or a name any of whose current DNS answers is forbidden.  A
        name that does not resolve yet is accepted; every send checks again."""
        target = self.parse(url)
        if self.allow_private:
            return target
        if target.literal is not None:
            self._refuse(target, str(target.literal))
        else:
            if is_localhost_name(target.host):
                raise WebhookTargetForbidden(target.host, "localhost name")
            try:
                addresses = self._resolve(target.host, target.port)
            except OSError:
                return target
            for address in addresses:
                self._refuse(target, address)
        return target

    def pin(self, url: str) -> Pinned:
        """Send-time check: the address to connect to, after resolving the name again
        and refusing when any answer is forbidden (DNS rebinding).  Raises
        ``WebhookTargetForbidden``, or ``OSError`` when the name does not resolve."""
        target = self.parse(url)
        if target.literal is not None:
            if not self.allow_private:
                self._refuse(target, str(target.literal))
            return Pinned(target, str(target.literal))
        if is_localhost_name(target.host) and not self.allow_private:
            raise WebhookTargetForbidden(target.host, "localhost name")
        addresses = self._resolve(target.host, target.port)
        if not addresses:
            raise OSError(f"{target.host} has no address")
        if not self.allow_private:
            for address in addresses:
                self._refuse(target, address)
        return Pinned(target, addresses[0])

    @staticmethod
    def _refuse(target: Target, address: str) -> None:
        try:
            reason = forbidden_reason(address)
        except ValueError:
            reason = "unparseable address"
        if reason:
            raise WebhookTargetForbidden(target.host, reason)
