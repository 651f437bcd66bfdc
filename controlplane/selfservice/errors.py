"""Errors of user self-service."""
from shared.errors import NotFound, RateLimited


class SessionNotFound(NotFound, code="SESSION_NOT_FOUND", message="Session not found or already revoked.",
                      detail_names=("session_id",)):
    """No active session with this id for the user (or it was already revoked)."""


class ExportLimited(RateLimited, message="A data export can be requested once per hour. Try again later."):
    """A data export within an hour of the last one (IAMGATE_RATE_LIMIT_EXPORT)."""
