"""One configuration object, built once from the environment and validated.

Every variable is optional; a bad value stops start-up with a one-line error that
names the variable (``ConfigError``).  Nothing else in the code reads ``os.environ``.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import ipaddress
import math
import os
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A configuration variable has a value that cannot be used."""


# One message wherever memory:// meets an installation without the embedded store.
EMBEDDED_STORE_MISSING = ("IAMGATE_MONGODB_URI: memory:// needs the embedded store, which is not installed "
                          "(pip install 'iamgate[embedded]'); set a mongodb:// URI")


@dataclass(frozen=True)
class Rate:
    """A rate limit: ``limit`` requests per ``window`` seconds (written ``limit/window``)."""

    limit: int
    window: int

    def __str__(self) -> str:
        return f"{self.limit}/{self.window}"


def _int(name, raw, lo=None, hi=None):
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {raw!r}") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"from {lo}" + (f" to {hi}" if hi is not None else "")
        raise ConfigError(f"{name}: expected an integer {bounds}, got {raw!r}")
    return value


def _integer(lo=None, hi=None):
    """The parser of an integer variable from ``lo`` (to ``hi``)."""
    return lambda name, raw: _int(name, raw, lo, hi)


def _fraction(name, raw):
    """A share from 0 to 1 (0.01: one in a hundred)."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # NaN included
        raise ConfigError(f"{name}: expected a number from 0 to 1 (0.01: one in a hundred), got {raw!r}")
    return value


def _decision_log_share(name, raw):
    """IAMGATE_DECISION_LOG_SAMPLE once held the request log's one-in-N (now
    IAMGATE_DECISION_REQUEST_LOG_SAMPLE); an old whole number says so instead of failing bare."""
    try:
        return _fraction(name, raw)
    except ConfigError as exc:
        if raw.strip().isdigit():
            raise ConfigError(f"{exc}; the request log's one-in-N setting is now "
                              "IAMGATE_DECISION_REQUEST_LOG_SAMPLE") from None
        raise


def _rate(name, raw):
    parts = raw.split("/")
    if len(parts) != 2:
        raise ConfigError(f"{name}: expected LIMIT/SECONDS such as 10/60, got {raw!r}")
    return Rate(_int(name, parts[0], 0), _int(name, parts[1], 1))


def _bool(name, raw):
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name}: expected true or false, got {raw!r}")


def _url(name, raw, schemes=("http", "https")):
    """A base URL: a host, and a port only if it is one (``https://id.example.com:44x``
    would make the issuer, every link and the passkey origin ones nobody can reach)."""
    parts = urlsplit(raw)
    try:
        valid_port = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of range
        valid_port = False
    if parts.scheme not in schemes or not parts.hostname or not valid_port:
        raise ConfigError(f"{name}: expected a {'/'.join(schemes)} URL, got {raw!r}")
    return raw.rstrip("/")


def _int_list(name, raw):
    try:
        values = tuple(int(v) for v in raw.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{name}: expected comma-separated seconds, got {raw!r}") from None
    if not values or any(v < 0 for v in values):
        raise ConfigError(f"{name}: expected comma-separated non-negative seconds, got {raw!r}")
    return values


def _cidrs(name, raw):
    try:
        return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in raw.split(",") if v.strip())
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _mongo_uri(name, raw):
    if raw == "memory://" or raw.startswith(("mongodb://", "mongodb+srv://")):
        return raw
    raise ConfigError(f"{name}: expected memory:// or a mongodb:// URI, got {raw!r}")


def _smtp_url(name, raw):
    if raw and urlsplit(raw).scheme not in ("smtp", "smtps"):
        raise ConfigError(f"{name}: expected smtp://user:pass@host:port or smtps://..., got {raw!r}")
    return raw or None


def _text(_name, raw):
    return raw


_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")


def _host(name, raw):
    """An address to bind: an IP address, or a host name whose last label is not all
    digits (``999.1.1.1`` is a malformed IPv4 address, not a name: RFC 1123, 2.1)."""
    try:
        ipaddress.ip_address(raw)
        return raw
    except ValueError:
        pass
    last_label = raw.rstrip(".").rsplit(".", 1)[-1]
    if len(raw) <= 253 and _HOST_NAME.fullmatch(raw) and not last_label.isdigit():
        return raw
    raise ConfigError(f"{name}: expected an IP address or a host name, got {raw!r}")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def _rp_id(name, raw):
    """A WebAuthn RP ID: a host name, never an IP address (browsers refuse them), and
    not a bare top-level label such as ``com`` (``localhost`` excepted)."""
    rp_id = raw.strip().lower().rstrip(".")
    if not rp_id:
        return ""
    if _is_ip(rp_id):
        raise ConfigError(f"{name}: an IP address cannot be a passkey RP ID; use a host name (locally: set "
                          f"IAMGATE_PUBLIC_URL to http://localhost:PORT), got {raw!r}")
    if not _HOST_NAME.fullmatch(rp_id) or ("." not in rp_id and rp_id != "localhost"):
        raise ConfigError(f"{name}: expected a host name such as example.com, got {raw!r}")
    return rp_id


# The port a browser leaves out of an origin it serializes (HTML "ASCII serialization of
# an origin"): scheme://host, and ``:port`` only for another port.
_DEFAULT_PORTS = {"http": 80, "https": 443}


def browser_origin(raw: str, *, of_url: bool = False) -> str | None:
    """``raw`` as a browser serializes its origin, or None when it is not an http(s)
    origin.  The WebAuthn ceremony compares the client data's ``origin`` with the
    configured ones as strings, and a browser writes scheme://host[:port]: the host lower
    case, no port when it is the scheme's default, never a path, a query or a user.  So
    the host and port are normalised (``https://App.example.com:443/`` is
    ``https://app.example.com``), and anything else is refused rather than dropped: a
    path (``https://example.com/login``) cannot narrow an origin, every page of which may
    call ``navigator.credentials``, so an operator who wrote one learns at start that the
    setting means the whole origin.  ``of_url``: ``raw`` is a URL (the public URL, which
    may sit under a path) whose origin is taken."""
    parts = urlsplit(raw.strip())
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or port == 0:
        return None
    if not of_url and (parts.path.strip("/") or parts.query or parts.fragment or "@" in parts.netloc):
        return None
    host = ascii_host(parts.hostname)
    if host is None:
        return None
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    return f"{parts.scheme}://{host}" + ("" if port in (None, _DEFAULT_PORTS[parts.scheme]) else f":{port}")


def ascii_host(host: str) -> str | None:
    """``host`` as a browser writes it in an origin: lower case and, for an
    internationalised name, its ASCII form (``bücher.example`` is
    ``xn--bcher-kva.example``, IDNA); None when it has none."""
    host = host.lower()
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def _origins(name, raw):
    origins = []
    for item in (v.strip() for v in raw.split(",") if v.strip()):
        origin = browser_origin(item)
        if origin is None:
            raise ConfigError(f"{name}: expected comma-separated origins such as https://app.example.com (scheme, "
                              f"host and port only: no path, query or user), got {item!r}")
        origins.append(origin)
    return tuple(dict.fromkeys(origins))  # two spellings of one origin are one


def rp_id_serves(rp_id: str, origin: str) -> bool:
    """WebAuthn's rule (section 5.1.3 step 8, via the HTML "is a registrable domain
    suffix" check): the RP ID is the origin's host or a parent domain of it."""
    host = (urlsplit(origin).hostname or "").lower()
    return host == rp_id or host.endswith("." + rp_id)


def _resolve_webauthn(values) -> None:
    """Default the RP ID to the public URL's host and the origins to its origin (only
    its origin: a public URL under a path, ``https://example.com/iam``, serves pages
    whose origin is ``https://example.com``).  A public URL on an IP address leaves the
    RP ID empty: passkeys are then unavailable (their routes answer 503
    PASSKEY_UNAVAILABLE), and the server still starts."""
    if not values["webauthn_origins"]:
        values["webauthn_origins"] = (browser_origin(values["public_url"], of_url=True),)
    if not values["webauthn_rp_id"]:
        host = ascii_host(urlsplit(values["public_url"]).hostname or "") or ""
        values["webauthn_rp_id"] = "" if _is_ip(host) else host
    rp_id = values["webauthn_rp_id"]
    for origin in values["webauthn_origins"] if rp_id else ():
        if not rp_id_serves(rp_id, origin):
            raise ConfigError(f"IAMGATE_WEBAUTHN_RP_ID: {rp_id!r} cannot serve the origin {origin} (the RP ID must be "
                              f"the origin's host or a parent domain of it; see IAMGATE_WEBAUTHN_ORIGINS)")


def _directory(name, raw):
    if raw and not os.path.isabs(raw):
        raise ConfigError(f"{name}: expected an absolute directory path, got {raw!r}")
    return raw


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(name, raw):
    if raw.strip().upper() not in LOG_LEVELS:
        raise ConfigError(f"{name}: expected one of {', '.join(LOG_LEVELS)}, got {raw!r}")
    return raw.strip().upper()


INTERNAL_TOKEN_MIN = 32


def _internal_token(name, raw):
    # A bearer secret that unlocks every application's grants: as long as the output of
    # `secrets.token_urlsafe(24)`, so it cannot be guessed (an empty value disables it).
    if raw and len(raw) < INTERNAL_TOKEN_MIN:
        raise ConfigError(f"{name}: must be at least {INTERNAL_TOKEN_MIN} characters (got {len(raw)})")
    return raw


def _api_key(name, raw):
    if raw and not raw.startswith(("sk_test_", "sk_live_")):
        raise ConfigError(f"{name}: expected an application API key (sk_test_... or sk_live_...)")
    return raw


# prometheus_client's own switch to its multiprocess mode; its value comes from
# IAMGATE_METRICS_DIR (shared/serving.py sets it in the gunicorn master).
MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

# IAMGATE_ variables that are not settings of the services: the test suite's own
# (tests/mongodb.py). No warning for them.
NOT_SETTINGS_PREFIXES = ("IAMGATE_TEST_",)

SECRET_KEY_RECIPE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def tracing_requested(env) -> bool:
    """OpenTelemetry's standard variables, read by its SDK (shared/tracing.py): tracing is
    on when an OTLP endpoint is set, unless the SDK or the trace exporter is switched off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


# name suffix -> (parser, default raw value).  The attribute is the lower-cased suffix.
_VARIABLES = {
    "HOST": (_host, "127.0.0.1"),
    "PORT": (_integer(1, 65535), "8000"),
    "WORKERS": (_integer(1, 64), "2"),
    "WORKER_PORT": (_integer(1, 65535), "8002"),
    "DECISION_HOST": (_host, "127.0.0.1"),
    "DECISION_PORT": (_integer(1, 65535), "8181"),
    "DECISION_WORKERS": (_integer(1, 64), "1"),
    "MAX_CONNECTIONS": (_integer(10, 100000), "1000"),
    "HEADER_TIMEOUT": (_integer(1, 300), "10"),
    "CONTROL_PLANE_URL": (_url, "http://127.0.0.1:8000"),
    "DECISION_API_KEY": (_api_key, ""),
    "INTERNAL_TOKEN": (_internal_token, ""),
    "DECISION_CACHE_TTL": (_integer(1), "3600"),
    "DECISION_CACHE_SIZE": (_integer(100), "100000"),
    "DECISION_MAX_STALENESS": (_integer(1), "5"),
    "DECISION_REQUEST_LOG_RATE": (_integer(0), "50"),
    "DECISION_REQUEST_LOG_SAMPLE": (_integer(0), "100"),
    "DECISION_LOG_SAMPLE": (_decision_log_share, "0"),
    "DECISION_LOG_DENIALS": (_bool, "false"),
    "PUBLIC_URL": (_url, "http://127.0.0.1:8000"),
    "WEBAUTHN_RP_ID": (_rp_id, ""),
    "WEBAUTHN_ORIGINS": (_origins, ""),
    "MONGODB_URI": (_mongo_uri, "memory://"),
    "SECRET_KEY": (_text, ""),
    "SMTP_URL": (_smtp_url, ""),
    "EMAIL_FROM": (_text, "iamgate <no-reply@iamgate.local>"),
    "ACCESS_TOKEN_TTL": (_integer(1), "900"),
    "OIDC_ACCESS_TOKEN_TTL": (_integer(1), "3600"),
    "REFRESH_TOKEN_TTL": (_integer(1), "604800"),
    "REFRESH_TOKEN_REMEMBER_ME_TTL": (_integer(1), "2592000"),
    "REFRESH_REUSE_GRACE": (_integer(0), "10"),
    "VERIFICATION_TOKEN_TTL": (_integer(1), "86400"),
    "RESET_TOKEN_TTL": (_integer(1), "3600"),
    "MFA_CHALLENGE_TTL": (_integer(1), "300"),
    "MFA_MAX_ATTEMPTS": (_integer(1), "5"),
    "LOCKOUT_THRESHOLD": (_integer(1), "5"),
    "LOCKOUT_SECONDS": (_integer(1), "900"),
    "RATE_LIMIT_LOGIN": (_rate, "10/60"),
    "RATE_LIMIT_DASHBOARD_LOGIN": (_rate, "10/60"),
    "RATE_LIMIT_REGISTER": (_rate, "60/60"),
    "RATE_LIMIT_FORGOT": (_rate, "3/900"),
    "RATE_LIMIT_RESEND": (_rate, "2/60"),
    "RATE_LIMIT_EXPORT": (_rate, "1/3600"),
    "RATE_LIMIT_API": (_rate, "6000/60"),
    "RATE_LIMIT_MEMBER_ADD": (_rate, "30/3600"),
    "RATE_LIMIT_IP": (_rate, "300/60"),
    "RATE_LIMIT_AUTHORIZE": (_rate, "300/60"),
    "REGISTRATION_RATE_LIMIT_MAX": (_integer(1), "600"),
    "LOG_EMAIL_BODIES": (_bool, "false"),
    "MAX_STREAMS_PER_CREDENTIAL": (_integer(1), "50"),
    "METRICS_TOKEN": (_internal_token, ""),
    "METRICS_DIR": (_directory, ""),
    "TRUSTED_PROXIES": (_cidrs, ""),
    "MAX_APPLICATIONS_PER_ORGANIZATION": (_integer(0), "10"),
    "MAX_USERS_PER_APPLICATION": (_integer(0), "10000"),
    "MAX_POLICIES_PER_APPLICATION": (_integer(1), "1000"),
    "MAX_POLICIES_PER_PERMISSION": (_integer(1), "100"),
    # Upper bounds keep one condition's compile and evaluation short (docs/authorization.md).
    "MAX_CONDITION_BYTES": (_integer(64, 65536), "4096"),
    "MAX_CONDITION_NODES": (_integer(1, 1000), "32"),
    "MAX_WEBHOOKS_PER_APPLICATION": (_integer(1), "50"),
    "DASHBOARD_SESSION_TTL": (_integer(60), "43200"),
    "DASHBOARD_SUDO_SECONDS": (_integer(60), "900"),
    "AUTHZ_CACHE_TTL": (_integer(0), "3600"),
    "EVENTS_POLL_INTERVAL": (_integer(5, 5000), "25"),
    "STREAM_HEARTBEAT": (_integer(1, 300), "2"),
    "WEBHOOK_RETRY_DELAYS": (_int_list, "30,300,1800"),
    "WEBHOOK_TIMEOUT": (_integer(1), "30"),
    "WEBHOOK_ALLOW_PRIVATE_TARGETS": (_bool, "false"),
    "WEBHOOK_DELIVERY_RETENTION": (_integer(3600), "2592000"),
    "WEBHOOK_WORKER_THREADS": (_integer(1, 256), "8"),
    "WEBHOOK_LEASE_MARGIN": (_integer(1), "30"),
    "WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION": (_integer(1, 256), "4"),
    "CONNECTION_HTTP_TIMEOUT": (_integer(1, 60), "10"),
    "AUDIT_RETENTION_DAYS": (_integer(1, 36500), "90"),
    "BCRYPT_ROUNDS": (_integer(4, 31), "12"),
    "LOG_LEVEL": (_log_level, "INFO"),
    "LOG_FLUSH_INTERVAL": (_integer(0, 5000), "100"),
}


@dataclass(frozen=True)
class Config:
    host: str
    port: int
    workers: int
    worker_port: int
    decision_host: str
    decision_port: int
    decision_workers: int
    max_connections: int
    header_timeout: int
    control_plane_url: str
    decision_api_key: str
    internal_token: str
    decision_cache_ttl: int
    decision_cache_size: int
    decision_max_staleness: int
    decision_request_log_rate: int
    decision_request_log_sample: int
    decision_log_sample: float
    decision_log_denials: bool
    public_url: str
    webauthn_rp_id: str  # "" when passkeys are unavailable (a public URL on an IP address)
    webauthn_origins: tuple
    mongodb_uri: str
    secret_key: str
    smtp_url: str | None
    email_from: str
    access_token_ttl: int
    oidc_access_token_ttl: int
    refresh_token_ttl: int
    refresh_token_remember_me_ttl: int
    refresh_reuse_grace: int
    verification_token_ttl: int
    reset_token_ttl: int
    mfa_challenge_ttl: int
    mfa_max_attempts: int
    lockout_threshold: int
    lockout_seconds: int
    rate_limit_login: Rate
    rate_limit_dashboard_login: Rate
    rate_limit_register: Rate
    rate_limit_forgot: Rate
    rate_limit_resend: Rate
    rate_limit_export: Rate
    rate_limit_api: Rate
    rate_limit_member_add: Rate
    rate_limit_ip: Rate
    rate_limit_authorize: Rate
    registration_rate_limit_max: int
    log_email_bodies: bool
    max_streams_per_credential: int
    metrics_token: str
    metrics_dir: str
    trusted_proxies: tuple
    max_applications_per_organization: int
    max_users_per_application: int
    max_policies_per_application: int
    max_policies_per_permission: int
    max_condition_bytes: int
    max_condition_nodes: int
    max_webhooks_per_application: int
    dashboard_session_ttl: int
    dashboard_sudo_seconds: int
    authz_cache_ttl: int
    events_poll_interval: int
    stream_heartbeat: int
    webhook_retry_delays: tuple
    webhook_timeout: int
    webhook_allow_private_targets: bool
    webhook_delivery_retention: int
    webhook_worker_threads: int
    webhook_lease_margin: int
    webhook_max_in_flight_per_application: int
    connection_http_timeout: int
    audit_retention_days: int
    bcrypt_rounds: int
    log_level: str
    log_flush_interval: int
    secret_key_generated: bool = field(default=False, compare=False)
    # IAMGATE_ variables of the environment that name no setting: (name, closest known
    # name or None). Reported once at start (``warn_unknown_variables``), never an error.
    unknown_variables: tuple = field(default=(), compare=False)
    # Set by the gunicorn master (shared/serving.py), not by operators: the directory of
    # prometheus_client's multiprocess files while more than one worker serves, read here
    # because nothing else may read the environment.  Empty: one registry per process.
    multiprocess_metrics_dir: str = ""
    # OpenTelemetry tracing (shared/tracing.py), from the OTEL_ variables: ``tracing_requested``.
    tracing: bool = False

    @property
    def is_memory_store(self) -> bool:
        return self.mongodb_uri == "memory://"

    @property
    def cookie_secure(self) -> bool:
        return self.public_url.startswith("https://")

    def check_decision_credential(self) -> None:
        """A decision service reads from the control plane with an API key or the internal
        token; without either it cannot start."""
        if not (self.decision_api_key or self.internal_token):
            raise ConfigError("IAMGATE_DECISION_API_KEY: set it, or IAMGATE_INTERNAL_TOKEN, so the decision "
                              "service can read from the control plane")

    def check_embedded_store(self) -> None:
        """``memory://`` runs on mongomock, an extra (``iamgate[embedded]``) that ``make run``
        and the tests install and the image does not: it runs on MongoDB."""
        if self.is_memory_store and importlib.util.find_spec("mongomock") is None:
            raise ConfigError(EMBEDDED_STORE_MISSING)

    @classmethod
    def from_env(cls, env=None, **overrides) -> Config:
        """Build the configuration from ``env`` (default ``os.environ``).

        ``overrides`` take attribute names and already-parsed values (tests use them).
        """
        env = os.environ if env is None else env
        values = {}
        for suffix, (parse, default) in _VARIABLES.items():
            name = f"IAMGATE_{suffix}"
            values[suffix.lower()] = parse(name, env.get(name, default))
        generated = not values["secret_key"]
        if generated and values["mongodb_uri"] != "memory://":
            # A key made at start would differ at the next start, and what the last one
            # encrypted in the persistent store (signing keys, TOTP secrets) would be lost.
            raise ConfigError(f"IAMGATE_SECRET_KEY: required with a MongoDB store (IAMGATE_MONGODB_URI); make one "
                              f"with: {SECRET_KEY_RECIPE}")
        if generated:
            values["secret_key"] = secrets.token_urlsafe(32)
        elif len(values["secret_key"]) < 16:
            raise ConfigError("IAMGATE_SECRET_KEY: must be at least 16 characters")
        values["secret_key_generated"] = generated
        values["multiprocess_metrics_dir"] = env.get(MULTIPROCESS_DIR_VARIABLE, "")
        values["unknown_variables"] = _unknown_variables(env)
        values["tracing"] = tracing_requested(env)
        _check_together(values)
        _resolve_webauthn(values)
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown configuration override(s): {', '.join(sorted(unknown))}")
        values.update(overrides)
        return cls(**values)


def _check_together(values) -> None:
    """Settings that are each valid but cannot work together."""
    if values["stream_heartbeat"] >= values["decision_max_staleness"]:
        # An idle stream would be silent for a whole staleness bound between heartbeats,
        # so a healthy decision service would keep dropping its trust (and /readyz flap).
        raise ConfigError(
            f"IAMGATE_STREAM_HEARTBEAT: must be below IAMGATE_DECISION_MAX_STALENESS "
            f"({values['decision_max_staleness']}), got {values['stream_heartbeat']}")


def _unknown_variables(env) -> tuple:
    """(name, closest known name or None) of each IAMGATE_ variable that names no setting.
    Names are compared without the common prefix, which would make every name look close."""
    known = set(variable_names())
    suffixes = [name.removeprefix("IAMGATE_") for name in known]
    unknown = []
    for name in sorted(env):
        if name.startswith("IAMGATE_") and name not in known and not name.startswith(NOT_SETTINGS_PREFIXES):
            closest = difflib.get_close_matches(name.removeprefix("IAMGATE_"), suffixes, n=1)
            unknown.append((name, f"IAMGATE_{closest[0]}" if closest else None))
    return tuple(unknown)


def warn_unknown_variables(config: Config, log) -> None:
    """One warning per ``IAMGATE_`` variable that names no setting (a misspelling is
    otherwise silently ignored), with the closest known name."""
    for name, closest in config.unknown_variables:
        hint = f"; did you mean {closest}?" if closest else " (docs/configuration.md lists the variables)"
        log.warning(f"{name} is not an iamgate setting and is ignored{hint}",
                    extra={"variable": name, "closest": closest})


def variable_names():
    """Every IAMGATE_ variable with its default, for docs and the README table."""
    return {f"IAMGATE_{suffix}": default for suffix, (_, default) in _VARIABLES.items()}
