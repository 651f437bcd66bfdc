"""The decision service's rules: who may ask, and the answer, from cache or control plane.

``DecisionService.begin(app_id)`` opens one request's ``Lookup``: it fixes whether the
cache may be trusted for this request (the stream's trust rule) and remembers what this
request fetched, so a caller checking itself costs one fetch, not two.

Credentials (the control plane's AuthMiddleware, in the same order): the application must
be served (404 NOT_FOUND), a bearer credential is required (401 UNAUTHORIZED), an API key
(``sk_test_``/``sk_live_``) is known by its SHA-256 digest and an end-user token verifies
and belongs to an active user, carrying the account's stamp if a reset or a hand-over set
one (401), and the caller holds ``authz:check`` (403 FORBIDDEN
with ``details.required_permission``).

Answers: the subject's grants and, for POST checks, the application's policies, from the
cache when trusted and not older than ``min_revision``; otherwise fetched. When the
control plane cannot answer, 503 DECISION_UNAVAILABLE: never a stale allow.
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from decision.cache import ApiKey, DecisionCache, GrantsEntry, KeyRing, PolicySet
from decision.client import ApplicationNotFound, ControlPlaneClient, ControlPlaneError
from decision.tokens import JwksUnavailable, TokenVerifier
from shared import checks, stamps
from shared.abac import CompiledPolicies
from shared.authorization import Decision, decide_compiled, decide_one
from shared.concurrency import yield_to_others
from shared.credentials import API_KEY_PREFIXES
from shared.errors import NotFound, PermissionMissing, RevisionAhead, ServiceUnavailable, Unauthorized
from shared.http import bearer_token
from shared.ids import is_uuid
from shared.rbac import ACTIVE, Grants, matches, resolve_scope

if TYPE_CHECKING:
    from decision.decisionlog import DecisionLog
    from decision.metrics import DecisionMetrics
    from decision.stream import ChangeFollower

CHECK_PERMISSION = "authz:check"
_NO_POLICIES = CompiledPolicies(())


class DecisionUnavailable(
        ServiceUnavailable, code="DECISION_UNAVAILABLE", detail_names=("reason",),
        message="The decision service cannot reach the control plane for a fresh answer; try again shortly."):
    """503: the answer cannot be given from data known to be fresh enough (fail closed)."""

    retry_after = 1


# A fetch that showed the change log's head below a check's min_revision bounds later
# min_revisions above that head for this long without another fetch: an absurd revision
# costs at most one control-plane read a second, never one per check.
HEAD_MEMORY_SECONDS = 1.0


@dataclass(eq=False, repr=False, kw_only=True)
class DecisionService:
    """What every check uses, built once by ``decision.app.create_app``."""

    client: ControlPlaneClient
    cache: DecisionCache
    follower: ChangeFollower
    verifier: TokenVerifier
    metrics: DecisionMetrics
    clock: Callable[[], datetime]
    single_application: bool = False  # API-key mode: the key's application only
    decision_log: DecisionLog | None = None  # None while decision logs are off
    monotonic: Callable[[], float] = time.monotonic
    _head_seen: tuple[int, float] | None = field(default=None, init=False)  # (head a fetch read, when)

    def refuse_revision_ahead(self, min_revision: int) -> None:
        """400 AUTHZ_REVISION_AHEAD, as the control plane answers, when a fetch within
        HEAD_MEMORY_SECONDS read a change-log head below ``min_revision``."""
        seen = self._head_seen
        if seen is not None and min_revision > seen[0] and self.monotonic() - seen[1] < HEAD_MEMORY_SECONDS:
            raise RevisionAhead(min_revision, seen[0])

    def note_head(self, head: int, min_revision: int) -> None:
        """A fetch for ``min_revision`` read the log at ``head``; refuse when it is behind."""
        if head < min_revision:
            self._head_seen = (head, self.monotonic())
            raise RevisionAhead(min_revision, head)

    def begin(self, app_id: str, request_id: str | None = None) -> Lookup:
        """Start one request on ``app_id``; 404 NOT_FOUND when this service does not serve it.
        ``request_id`` goes with every lookup this request sends to the control plane
        (``X-Request-Id``), so one id finds the request in both services' logs."""
        if self.single_application:
            served = self.follower.application_id
            if app_id != served:
                if served is None:
                    self.metrics.unavailable.inc()
                    raise DecisionUnavailable("the control plane has not yet told which application this "
                                              "decision service serves")
                raise _not_found(app_id)
        return Lookup(self, app_id, trusted=self.follower.trusted(), request_id=request_id)


class Lookup:
    __slots__ = ("_service", "app_id", "_trusted", "_fetched", "now", "request_id")

    def __init__(self, service: DecisionService, app_id: str, *, trusted: bool, request_id: str | None = None):
        self._service = service
        self.app_id = app_id
        self.request_id = request_id
        self._trusted = trusted
        self._fetched: dict[str, GrantsEntry] | None = None  # users fetched by this request
        self.now = service.clock()

    # -- the caller

    def authenticate(self, authorization: str | None) -> None:
        """The caller may check: see the module docstring for the order of errors."""
        ring = self._key_ring()
        token = _bearer(authorization)
        if token.startswith(API_KEY_PREFIXES):
            key = ring.by_digest.get(hashlib.sha256(token.encode("utf-8")).hexdigest())
            if key is None:
                raise Unauthorized("The API key is not valid for this application.")
            if not key.may_check:
                raise PermissionMissing(CHECK_PERMISSION)
            return
        try:
            user_id, stamp = self._service.verifier.verify(token, self.app_id)
        except JwksUnavailable:
            raise self._unavailable("the control plane did not answer the signing keys lookup") from None
        entry, cached = self._grants(user_id, fresh=False)
        known = entry.grants.token_stamp
        if cached and stamp is not None and (known is None or stamp > known):
            # A stamp newer than the cached grants' (the reset's change is not here yet):
            # they are read again before the token is judged.  An older stamp never is.
            entry, _ = self._grants(user_id, fresh=True)
        if entry.grants.status != ACTIVE:
            raise Unauthorized("The user of this token is no longer active.")
        stamps.check(stamp, entry.grants.token_stamp)
        if not entry.at(None, self.now).allows(CHECK_PERMISSION):
            raise PermissionMissing(CHECK_PERMISSION)

    # -- the answer

    def decide(self, user_id: str, permissions, *, scope: str | None, min_revision: int | None,
               abac: bool, resource=None, context=None) -> tuple[dict[str, Decision], bool]:
        """Decisions for ``permissions`` of ``user_id`` and whether they came from the cache.
        ``abac``: evaluate the application's policies (POST checks)."""
        fresh = min_revision is not None and self._refresh_for(min_revision)
        entry, cached = self._grants(user_id, fresh=fresh)
        if fresh and min_revision is not None:  # fresh implies the latter; mypy cannot tell
            self._check_head(user_id, entry, min_revision)
        scoped = entry.at(scope, self.now)
        if abac:
            policies, policies_cached = self._policies(fresh=fresh)
            cached = cached and policies_cached
            if policies.policies:
                return decide_compiled(scoped.compiled, permissions, policies=policies, resource=resource,
                                       context=context, pause=yield_to_others), cached
        # No policy can apply: RBAC alone, whose decisions the scoped grants remember.
        return scoped.decide_many(permissions), cached

    def decide_one(self, user_id: str, permission: str, *, scope: str | None, min_revision: int | None,
                   resource, context) -> tuple[Decision, bool]:
        """:meth:`decide` for a POST check of one permission: the decision, not a dict of them."""
        fresh = min_revision is not None and self._refresh_for(min_revision)
        entry, cached = self._grants(user_id, fresh=fresh)
        if fresh and min_revision is not None:  # fresh implies the latter; mypy cannot tell
            self._check_head(user_id, entry, min_revision)
        scoped = entry.at(scope, self.now)
        policies, policies_cached = self._policies(fresh=fresh)
        cached = cached and policies_cached
        if policies.policies:
            return decide_one(scoped.compiled, permission, policies, resource, context, yield_to_others), cached
        return scoped.decide(permission), cached

    def check_text(self, user_id: str, permission: str, *, scope: str | None = None,
                   min_revision: int | None = None) -> str:
        """A GET check's answer (``shared.checks.CHECK_QUERY``): RBAC only."""
        log = self._service.decision_log
        sampled, started = _log_start(log) if log is not None else _NOT_LOGGED
        decisions, cached = self.decide(user_id, (permission,), scope=scope, min_revision=min_revision, abac=False)
        decision = decisions[permission]
        if started is not None and log is not None and (sampled or not decision.allowed):
            log.put(self, user_id, permission, decision.allowed, cached, 0, time.perf_counter() - started, sampled)
        return checks.check_text(permission, decision.allowed, cached)

    def abac_check_text(self, values: dict) -> str:
        """A validated POST check's answer (``shared.checks.CHECK``): RBAC and the
        application's policies over resource and context."""
        log = self._service.decision_log
        sampled, started = _log_start(log) if log is not None else _NOT_LOGGED
        user_id, permission, context = values["user_id"], values["permission"], values.get("context")
        decision, cached = self.decide_one(
            user_id, permission, scope=resolve_scope(values.get("scope"), context),
            min_revision=values.get("min_revision"), resource=values.get("resource"), context=context)
        if started is not None and log is not None and (sampled or not decision.allowed):
            log.put(self, user_id, permission, decision.allowed, cached, decision.policies_checked,
                    time.perf_counter() - started, sampled)
        return checks.abac_check_text(permission, decision.allowed, cached, decision.abac_evaluated,
                                      decision.policies_checked)

    def bulk_text(self, values: dict) -> str:
        """A validated bulk check's answer (``shared.checks.CHECK_BULK``); to the decision
        log, one check: one line with every permission's result."""
        log = self._service.decision_log
        sampled, started = _log_start(log) if log is not None else _NOT_LOGGED
        user_id, context = values["user_id"], values.get("context")
        decisions, cached = self.decide(
            user_id, values["permissions"], scope=resolve_scope(values.get("scope"), context),
            min_revision=values.get("min_revision"), abac=True, resource=values.get("resource"), context=context)
        answers = [(permission, decision.allowed) for permission, decision in decisions.items()]
        if started is not None and log is not None:  # the latter follows; mypy cannot tell
            latency = time.perf_counter() - started
            allowed = all(answer for _, answer in answers)
            if sampled or not allowed:
                log.put(self, user_id, answers, allowed, cached,
                        sum(decision.policies_checked for decision in decisions.values()), latency, sampled)
        return checks.bulk_text(user_id, answers)

    def _refresh_for(self, min_revision: int) -> bool:
        """Whether answering at ``min_revision`` needs fresh data (the cache has not applied
        it); 400 AUTHZ_REVISION_AHEAD when a recent fetch showed it is not there yet."""
        if self._service.cache.fresh_through(min_revision):
            return False
        self._service.refuse_revision_ahead(min_revision)
        return True

    def _check_head(self, user_id: str, entry: GrantsEntry, min_revision: int) -> None:
        if is_uuid(user_id):  # a fetch happened: its head must reach min_revision
            self._service.note_head(entry.seq, min_revision)

    # -- lookups: cache when trusted, else the control plane

    def _grants(self, user_id: str, *, fresh: bool) -> tuple[GrantsEntry, bool]:
        service = self._service
        if self._trusted and not fresh:
            entry = service.cache.grants(self.app_id, user_id)
            if entry is not None:
                service.metrics.hits.inc(("grants",))
                return entry, True
        fetched = self._fetched.get(user_id) if self._fetched else None
        if fetched is not None:
            return fetched, False
        if not is_uuid(user_id):
            # Ids are UUIDs: no such user, nothing to ask (a user who does not exist is
            # simply not allowed, as on the control plane).
            entry = GrantsEntry(Grants.unknown(user_id), 0)
        else:
            service.metrics.misses.inc(("grants",))
            cache = service.cache
            with cache.filling():
                seq, grants = self._fetch("grants", service.client.grants, self.app_id, user_id)
                entry = GrantsEntry(grants, seq, user_id=user_id)
                if not cache.store_grants(self.app_id, user_id, entry):
                    service.metrics.stale_fills.inc()
        if self._fetched is None:
            self._fetched = {}
        self._fetched[user_id] = entry
        return entry, False

    def _policies(self, *, fresh: bool) -> tuple[CompiledPolicies, bool]:
        service = self._service
        if self._trusted and not fresh:
            found = service.cache.policies(self.app_id)
            if found is not None:
                if found.stale:
                    return self._patched(found), False
                service.metrics.hits.inc(("policies",))
                return found.compiled, True
        service.metrics.misses.inc(("policies",))
        cache = service.cache
        with cache.filling():
            seq, policies = self._fetch("policies", service.client.policies, self.app_id)
            found = PolicySet(seq, CompiledPolicies(policies) if policies else _NO_POLICIES)
            if not cache.store_policies(self.app_id, found):
                service.metrics.stale_fills.inc()
        return found.compiled, False

    def _patched(self, found: PolicySet) -> CompiledPolicies:
        """``found`` with its stale policies fetched by id and patched in. The patched set
        shows every change up to the fetch's head only once the stream has applied them
        all; until then it claims the seq the stream had applied before the fetch."""
        service = self._service
        service.metrics.misses.inc(("policies",))
        cache = service.cache
        with cache.filling():
            applied = cache.applied
            seq, changed = self._fetch("policies", service.client.policies, self.app_id, sorted(found.stale))
            patched = PolicySet(max(found.seq, min(seq, applied)), found.compiled.patched(found.stale, changed),
                                read_at=found.read_at)
            if not cache.swap_policies(self.app_id, found, patched):
                service.metrics.stale_fills.inc()
        return patched.compiled

    def _key_ring(self) -> KeyRing:
        service = self._service
        cache = service.cache
        if self._trusted:
            ring = cache.keys(self.app_id)
            if ring is not None:
                service.metrics.hits.inc(("api_keys",))
                return ring
            if cache.is_missing(self.app_id):
                raise _not_found(self.app_id)
        if not is_uuid(self.app_id):  # application ids are UUIDs: nothing to ask
            raise _not_found(self.app_id)
        service.metrics.misses.inc(("api_keys",))
        with cache.filling():
            try:
                seq, keys = self._fetch("api_keys", service.client.api_keys, self.app_id)
            except ApplicationNotFound:
                cache.store_missing(self.app_id)
                raise _not_found(self.app_id) from None
            ring = KeyRing(seq, {
                key["key_digest"]: ApiKey(key["id"], key["permissions"],
                                          any(matches(pattern, CHECK_PERMISSION) for pattern in key["permissions"]))
                for key in keys
            })
            if not cache.store_keys(self.app_id, ring):
                service.metrics.stale_fills.inc()
        return ring

    def _fetch(self, resource: str, call, *args):
        counter = self._service.metrics.control_plane
        try:
            result = call(*args, request_id=self.request_id)
        except ApplicationNotFound:
            counter.inc((resource, "not_found"))
            if resource != "api_keys":
                raise _not_found(self.app_id) from None
            raise
        except ControlPlaneError:
            counter.inc((resource, "error"))
            raise self._unavailable(f"the control plane did not answer the {resource} lookup") from None
        counter.inc((resource, "ok"))
        return result

    def _unavailable(self, reason: str) -> DecisionUnavailable:
        self._service.metrics.unavailable.inc()
        return DecisionUnavailable(reason)


def _log_start(log: DecisionLog) -> tuple[bool, float | None]:
    """For a check, drawn before it decides: whether the decision log's sample takes it,
    and the time the check started when a line may come of it (taken, or denials
    logged), else None: a check the sample does not take pays one subtraction, no clock
    read."""
    sampled = log.take()
    return sampled, time.perf_counter() if sampled or log.denials else None


_NOT_LOGGED: tuple[bool, None] = (False, None)  # decision logs off


def _bearer(authorization: str | None) -> str:
    token = bearer_token(authorization)
    if token is None:
        raise Unauthorized("A bearer credential is required.")
    return token


def _not_found(app_id: str) -> NotFound:
    return NotFound("Application not found.", details={"application_id": app_id})
