"""Single-use tokens sent by email (spec "User authentication": email verification and
password reset): a random token goes into the link, only its SHA-256 digest is stored
(``user_tokens``), bound to the user and the email it was sent to."""
from __future__ import annotations

from controlplane.users.store import OneTimeTokenStore
from shared.ids import digest, random_token
from shared.timeutil import seconds

VERIFICATION, RESET = "verification", "reset"


def issue_one_time_token(tokens: OneTimeTokenStore, user: dict, purpose: str, ttl: int, now) -> str:
    """Store a new ``purpose`` token for ``user``, valid ``ttl`` seconds; the token."""
    token = random_token()
    tokens.insert({
        "_id": digest(token), "app_id": user["app_id"], "user_id": user["_id"], "email": user["email"],
        "purpose": purpose, "created_at": now, "expires_at": now + seconds(ttl), "used_at": None,
    })
    return token
