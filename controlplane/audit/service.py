"""The audit log (docs/audit.md): records what happened, lists and exports it.

Recording: a change-log event is its change's record (``EventLog.emit`` adds who, from
where and the result from the request's ``controlplane.audit.context``); ``record``
writes the records that are not change-log events: attempts that change nothing (a
failed login) and actions outside an application's change log (the dashboard's).
"""
from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime, timedelta

from controlplane.audit.chain import Verdict, verify
from controlplane.audit.store import AuditStore
from shared.errors import ValidationFailed
from shared.http import dumps
from shared.timeutil import isoformat

APPLICATION, ORGANIZATION = "app_id", "organization_id"  # the two scopes a listing has
EXPORT_CHUNK = 64 * 1024  # bytes of NDJSON lines sent as one write
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class AuditLog:
    def __init__(self, store: AuditStore, events):
        self.store = store
        self._events = events

    def record(self, action: str, *, result: dict, target: dict, data: dict | None = None,
               application_id: str | None = None, organization_id: str | None = None, actor: dict | None = None) -> int:
        """Record an attempt or an action that is not a change-log event; returns its seq.

        ``action``: a name of ``controlplane.audit.actions.ACTIONS`` (ValueError otherwise).
        ``result``: ``context.success()`` or ``context.failure(reason)``. ``target`` and
        ``actor``: ``context.actor(type, id, display)``; ``actor`` defaults to the request's
        (``context.act_as``, or the authenticated principal), else the system. ``data``: the
        changed fields' names and non-secret values, never a password or token.
        ``organization_id`` defaults to the application's.
        """
        return self._events.record(action, result=result, target=target, data=data, app_id=application_id,
                                   organization_id=organization_id, actor=actor)

    def of_user(self, app_id: str, user_id: str) -> list[dict]:
        """The user's own records, those they did and those done to them, oldest first,
        every one still retained (the GDPR export's ``audit_logs``)."""
        return [serialize(doc) for doc in self.store.of_user(app_id, user_id)]

    def forget_user(self, app_id: str, user_id: str) -> None:
        """Account deletion: the records stay, their email and name of the user become
        the user's id (``display`` of actor and target, ``data.email``, ``data.name``)."""
        self.store.pseudonymize_user(app_id, user_id)

    def personal_events(self, app_id: str, user_id: str) -> list[int]:
        """The seqs of the user's own change events whose ``data`` held their email or
        name, the values ``forget_user`` replaces: a copy of such an event kept elsewhere
        (a webhook delivery's body) must forget them too."""
        return self.store.personal_events(app_id, user_id)

    def verify(self, *, application_id: str | None = None, organization_id: str | None = None) -> Verdict:
        """Check the hash chain of an application's records (or of an organization's
        dashboard actions outside any application), and that no record of the scope sits
        beside it: one the listing shows as history while no link covers it."""
        if application_id is not None:
            chain, scope = application_id, {"app_id": application_id}
        else:
            chain, scope = f"organization:{organization_id}", {"app_id": None, "organization_id": organization_id}
        return verify(self.store.chain(chain), self.store.unsealed_count(scope),
                      lambda start: self.store.outside_chain(scope, chain, start))

    def page(self, scope: str, scope_id: str, filters: dict, cursor: str | None,
             limit: int) -> tuple[list[dict], str | None]:
        """One page, newest first, and the cursor of the next (None: the last page)."""
        docs = self.store.page(scope, scope_id, filters, decode_cursor(cursor) if cursor else None, limit + 1)
        more = len(docs) > limit
        docs = docs[:limit]
        return [serialize(d) for d in docs], encode_cursor(docs[-1]) if more else None

    def export(self, scope: str, scope_id: str, filters: dict):
        """Every matching record as NDJSON, newest first, in chunks of about
        ``EXPORT_CHUNK`` bytes: a generator over one cursor, so memory stays flat however
        many records match."""
        chunk, size = [], 0
        for doc in self.store.each(scope, scope_id, filters):
            line = dumps(serialize(doc)) + "\n"
            chunk.append(line)
            size += len(line)
            if size >= EXPORT_CHUNK:
                yield "".join(chunk).encode("utf-8")
                chunk, size = [], 0
        if chunk:
            yield "".join(chunk).encode("utf-8")


def _micros(at: datetime) -> int:
    if at.tzinfo is None:  # pymongo without tz_aware, and mongomock, give naive UTC
        at = at.replace(tzinfo=UTC)
    return (at - _EPOCH) // _MICROSECOND


def encode_cursor(doc: dict) -> str:
    """Opaque to clients: the last record's ``(at, seq)``."""
    return base64.urlsafe_b64encode(f"{_micros(doc['at'])}:{doc['seq']}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[datetime, int]:
    try:
        micros, seq = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii").split(":")
        return _EPOCH + timedelta(microseconds=int(micros)), int(seq)
    except (ValueError, binascii.Error, UnicodeDecodeError, OverflowError):
        raise ValidationFailed({"cursor": "is not a cursor this API returned"}) from None


def serialize(doc: dict) -> dict:
    """The record as the API shows it (docs/audit.md, "Fields")."""
    result = doc.get("result") or {"status": "success"}
    return {
        "id": doc["_id"],
        "at": isoformat(doc["at"]),
        "action": doc.get("action") or doc.get("type"),
        "result": result,
        "actor": doc.get("actor") or {"type": "system", "id": None, "display": None},
        "target": doc.get("target"),
        "application_id": doc.get("app_id"),
        "organization_id": doc.get("organization_id"),
        "request_id": doc.get("request_id"),
        "ip": doc.get("ip"),
        "user_agent": doc.get("user_agent"),
        "data": doc.get("data") or {},
        "prev_hash": doc.get("prev_hash"),
        "hash": doc.get("hash"),
    }
