"""Identifiers and random secrets."""
import hashlib
import re
import secrets
import uuid

# What ``new_id`` writes; ``uuid.UUID`` accepts more spellings, and is asked about those.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def new_id() -> str:
    """A random UUID (version 4) as a string: the id of every resource."""
    return str(uuid.uuid4())


def is_uuid(value) -> bool:
    if type(value) is str and _CANONICAL_UUID.fullmatch(value):
        return True
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def random_token(nbytes: int = 32) -> str:
    """An unguessable URL-safe token (refresh tokens, one-time tokens, session ids)."""
    return secrets.token_urlsafe(nbytes)


def digest(value: str) -> str:
    """SHA-256 hex digest: how high-entropy secrets (tokens, API keys) are stored."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()
