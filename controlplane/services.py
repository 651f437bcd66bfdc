"""The composition root: every service of the control plane, built once, in dependency
order, with its dependencies passed to ``__init__``.

Read ``build_services`` top to bottom to see what depends on what: first what every area
uses, then one block per area, ending with the area's service or, for an area of several,
its frozen record of them (``services.users.login``, ``services.oidc.token``).  Areas
never build services of their own and never add attributes to ``Services``: an area's
``routes`` module only maps paths to resources, giving each resource the services it uses.
Cross-area hooks are constructor arguments (the login's second factor is the MFA
service; the permission gate of V1 routes is the authz service).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from controlplane.abac.schemas import PolicyLimits
from controlplane.abac.service import AbacService, PolicyReader
from controlplane.abac.store import PolicyStore
from controlplane.apikeys.service import ApiKeyService
from controlplane.apikeys.store import ApiKeyStore
from controlplane.applications.service import ApplicationService
from controlplane.applications.store import ApplicationStore
from controlplane.audit.chain import Sealer
from controlplane.audit.service import AuditLog
from controlplane.audit.store import AuditStore
from controlplane.auth import Authenticator
from controlplane.authz.service import AuthzService, export_cache_counts
from controlplane.connections.flow import ConnectionFlow, client_auth
from controlplane.connections.http import ProviderHttp
from controlplane.connections.identities import IdentityService, IdentityStore, export_of_user
from controlplane.connections.jwks import JwksCache
from controlplane.connections.linking import PendingLinkStore
from controlplane.connections.model import secret_box as connection_secret_box
from controlplane.connections.service import UpstreamConnectionService
from controlplane.connections.states import StateStore
from controlplane.connections.store import ConnectionStore
from controlplane.connections.upstream_tokens import UpstreamTokens
from controlplane.dashboard.access import DashboardAccess
from controlplane.dashboard.accounts import AccountService
from controlplane.dashboard.applications import OrganizationApplications
from controlplane.dashboard.mfa import DashboardMfa
from controlplane.dashboard.organizations import OrganizationService
from controlplane.dashboard.passkeys import DashboardPasskeys
from controlplane.dashboard.sessions import DashboardSessions
from controlplane.dashboard.store import DashboardStore
from controlplane.dashboard.sudo import DashboardSudo
from controlplane.events import EventLog, Tailer
from controlplane.internal.service import DECISION_PERMISSION, ChangeFeed, DecisionData, StreamAccess
from controlplane.internal.store import StreamLeases
from controlplane.keys import SigningKeys
from controlplane.lockout import LoginAttemptStore, PasswordGuard
from controlplane.mail import Mailer
from controlplane.mfa.factor import TotpFactor
from controlplane.mfa.service import MfaService
from controlplane.mfa.store import BackupCodeStore, ChallengeStore, MethodStore
from controlplane.oidc.authorize import AuthorizeService
from controlplane.oidc.backchannel import KIND as BACKCHANNEL_KIND
from controlplane.oidc.backchannel import BackchannelLogout
from controlplane.oidc.claims import OidcTokens
from controlplane.oidc.clients import ClientService
from controlplane.oidc.connections import ConnectionService
from controlplane.oidc.hosted import HostedLogin
from controlplane.oidc.introspection import Introspection
from controlplane.oidc.logout import Logout
from controlplane.oidc.revocation import Revocation
from controlplane.oidc.store import (
    BrowserSessionStore,
    ClientStore,
    CodeStore,
    ConsentStore,
    GrantStore,
    PendingRequestStore,
)
from controlplane.oidc.token import AuthorizationCodeGrant, ClientCredentialsGrant, RefreshTokenGrant, TokenEndpoint
from controlplane.oidc.upstream import HostedConnections
from controlplane.oidc.userinfo import UserInfo
from controlplane.pages import Pages
from controlplane.passkeys.ceremony import RelyingParty
from controlplane.passkeys.credentials import PasskeyCredentials
from controlplane.passkeys.service import PasskeyService
from controlplane.passkeys.store import PasskeyChallengeStore, PasskeyStore
from controlplane.passwords import PasswordHasher
from controlplane.ratelimit import ApiThrottle, PasswordWorkLimit, RateLimiter
from controlplane.roles.service import RoleService
from controlplane.roles.store import RoleStore
from controlplane.selfservice.service import SelfService
from controlplane.startup import StartUp
from controlplane.store import Store
from controlplane.tokens import TokenService
from controlplane.users.admin import UserAdminService
from controlplane.users.claim import AccountClaim
from controlplane.users.directory import UserDirectory
from controlplane.users.login import LoginService
from controlplane.users.passwords import PasswordService
from controlplane.users.registration import RegistrationService
from controlplane.users.sessions import SessionService
from controlplane.users.store import OneTimeTokenStore, SessionStore, UserStore
from controlplane.users.verification import EmailVerificationService
from controlplane.webhooks.delivery import DeliveryMetrics, DeliveryWorker, Sender
from controlplane.webhooks.dispatcher import Dispatcher
from controlplane.webhooks.service import WebhookService
from controlplane.webhooks.store import WebhookStore
from controlplane.webhooks.targets import TargetPolicy, system_resolver
from shared.config import Config
from shared.crypto import SecretBox
from shared.event_types import PUBLIC_EVENT_TYPES
from shared.metrics import HttpMetrics
from shared.timeutil import utcnow


@dataclass(frozen=True)
class DashboardServices:
    """The dashboard area: its accounts, their sessions, and the organizations they run."""

    sessions: DashboardSessions
    access: DashboardAccess
    accounts: AccountService
    organizations: OrganizationService
    applications: OrganizationApplications
    mfa: DashboardMfa
    passkeys: DashboardPasskeys
    sudo: DashboardSudo


@dataclass(frozen=True)
class InternalServices:
    """The internal API decision services sync from."""

    decision_data: DecisionData
    change_feed: ChangeFeed
    stream_access: StreamAccess


@dataclass(frozen=True)
class WebhookServices:
    """Webhook management, and the dispatch and delivery of events to the webhooks."""

    management: WebhookService
    dispatcher: Dispatcher
    worker: DeliveryWorker


@dataclass(frozen=True)
class OidcServices:
    """The OpenID provider: clients, connections (grants and consents), the flows."""

    clients: ClientService
    connections: ConnectionService
    tokens: OidcTokens
    authorize: AuthorizeService
    token: TokenEndpoint
    userinfo: UserInfo
    revocation: Revocation
    introspection: Introspection
    logout: Logout
    hosted: HostedLogin
    upstream: HostedConnections  # the hosted login's sign-in through a connection


@dataclass(frozen=True)
class ConnectionSignInServices:
    """Signing in through an application's connections: the relying-party flow, the
    linked identities, and the upstream tokens kept for the application."""

    flow: ConnectionFlow
    identities: IdentityService
    tokens: UpstreamTokens


@dataclass(frozen=True)
class UserServices:
    """An application's end users: registration, login, sessions, passwords, and what
    other areas may know of them (``directory``)."""

    directory: UserDirectory
    sessions: SessionService
    passwords: PasswordService
    email_verification: EmailVerificationService
    registration: RegistrationService
    admin: UserAdminService
    login: LoginService


@dataclass(frozen=True)
class Services:
    """Everything an area's resources may be given: what every area uses at the top,
    then the services of each area (one service, or a group of them).  Tests reach
    services here too."""

    config: Config
    clock: object
    store: Store
    box: SecretBox
    metrics: HttpMetrics
    events: EventLog
    audit: AuditLog
    tailer: Tailer
    keys: SigningKeys
    tokens: TokenService
    rate_limiter: RateLimiter
    api_throttle: ApiThrottle
    password_work: PasswordWorkLimit
    mailer: Mailer
    hasher: PasswordHasher
    pages: Pages
    password_guard: PasswordGuard
    authenticator: Authenticator
    startup: StartUp
    applications: ApplicationService
    api_keys: ApiKeyService
    dashboard: DashboardServices
    roles: RoleService
    authz: AuthzService
    abac: AbacService
    internal: InternalServices
    webhooks: WebhookServices
    users: UserServices
    mfa: MfaService
    passkeys: PasskeyService
    oidc: OidcServices
    selfservice: SelfService
    connections: UpstreamConnectionService
    connection_sign_in: ConnectionSignInServices


def build_services(config: Config, *, streams: bool = True, store: Store | None = None, clock=None,
                   resolver=None) -> Services:
    """Build every service for ``config``.  ``streams``: whether this process serves change
    streams (a web process; the webhook worker does not, and its tailer keeps no recent
    events for them).  ``store``, ``clock`` and ``resolver`` (name resolution for webhook
    targets) are for tests."""
    clock = clock or utcnow
    store = store or Store(config.mongodb_uri)
    box = SecretBox(config.secret_key)
    metrics = HttpMetrics("iamgate", multiprocess_dir=config.multiprocess_metrics_dir, local_store=store.is_memory,
                          service="controlplane")
    application_store = ApplicationStore(store)
    events = EventLog(store, clock, organization_of=application_store.organization_of,
                      retention_days=config.audit_retention_days)
    tailer = Tailer(events, interval_ms=config.events_poll_interval, deferred=True, buffered=streams)
    keys = SigningKeys(store, box, clock,
                       max_token_lifetime=max(config.access_token_ttl, config.oidc_access_token_ttl))
    tokens = TokenService(keys, clock, issuer=config.public_url, access_ttl=config.access_token_ttl)
    rate_limiter = RateLimiter(store, clock)
    api_throttle = ApiThrottle(rate_limiter, config.rate_limit_api)
    password_work = PasswordWorkLimit(rate_limiter, config.rate_limit_ip, config.trusted_proxies)
    mailer = Mailer(config.smtp_url, config.email_from, log_bodies=config.log_email_bodies)
    hasher = PasswordHasher(config.bcrypt_rounds)
    pages = Pages(secret_key=config.secret_key, cookie_secure=config.cookie_secure)
    audit = AuditLog(AuditStore(store, events.records), events)
    password_guard = PasswordGuard(LoginAttemptStore(store), clock, hasher, audit, threshold=config.lockout_threshold,
                                   lock_seconds=config.lockout_seconds)

    applications = ApplicationService(application_store, events, clock, audit)
    api_keys = ApiKeyService(ApiKeyStore(store), events, clock)
    for credential_cache in (applications.apply_event, api_keys.apply_event):  # per-worker lookup caches
        events.listen(credential_cache)
        tailer.subscribe(credential_cache)

    # Passkeys of end users and of dashboard accounts: one store, one relying party.
    relying_party = (RelyingParty(config.webauthn_rp_id, config.webauthn_origins) if config.webauthn_rp_id else None)
    passkey_store = PasskeyStore(store)
    passkey_credentials = PasskeyCredentials(passkey_store, PasskeyChallengeStore(store), clock,
                                           relying_party=relying_party)

    dashboard_store = DashboardStore(store)
    dashboard_sessions = DashboardSessions(store, dashboard_store, clock, config.dashboard_session_ttl)
    dashboard_factor = TotpFactor(MethodStore(store), BackupCodeStore(store), ChallengeStore(store), box,
                                  secret_key=config.secret_key)
    dashboard_passkeys = DashboardPasskeys(dashboard_store, dashboard_sessions, password_guard, audit, clock,
                                           passkey_credentials, dashboard_factor,
                                           max_attempts=config.mfa_max_attempts)
    dashboard_mfa = DashboardMfa(dashboard_store, dashboard_sessions, password_guard, audit, clock,
                                 dashboard_factor, dashboard_passkeys,
                                 challenge_ttl=config.mfa_challenge_ttl, max_attempts=config.mfa_max_attempts)
    dashboard_sudo = DashboardSudo(dashboard_store, dashboard_sessions, password_guard, audit, clock,
                                   dashboard_passkeys, window=config.dashboard_sudo_seconds)
    dashboard_access = DashboardAccess(dashboard_store, applications, dashboard_mfa)
    dashboard_organizations = OrganizationService(dashboard_store, dashboard_access, applications, api_keys,
                                                  rate_limiter, clock, audit,
                                                  member_add_rate=config.rate_limit_member_add)
    dashboard_accounts = AccountService(
        dashboard_store, dashboard_organizations, dashboard_sessions, hasher, password_guard, dashboard_mfa,
        dashboard_passkeys, rate_limiter, mailer,
        clock, register_rate=config.rate_limit_register, login_rate=config.rate_limit_dashboard_login,
        forgot_rate=config.rate_limit_forgot, resend_rate=config.rate_limit_resend, public_url=config.public_url,
        verification_ttl=config.verification_token_ttl, reset_ttl=config.reset_token_ttl)
    dashboard_applications = OrganizationApplications(dashboard_store, dashboard_access, applications,
                                                      max_applications=config.max_applications_per_organization)
    dashboard = DashboardServices(sessions=dashboard_sessions, access=dashboard_access, accounts=dashboard_accounts,
                                  organizations=dashboard_organizations, applications=dashboard_applications,
                                  mfa=dashboard_mfa, passkeys=dashboard_passkeys, sudo=dashboard_sudo)

    user_store = UserStore(store)
    user_directory = UserDirectory(user_store)
    roles = RoleService(RoleStore(store), user_directory, events, clock)

    # ABAC, then the checks that read its active policies through its reader.
    policy_store = PolicyStore(store)
    policy_reader = PolicyReader(policy_store)
    abac = AbacService(policy_store, user_directory, roles, events, clock, PolicyLimits.of(config))
    authz = AuthzService(roles=roles, policy_reader=policy_reader, events=events, tailer=tailer, clock=clock,
                         cache_ttl=config.authz_cache_ttl)
    export_cache_counts(metrics, authz)
    authenticator = Authenticator(applications=applications, api_keys=api_keys, tokens=tokens, users=user_store,
                                  dashboard_sessions=dashboard_sessions, dashboard_sudo=dashboard_sudo,
                                  permission_resolver=authz.permission_resolver,
                                  internal_token=config.internal_token)

    # A lease outlives three missed renewals (one per heartbeat) before it stops counting.
    stream_leases = StreamLeases(store, clock, ttl=max(10, 3 * config.stream_heartbeat))
    internal = InternalServices(
        decision_data=DecisionData(roles=roles, policy_reader=policy_reader, api_keys=api_keys, events=events),
        change_feed=ChangeFeed(events, tailer, heartbeat=config.stream_heartbeat, registry=metrics.registry),
        stream_access=StreamAccess(authenticator, stream_leases, cap=config.max_streams_per_credential,
                                   permission=DECISION_PERMISSION, retry_after=max(10, 3 * config.stream_heartbeat)))

    webhook_store = WebhookStore(store)
    target_policy = TargetPolicy(allow_private=config.webhook_allow_private_targets,
                                 resolver=resolver or system_resolver)
    # Every call to an upstream identity provider goes through the one ProviderHttp.
    connection_box = connection_secret_box(config.secret_key)
    provider_http = ProviderHttp(config, resolver=resolver or system_resolver)
    identity_store, pending_links = IdentityStore(store), PendingLinkStore(store)
    connections = UpstreamConnectionService(ConnectionStore(store), connection_box, provider_http, identity_store,
                                            pending_links, events, audit, clock)
    # OIDC back-channel logout notices are deliveries of their own kind in the webhook queue.
    oidc_clients = ClientService(ClientStore(store), clock, target_policy, events, applications.live)
    events.listen(oidc_clients.apply_event)  # the per-worker copies of clients
    tailer.subscribe(oidc_clients.apply_event)
    backchannel = BackchannelLogout(oidc_clients, tokens, webhook_store, clock, issuer=config.public_url,
                                    retention_seconds=config.webhook_delivery_retention)
    webhook_worker = DeliveryWorker(webhook_store, box, target_policy, Sender(config.webhook_timeout), clock,
                                    DeliveryMetrics(metrics, webhook_store),
                                    retry_delays=config.webhook_retry_delays, threads=config.webhook_worker_threads,
                                    lease_seconds=config.webhook_timeout + config.webhook_lease_margin,
                                    per_application=config.webhook_max_in_flight_per_application,
                                    kinds={BACKCHANNEL_KIND: backchannel}, application_live=applications.live)
    webhook_management = WebhookService(webhook_store, box, target_policy, events, clock, audit, PUBLIC_EVENT_TYPES,
                                        retention_seconds=config.webhook_delivery_retention,
                                        max_per_application=config.max_webhooks_per_application,
                                        on_queued=webhook_worker.wake)
    webhook_dispatcher = Dispatcher(webhook_store, events, clock, kinds=PUBLIC_EVENT_TYPES,
                                    retention_seconds=config.webhook_delivery_retention,
                                    on_dispatched=webhook_worker.wake, forget_user=webhook_management.forget_user)
    webhooks = WebhookServices(management=webhook_management, dispatcher=webhook_dispatcher, worker=webhook_worker)
    startup = StartUp(store, keys, applications, tailer, webhook_dispatcher, webhook_worker,
                      Sealer(audit.store, clock))

    # OIDC before end users: a password reset and a suspension end the user's connections.
    # The hosted login, which signs end users in, comes after them.
    oidc_codes, oidc_grants, session_store = CodeStore(store), GrantStore(store), SessionStore(store)
    oidc_connections = ConnectionService(ConsentStore(store), oidc_grants, events, clock, backchannel)
    events.listen(oidc_connections.apply_event)  # the per-worker copies of grant states
    tailer.subscribe(oidc_connections.apply_event)
    oidc_tokens = OidcTokens(tokens, keys, clock, issuer=config.public_url, access_ttl=config.oidc_access_token_ttl)
    oidc_authorize = AuthorizeService(oidc_clients, oidc_codes, oidc_connections, clock)
    oidc_token = TokenEndpoint(
        clients=oidc_clients, connections=oidc_connections, tokens=oidc_tokens,
        code_grant=AuthorizationCodeGrant(codes=oidc_codes, grants=oidc_grants, connections=oidc_connections,
                                          users=user_directory, session_live=session_store.is_live, clock=clock,
                                          audit=audit, refresh_ttl=config.refresh_token_ttl),
        refresh_grant=RefreshTokenGrant(grants=oidc_grants, connections=oidc_connections, users=user_directory,
                                        clock=clock, audit=audit, secret_key=config.secret_key,
                                        reuse_grace=config.refresh_reuse_grace),
        client_grant=ClientCredentialsGrant(clients=oidc_clients, connections=oidc_connections))
    oidc_userinfo = UserInfo(oidc_tokens, oidc_connections, user_directory, applications.live)
    oidc_revocation = Revocation(oidc_grants, oidc_connections)
    oidc_introspection = Introspection(oidc_tokens, oidc_connections, oidc_grants, user_directory, clock)
    browser_sessions = BrowserSessionStore(store)  # the hosted login's; a logout with an ID token ends them
    oidc_logout = Logout(oidc_tokens, oidc_clients, oidc_connections, browser_sessions, oidc_codes)

    # End users: sessions first (MFA verify and the login both start one), then the
    # password check MFA confirms with, then MFA, which the login takes as second factor.
    one_time_tokens = OneTimeTokenStore(store)
    sessions = SessionService(user_store, session_store, events, clock, tokens, oidc_connections, audit,
                              secret_key=config.secret_key, refresh_token_ttl=config.refresh_token_ttl,
                              remember_me_ttl=config.refresh_token_remember_me_ttl,
                              reuse_grace=config.refresh_reuse_grace)
    # A reset (or a link code) hands an unverified account to its mailbox's owner; the
    # areas below add the ways in they keep.
    account_claim = AccountClaim(user_store, sessions, oidc_connections, events, clock)
    passwords = PasswordService(user_store, one_time_tokens, sessions, oidc_connections, events, clock, hasher,
                                password_guard, rate_limiter, mailer, audit, account_claim,
                                public_url=config.public_url,
                                reset_token_ttl=config.reset_token_ttl, rate_limit_forgot=config.rate_limit_forgot)
    email_verification = EmailVerificationService(user_store, one_time_tokens, clock, rate_limiter, mailer,
                                                  public_url=config.public_url,
                                                  verification_token_ttl=config.verification_token_ttl,
                                                  rate_limit_resend=config.rate_limit_resend)
    registration = RegistrationService(user_store, email_verification, events, clock, hasher, rate_limiter,
                                       max_users_per_application=config.max_users_per_application,
                                       rate_limit_register=config.rate_limit_register,
                                       registration_rate_limit_max=config.registration_rate_limit_max)
    mfa = MfaService(MethodStore(store), BackupCodeStore(store), ChallengeStore(store), user_directory, sessions,
                     passwords, events, clock, box, rate_limiter, mailer, audit, secret_key=config.secret_key,
                     challenge_ttl=config.mfa_challenge_ttl, max_attempts=config.mfa_max_attempts)
    events.listen(mfa.on_event)
    account_claim.also_removes(mfa.on_claim)
    passkeys = PasskeyService(passkey_store, passkey_credentials, user_directory, mfa, sessions, events, audit,
                              mailer, clock)
    events.listen(passkeys.on_event)
    account_claim.also_removes(passkeys.on_claim)
    # Passkeys wrap MFA: the login's challenge offers TOTP and/or a passkey.
    login = LoginService(user_store, sessions, password_guard, rate_limiter, second_factor=passkeys, audit=audit,
                         rate_limit_login=config.rate_limit_login)
    users = UserServices(directory=user_directory, sessions=sessions, passwords=passwords,
                         email_verification=email_verification, registration=registration,
                         admin=UserAdminService(user_store, sessions, oidc_connections, events, clock), login=login)

    hosted_login = HostedLogin(oidc_authorize, PendingRequestStore(store), browser_sessions,
                               applications=applications, login=login, mfa=mfa, authenticator=authenticator,
                               sessions=sessions, users=user_directory, passwords=passwords,
                               registration=registration, passkeys=passkeys, box=box, clock=clock,
                               rate_limiter=rate_limiter, rate_limit_authorize=config.rate_limit_authorize)
    selfservice = SelfService(user_directory, sessions, mfa, passkeys, events, clock, rate_limiter, registration, roles,
                              oidc_connections, audit, rate_limit_export=config.rate_limit_export,
                              linked_identities=partial(export_of_user, identity_store, connections),
                              forget_deliveries=webhooks.management.forget_user)

    # Sign-in through connections last: it creates users (registration), maps attributes
    # and roles (ABAC, roles), and answers the second factor as the login does (passkeys).
    # Its attribute mapping writes the same values at every sign-in: no grants.invalidated
    # for those (AbacService.set_attribute).
    identities = IdentityService(identity_store, pending_links, user_directory,
                                 create_user=registration.create_external,
                                 set_attribute=partial(abac.set_attribute, invalidate_unchanged=False),
                                 roles=roles, passkey_count=PasskeyStore(store).count_for_user, events=events,
                                 clock=clock, connection_active=connections.store.is_active)
    events.listen(identities.on_event)
    account_claim.also_removes(identities.on_claim)
    upstream_tokens = UpstreamTokens(identity_store, connections, provider_http, client_auth, connection_box, events,
                                     clock)
    connection_sign_in = ConnectionSignInServices(
        flow=ConnectionFlow(connections, StateStore(store), pending_links, provider_http,
                            JwksCache(store, provider_http, clock), identities, upstream_tokens,
                            second_factor=passkeys, passwords=passwords, guard=password_guard, claim=account_claim,
                            mailer=mailer,
                            audit=audit,
                            box=connection_box, clock=clock),
        identities=identities, tokens=upstream_tokens)
    oidc = OidcServices(
        clients=oidc_clients, connections=oidc_connections, tokens=oidc_tokens, authorize=oidc_authorize,
        token=oidc_token, userinfo=oidc_userinfo, revocation=oidc_revocation, introspection=oidc_introspection,
        logout=oidc_logout, hosted=hosted_login,
        upstream=HostedConnections(hosted_login, connections, connection_sign_in.flow, sessions,
                                   public_url=config.public_url))

    return Services(
        config=config, clock=clock, store=store, box=box, metrics=metrics, events=events, audit=audit, tailer=tailer,
        keys=keys,
        tokens=tokens, rate_limiter=rate_limiter, api_throttle=api_throttle, password_work=password_work,
        mailer=mailer, hasher=hasher, pages=pages, password_guard=password_guard, authenticator=authenticator,
        startup=startup, applications=applications, api_keys=api_keys, dashboard=dashboard, roles=roles,
        authz=authz, abac=abac, internal=internal, webhooks=webhooks, users=users, mfa=mfa, oidc=oidc,
        selfservice=selfservice, passkeys=passkeys, connections=connections,
        connection_sign_in=connection_sign_in)
