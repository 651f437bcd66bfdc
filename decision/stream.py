"""Following the control plane's change stream: what keeps the cache correct.

One follower per worker process (a greenlet under gunicorn's gevent worker, a thread
elsewhere) reads the server-sent events and applies them to the cache:

- ``hello {seq, epoch}``: connected. Everything is dropped on the first connection (the
  cache holds nothing it could trust), whenever the head is below what was already
  applied (the change log went backwards: a control plane without persistence
  restarted), and whenever the epoch differs from the last hello's (the log was
  replaced: such a control plane restarted and has since taken as many writes as we had
  applied, or more, so its head alone cannot show it; the events it replays after our
  seq are another log's and would leave entries changed in its first seqs stale). A
  hello without an epoch is a protocol error;
- ``change {seq, app_id, type, user_ids[, policy_ids]}``: drop the entries the event
  names (a policy event's ``policy_ids`` mark just those policies for a patch);
- ``reset {seq}``: the server cannot replay from our seq; drop everything;
- ``heartbeat {seq}``: the stream covered every event up to seq;
- ``revoked {seq}``: this service's credential stopped being valid (API key revoked or
  lost ``decision:sync``, application deleted). The cache is no longer trusted from that
  moment, not only once the staleness bound passes: checks fetch from the control plane,
  which refuses the credential too, so they fail closed at once.

Reconnect rule: after any gap (error, server gone, no frame within the staleness bound)
the follower reconnects with ``since=<last applied seq>`` (backing off up to two seconds)
so the server replays what was missed, or answers ``reset``. A refusal (``revoked``, 401
or 403 on connecting, 429 STREAM_LIMIT_EXCEEDED) is not a gap that retrying fixes soon:
the follower waits the 429's Retry-After, or ``refused_wait`` seconds (30), before it asks
again, so a revoked sidecar does not knock on the control plane twice a second forever.

Trust rule: the cache is trusted only while a frame arrived within
``IAMGATE_DECISION_MAX_STALENESS`` seconds and the stream has caught up with the head it
announced at connection. Otherwise every check fetches from the control plane and fails
closed (503) when that fails too.
"""
from __future__ import annotations

import logging
import random
import time

from decision.client import ApplicationNotFound, ChangeStream, ControlPlaneError, Refused
from shared.concurrency import BackgroundLoop

log = logging.getLogger("iamgate.decision.stream")

BACKOFF_MIN = 0.05
BACKOFF_MAX = 2.0
REFUSED_WAIT = 30.0


class CredentialRevoked(Refused):
    """The stream's ``revoked`` frame: see the module docstring."""


class ProtocolError(Exception):
    """A frame the follower cannot apply: it cannot prove it saw every change."""


class ChangeFollower(BackgroundLoop):
    thread_name = "iamgate-decision-stream"

    def __init__(self, client, cache, metrics, *, max_staleness: float, read_timeout: float,
                 single_application: bool = False, monotonic=time.monotonic, backoff_max: float = BACKOFF_MAX,
                 refused_wait: float = REFUSED_WAIT):
        super().__init__()
        self._client = client
        self._cache = cache
        self._metrics = metrics
        self._single_application = single_application
        # API-key mode: the application of the key, learned from the control plane before
        # the first stream opens; until then nothing can be answered.
        self.application_id: str | None = None
        self._max_staleness = max_staleness
        self._read_timeout = read_timeout
        self._monotonic = monotonic
        self._backoff_max = backoff_max
        self._refused_wait = refused_wait
        self._stream: ChangeStream | None = None
        self._last_frame = float("-inf")
        self._caught_up_at = 0   # the head announced by the last hello
        self._epoch: str | None = None  # the change log's id, from the last hello
        self.synced = False      # a hello has been applied once
        self.connected = False

    # -- state read by the request path

    def trusted(self) -> bool:
        """May cached entries answer checks? See the module docstring."""
        return (self.synced and self._cache.applied >= self._caught_up_at
                and self._monotonic() - self._last_frame <= self._max_staleness)

    def healthy(self) -> bool:
        """Connected, and a frame arrived within the staleness bound (readiness)."""
        return self.connected and self._monotonic() - self._last_frame <= self._max_staleness

    # -- lifecycle

    def stop(self) -> None:
        super().stop()
        stream = self._stream
        if stream is not None:
            stream.close()

    def _run(self) -> None:
        delay = BACKOFF_MIN
        outage_logged = False
        while not self._stop.is_set():
            wait = None
            try:
                if self._single_application and self.application_id is None:
                    self.application_id = self._learn_application()
                since = self._cache.applied if self.synced else None
                self._stream = self._client.changes(since, app_id=self.application_id,
                                                    read_timeout=self._read_timeout)
                for event, data in self._stream:
                    self._handle(event, data)
                    if self.connected and outage_logged:
                        log.info("change stream reconnected", extra={"applied_seq": self._cache.applied})
                        outage_logged = False
                    delay = BACKOFF_MIN
                problem = "the control plane ended the stream"
            except Refused as exc:
                problem = str(exc)
                wait = exc.retry_after if exc.retry_after is not None else self._refused_wait
            except ApplicationNotFound:
                problem = "the control plane does not know this decision service's application"
            except Exception as exc:  # protocol, socket, HTTP: requests/urllib3 raise many types
                problem = f"{exc.__class__.__name__}: {exc}"
            finally:
                self._disconnected()
            if self._stop.is_set():
                break
            if not outage_logged:
                log.warning("change stream lost; reconnecting", extra={"reason": problem,
                                                                      "applied_seq": self._cache.applied})
                outage_logged = True
            if wait is not None:
                self._stop.wait(wait)
                continue
            self._stop.wait(delay * (0.5 + random.random()))
            delay = min(delay * 2, self._backoff_max)

    def _learn_application(self) -> str:
        who = self._client.whoami()
        app_id = who.get("application_id")
        if who["kind"] != "api_key" or not isinstance(app_id, str) or not app_id:
            raise ControlPlaneError("IAMGATE_DECISION_API_KEY is not an application API key")
        log.info("serving one application", extra={"application_id": app_id})
        return app_id

    def _disconnected(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        self.connected = False

    # -- frames

    def _handle(self, event: str, data: dict) -> None:
        seq = data.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ProtocolError(f"{event} frame without a valid seq")
        cache = self._cache
        if event == "change":
            self._apply_change(seq, data)
        elif event == "heartbeat":
            cache.advance(seq)
        elif event == "hello":
            epoch = data.get("epoch")
            if not isinstance(epoch, str) or not epoch:
                raise ProtocolError("hello frame without a valid epoch")
            replaced = self._epoch is not None and epoch != self._epoch
            if not self.synced or seq < cache.applied or replaced:
                if self.synced:
                    if seq < cache.applied:
                        log.warning("the change log went backwards (control plane restarted without its data); "
                                    "dropping the cache", extra={"applied_seq": cache.applied, "head": seq})
                    else:
                        log.warning("the change log was replaced (control plane restarted without its data); "
                                    "dropping the cache", extra={"applied_seq": cache.applied, "head": seq,
                                                                 "epoch": epoch, "previous_epoch": self._epoch})
                    self._metrics.resets.inc()
                cache.resync(seq)
                self.synced = True
            self._epoch = epoch
            cache.saw_head(seq)
            self._caught_up_at = seq
            self.connected = True
        elif event == "revoked":
            log.error("the control plane revoked this decision service's credential; checks fail closed",
                      extra={"applied_seq": cache.applied, "head": seq})
            self._last_frame = float("-inf")
            raise CredentialRevoked("the control plane revoked this decision service's credential")
        elif event == "reset":
            log.warning("change stream reset: the control plane cannot replay from our seq; dropping the cache",
                        extra={"applied_seq": cache.applied, "head": seq})
            cache.resync(seq)
            self._caught_up_at = seq
            self._metrics.resets.inc()
        else:
            return  # not a frame of the protocol (an SSE "message", say): nothing to apply
        self._last_frame = self._monotonic()

    def _apply_change(self, seq: int, data: dict) -> None:
        app_id, type_, user_ids = data.get("app_id"), data.get("type"), data.get("user_ids") or []
        policy_ids = data.get("policy_ids")  # absent: the whole policy set is read again
        if not isinstance(type_, str) or not isinstance(user_ids, list) or (
                app_id is not None and not isinstance(app_id, str)) or (
                policy_ids is not None and not (isinstance(policy_ids, list)
                                                and all(isinstance(p, str) for p in policy_ids))):
            raise ProtocolError(f"change frame {seq} is malformed")
        dropped = self._cache.apply(seq, app_id, type_, [u for u in user_ids if isinstance(u, str)], policy_ids)
        if dropped is None:
            return
        self._metrics.events.inc()
        if dropped.total:
            for kind, count in (("grants", dropped.grants), ("policies", dropped.policies),
                                ("api_keys", dropped.api_keys)):
                if count:
                    self._metrics.invalidations.inc((kind,), count)
