"""OpenID Connect Discovery of a connection's provider, pinned at configuration time,
and the "test connection" report.

``fetch_endpoints`` reads ``{issuer}/.well-known/openid-configuration`` (OpenID Connect
Discovery 1.0 section 4) and keeps what sign-in needs: the endpoints, the JWKS URI and
RFC 9207's ``authorization_response_iss_parameter_supported``.  Section 4.3: the
document's ``issuer`` MUST be identical to the issuer it was fetched for, else the
document is not used — a provider that answers for another issuer is refused here, at
configuration, rather than at every sign-in.

``connection_report`` runs the same fetches again, and those of the JWKS, and says in
words what is wrong; it changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from controlplane.connections.http import ProviderError, ProviderHttp
from controlplane.connections.model import Connection, Endpoints
from controlplane.pages import csp_origin

WELL_KNOWN = "/.well-known/openid-configuration"
# OpenID Connect Core 15.1: RS256 is the one algorithm every provider must support, and
# the one the id_token check relies on being available.
REQUIRED_ALG = "RS256"


def discovery_url(issuer: str) -> str:
    """Discovery 4.1: the issuer, less a trailing slash, and the well-known path."""
    return issuer.rstrip("/") + WELL_KNOWN


def fetch_endpoints(http: ProviderHttp, issuer: str, *, now) -> Endpoints:
    """The provider's endpoints, from its discovery document; ``ProviderError`` when it
    cannot be fetched, names another issuer, or lacks an endpoint sign-in needs."""
    url = discovery_url(issuer)
    document = http.get_object(url)
    found = document.get("issuer")
    if found != issuer:
        raise ProviderError(f"discovery issuer {found} differs from the configured {issuer}"
                            if isinstance(found, str) else f"the discovery document at {url} names no issuer")
    return Endpoints(
        issuer=issuer,
        authorization_endpoint=_endpoint(http, document, "authorization_endpoint"),
        token_endpoint=_endpoint(http, document, "token_endpoint"),
        userinfo_endpoint=_endpoint(http, document, "userinfo_endpoint", required=False),
        jwks_uri=_endpoint(http, document, "jwks_uri"),
        iss_parameter_supported=document.get("authorization_response_iss_parameter_supported") is True,
        fetched_at=now,
    )


def _endpoint(http: ProviderHttp, document: dict, name: str, *, required: bool = True) -> str | None:
    value = document.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ProviderError(f"the discovery document has no {name}")
    try:
        http.vet(value)
        if name == "authorization_endpoint":
            _page_can_send_to(value)
    except ProviderError as exc:
        raise ProviderError(f"the discovery document's {name}: {exc.reason}") from None
    return value


def _page_can_send_to(url: str) -> None:
    """The hosted login page sends the browser to the authorization endpoint, which its
    Content-Security-Policy (``form-action``) must name: a host a CSP source cannot spell
    (an ``_`` in it) would break the application's login page, so it is refused here."""
    try:
        csp_origin(url)
    except ValueError:
        raise ProviderError(f"the host of {url} cannot be named in a page's Content-Security-Policy "
                            "(letters, digits, dots and hyphens only)") from None


def fetch_jwks(http: ProviderHttp, jwks_uri: str) -> dict:
    """The provider's JSON Web Key Set (RFC 7517 section 5): an object with ``keys``."""
    document = http.get_object(jwks_uri)
    if not isinstance(document.get("keys"), list):
        raise ProviderError(f"{jwks_uri} is not a JWK Set (no keys list)")
    return document


def signing_keys(jwks: dict, alg: str = REQUIRED_ALG) -> list[dict]:
    """The keys of ``jwks`` that can verify a signature made with ``alg`` (RFC 7517
    section 4: ``use`` "sig" or absent, ``alg`` equal or absent, the right key type)."""
    kty = {"RS": "RSA", "PS": "RSA", "ES": "EC"}.get(alg[:2])
    return [key for key in jwks["keys"] if isinstance(key, dict) and key.get("kty") == kty
            and key.get("use", "sig") == "sig" and key.get("alg", alg) == alg]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str


def connection_report(http: ProviderHttp, connection: Connection) -> list[Check]:
    """What is wrong with the connection's provider now, check by check, in words.
    An OAuth 2.0 connection (no discovery) has its fixed endpoints checked for an
    address the service may call."""
    if connection.type != "oidc":
        return [_reachable(http, name, url) for name, url in (
            ("authorization_endpoint", connection.endpoints.authorization_endpoint),
            ("token_endpoint", connection.endpoints.token_endpoint),
            ("userinfo_endpoint", connection.endpoints.userinfo_endpoint)) if url]
    url = discovery_url(connection.issuer)
    try:
        document = http.get_object(url)
    except ProviderError as exc:
        return [Check("discovery", False, f"the discovery document could not be fetched: {exc.reason}")]
    checks = [Check("discovery", True, f"fetched {url}")]
    found = document.get("issuer")
    if found == connection.issuer:
        checks.append(Check("issuer", True, f"the discovery issuer is the configured {connection.issuer}"))
    else:
        checks.append(Check("issuer", False, f"discovery issuer {found} differs from the configured "
                                             f"{connection.issuer}; sign-in refuses every answer of this provider"))
    checks.append(_pinned(connection.endpoints, document))
    checks.append(_pkce(document))
    jwks_uri = document.get("jwks_uri")
    if not isinstance(jwks_uri, str):
        checks.append(Check("jwks", False, "the discovery document has no jwks_uri"))
        return checks
    try:
        jwks = fetch_jwks(http, jwks_uri)
    except ProviderError as exc:
        checks.append(Check("jwks", False, f"the JWKS could not be fetched: {exc.reason}"))
        return checks
    keys = signing_keys(jwks)
    if keys:
        checks.append(Check("jwks", True, f"JWKS has {len(keys)} {REQUIRED_ALG} signing key(s)"))
    else:
        checks.append(Check("jwks", False, f"JWKS has no {REQUIRED_ALG} signing key"))
    return checks


def _pinned(pinned: Endpoints, document: dict) -> Check:
    """Whether the endpoints pinned at configuration still match what discovery says."""
    moved = [f"{name} is now {document.get(name)}, pinned {getattr(pinned, name)}"
             for name in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")
             if document.get(name) != getattr(pinned, name)]
    if moved:
        return Check("endpoints", False, "the provider's endpoints changed since they were pinned: "
                                         + "; ".join(moved) + ". Save the issuer again to pin them anew")
    return Check("endpoints", True, "the pinned endpoints match discovery")


def _pkce(document: dict) -> Check:
    methods = document.get("code_challenge_methods_supported")
    if methods is None:
        return Check("pkce", True, "code_challenge_methods_supported is not advertised; PKCE S256 is sent anyway")
    if isinstance(methods, list) and "S256" in methods:
        return Check("pkce", True, "PKCE S256 is supported")
    return Check("pkce", False, f"PKCE S256 is not among the advertised methods {methods}")


def _reachable(http: ProviderHttp, name: str, url: str) -> Check:
    try:
        http.pin(url)
    except ProviderError as exc:
        return Check(name, False, exc.reason)
    return Check(name, True, f"{url} resolves to an allowed address")
