"""Who is calling, and may they call this route?

Every resource declares, per HTTP method, who may call it (``access = {"GET": ...}``);
a method without a declaration needs a valid credential of the application, so routes
are closed by default.  ``AuthMiddleware`` runs after routing and:

1. resolves ``{applicationId}`` (404 when the application does not exist; through the
   per-worker ``controlplane.lookup_cache``, so a deleted application's credentials stop
   at once in the worker that deleted it and within the change-log tailer's poll
   interval, at most the cache's 2 s TTL, everywhere else);
2. authenticates the bearer credential -- an application API key (``sk_test_``/``sk_live_``
   prefix, looked up by SHA-256 digest through the same kind of cache, dropped on
   ``api_keys.changed``), an end-user RS256 access token of the same
   application (user status checked live), or the internal service token;
3. applies the gate: public, dashboard session cookie, any credential, a permission
   (API key: its permission list; user: its current roles, evaluated live), JWT-owner
   ({userId} must be the token's user; API keys never pass), JWT-owner or a permission,
   user JWT only, or internal; a dashboard route's ``sensitive`` methods also need a
   recent proof of the session's holder (``dashboard.sudo``);
4. counts the request against the general per-credential throttle.

The result is ``req.context.principal`` (``Principal``).
"""
from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from shared import stamps
from shared.credentials import API_KEY_PREFIXES
from shared.errors import ApplicationNotFound, Forbidden, PermissionMissing, Unauthorized
from shared.http import bearer_token as bearer_header_token
from shared.ids import is_uuid
from shared.rbac import covering_patterns, is_valid_permission

if TYPE_CHECKING:  # the areas import this module: their types only for the annotations
    from controlplane.apikeys.service import ApiKeyService
    from controlplane.applications.service import ApplicationService
    from controlplane.dashboard.sessions import DashboardSessions
    from controlplane.dashboard.sudo import DashboardSudo
    from controlplane.tokens import TokenService
    from controlplane.users.store import UserStore


def is_api_key(token: str) -> bool:
    return token.startswith(API_KEY_PREFIXES)


SESSION_COOKIE = "iamgate_session"
# API keys whose Principal a worker keeps (Authenticator.api_key); more clears the lot.
KEY_PRINCIPALS = 10_000


@dataclass(frozen=True)
class Access:
    kind: str
    permission: str | None = None

    def describe(self) -> str:
        text = {
            "public": "No authentication.",
            "dashboard": "Dashboard session cookie.",
            "console": "The dashboard session cookie when the browser has one; a page that needs it sends a "
                       "signed-out visitor to /console/sign-in.",
            "credential": "Bearer: an end-user access token or an API key of the application.",
            "permission": f"Bearer with permission {self.permission} (user roles or API key permissions).",
            "owner": "Bearer end-user access token of the user named by {userId} (JWT-owner).",
            "owner_or_permission": f"Bearer end-user access token of the user named by {{userId}}, or a "
                                   f"credential with permission {self.permission} (user roles or API key "
                                   f"permissions).",
            "user": "Bearer end-user access token of the application.",
            "internal": "Bearer internal service token, or an API key of the application holding decision:sync.",
        }[self.kind]
        note = PERMISSION_NOTES.get(self.permission or "")
        return f"{text} {note}" if note else text


# What a permission amounts to, where that is more than its name says (docs/security.md).
PERMISSION_NOTES = {
    "roles:manage": "roles:manage is administration of the application's authorization: its holder can "
                    "create a role granting *:* (or a system role, which can never change again) and assign it "
                    "to anyone, itself included. Give it only to administrators.",
    "connections:manage": "connections:manage is administration of sign-in: its holder decides which identity "
                          "providers' word signs users in, and with linking trusted_email a provider it controls "
                          "can sign in as any user whose verified email it asserts. Give it only to administrators.",
}


PUBLIC = Access("public")
DASHBOARD = Access("dashboard")
CONSOLE = Access("console")
CREDENTIAL = Access("credential")
OWNER = Access("owner")
USER = Access("user")
INTERNAL = Access("internal")


def permission(name: str) -> Access:
    return Access("permission", name)


def owner_or(name: str) -> Access:
    """The user named by {userId} themself, or an administrator (API key or user)
    holding permission ``name``: a user's own data that the application's back end
    may also manage."""
    return Access("owner_or_permission", name)


@dataclass(frozen=True)
class Principal:
    """Who a request is, once authenticated. Frozen: an API key's is built once per
    loaded key document and shared by its requests (``Authenticator.api_key``)."""
    kind: str                      # "user" | "api_key" | "internal" | "account"
    app_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    key_id: str | None = None
    account_id: str | None = None
    session_expires_at: datetime | None = None  # a dashboard session's end (the console shows it)
    authenticated_at: datetime | None = None  # when a dashboard session's holder last proved who they are
    permissions: frozenset = frozenset()  # an API key's permission patterns
    claims: dict = field(default_factory=dict)
    display: str | None = None  # what the audit log shows beside the id (an API key's name)

    @property
    def credential_id(self) -> str:
        return self.key_id or self.user_id or self.account_id or self.kind


def holds(permissions: frozenset, name: str) -> bool:
    """Whether a set of permission patterns (an API key's, the console principal's)
    grants ``name``.  The same answer as ``any(matches(p, name) ...)``, in four set
    lookups: the only patterns that can cover a valid permission are its covering
    patterns."""
    return is_valid_permission(name) and not permissions.isdisjoint(covering_patterns(name))


def bearer_token(req) -> str | None:
    return bearer_header_token(req.get_header("Authorization"))


def required_token(authorization: str | None) -> str:
    """The bearer token of an ``Authorization`` header value; 401 without one."""
    token = bearer_header_token(authorization)
    if token is None:
        raise Unauthorized("A bearer credential is required.")
    return token


@dataclass(eq=False, repr=False, kw_only=True)  # no repr: it would show the internal token
class Authenticator:
    """Turns a credential into a ``Principal``: an API key, an end-user access token, the
    internal service token, or a dashboard session.  Also answers permission gates."""

    applications: ApplicationService
    api_keys: ApiKeyService
    tokens: TokenService
    users: UserStore
    dashboard_sessions: DashboardSessions
    dashboard_sudo: DashboardSudo
    permission_resolver: Callable[[str, str, str], bool]
    internal_token: str | None
    _key_principals: dict = field(default_factory=dict, init=False)  # key id -> (the key document, its Principal)

    def application(self, app_id: str) -> dict:
        """The live application named by ``{applicationId}``."""
        app = self.applications.live(app_id) if is_uuid(app_id) else None
        if app is None:
            raise ApplicationNotFound(details={"application_id": app_id})
        return app

    def dashboard_account(self, raw_cookie: str | None) -> Principal:
        principal = self.signed_in_account(raw_cookie)
        if principal is None:
            raise Unauthorized("Sign in to the dashboard first.")
        return principal

    def signed_in_account(self, raw_cookie: str | None) -> Principal | None:
        """The dashboard account of a live session cookie, or None."""
        session = self.dashboard_sessions.live(raw_cookie) if raw_cookie else None
        if session is None:
            return None
        return Principal(kind="account", account_id=session["account_id"], session_expires_at=session["expires_at"],
                         authenticated_at=session["authenticated_at"])

    def is_internal_token(self, token: str) -> bool:
        expected = self.internal_token
        return bool(expected) and hmac.compare_digest(token.encode(), expected.encode())

    def internal(self, token: str, app_id: str | None) -> Principal:
        """The internal service token, or an API key of ``app_id``."""
        if self.is_internal_token(token):
            return Principal(kind="internal", app_id=app_id)
        if app_id is not None and is_api_key(token):
            return self.api_key(token, app_id)
        raise Unauthorized("The internal service token or an API key of the application is required.")

    def v1(self, token: str, app_id: str) -> Principal:
        """An API key or an end-user access token of application ``app_id``."""
        if is_api_key(token):
            return self.api_key(token, app_id)
        return self.user_token(token, app_id)

    def api_key(self, token: str, app_id: str | None) -> Principal:
        """An API key of ``app_id`` (of any live application when None)."""
        key = self.api_keys.authenticate(token)
        if key is None or (app_id is not None and key["app_id"] != app_id) \
                or (app_id is None and self.applications.live(key["app_id"]) is None):
            raise Unauthorized("The API key is not valid for this application.")
        # One Principal per loaded key document: the document is the cache's until it is
        # read again (controlplane.lookup_cache), so a changed key gets a new one.
        known = self._key_principals.get(key["_id"])
        if known is None or known[0] is not key:
            if len(self._key_principals) >= KEY_PRINCIPALS:
                self._key_principals.clear()
            known = self._key_principals[key["_id"]] = (key, Principal(
                kind="api_key", app_id=key["app_id"], key_id=key["_id"], permissions=frozenset(key["permissions"]),
                display=key.get("name")))
        return known[1]

    def user_token(self, token: str, app_id: str) -> Principal:
        """An RS256 access token of ``app_id`` whose user is still active, and carries the
        user's current stamp, if a password reset or a hand-over to the email's owner
        (``controlplane.users.claim``) set one: an older token is refused (checked live)."""
        claims = self.tokens.verify(token, audience=app_id)
        gate = self.users.token_gate(app_id, claims["sub"])
        if gate is None or gate.get("status", "active") != "active":
            raise Unauthorized("The user of this token is no longer active.")
        stamps.check(claims.get("tnb"), stamps.stamp_of(gate))
        return Principal(kind="user", app_id=app_id, user_id=claims["sub"], session_id=claims.get("sid"), claims=claims)

    def has_permission(self, principal: Principal, name: str) -> bool:
        if principal.kind == "api_key":
            return holds(principal.permissions, name)
        if principal.kind == "user":
            return self.permission_resolver(principal.app_id, principal.user_id, name)
        return principal.kind == "internal"


class AuthMiddleware:
    def __init__(self, authenticator: Authenticator, api_throttle):
        self.authenticator = authenticator
        self._api_throttle = api_throttle

    def process_resource(self, req, _resp, resource, params):
        if resource is None or not hasattr(resource, "on_" + req.method.lower()):
            return
        access = getattr(resource, "access", {}).get(req.method, CREDENTIAL)
        auth = self.authenticator
        if access.kind == "dashboard":
            # Dashboard routes check organization access themselves (dashboard.access);
            # resolving the application first would let anonymous callers probe ids.
            principal = req.context.principal = auth.dashboard_account(req.cookies.get(SESSION_COOKIE))
            if req.method in getattr(resource, "sensitive", ()):
                auth.dashboard_sudo.require(principal.authenticated_at)
            return
        if access.kind == "console":
            # A console page sends a signed-out browser to sign in itself (a redirect,
            # not a 401); a signed-in one is the same principal as on dashboard routes.
            req.context.principal = auth.signed_in_account(req.cookies.get(SESSION_COOKIE))
            return
        app_id = params.get("applicationId")
        if app_id is not None:
            req.context.application = auth.application(app_id)
        if access.kind == "public":
            return
        token = required_token(req.get_header("Authorization"))
        if access.kind == "internal":
            principal = req.context.principal = auth.internal(token, app_id)
            # A tenant's key is throttled here as on V1 routes; the operator's internal
            # token is not (one sidecar may serve every application).
            if principal.kind == "api_key":
                self._api_throttle.hit(f"api:{principal.credential_id}")
            return
        req.context.principal = self.admit(token, app_id, access, params)

    def admit(self, token: str, app_id: str | None, access: Access, params: dict) -> Principal:
        """Steps 2 to 4 for a route of application ``app_id`` (already resolved): the
        credential, the gate, the throttle's count. Also what ``controlplane.hotpath``
        calls for the plain check, so both follow one rule."""
        if app_id is None:
            raise Unauthorized("This route needs an application-scoped credential.")
        principal = self.authenticator.v1(token, app_id)
        self._gate(access, principal, params)
        self._api_throttle.hit(f"api:{principal.credential_id}")
        return principal

    def _gate(self, access, principal, params):
        if access.kind == "credential":
            return
        if access.kind == "user":
            if principal.kind != "user":
                raise Forbidden("This route needs an end-user access token.")
            return
        if access.kind == "owner":
            if principal.kind != "user" or principal.user_id != params.get("userId"):
                raise Forbidden("Only the user themself may call this route.")
            return
        if access.kind == "owner_or_permission" and principal.kind == "user" \
                and principal.user_id == params.get("userId"):
            return
        if access.kind in ("permission", "owner_or_permission"):
            if not self.authenticator.has_permission(principal, access.permission):
                raise PermissionMissing(access.permission)
            return
        raise Forbidden("This credential cannot call this route.")
