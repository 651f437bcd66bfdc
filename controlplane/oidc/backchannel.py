"""OpenID Connect Back-Channel Logout 1.0: when a user's sign-ins at a relying party end
here, the relying party is told so server to server.

What ends sign-ins is what revokes a user's grants through ``ConnectionService``
(``revoke_session``: RP-initiated logout; ``revoke_user``: a password reset,
``DELETE .../sessions``, a suspension, a deletion, a consent withdrawal).  Each client
that had a live grant revoked, and registered a ``backchannel_logout_uri``, receives one
POST per (user, login session) of ``logout_token=<JWT>`` (section 2.5), form-encoded.

The logout token (section 2.4) is signed with the provider's active key (RS256, header
``typ: logout+jwt``, section 2.4 and the JWT BCP 3.11) and carries iss, aud (the
client_id), iat, exp (two minutes), jti, events
{``http://schemas.openid.net/event/backchannel-logout``: {}}, sub (the user id) and sid
(the login session, the ``sid`` of the ID tokens issued under it) when there was one;
never a nonce (2.4: a nonce would let it pass for an ID token).

The HTTP request is the webhook sender's (``controlplane.webhooks.delivery.Sender``):
the URL is checked against the webhook target rules at every attempt
(``TargetPolicy.pin``: no private or loopback address unless
IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS, the resolved address pinned against DNS
rebinding), no redirects, IAMGATE_WEBHOOK_TIMEOUT per attempt.  Sending happens on a
background thread, so the request that ended the sign-ins does not wait for relying
parties.  A failed attempt (not 2xx, timeout, refused target) is logged and retried
after each of ``RETRY_DELAYS``; the last failure is logged as given up.  Retries live in
this process only: the notification is best effort, as the spec allows (2.8), and the
grants are revoked whatever the relying party answers.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from controlplane.tokens import TokenService
from controlplane.webhooks.delivery import Outcome, Sender
from controlplane.webhooks.errors import WebhookTargetForbidden
from controlplane.webhooks.targets import TargetPolicy
from shared.errors import ValidationFailed
from shared.ids import new_id
from shared.timeutil import Clock

if TYPE_CHECKING:
    from controlplane.oidc.clients import ClientService

log = logging.getLogger("iamgate.oidc.backchannel")

LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
LOGOUT_TOKEN_TYPE = "logout+jwt"
LOGOUT_TOKEN_TTL = 120      # seconds: the relying party checks it on arrival
RETRY_DELAYS = (1, 5, 30)   # seconds after a failed attempt


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
    clients: ClientService
    tokens: TokenService
    policy: TargetPolicy
    sender: Sender
    clock: Clock
    _: KW_ONLY
    issuer: str
    retry_delays: tuple[int, ...] = RETRY_DELAYS
    _queue: queue.Queue = field(default_factory=queue.Queue, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _pid: int | None = field(default=None, init=False)

    def __post_init__(self):
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
            self._submit(notice, attempt=1)
        return notices

    def logout_token(self, notice: LogoutNotice) -> str:
        """Back-Channel Logout 2.4: the signed logout token of ``notice``."""
        now = int(self.clock().timestamp())
        claims = {"iss": self.issuer, "aud": notice.client_id, "iat": now, "exp": now + LOGOUT_TOKEN_TTL,
                  "jti": new_id(), "sub": notice.user_id, "events": {LOGOUT_EVENT: {}}}
        if notice.session_id:
            claims["sid"] = notice.session_id
        return self.tokens.sign(claims, headers={"typ": LOGOUT_TOKEN_TYPE})

    def send(self, notice: LogoutNotice) -> Outcome:
        """One attempt (2.5): POST logout_token to the client, through the webhook
        sender, to the address the target rules allow."""
        body = urlencode({"logout_token": self.logout_token(notice)}).encode("ascii")
        try:
            pinned = self.policy.pin(notice.uri)
        except (WebhookTargetForbidden, ValidationFailed, OSError) as refused:
            return Outcome(None, f"target refused: {refused}")
        return self.sender.post(pinned, body, {"Content-Type": "application/x-www-form-urlencoded",
                                                "Cache-Control": "no-cache"})

    # ------------------------------------------------------------------ the sending thread

    def _submit(self, notice: LogoutNotice, *, attempt: int) -> None:
        with self._lock:
            if self._pid != os.getpid():  # first use in this process (or a fork of one that used it)
                self._pid, self._queue = os.getpid(), queue.Queue()
                threading.Thread(target=self._run, name="iamgate-backchannel-logout", daemon=True).start()
            self._queue.put((notice, attempt))

    def _run(self) -> None:
        while True:
            notice, attempt = self._queue.get()
            try:
                self._attempt(notice, attempt)
            except Exception:  # the thread must outlive one bad notice
                log.exception("back-channel logout failed", extra={"client_id": notice.client_id})

    def _attempt(self, notice: LogoutNotice, attempt: int) -> None:
        outcome = self.send(notice)
        where = {"client_id": notice.client_id, "app_id": notice.app_id, "attempt": attempt,
                 "status": outcome.status, "error": outcome.error}
        if outcome.ok:
            log.info("back-channel logout sent", extra=where)
            return
        if attempt > len(self.retry_delays):
            log.warning("back-channel logout failed; giving up", extra=where)
            return
        log.warning("back-channel logout failed; will retry", extra={**where,
                                                                       "retry_in": self.retry_delays[attempt - 1]})
        timer = threading.Timer(self.retry_delays[attempt - 1], self._submit, args=(notice,),
                                kwargs={"attempt": attempt + 1})
        timer.daemon = True
        timer.start()
