"""Sending webhook deliveries (spec "Events": delivery headers, retries; docs/webhooks.md,
"Delivery").

``Sender`` makes one HTTP POST: to the address ``TargetPolicy.pin`` checked (the name
is resolved and checked again at every send, so DNS rebinding cannot steer it
elsewhere), with the URL's name kept as Host and as TLS SNI and certificate name,
a total deadline per attempt (``_Deadline``), no redirects, no proxies from the environment,
no cookies, and a cap on what is read of the response, whose body is never decompressed.

``DeliveryWorker`` claims due deliveries with a lease (``WebhookStore.claim``), at most
IAMGATE_WEBHOOK_MAX_IN_FLIGHT_PER_APPLICATION of one application at once across every
worker, so one tenant's slow receiver cannot hold every delivery thread; it signs
the exact bytes it sends twice (``signing``: the spec's X-Service-Signature, and Standard
Webhooks' signature of the delivery id, the attempt's timestamp and the body), records
the outcome if it still holds the lease, schedules retries after
IAMGATE_WEBHOOK_RETRY_DELAYS, and disables a webhook after
``DISABLE_AFTER`` failed attempts in a row.  A worker killed mid-send loses nothing:
the lease lapses and another worker sends the same delivery, same id, again.

The same queue carries deliveries of other kinds (a delivery's ``kind``; none for a
webhook's event): a ``DeliveryKind`` names each attempt's URL (or cancels the delivery),
builds its request, judges its answer, sets its retry delays and logs its attempts,
while the worker keeps the lease, the target rules (``TargetPolicy.pin`` at every
attempt), the sender and the delivery log.
OIDC back-channel logout (``controlplane.oidc.backchannel``) is one.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import timedelta
from typing import Protocol
from urllib.parse import urlsplit

import requests
from prometheus_client import Counter
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from controlplane.webhooks.errors import WebhookTargetForbidden
from controlplane.webhooks.signing import service_signature, standard_headers, standard_key
from controlplane.webhooks.store import INACTIVE, WebhookStore, unsubscribed
from controlplane.webhooks.targets import Pinned, TargetPolicy
from shared import tracing
from shared.crypto import DecryptionError, SecretBox
from shared.metrics import HttpMetrics
from shared.timeutil import Clock

log = logging.getLogger("iamgate.webhooks")

DISABLE_AFTER = 100          # failed attempts in a row (docs/webhooks.md, "Auto-disable")
APPLICATION_DELETED = "application deleted"  # a delivery's last_error when its application's deletion began
RESPONSE_READ_CAP = 64 * 1024
LEASE_MARGIN = 30            # seconds a lease outlives the request timeout
TARGETS_PER_THREAD = 16      # kept-alive targets per delivery thread
IDLE_REUSE = 1.0             # seconds a kept-alive connection may sit idle and still be reused
USER_AGENT = "iamgate-webhooks/1"


@dataclass(frozen=True)
class Cancelled:
    """Why a delivery is no longer to be sent: it ends unsent, status ``cancelled``."""

    reason: str


@dataclass(frozen=True)
class Outcome:
    status: int | None      # the receiver's HTTP status; None when no response arrived
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class _Watchdog:
    """One thread per process that expires the deadlines of every attempt in flight, in
    the order they fall due.  (A ``threading.Timer`` per attempt cost a thread start per
    delivery, and a start waits for the new thread to get the GIL: up to the 5 ms switch
    interval while the other delivery threads are busy.)"""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list = []
        self._order = itertools.count()
        self._pid = None

    def add(self, deadline: _Deadline, seconds: float) -> None:
        with self._cond:
            if self._pid != os.getpid():  # first use in this process (or a fork of one that used it)
                self._pid, self._heap = os.getpid(), []
                threading.Thread(target=self._run, name="iamgate-webhook-deadlines", daemon=True).start()
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), deadline))
            if self._heap[0][2] is deadline:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            due = []
            with self._cond:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].finished or self._heap[0][0] <= now):
                    entry = heapq.heappop(self._heap)
                    if not entry[2].finished:
                        due.append(entry[2])
                if not due:
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
            for deadline in due:
                deadline._expire()


class _Deadline:
    """IAMGATE_WEBHOOK_TIMEOUT as a total for one attempt (connect, TLS, request,
    response head and the capped body read): the socket timeouts only bound each read,
    so a receiver dribbling a byte at a time could hold an attempt indefinitely.  When
    the deadline passes, the attempt's sockets are shut down, which ends any blocked
    read at once; the attempt then counts as a timeout."""

    _current = threading.local()  # the deadline of the attempt running on this thread
    _watchdog = _Watchdog()

    def __init__(self, seconds: float):
        self.expired = False
        self.finished = False
        self._seconds = seconds
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> _Deadline:
        _Deadline._current.value = self
        self._watchdog.add(self, self._seconds)
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self.finished = True  # from now on the sockets may be another attempt's (kept alive)
            self._sockets = []
        _Deadline._current.value = None

    @classmethod
    def watch(cls, sock: socket.socket) -> None:
        deadline = getattr(cls._current, "value", None)
        if deadline is None:
            return
        with deadline._lock:
            deadline._sockets.append(sock)
            if deadline.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            if self.finished:
                return  # the attempt ended first
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class _WatchedHTTPConnection(HTTPConnection):
    def _new_conn(self):
        sock = super()._new_conn()
        _Deadline.watch(sock)
        return sock


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self):
        sock = super()._new_conn()
        _Deadline.watch(sock)
        return sock


class _ReusingPool:
    """A kept-alive connection is reused only if it was idle less than ``IDLE_REUSE``
    seconds (receivers close idle connections after a few seconds, and a POST sent into
    one that is closing fails), and its socket is put under the attempt's deadline like
    a new one's."""

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)
        if conn.sock is not None:
            if time.monotonic() - getattr(conn, "_iamgate_idle_since", 0.0) > IDLE_REUSE:
                conn.close()  # connects afresh (and is watched in _new_conn) on its next request
            else:
                _Deadline.watch(conn.sock)
        return conn

    def _put_conn(self, conn):
        if conn is not None:
            conn._iamgate_idle_since = time.monotonic()
        super()._put_conn(conn)


class _WatchedHTTPConnectionPool(_ReusingPool, HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSConnectionPool(_ReusingPool, HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class _PinnedAdapter(HTTPAdapter):
    """Connects to the URL's host (the checked IP address) while naming ``hostname``
    in TLS: SNI and certificate verification (urllib3's ``server_hostname`` and
    ``assert_hostname`` pool arguments, through requests' documented subclassing hook)."""

    def __init__(self, hostname: str, **kw):
        self._hostname = hostname
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPConnectionPool,
                                                   "https": _WatchedHTTPSConnectionPool}

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if host_params["scheme"] == "https":
            pool_kwargs["server_hostname"] = self._hostname
            pool_kwargs["assert_hostname"] = self._hostname
        return host_params, pool_kwargs


class Sender:
    """Posts deliveries, keeping connections alive between them: each delivery thread
    keeps one pinned adapter per (scheme, checked address, port, host name), at most
    ``TARGETS_PER_THREAD`` (least recently used dropped), each with one connection.
    A kept connection goes to the address that was checked for this very send, under the
    same host name for TLS; a response whose body is longer than the read cap is closed,
    not kept.

    Requests go through the adapter itself, never a ``requests.Session``: a session keeps
    a cookie jar, which would carry a cookie one receiver set on to the next delivery to
    that host, another tenant's included; and for a 3xx with a Location it reads the
    whole body, decompressed, to prepare a redirect it then does not follow.  So the
    connection is all a delivery leaves behind, and no answer, whatever its status, is
    read past the cap; it is asked for ``Accept-Encoding: identity`` and read raw, never
    decompressed."""

    def __init__(self, timeout: float, *, verify=True, read_cap: int = RESPONSE_READ_CAP):
        self.timeout = timeout
        self._verify = verify  # a CA bundle path in tests with their own certificate
        self._read_cap = read_cap
        self._local = threading.local()

    def _adapter(self, scheme: str, address: str, port: int, hostname: str) -> _PinnedAdapter:
        adapters = getattr(self._local, "adapters", None)
        if adapters is None:
            adapters = self._local.adapters = OrderedDict()
        key = (scheme, address, port, hostname)
        adapter = adapters.get(key)
        if adapter is not None:
            adapters.move_to_end(key)
            return adapter
        adapter = adapters[key] = _PinnedAdapter(hostname, max_retries=0, pool_connections=1, pool_maxsize=1)
        if len(adapters) > TARGETS_PER_THREAD:
            adapters.popitem(last=False)[1].close()
        return adapter

    def post(self, pinned: Pinned, body: bytes, headers: dict) -> Outcome:
        """POST ``body`` to the pinned target: a CLIENT span while tracing, named by the
        target's host and port only (a receiver's URL path may hold its own secret), whose
        ``traceparent`` goes out with the delivery."""
        target = pinned.target
        with tracing.client_call("POST", {"server.address": target.host, "server.port": target.port,
                                          "url.scheme": target.scheme}) as call:
            outcome = self._send(pinned, body, tracing.propagate(headers))
            call.answered(outcome.status, outcome.error)
        return outcome

    def _send(self, pinned: Pinned, body: bytes, headers: dict) -> Outcome:
        target = pinned.target
        address = f"[{pinned.address}]" if ":" in pinned.address else pinned.address
        url = f"{target.scheme}://{address}:{target.port}{target.path}"
        default_port = 443 if target.scheme == "https" else 80
        host = target.host if ":" not in target.host else f"[{target.host}]"
        host_header = host if target.port == default_port else f"{host}:{target.port}"
        adapter = self._adapter(target.scheme, pinned.address, target.port, target.host)
        with _Deadline(self.timeout) as deadline:
            try:
                # Nothing here reads the environment: no proxy would connect elsewhere.
                request = requests.Request("POST", url, data=body, headers={
                    **headers, "Accept-Encoding": "identity", "Host": host_header}).prepare()
                response = adapter.send(request, stream=True, timeout=(self.timeout, self.timeout),
                                        verify=self._verify)
            except requests.Timeout:
                return Outcome(None, "timeout")
            except requests.RequestException as exc:
                if deadline.expired:
                    return Outcome(None, "timeout")
                return Outcome(None, f"connection failed: {type(exc).__name__}")
            try:
                response.raw.read(self._read_cap, decode_content=False)
            except Exception:
                pass  # the status is what counts; a broken body does not change it
            finally:
                # A body read to its end has already given the connection back to the
                # pool; close() then only closes one that was cut off (over the cap, broken).
                response.close()
            if deadline.expired:
                return Outcome(None, "timeout")  # the answer, or its body, came too late
            return Outcome(response.status_code)


class DeliveryKind(Protocol):
    """A kind of delivery that is not a webhook's event, queued with its target ``url``
    in the delivery record (``WebhookStore.insert_delivery``)."""

    retry_delays: tuple[int, ...]  # seconds before each retry; then the delivery has failed

    def target(self, delivery: dict) -> str | Cancelled:
        """The URL this attempt goes to, read afresh at each attempt; ``Cancelled`` when
        the delivery is no longer wanted there."""

    def request(self, delivery: dict) -> tuple[bytes, dict]:
        """The body and headers of one attempt."""

    def succeeded(self, outcome: Outcome) -> bool:
        """Whether the receiver's answer is a success."""

    def attempted(self, delivery: dict, outcome: Outcome, *, attempt: int, retry_in: int | None) -> None:
        """Log one attempt (``retry_in`` None: no retry follows)."""


class DeliveryQueue(Protocol):
    """What another area may do with the delivery queue: put a delivery of its own kind
    on it (``WebhookStore`` is the queue; other areas never import the store)."""

    def insert_delivery(self, doc: dict) -> bool:
        """Queue ``doc``; False when a delivery of its ``_id`` is already there."""


class DeliveryMetrics:
    """Prometheus: deliveries sent, failed and retried, and the queue depth."""

    def __init__(self, metrics: HttpMetrics, store: WebhookStore):
        registry = metrics.registry
        self.sent = Counter("iamgate_webhook_deliveries_sent_total", "Webhook deliveries answered 2xx",
                            registry=registry)
        self.failed = Counter("iamgate_webhook_delivery_failures_total",
                              "Webhook delivery attempts that failed (non-2xx, timeout, refused target)",
                              registry=registry)
        self.retried = Counter("iamgate_webhook_delivery_retries_total", "Webhook delivery retries scheduled",
                               registry=registry)
        # The store's figure, the same from every worker: read in the background.
        metrics.add_store_gauge("iamgate_webhook_queue_depth", "Webhook deliveries pending (due or scheduled)",
                                store.queue_depth)


@dataclass(eq=False)
class DeliveryWorker:
    store: WebhookStore
    box: SecretBox
    policy: TargetPolicy
    sender: Sender
    clock: Clock
    metrics: DeliveryMetrics
    _: KW_ONLY
    retry_delays: InitVar[tuple[int, ...]]
    lease_seconds: InitVar[float | None] = None
    threads: int = 4  # how many delivery threads start() runs
    per_application: int = 4  # attempts in flight per application, across every worker
    idle_wait: float = 1.0
    kinds: dict[str, DeliveryKind] = field(default_factory=dict)  # by a delivery's ``kind``
    # The live application of an id, None from the moment its deletion began
    # (``ApplicationService.live``); None here: every application is taken as live.
    application_live: Callable[[str], object] | None = None

    def __post_init__(self, retry_delays, lease_seconds: float | None):
        self._delays = tuple(retry_delays)
        self._lease = timedelta(seconds=lease_seconds if lease_seconds is not None
                                else self.sender.timeout + LEASE_MARGIN)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- running

    def start(self) -> DeliveryWorker:
        for i in range(self.threads - len(self._threads)):
            thread = threading.Thread(target=self._run, name=f"iamgate-webhooks-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the delivery threads and wait (up to ``timeout`` seconds in all) for them
        to finish the attempt in hand; an attempt cut short is retried after its lease."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]

    def wake(self) -> None:
        """A delivery became due (the dispatcher calls this in the same process)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                worked = self.run_once()
            except Exception:
                log.exception("webhook delivery failed unexpectedly")
                worked = False
            if not worked:
                self._wake.wait(self.idle_wait)
                self._wake.clear()

    # --- one delivery

    def run_once(self) -> bool:
        """Claim one due delivery and attempt it; False when none was due."""
        now = self.clock()
        delivery = self.store.claim(now, now + self._lease, per_application=self.per_application)
        if delivery is None:
            return False
        attributes = {"iamgate.application_id": delivery["app_id"], "iamgate.delivery_id": delivery["_id"],
                      "iamgate.event": delivery["event"]}
        if delivery.get("webhook_id"):
            attributes["iamgate.webhook_id"] = delivery["webhook_id"]
        with tracing.span("webhook delivery", attributes):
            self.attempt(delivery)
        return True

    def attempt(self, delivery: dict) -> None:
        if delivery.get("kind") is not None:
            self._attempt_kind(delivery)
            return
        if self.application_live is not None and self.application_live(delivery["app_id"]) is None:
            # Its deletion began (the purge may run late or be cut short and finished at a
            # start): nothing of a deleted tenant goes out, its users' data least of all.
            self.store.finish(delivery, {"status": "cancelled", "last_error": APPLICATION_DELETED})
            return
        webhook = self.store.get(delivery["app_id"], delivery["webhook_id"])
        if webhook is None:
            self.store.drop_delivery(delivery)  # deleted webhook: pending retries are cancelled
            return
        if not webhook["is_active"]:
            self.store.finish(delivery, {"status": "cancelled", "last_error": INACTIVE})
            return
        if delivery["event"] not in webhook["events"]:
            # Unsubscribed since it was queued (PUT events replaces them): the receiver
            # opted out of this kind, retries included.
            self.store.finish(delivery, {"status": "cancelled", "last_error": unsubscribed(delivery["event"])})
            return
        body = delivery["body"].encode("utf-8")
        try:
            secret = self.box.decrypt(webhook["secret"]).decode("utf-8")
        except DecryptionError:
            self._record(delivery, webhook, Outcome(None, "secret cannot be decrypted"))
            return
        pinned = self._pin(webhook["url"])
        if isinstance(pinned, Outcome):
            self._record(delivery, webhook, pinned)
            return
        timestamp = int(self.clock().timestamp())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Service-Signature": service_signature(secret, body),
            "X-Service-Event": delivery["event"],
            "X-Service-Delivery-Id": delivery["_id"],
            "X-Service-Timestamp": str(timestamp),
        }
        key = standard_key(secret)
        if key is not None:  # None only for some secrets made before these headers
            headers.update(standard_headers(key, delivery["_id"], timestamp, body))
        self._record(delivery, webhook, self.sender.post(pinned, body, headers))

    def _pin(self, url: str) -> Pinned | Outcome:
        """The checked address to send to, or the failed attempt's outcome."""
        try:
            return self.policy.pin(url)
        except WebhookTargetForbidden as exc:
            return Outcome(None, f"target forbidden: {exc.details.get('reason')}")
        except (OSError, UnicodeError) as exc:
            return Outcome(None, f"name resolution failed: {type(exc).__name__}")
        except Exception as exc:  # a URL that no longer parses (rules tightened since it was saved)
            return Outcome(None, f"invalid target: {type(exc).__name__}")

    def _attempt_kind(self, delivery: dict) -> None:
        kind = self.kinds.get(delivery["kind"])
        if kind is None:  # queued by a newer release than this worker's: left to one that knows it
            log.warning("delivery of an unknown kind left unsent", extra={"delivery_id": delivery["_id"],
                                                                          "kind": delivery["kind"]})
            self.store.finish(delivery, {}, self.clock() + timedelta(seconds=self._delays[0]))
            return
        url = kind.target(delivery)
        if isinstance(url, Cancelled):
            if self.store.finish(delivery, {"status": "cancelled", "last_error": url.reason}):
                log.info("delivery cancelled unsent", extra={"delivery_id": delivery["_id"], "kind": delivery["kind"],
                                                             "reason": url.reason})
            return
        outcome = self._pin(url)
        if not isinstance(outcome, Outcome):
            body, headers = kind.request(delivery)
            outcome = self.sender.post(outcome, body, {"User-Agent": USER_AGENT, **headers})
        ok = kind.succeeded(outcome)
        attempt = delivery.get("attempts", 0) + 1
        retry_in = None if ok or attempt > len(kind.retry_delays) else kind.retry_delays[attempt - 1]
        if self._finish(delivery, outcome, ok=ok, retry_in=retry_in):
            kind.attempted(delivery, outcome, attempt=attempt, retry_in=retry_in)
            self._count(ok=ok, retried=retry_in is not None)

    def _finish(self, delivery: dict, outcome: Outcome, *, ok: bool, retry_in: int | None) -> bool:
        """Log the attempt on the delivery and queue its retry; False when the lease
        lapsed and another worker owns the delivery now."""
        now = self.clock()
        attempts = delivery.get("attempts", 0) + 1
        changes = {"attempts": attempts, "retry_count": attempts - 1, "response_status": outcome.status,
                   "last_error": outcome.error}
        if ok:
            changes.update(status="delivered", delivered_at=now)
        elif retry_in is None:
            changes.update(status="failed")
        return self.store.finish(delivery, changes, None if retry_in is None else now + timedelta(seconds=retry_in))

    def _count(self, *, ok: bool, retried: bool) -> None:
        if ok:
            self.metrics.sent.inc()
            return
        self.metrics.failed.inc()
        if retried:
            self.metrics.retried.inc()

    def _record(self, delivery: dict, webhook: dict, outcome: Outcome) -> None:
        attempts = delivery.get("attempts", 0) + 1
        retry_in = None if outcome.ok or attempts > len(self._delays) else self._delays[attempts - 1]
        if not self._finish(delivery, outcome, ok=outcome.ok, retry_in=retry_in):
            return  # the lease lapsed and another worker owns the delivery now
        self._count(ok=outcome.ok, retried=retry_in is not None)
        now = self.clock()
        app_id, webhook_id = delivery["app_id"], delivery["webhook_id"]
        if outcome.ok:
            self.store.record_success(app_id, webhook_id)
            return
        failures, active = self.store.record_failure(app_id, webhook_id)
        disabled = active and failures >= DISABLE_AFTER and self.store.disable(app_id, webhook_id, now)
        if disabled:
            # The host only: the URL's path or query may carry the receiver's token.
            log.warning("webhook disabled after %d failed deliveries in a row", DISABLE_AFTER,
                        extra={"app_id": app_id, "webhook_id": webhook_id, "host": _host(webhook["url"])})
        if disabled or (not active and retry_in is not None):
            # Deactivated, here or by hand while this attempt was in flight (whose own
            # cancel passed this held delivery by): its pending deliveries, the retry just
            # queued included, are cancelled, not kept for the webhook's return.
            self.store.cancel_queued(app_id, webhook_id, now, INACTIVE)


def _host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None
