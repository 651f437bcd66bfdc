"""The brute-force guard on password checks: the login lock (spec "Limits").

One implementation for end users and dashboard accounts.  Failed checks are counted per
email per *scope*: an application's id for its end users (per email per application,
docs/authentication.md), ``"dashboard"`` for dashboard accounts; application ids are UUIDs, so
the two never share a record.  Every check takes one of IAMGATE_LOCKOUT_THRESHOLD units
*before* bcrypt runs, so parallel guesses cannot get past the threshold;
IAMGATE_LOCKOUT_THRESHOLD consecutive failures lock the email for
IAMGATE_LOCKOUT_SECONDS (429 AUTH_ACCOUNT_LOCKED); a success forgives the failures.
Unknown emails are counted and hashed the same way as known ones.

``ctx.password_guard`` is the one ``PasswordGuard`` of the process; its state lives in
MongoDB (``login_attempts``), so every replica enforces the same lock.

Locking an application's end user is an audit record ``user.locked`` (docs/audit.md),
written once per lock by the check whose failure placed it.
"""
from __future__ import annotations

import logging
import math
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from controlplane.audit.context import success
from shared.errors import RateLimited
from shared.timeutil import Clock, aware, isoformat, seconds

if TYPE_CHECKING:
    from controlplane.audit.service import AuditLog
    from controlplane.passwords import PasswordHasher

log = logging.getLogger("iamgate.lockout")

INDEXES = {
    "login_attempts": [
        IndexModel([("resets_at", ASCENDING)], expireAfterSeconds=0),
    ],
}



class AccountLocked(RateLimited, code="AUTH_ACCOUNT_LOCKED"):
    """Too many failed logins for the email: locked for IAMGATE_LOCKOUT_SECONDS."""

def _upsert(collection, filter_, update, **kwargs):
    """``find_one_and_update`` with ``upsert``; two racing upserts of one ``_id`` can
    both try the insert, and the loser simply retries as an update."""
    try:
        return collection.find_one_and_update(filter_, update, upsert=True, **kwargs)
    except DuplicateKeyError:
        return collection.find_one_and_update(filter_, update, upsert=True, **kwargs)


class LoginAttemptStore:
    """The guard's records, one per email per scope.

    ``{_id: "<scope_id>:<email>", app_id: scope_id, email, used, failures, locked_until,
    resets_at}``: ``used`` counts password checks that failed or are still running (taken
    *before* bcrypt runs), ``failures`` the consecutive failed ones.  The scope is stored
    as ``app_id`` so that deleting an application purges its end users' records with the
    rest of its data; the dashboard's scope is no application's id, so no purge touches
    it.  A record is forgotten once ``resets_at`` has passed (the TTL index reclaims it;
    the code decides)."""

    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._attempts = store["login_attempts"]

    @staticmethod
    def key(scope_id: str, email: str) -> str:
        return f"{scope_id}:{email}"

    def get(self, key: str) -> dict | None:
        return self._attempts.find_one({"_id": key})

    def restart(self, key: str, observed_resets_at, now, window: int) -> None:
        """Start a lapsed record over.  Conditional on the ``resets_at`` that was read,
        so of several racing requests only the first one resets the count."""
        self._attempts.update_one(
            {"_id": key, "resets_at": observed_resets_at},
            {"$set": {"used": 0, "failures": 0, "locked_until": None, "resets_at": now + seconds(window)}},
        )

    def take(self, key: str, scope_id: str, email: str, now, window: int) -> dict:
        """Take one unit of the budget (atomic ``$inc``); the record after it."""
        return _upsert(
            self._attempts, {"_id": key},
            {"$inc": {"used": 1},
             "$setOnInsert": {"app_id": scope_id, "email": email, "failures": 0, "locked_until": None,
                              "resets_at": now + seconds(window)}},
            return_document=ReturnDocument.AFTER,
        )

    def give_back(self, key: str) -> None:
        self._attempts.update_one({"_id": key, "used": {"$gt": 0}}, {"$inc": {"used": -1}})

    def record_failure(self, key: str, now, window: int) -> dict | None:
        """The taken unit stays used; one more consecutive failure."""
        return self._attempts.find_one_and_update(
            {"_id": key}, {"$inc": {"failures": 1}, "$set": {"resets_at": now + seconds(window)}},
            return_document=ReturnDocument.AFTER,
        )

    def forgive(self, key: str, failures: int) -> bool:
        """After a success: give back its own unit and every failure before it.
        Conditional on ``failures`` as read, so a failure recorded meanwhile is not lost."""
        result = self._attempts.update_one(
            {"_id": key, "failures": failures}, {"$inc": {"used": -(1 + failures)}, "$set": {"failures": 0}})
        return result.modified_count == 1

    def lock(self, key: str, until, now) -> bool:
        """Lock until ``until`` unless a lock is already running; whether this call locked."""
        result = self._attempts.update_one(
            {"_id": key, "$or": [{"locked_until": None}, {"locked_until": {"$lte": now}}]},
            {"$set": {"locked_until": until, "resets_at": until}},
        )
        return result.modified_count == 1

    def clear(self, key: str) -> None:
        self._attempts.delete_one({"_id": key})


@dataclass(eq=False)
class PasswordGuard:
    """Password checks under the login lock, for any scope (see the module docstring)."""

    attempts: LoginAttemptStore
    clock: Clock
    hasher: PasswordHasher
    audit: AuditLog
    _: KW_ONLY
    threshold: int
    lock_seconds: int

    def check(self, scope_id: str, email: str, password: str, password_hash: str | None, *,
              audit_target: dict | None = None) -> bool:
        """Whether ``password`` matches ``password_hash``, counted against the email's
        budget in ``scope_id``.  ``password_hash`` None (no such account) burns the same
        bcrypt time and fails.  Raises 429 AUTH_ACCOUNT_LOCKED (with Retry-After,
        ``details.reason`` and, when locked, ``details.locked_until``) instead of
        checking while the email is locked, even for the right password.

        ``audit_target``: the end user (``{type, id, display}``) a lock this check places
        is recorded against, ``scope_id`` being their application; without it (the
        dashboard's accounts, in no tenant's log) a lock is not recorded."""
        key = self.take(scope_id, email)
        if self.hasher.verify(password, password_hash):
            self.succeeded(key)
            return True
        until = self.failed(key)
        if until is not None and audit_target is not None:
            self.audit.record("user.locked", result=success(), target=audit_target, application_id=scope_id,
                               data={"failures": self.threshold, "locked_until": isoformat(until)})
        return False

    def take(self, scope_id: str, email: str, *, error: type[RateLimited] = AccountLocked) -> str:
        """Take one of the email's ``lockout_threshold`` password checks before it runs
        (the first step of ``check``); returns the record's key.  Any other secret
        checked under the same rules (a second factor's code) calls ``take``, then
        ``succeeded`` or ``failed``, with its own scope, and raises its own ``error``.

        Checks that failed and checks still running both hold a unit, so however many
        requests race, at most the threshold reach bcrypt.  Raises 429
        AUTH_ACCOUNT_LOCKED while the email is locked, or (Retry-After 1 s, no lock)
        while the other units are held by checks still running."""
        now = self.clock()
        key = self.attempts.key(scope_id, email)
        record = self.attempts.get(key)
        if record is not None:
            self._raise_if_locked(record, now, error)
            if aware(record["resets_at"]) <= now:
                self.attempts.restart(key, record["resets_at"], now, self.lock_seconds)
        record = self.attempts.take(key, scope_id, email, now, self.lock_seconds)
        self._raise_if_locked(record, now, error)
        if record["used"] > self.threshold:
            self.attempts.give_back(key)
            if record["failures"] >= self.threshold:  # failed enough; the lock write was lost
                self.attempts.lock(key, now + seconds(self.lock_seconds), now)
                raise self._locked(now + seconds(self.lock_seconds), now, error)
            raise self._locked(now + seconds(1), now, error, reason="attempts_in_progress")
        return key

    def lift(self, scope_id: str, email: str) -> None:
        """Forget the email's failures and lock (its owner proved who they are)."""
        self.attempts.clear(self.attempts.key(scope_id, email))

    def succeeded(self, key: str) -> None:
        """The check that ``take`` counted succeeded: its failures are forgiven."""
        # A success resets the consecutive failures (spec), but checks still running
        # keep their units: they may be an attacker's guesses racing the real user.
        for _ in range(5):
            record = self.attempts.get(key)
            if record is None or self.attempts.forgive(key, record["failures"]):
                return

    def failed(self, key: str):
        """The check that ``take`` counted failed: count the failure; the end of the lock
        it placed, if it placed one."""
        now = self.clock()
        record = self.attempts.record_failure(key, now, self.lock_seconds)
        if record is not None and record["failures"] >= self.threshold:
            until = now + seconds(self.lock_seconds)
            log.warning("login locked after consecutive failures",
                        extra={"app_id": record.get("app_id"), "failures": record["failures"]})
            if self.attempts.lock(key, until, now):
                return until
        return None

    def _raise_if_locked(self, record: dict, now, error: type[RateLimited]) -> None:
        until = aware(record.get("locked_until"))
        if until is not None and until > now:
            raise self._locked(until, now, error)

    def _locked(self, until, now, error: type[RateLimited], reason: str = "locked") -> RateLimited:
        message = ("Too many failed logins for this account. Try again later." if reason == "locked" else
                   "Too many logins for this account are in progress. Try again in a moment.")
        if error is not AccountLocked:
            message = None  # the error's own message says what was locked
        return error(
            limit=self.threshold, reset_at=math.ceil(until.timestamp()),
            retry_after=math.ceil((until - now).total_seconds()), message=message,
            details={"reason": reason, **({"locked_until": isoformat(until)} if reason == "locked" else {})},
        )
