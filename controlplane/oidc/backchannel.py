"""OpenID Connect Back-Channel Logout 1.0: when a user's sign-ins at a relying party end
here, the relying party is told so server to server.

What ends sign-ins is what revokes a user's grants through ``ConnectionService``
(``revoke_session``: RP-initiated logout, V1 logout, ``DELETE .../sessions/{sessionId}``,
a session revoked for the reuse of its refresh token or evicted by the concurrent-session
limit; ``revoke_user``: a password reset or change, ``DELETE .../sessions``, a
suspension, a deletion, a consent withdrawal).  Each client
that had a live grant revoked, and registered a ``backchannel_logout_uri``, receives one
POST per (user, login session) of ``logout_token=<JWT>`` (section 2.5), form-encoded.

The logout token (section 2.4) is signed with the provider's active key (RS256, header
``typ: logout+jwt``, section 2.4 and the JWT BCP 3.11) and carries iss, aud (the
client_id), iat, exp (two minutes), jti, events
{``http://schemas.openid.net/event/backchannel-logout``: {}}, sub (the user id) and sid
(the login session, the ``sid`` of the ID tokens issued under it) when there was one;
never a nonce (2.4: a nonce would let it pass for an ID token).

Delivery is the webhook worker's (``controlplane.webhooks.delivery``): each notice is
queued as a delivery of kind ``back-channel`` in the webhook queue in MongoDB, where any
worker, in any process or replica, leases it, sends it, logs the attempt on the
delivery record and retries it after each of ``RETRY_DELAYS``; so a restart loses no
notice.  Every attempt reads the client again (``target``): a notice whose client was
deleted or deactivated, or whose backchannel_logout_uri changed since it was queued, is
cancelled unsent, so a retry never goes to a URI the tenant replaced.  It checks the URI
against the webhook target rules (``TargetPolicy.pin``: no private or loopback address
unless IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS, the resolved address pinned against DNS
rebinding), follows no redirects and waits at most IAMGATE_WEBHOOK_TIMEOUT, and carries a
logout token signed for it (fresh iat, exp and jti: a retry minutes later is not
expired on arrival).  Success is 200 or 204 (2.8); anything else, a timeout or a refused
target is logged and retried, the last failure logged as given up.  The grants are
revoked whatever the relying party answers: the notification is best effort (2.8).
"""
from __future__ import annotations

import ipaddress
import logging
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit

from controlplane.tokens import TokenService
from controlplane.webhooks.delivery import Cancelled, DeliveryQueue, Outcome
from controlplane.webhooks.errors import WebhookTargetForbidden
from controlplane.webhooks.targets import TargetPolicy, is_localhost_name
from shared.errors import ValidationFailed
from shared.ids import new_id
from shared.timeutil import Clock

if TYPE_CHECKING:
    from controlplane.oidc.clients import ClientService

log = logging.getLogger("iamgate.oidc.backchannel")

KIND = "back-channel"         # the delivery kind in the webhook queue
LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
LOGOUT_TOKEN_TYPE = "logout+jwt"
LOGOUT_TOKEN_TTL = 120        # seconds: the relying party checks it on arrival
RETRY_DELAYS = (1, 5, 30)     # seconds after a failed attempt
SUCCESS = frozenset({200, 204})  # section 2.8


def uri_problem(uri: str, targets: TargetPolicy) -> str | None:
    """Why ``uri`` cannot be a client's backchannel_logout_uri, or None.  Section 2.2:
    an absolute URI without fragment; section 4.1 (the OP calls it server to server)
    makes it a webhook target: https, not a private, loopback or local address, under
    the webhook rules (``TargetPolicy.check``).  http is allowed only for a loopback host,
    and only with the development override IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError:
        return "must be an absolute https URL"
    if parts.fragment or "#" in uri:
        return "must not contain a fragment"
    if parts.scheme == "http" and not (targets.allow_private and _is_loopback(host)):
        return ("must be an https URL (http only for a loopback host, with "
                "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS)")
    try:
        targets.check(uri)
    except ValidationFailed as exc:
        return next(iter(exc.errors.values()))
    except WebhookTargetForbidden as exc:
        return f"must not target a private or local address ({exc.details['reason']})"
    return None


def _is_loopback(host: str) -> bool:
    try:
        return is_localhost_name(host) or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class LogoutNotice:
    """One logout token to send: the client's URI, and whose sign-in ended."""

    app_id: str
    client_id: str
    uri: str
    user_id: str
    session_id: str | None


@dataclass(eq=False, repr=False)
class BackchannelLogout:
    """The ``back-channel`` kind of delivery (``controlplane.webhooks.delivery.DeliveryKind``)."""

    clients: ClientService
    tokens: TokenService
    deliveries: DeliveryQueue
    clock: Clock
    _: KW_ONLY
    issuer: str
    retention_seconds: InitVar[int]
    retry_delays: tuple[int, ...] = RETRY_DELAYS
    _retention: timedelta = field(init=False)

    def __post_init__(self, retention_seconds: int):
        self._retention = timedelta(seconds=retention_seconds)
        self.retry_delays = tuple(self.retry_delays)

    def notify(self, app_id: str, grants) -> list[LogoutNotice]:
        """Queue a logout token for each (client, user, session) of the revoked
        ``grants`` whose client has a backchannel_logout_uri; the notices queued."""
        notices, uris = [], {}
        for client_id, user_id, session_id in sorted({(g["client_id"], g["user_id"], g.get("session_id") or "")
                                                      for g in grants}):
            if client_id not in uris:
                client = self.clients.by_client_id(client_id)
                uris[client_id] = (client or {}).get("backchannel_logout_uri")
            if uris[client_id]:
                notices.append(LogoutNotice(app_id, client_id, uris[client_id], user_id, session_id or None))
        for notice in notices:
            self._queue(notice)
        return notices

    def _queue(self, notice: LogoutNotice) -> None:
        now = self.clock()
        self.deliveries.insert_delivery({
            "_id": new_id(), "kind": KIND, "app_id": notice.app_id, "webhook_id": None, "event": KIND,
            "url": notice.uri, "client_id": notice.client_id, "user_id": notice.user_id,
            "session_id": notice.session_id, "body": None, "status": "pending", "lease": None, "attempts": 0,
            "retry_count": 0, "response_status": None, "delivered_at": None, "last_error": None,
            "created_at": now, "expires_at": now + self._retention,
        })

    def logout_token(self, notice: LogoutNotice) -> str:
        """Back-Channel Logout 2.4: the signed logout token of ``notice``."""
        now = int(self.clock().timestamp())
        claims = {"iss": self.issuer, "aud": notice.client_id, "iat": now, "exp": now + LOGOUT_TOKEN_TTL,
                  "jti": new_id(), "sub": notice.user_id, "events": {LOGOUT_EVENT: {}}}
        if notice.session_id:
            claims["sid"] = notice.session_id
        return self.tokens.sign(claims, headers={"typ": LOGOUT_TOKEN_TYPE})

    # ------------------------------------------------------------------ the delivery kind

    def target(self, delivery: dict) -> str | Cancelled:
        """The URI the notice was queued for, while it is still its client's
        backchannel_logout_uri: a client deleted, deactivated, or whose application is
        being deleted wants no notice, and one whose URI changed (or was removed) wants
        none at the old one.  Read through the per-worker copy of clients (``active``)."""
        client = self.clients.active(delivery["client_id"])
        if client is None or client["app_id"] != delivery["app_id"]:
            return Cancelled("client deleted or inactive")
        if client.get("backchannel_logout_uri") != delivery["url"]:
            return Cancelled("backchannel_logout_uri changed")
        return delivery["url"]

    def request(self, delivery: dict) -> tuple[bytes, dict]:
        """Section 2.5: ``logout_token`` form-encoded, a token signed for this attempt."""
        notice = LogoutNotice(delivery["app_id"], delivery["client_id"], delivery["url"], delivery["user_id"],
                              delivery["session_id"])
        body = urlencode({"logout_token": self.logout_token(notice)}).encode("ascii")
        return body, {"Content-Type": "application/x-www-form-urlencoded", "Cache-Control": "no-cache"}

    def succeeded(self, outcome: Outcome) -> bool:
        return outcome.status in SUCCESS

    def attempted(self, delivery: dict, outcome: Outcome, *, attempt: int, retry_in: int | None) -> None:
        where = {"client_id": delivery["client_id"], "app_id": delivery["app_id"], "delivery_id": delivery["_id"],
                 "attempt": attempt, "status": outcome.status, "error": outcome.error}
        if self.succeeded(outcome):
            log.info("back-channel logout sent", extra=where)
        elif retry_in is None:
            log.warning("back-channel logout failed; giving up", extra=where)
        else:
            log.warning("back-channel logout failed; will retry", extra={**where, "retry_in": retry_in})
