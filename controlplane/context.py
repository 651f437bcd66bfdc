"""The application context: configuration and the services every area shares.

Built once per process by ``build_context`` and passed to each area's ``register``.
Areas add their own services as attributes (``ctx.users``, ``ctx.authz`` ...).
"""
from __future__ import annotations

from shared.crypto import SecretBox
from shared.metrics import HttpMetrics
from shared.timeutil import utcnow

from controlplane.apikeys.service import ApiKeyService
from controlplane.applications.service import ApplicationService
from controlplane.dashboard.access import DashboardAccess
from controlplane.dashboard.sessions import DashboardSessions
from controlplane.events import EventLog, Tailer
from controlplane.keys import SigningKeys
from controlplane.lockout import LoginAttemptStore, PasswordGuard
from controlplane.mail import Mailer
from controlplane.passwords import PasswordHasher
from controlplane.ratelimit import RateLimiter
from controlplane.store import Store
from controlplane.tokens import TokenService

OIDC_ACCESS_TOKEN_TTL = 3600


class AppContext:
    def __init__(self, config, store: Store | None = None, clock=None):
        self.config = config
        self.clock = clock or utcnow
        self.store = store or Store(config.mongodb_uri)
        self.box = SecretBox(config.secret_key)
        self.events = EventLog(self.store, self.clock)
        self.tailer = Tailer(self.events, interval_ms=config.events_poll_interval)
        self.keys = SigningKeys(
            self.store, self.box, self.clock,
            max_token_lifetime=max(config.access_token_ttl, OIDC_ACCESS_TOKEN_TTL),
        )
        self.tokens = TokenService(self.keys, self.clock, issuer=config.public_url, access_ttl=config.access_token_ttl)
        self.rate_limiter = RateLimiter(self.store, self.clock)
        self.mailer = Mailer(config.smtp_url, config.email_from)
        self.hasher = PasswordHasher(config.bcrypt_rounds)
        self.password_guard = PasswordGuard(LoginAttemptStore(self.store), config, self.clock, self.hasher)
        self.applications = ApplicationService(self.store, self.events, self.clock, config)
        self.api_keys = ApiKeyService(self.store, self.events, self.clock)
        self.dashboard_sessions = DashboardSessions(self.store, self.clock, config.dashboard_session_ttl)
        self.dashboard_access = DashboardAccess(self.store, self.applications)
        self.metrics = HttpMetrics("iamgate")
        self.auth = None  # the AuthMiddleware, set by create_app

    # Replaced by the MFA area: the second factor a password login must pass.  Returns
    # the MFA challenge to answer instead of tokens, or None when the user has none.
    def login_second_factor(self, app: dict, user: dict, *, remember_me: bool, device_info: dict) -> dict | None:
        return None

    # Replaced by the roles area: may this end user use ``permission`` right now?
    def permission_resolver(self, app_id: str, user_id: str, permission: str) -> bool:
        return False
