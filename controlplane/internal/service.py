"""The change stream decision services follow (contract item 4), as server-sent events.

Frames, in this order:

- ``event: hello`` ``data: {"seq": HEAD, "epoch": EPOCH}``, always first; EPOCH names the
  change log (``EventLog.epoch``): it stays the same while the log lives and changes when
  the log starts over (a ``memory://`` control plane restarted), so a client resuming with
  ``since`` can tell that seqs it applied belong to another log even when HEAD is not
  below them, and drop its whole cache;
- ``event: reset`` ``data: {"seq": HEAD}`` when ``since`` cannot be replayed (older than
  the oldest retained event minus one, or ahead of the log: the store was reset); the
  client drops its whole cache and the stream goes on live from HEAD;
- ``event: change`` ``id: N`` ``data: {"seq", "app_id", "type", "user_ids"}`` for every
  event after ``since`` (or after HEAD when ``since`` is omitted) that can change a
  decision service's answers (``shared.invalidation.concerns_decisions``), in seq order:
  replayed from the log, then live; a policy event names the policies it changed in
  ``policy_ids`` too (``shared.invalidation.changed_policies``);
- ``event: heartbeat`` ``data: {"seq": LAST}`` after ``heartbeat`` seconds without a frame,
  and ``ADVANCE_AFTER`` (50 ms) after the stream covered an event it did not send; LAST
  is the last seq the stream covered. A per-application stream skips other applications'
  events, and every stream skips the events that concern no decision (a token's
  ``connection.refreshed``, a profile edit), but moves past them: a client's applied seq
  reaches such a write's ``X-Iamgate-Revision`` within ``ADVANCE_AFTER``, and a sidecar
  costs the control plane a frame per decision change, not one per token it issues.

- ``event: revoked`` ``data: {"seq": LAST}`` when the stream's credential stopped being
  valid (API key revoked or lost ``decision:sync``, application deleted): the credential
  is checked again at least once per heartbeat interval, and the stream then ends.

Every stream of a process waits on the process's one tailer (``ctx.tailer``), so N clients
cost one poll of MongoDB, not N; the log is read directly only to replay what the
tailer's ring buffer no longer holds, a page at a time.  A stream of one application is
woken only by that application's events (or its heartbeat), and each change frame is
encoded once per process, not once per stream (benchmarks/NOTES.md, "Change-stream
fan-out").
"""
from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from controlplane.abac.service import PolicyReader
from controlplane.apikeys.service import ApiKeyService
from controlplane.events import EventLog
from controlplane.internal.store import StreamLeases
from controlplane.roles.service import RoleService
from controlplane.store import UNREACHABLE, one_line
from shared.errors import ApplicationNotFound, RateLimited, Unauthorized
from shared.invalidation import affected_users, changed_policies, concerns_decisions

log = logging.getLogger("iamgate.internal")

REPLAY_PAGE = 1000
# The API-key permission that opens the internal API (docs/authorization.md, "Permission gates").
DECISION_PERMISSION = "decision:sync"
FRAME_CACHE = 4096  # encoded change frames kept: every stream of the process sends the same bytes
# Seconds after which a stream that covered events it did not send (they concern no
# decision) says so with a heartbeat: what a check's min_revision after such a write waits for.
ADVANCE_AFTER = 0.05


def frame(event: str, data: dict, event_id: int | None = None) -> bytes:
    """One server-sent event."""
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode("utf-8")


def change_frame(event) -> bytes:
    data = {"seq": event.seq, "app_id": event.app_id, "type": event.type, "user_ids": affected_users(event)}
    policy_ids = changed_policies(event)
    if policy_ids is not None:
        data["policy_ids"] = policy_ids
    return frame("change", data, event.seq)


class ChangeFeed:
    def __init__(self, events, tailer, *, heartbeat: float, registry=None, monotonic=time.monotonic,
                 sleep=time.sleep):
        self._events = events
        self._tailer = tailer
        self.heartbeat = heartbeat
        self._monotonic = monotonic
        self._sleep = sleep
        registry = registry if registry is not None else CollectorRegistry()
        # Each worker counts the streams it serves; a scrape of several workers shows their
        # sum, and a worker that died takes its count with it (livesum).
        self.open_streams = Gauge("iamgate_change_streams_open", "Change streams being served",
                                  registry=registry, multiprocess_mode="livesum")
        self.resets = Counter("iamgate_change_stream_resets_total",
                              "Change streams opened with a since that could not be replayed", registry=registry)
        self._frames: OrderedDict[int, bytes] = OrderedDict()

    def change_frame(self, event) -> bytes:
        """``change_frame(event)``, encoded once for all the streams that send it.  Keyed by
        everything the frame is made of, not the seq alone: a wiped store reuses seqs."""
        key = (event.seq, event.app_id, event.type, event.user_ids, event.subject.get("user_id"),
               event.subject.get("policy_id"))
        try:
            encoded = self._frames.get(key)
        except TypeError:  # an unhashable subject: encode it for this stream alone
            return change_frame(event)
        if encoded is None:
            encoded = self._frames[key] = change_frame(event)
            if len(self._frames) > FRAME_CACHE:
                self._frames.popitem(last=False)
        return encoded

    def replayable(self, since: int, head: int) -> bool:
        """Whether every event after ``since`` is still in the log."""
        if since > head:
            return False  # the client saw events this log never had (a reset store)
        if since == head:
            return True
        oldest = self._events.oldest_retained()
        return oldest is not None and since >= oldest - 1

    def frames(self, app_id: str | None, since: int | None, guard=None):
        """The stream for one client: the events of ``app_id`` (None: every application).
        ``guard`` (a ``StreamGuard``) is asked at least once per heartbeat interval
        whether the client's credential still holds; when it does not, the stream says
        ``revoked`` and ends.

        The log's epoch and head (and whether ``since`` can be replayed) are read here, at
        once: a store that does not answer fails the request (503) before its 200 is
        sent. Once streaming, it ends the stream (the client resumes with ``since``)."""
        try:
            epoch = self._events.epoch()
            head = self._events.head()
            replay = since is not None and self.replayable(since, head)
        except BaseException:
            if guard is not None:
                guard.close()
            raise
        return self._stream(app_id, since, guard, epoch, head, replay)

    def _stream(self, app_id, since, guard, epoch: str, head: int, replay: bool):
        self.open_streams.inc()
        last = told = head  # covered so far; what the client was last told it covers
        checked = self._monotonic()
        try:
            yield frame("hello", {"seq": head, "epoch": epoch})
            if since is not None:
                if replay:
                    last = told = since
                else:
                    self.resets.inc()
                    yield frame("reset", {"seq": head})
            quiet_since = self._monotonic()
            untold_since = None  # when the stream first covered an event it did not send
            while True:
                if guard is not None and self._monotonic() - checked >= self.heartbeat:
                    checked = self._monotonic()
                    if not guard.check():
                        yield frame("revoked", {"seq": last})
                        return
                now = self._monotonic()
                wait = self.heartbeat - (now - quiet_since)
                if guard is not None:  # wake for the next credential check too
                    wait = min(wait, self.heartbeat - (now - checked))
                if untold_since is not None:  # and to say how far it covered
                    wait = min(wait, ADVANCE_AFTER - (now - untold_since))
                wait = max(0.0, wait)
                started = self._monotonic()
                # Untold events are covered by the next heartbeat: until then only an
                # event that concerns decisions wakes the stream, so a busy log of token
                # events costs a wake-up and a frame per ADVANCE_AFTER, not per event.
                batch = self._tailer.wait_after(last, wait, app_id, decisions_only=untold_since is not None)
                if batch is None:  # older than the tailer's buffer: read the log itself
                    batch, last = self._replay_page(app_id, last)
                elif not batch and self._monotonic() - started < wait:
                    self._sleep(wait)  # the tailer has stopped: do not spin
                for event in batch:
                    last = max(last, event.seq)
                    if (app_id is None or event.app_id == app_id) and concerns_decisions(event):
                        yield self.change_frame(event)
                        told = event.seq
                        quiet_since = self._monotonic()
                now = self._monotonic()
                if last == told:
                    untold_since = None
                elif untold_since is None:
                    untold_since = now
                if now - quiet_since >= self.heartbeat or (
                        untold_since is not None and now - untold_since >= ADVANCE_AFTER):
                    yield frame("heartbeat", {"seq": last})
                    told, untold_since = last, None
                    quiet_since = self._monotonic()
        except UNREACHABLE as exc:
            log.warning("change stream ended: the store does not answer", extra={"app_id": app_id, "last_seq": last,
                                                                                  "error": one_line(exc)})
        finally:
            # Runs when the client goes away too: the server closes the body at its next write.
            self.open_streams.dec()
            if guard is not None:
                guard.close()
            log.debug("change stream closed", extra={"app_id": app_id, "last_seq": last})

    def _replay_page(self, app_id, last: int):
        """The next page of events after ``last`` from the log, and how far it covers.

        Only events up to the tailer's position are taken: below it every seq is either
        in the log or was given up as a gap by the tailer, so nothing in flight is missed.
        """
        bound = self._tailer.last_seq
        page = self._events.read_after(last, REPLAY_PAGE, app_id=app_id)
        batch = [event for event in page if event.seq <= bound and event.is_change]
        if len(page) < REPLAY_PAGE or page[-1].seq > bound:
            return batch, max(last, bound)
        return batch, page[-1].seq


@dataclass(eq=False)
class DecisionData:
    """What a decision service reads (contract items 1 to 3): a user's grants, the
    application's active ABAC policies, and its API key digests, each with the
    change-log head read before the data (``seq``: the no-stale-re-fill rule)."""

    roles: RoleService
    policy_reader: PolicyReader
    api_keys: ApiKeyService
    events: EventLog

    def grants(self, app_id: str, user_id: str):
        """``shared.rbac.Grants``, which carries its own seq."""
        return self.roles.grants(app_id, user_id)

    def policies(self, app_id: str, policy_ids: list[str] | None = None) -> tuple[int, list]:
        """Every active policy, or those of ``policy_ids`` that are active."""
        seq = self.events.head()
        if policy_ids is not None:
            return seq, self.policy_reader.active_by_ids(app_id, policy_ids)
        return seq, self.policy_reader.active(app_id)

    def api_key_digests(self, app_id: str) -> tuple[int, list[dict]]:
        seq = self.events.head()
        return seq, self.api_keys.digests(app_id)


# ---------------------------------------------------------------- stream credentials and the cap

class TooManyStreams(RateLimited, code="STREAM_LIMIT_EXCEEDED",
                     message="This credential has too many open change streams. Close one or try again later."):
    """The credential already holds IAMGATE_MAX_STREAMS_PER_CREDENTIAL open change
    streams (across every replica)."""


class StreamGuard:
    """Re-checks one stream's credential: ``check`` answers whether the API key (still
    active, still holding ``permission``) or the internal token, and the application,
    are still valid, and renews the stream's lease; ``close`` gives the lease back."""

    def __init__(self, recheck, leases: StreamLeases | None, lease_id: str | None):
        self._recheck = recheck
        self._leases = leases
        self._lease_id = lease_id

    def check(self) -> bool:
        """Raises ``UNREACHABLE`` when the store does not answer: the stream ends, but
        the credential is not said to be revoked."""
        try:
            valid = self._recheck()
        except UNREACHABLE:
            raise
        except Exception:  # an unreadable store must not keep a stream open on an old answer
            log.warning("change stream credential check failed", exc_info=True)
            valid = False
        if valid and self._lease_id is not None:
            self._leases.renew(self._lease_id)
        return valid

    def close(self) -> None:
        if self._lease_id is not None:
            lease_id, self._lease_id = self._lease_id, None
            try:
                self._leases.give_back(lease_id)
            except UNREACHABLE:
                pass  # the lease lapses after its TTL, as a dead process's does


class StreamAccess:
    """Opens guarded streams: the per-credential cap (IAMGATE_MAX_STREAMS_PER_CREDENTIAL,
    429 STREAM_LIMIT_EXCEEDED) for API keys, and the re-check of the credential.  The
    operator's internal service token is not capped: one all-applications sidecar per
    pod of a large deployment may legitimately hold many streams."""

    def __init__(self, authenticator, leases: StreamLeases, *, cap: int, permission: str, retry_after: int):
        self._auth = authenticator
        self._leases = leases
        self._cap = cap
        self._permission = permission
        self._retry_after = retry_after

    def open(self, token: str, principal, app_id: str | None) -> StreamGuard:
        lease_id = None
        if principal.kind == "api_key":
            lease_id = self._leases.take(principal.credential_id, self._cap)
            if lease_id is None:
                raise TooManyStreams(limit=self._cap, reset_at=0, retry_after=self._retry_after)
        return StreamGuard(lambda: self._still_valid(token, app_id), self._leases, lease_id)

    def _still_valid(self, token: str, app_id: str | None) -> bool:
        try:
            principal = self._auth.internal(token, app_id)
            if app_id is not None:
                self._auth.application(app_id)
        except (Unauthorized, ApplicationNotFound):
            return False
        return principal.kind == "internal" or self._auth.has_permission(principal, self._permission)
