"""Who is acting, from where: the request's audit context.

``AuditMiddleware`` sets it once per request (request id, client address, user agent,
then the authenticated principal as the actor), and every record written while the
request runs (``EventLog.emit``, ``AuditLog.record``) takes it from here, so no
service passes it along.  A ContextVar: each request (thread or greenlet) has its own,
and work outside a request (the tailer, the worker, the CLI) has none, its records'
actor being ``system``.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, replace

from shared.http import client_ip, request_id

ACTOR_TYPES = ("dashboard_account", "api_key", "user", "client", "system")
USER_AGENT_MAX = 256  # a user agent is the caller's to choose: kept short
SYSTEM = {"type": "system", "id": None, "display": None}


def actor(type_: str, id_: str | None, display: str | None = None) -> dict:
    """An ``actor`` (or, with any type, a ``target``) field: ``{type, id, display}``."""
    return {"type": type_, "id": id_, "display": display}


def success() -> dict:
    return {"status": "success"}


def failure(reason: str) -> dict:
    """A failed attempt; ``reason`` is a code (``invalid_credentials``), never a secret."""
    return {"status": "failure", "reason": reason}


@dataclass(frozen=True)
class AuditContext:
    request_id: str | None = None
    ip: str | None = None
    user_agent: str | None = None
    actor: dict | None = None  # None: nobody authenticated (yet)
    app_id: str | None = None  # the request's application, and its organization
    organization_id: str | None = None


_context: contextvars.ContextVar[AuditContext | None] = contextvars.ContextVar("iamgate_audit", default=None)


def current() -> AuditContext | None:
    return _context.get()


def begin(context: AuditContext | None) -> None:
    _context.set(context)


def act_as(who: dict) -> None:
    """Name the actor of the rest of the request, where authentication happens inside
    the route (a login, an OAuth client at the token endpoint)."""
    context = _context.get()
    _context.set(replace(context or AuditContext(), actor=who))


def principal_actor(principal) -> dict | None:
    """The actor a ``controlplane.auth.Principal`` stands for."""
    if principal is None:
        return None
    if principal.kind == "api_key":
        return actor("api_key", principal.key_id, principal.display)
    if principal.kind == "user":
        return actor("user", principal.user_id, principal.claims.get("email"))
    if principal.kind == "account":
        return actor("dashboard_account", principal.account_id)
    return SYSTEM  # the internal service token


class AuditMiddleware:
    """Sets the audit context: the request's facts at once, the actor after
    authentication (place it after ``AuthMiddleware``)."""

    def __init__(self, trusted_proxies=()):
        self._trusted = trusted_proxies

    def process_request(self, req, _resp):
        agent = req.get_header("User-Agent")
        begin(AuditContext(request_id=request_id(req), ip=client_ip(req, self._trusted),
                           user_agent=agent[:USER_AGENT_MAX] if agent else None))

    def process_resource(self, req, _resp, _resource, _params):
        context = _context.get()
        if context is None:
            return
        app = getattr(req.context, "application", None)
        principal = getattr(req.context, "principal", None)
        _context.set(replace(context, actor=principal_actor(principal),
                             app_id=app["_id"] if app else None,
                             organization_id=app.get("organization_id") if app else None))

    def process_response(self, _req, _resp, _resource, _req_succeeded):
        begin(None)
