"""The composition root: every service of the control plane, built once, in dependency
order, with its dependencies passed to ``__init__``.

Read ``build_services`` top to bottom to see what depends on what.  Areas never build
services of their own and never add attributes to ``Services``: an area's ``routes``
module only maps paths to resources, giving each resource the services it uses.
Cross-area hooks are constructor arguments (the login's second factor is the MFA
service; the permission gate of V1 routes is the authz service).
"""
from __future__ import annotations

from dataclasses import dataclass

from shared.config import Config
from shared.crypto import SecretBox
from shared.metrics import HttpMetrics
from shared.timeutil import utcnow

from controlplane.apikeys.service import ApiKeyService
from controlplane.apikeys.store import ApiKeyStore
from controlplane.applications.service import ApplicationService
from controlplane.applications.store import ApplicationStore
from controlplane.auth import Authenticator
from controlplane.authz.service import AuthzService
from controlplane.authz.store import PolicyStore
from controlplane.dashboard.access import DashboardAccess
from controlplane.dashboard.service import DashboardService
from controlplane.dashboard.sessions import DashboardSessions
from controlplane.events import EventLog, Tailer
from controlplane.internal.service import ChangeFeed, DecisionData
from controlplane.keys import SigningKeys
from controlplane.lockout import LoginAttemptStore, PasswordGuard
from controlplane.mail import Mailer
from controlplane.mfa.service import MfaService
from controlplane.passwords import PasswordHasher
from controlplane.ratelimit import RateLimiter
from controlplane.roles.service import RoleService
from controlplane.roles.store import RoleStore
from controlplane.selfservice.service import SelfService
from controlplane.startup import StartUp
from controlplane.store import Store
from controlplane.tokens import TokenService
from controlplane.users.service import UserService
from controlplane.users.store import UserStore


@dataclass
class Services:
    """Everything an area's resources may be given.  Tests reach services here too."""

    config: Config
    clock: object
    store: Store
    box: SecretBox
    metrics: HttpMetrics
    events: EventLog
    tailer: Tailer
    keys: SigningKeys
    tokens: TokenService
    rate_limiter: RateLimiter
    mailer: Mailer
    hasher: PasswordHasher
    password_guard: PasswordGuard
    applications: ApplicationService
    api_keys: ApiKeyService
    dashboard_sessions: DashboardSessions
    dashboard_access: DashboardAccess
    roles: RoleService
    authz: AuthzService
    authenticator: Authenticator
    decision_data: DecisionData
    change_feed: ChangeFeed
    users: UserService
    mfa: MfaService
    selfservice: SelfService
    dashboard: DashboardService
    startup: StartUp


def build_services(config: Config, *, store: Store | None = None, clock=None) -> Services:
    """Build every service for ``config``.  ``store`` and ``clock`` are for tests."""
    clock = clock or utcnow
    store = store or Store(config.mongodb_uri)
    box = SecretBox(config.secret_key)
    metrics = HttpMetrics("iamgate")
    events = EventLog(store, clock)
    tailer = Tailer(events, interval_ms=config.events_poll_interval, deferred=True)
    keys = SigningKeys(store, box, clock,
                       max_token_lifetime=max(config.access_token_ttl, config.oidc_access_token_ttl))
    tokens = TokenService(keys, clock, issuer=config.public_url, access_ttl=config.access_token_ttl)
    rate_limiter = RateLimiter(store, clock)
    mailer = Mailer(config.smtp_url, config.email_from)
    hasher = PasswordHasher(config.bcrypt_rounds)
    password_guard = PasswordGuard(LoginAttemptStore(store), config, clock, hasher)

    applications = ApplicationService(ApplicationStore(store), events, clock, config)
    api_keys = ApiKeyService(ApiKeyStore(store), events, clock)
    dashboard_sessions = DashboardSessions(store, clock, config.dashboard_session_ttl)
    dashboard_access = DashboardAccess(store, applications)

    roles = RoleService(RoleStore(store), events, clock)
    policy_store = PolicyStore(store)
    authz = AuthzService(roles=roles, policies=policy_store, events=events, tailer=tailer, clock=clock,
                         cache_ttl=config.authz_cache_ttl)
    user_store = UserStore(store)
    authenticator = Authenticator(applications=applications, api_keys=api_keys, tokens=tokens, users=user_store,
                                  dashboard_sessions=dashboard_sessions, permission_resolver=authz.permission_resolver,
                                  internal_token=config.internal_token)
    decision_data = DecisionData(roles=roles, policies=policy_store, api_keys=api_keys, events=events)
    change_feed = ChangeFeed(events, tailer, heartbeat=config.stream_heartbeat, registry=metrics.registry)
    startup = StartUp(store, keys, applications, tailer)

    services = Services(
        config=config, clock=clock, store=store, box=box, metrics=metrics, events=events, tailer=tailer,
        keys=keys, tokens=tokens, rate_limiter=rate_limiter, mailer=mailer, hasher=hasher,
        password_guard=password_guard, applications=applications, api_keys=api_keys,
        dashboard_sessions=dashboard_sessions, dashboard_access=dashboard_access, roles=roles, authz=authz,
        authenticator=authenticator, decision_data=decision_data, change_feed=change_feed, users=None, mfa=None, selfservice=None, dashboard=None,
        startup=startup,
    )
    # TRANSITION (issue "one shape"): these four still take the whole container.
    services.users = UserService(services)
    services.mfa = MfaService(services)
    services.login_second_factor = services.mfa.login_challenge
    events.listen(services.mfa.on_event)
    services.selfservice = SelfService(services)
    services.dashboard = DashboardService(services)
    return services
