"""Handing an account whose email nobody proved to the owner of that mailbox
(docs/authentication.md, "Unverified accounts").

Anyone can set an account up under an address they do not own: register it with a
password of their own, or sign in through a connection whose provider does not vouch for
the email.  The account then waits, unverified, for the address's owner.  If the owner
later proved the mailbox and the account were kept as it was, the squatter's password,
upstream identity, passkey or session would still open it: a pre-account takeover
(Sudhodanan and Paverd, "Pre-hijacked accounts", USENIX Security 2022).

So the first proof of the mailbox that comes *without* the account's own credentials (a
password reset link, or the code that links a sign-in provider) hands the account over:
every way in it had (its password, linked identities, passkeys, TOTP and backup codes)
is removed and every session and OIDC grant revoked, then the email is marked verified;
only after that does the caller add the new way in (the new password, the linked
identity).  An account whose email is verified was vouched for by its mailbox's owner,
and is never handed over.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from controlplane.events import EventLog
from controlplane.oidc.connections import ConnectionService
from controlplane.users.sessions import SessionService
from controlplane.users.store import UserStore
from shared.stamps import next_stamp
from shared.timeutil import Clock

# The ``reason`` of the sessions, grants and identities a hand-over revokes.
REASON = "account_claimed"


@dataclass(eq=False)
class AccountClaim:
    users: UserStore
    sessions: SessionService
    oauth_connections: ConnectionService
    events: EventLog
    clock: Clock
    # ``remove(app_id, user_id)`` of the ways in other areas keep (linked identities,
    # passkeys, TOTP), each emitting its own events; those areas are built after the
    # users' and add theirs with ``also_removes``, as listeners join the change log.
    _removers: list[Callable[[str, str], None]] = field(default_factory=list)

    def also_removes(self, remove: Callable[[str, str], None]) -> None:
        self._removers.append(remove)

    def hand_over(self, app_id: str, user: dict, *, via: str, reason: str = REASON) -> dict:
        """Hand the unverified account ``user`` to whoever proved its mailbox ``via``
        (``password_reset`` or ``link_code``); the account as it is after.  Emits
        ``user.claimed``; ``reason`` is the revoked sessions' and grants'.  A verified
        account is returned unchanged.

        First the account is stamped (``tokens_not_before``) and its password goes: from
        then on only access tokens that carry the current stamp are accepted
        (``controlplane.auth``), only sessions begun under it refresh, and a sign-in,
        password change or link that read the account before the stamp and lands after it
        is undone (``shared.stamps.stamped_since``).  Then the sessions and OIDC grants end
        (consents too: the squatter's approvals are not the owner's) before the ways in go
        (a passkey a session registers after that finds its session ended and removes
        itself).  Last, the account is stamped anew, with its email verified, and the
        sessions end again: whatever signed in through a way in while it went holds the
        first stamp only.  A hand-over that fails part way (the store unreachable) leaves
        the email unverified, and the next proof does it again, whole."""
        if user.get("email_verified"):
            return user
        user_id = user["_id"]
        now = next_stamp(user.get("tokens_not_before"), self.clock())
        self.users.update(app_id, user_id, {"tokens_not_before": now, "password_hash": None, "updated_at": now})
        self._end_sessions(app_id, user_id, reason)
        for remove in self._removers:
            remove(app_id, user_id)
        # Stamped again once the ways in are gone: a sign-in through one of them while they
        # went read the first stamp, so its tokens carry that one and are refused.
        done = next_stamp(now, self.clock())
        claimed = self.users.update(app_id, user_id, {"tokens_not_before": done, "email_verified": True,
                                                      "updated_at": done})
        self._end_sessions(app_id, user_id, reason)
        self.events.emit(app_id, "user.claimed", {"user_id": user_id, "via": via}, subject={"user_id": user_id})
        return claimed if claimed is not None else user

    def _end_sessions(self, app_id: str, user_id: str, reason: str) -> None:
        self.sessions.revoke_user(app_id, user_id, reason=reason)
        self.oauth_connections.withdraw_consents(app_id, user_id, reason=reason)

