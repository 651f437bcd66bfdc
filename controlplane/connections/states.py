"""The relying party's pending authorization requests: one ``connection_states``
document per sign-in started at an upstream provider.

What a callback is checked against lives here, never in the browser: the connection
that started the request (the mix-up defence: the state names it, and only its issuer's
answer is taken), the PKCE S256 verifier (RFC 7636 4.1), the OpenID ``nonce`` (OIDC
Core 3.1.2.1), the ``redirect_uri`` the code was sent to (RFC 6749 4.1.3), the
browser binding, and the fresh authentication the authorization request behind the
sign-in demands (``prompt_login``, ``max_age``), which the ID Token's ``auth_time`` must
meet (for ``prompt_login``: no earlier than the document's ``created_at``).  The
``state`` value (RFC 6749 10.12) and the binding are stored as their SHA-256 digests
only, so the collection cannot be replayed from a copy of it.

Single use and short-lived: ``take`` removes the document with an atomic
``find_one_and_delete`` (two callbacks racing with one state: one winner), and a state
older than ``STATE_TTL_SECONDS`` is refused even before MongoDB's TTL monitor reclaims it.
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass

from pymongo import ASCENDING, IndexModel

from controlplane.collection import Collection
from controlplane.oidc import pkce
from shared.ids import digest, random_token
from shared.timeutil import aware, seconds

STATE_TTL_SECONDS = 600  # 10 minutes, the bound on state, nonce and verifier

INDEXES = {
    "connection_states": [IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)],
}


@dataclass(frozen=True, slots=True)
class PendingState:
    """A started sign-in: what goes into the authorization URL (``state``, ``nonce``,
    the S256 ``code_challenge``) and, in the store, what the callback needs."""

    state: str
    nonce: str
    code_challenge: str


@dataclass(frozen=True, slots=True)
class TakenState:
    """A state document taken back by its callback (None when unknown) and, when it
    cannot be used, why (``problem``: "unknown", "expired", "binding")."""

    doc: dict | None
    problem: str | None = None


class StateStore(Collection):
    name, indexes = "connection_states", INDEXES

    def create(self, *, application_id: str, connection_id: str, binding: str, redirect_uri: str,
               login_hint: str | None, return_to: str | None, now, prompt_login: bool = False,
               max_age: int | None = None) -> PendingState:
        state, nonce = random_token(), random_token()
        verifier = random_token(48)  # 64 characters: within RFC 7636's 43..128
        self._docs.insert_one({
            "_id": digest(state), "app_id": application_id, "connection_id": connection_id,
            "binding_hash": digest(binding), "code_verifier": verifier, "nonce": nonce,
            "redirect_uri": redirect_uri, "login_hint": login_hint, "return_to": return_to,
            "prompt_login": prompt_login, "max_age": max_age,
            "created_at": now, "expires_at": now + seconds(STATE_TTL_SECONDS),
        })
        return PendingState(state=state, nonce=nonce, code_challenge=pkce.s256(verifier))

    def take(self, application_id: str, state: str, binding: str, now) -> TakenState:
        """Remove the state and hand it back when it is live and the binding is the one
        that started it.  It is removed whatever the outcome: a state presented once,
        by anyone, is spent."""
        doc = self._docs.find_one_and_delete({"_id": digest(state), "app_id": application_id})
        if doc is None:
            return TakenState(None, "unknown")
        if aware(doc["expires_at"]) <= now:
            return TakenState(doc, "expired")
        if not hmac.compare_digest(doc["binding_hash"], digest(binding)):
            return TakenState(doc, "binding")
        return TakenState(doc)
