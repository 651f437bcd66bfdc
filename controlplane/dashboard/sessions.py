"""Dashboard session cookies: opaque random ids, stored as SHA-256 digests, expiring.

The cookie is HttpOnly, SameSite=Lax and Secure when IAMGATE_PUBLIC_URL is https.
Logout deletes the stored session, so a copied cookie stops working at once.

A session holds the account's stamp (``tokens_not_before``, ``shared.stamps``) as its
sign-in read it before checking the credentials, and is valid while the account holds
the same one, or names it as the session its last change kept (``KEPT_SESSION``).  Every
change that ends the account's other sessions moves the stamp in the write that makes the
change (``DashboardStore.restamp``) before it deletes them, so a sign-in that checked the
credentials before the change and stored its session after the deletion keeps nothing.
Each use reads the account's stamp beside the session, by ``_id`` both, as an end user's
access token reads its user's (``controlplane.auth``).

A session also holds when its holder last proved who they are (``authenticated_at``):
the sign-in that opened it, moved on by each re-authentication (``reauthenticate``).
Sensitive actions ask for a recent one (``controlplane.dashboard.sudo``).
"""
from __future__ import annotations

from collections.abc import Mapping

from pymongo import ASCENDING, IndexModel

from controlplane.dashboard.store import KEPT_SESSION, DashboardStore
from shared.ids import digest, random_token
from shared.stamps import stamped_since
from shared.timeutil import aware, seconds

INDEXES = {
    "dashboard_sessions": [
        IndexModel([("account_id", ASCENDING)]),
        IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0),
    ]
}


class DashboardSessions:
    def __init__(self, store, accounts: DashboardStore, clock, ttl: int):
        store.declare_indexes(INDEXES)
        self._sessions = store["dashboard_sessions"]
        self._accounts = accounts
        self._clock = clock
        self.ttl = ttl

    def create(self, account: Mapping) -> str:
        """A new session of ``account`` as its sign-in read it before checking the
        credentials (its stamp); the raw id, the cookie."""
        raw = random_token()
        now = self._clock()
        self._sessions.insert_one({
            "_id": digest(raw), "account_id": account["_id"], "tokens_not_before": account.get("tokens_not_before"),
            "created_at": now, "authenticated_at": now, "expires_at": now + seconds(self.ttl),
        })
        return raw

    def live(self, raw: str) -> dict | None:
        """The unexpired session of cookie ``raw`` that no change of its account ended:
        ``account_id``, ``expires_at`` (the console shows the expiry before it happens)
        and ``authenticated_at``, or None.  Sessions and accounts stored before stamps
        were have none, and match until the account's next change; sessions stored
        before ``authenticated_at`` was have None there, which no sensitive action
        accepts (they are not signed out for it)."""
        session = self._sessions.find_one({"_id": digest(raw)})
        if session is None or aware(session["expires_at"]) <= self._clock():
            return None
        account = self._accounts.session_gate(session["account_id"]) or {}
        if stamped_since(session, account) and account.get(KEPT_SESSION) != session["_id"]:
            return None
        authenticated_at = session.get("authenticated_at")
        return {"account_id": session["account_id"], "expires_at": aware(session["expires_at"]),
                "authenticated_at": aware(authenticated_at) if authenticated_at else None}

    def reauthenticate(self, raw: str | None) -> None:
        """The holder of cookie ``raw`` proved who they are now: its ``authenticated_at``."""
        if raw:
            self._sessions.update_one({"_id": digest(raw)}, {"$set": {"authenticated_at": self._clock()}})

    @staticmethod
    def stored_id(raw: str | None) -> str | None:
        """The id under which the session of cookie ``raw`` is stored (``KEPT_SESSION``)."""
        return digest(raw) if raw else None

    def revoke(self, raw: str) -> None:
        self._sessions.delete_one({"_id": digest(raw)})

    def revoke_account(self, account_id: str) -> None:
        self._sessions.delete_many({"account_id": account_id})

    def revoke_others(self, account_id: str, keep_raw: str | None) -> None:
        """End every session of the account but the one of ``keep_raw``."""
        query: dict = {"account_id": account_id}
        if keep_raw:
            query["_id"] = {"$ne": digest(keep_raw)}
        self._sessions.delete_many(query)
