"""Errors of user self-service."""
from shared.errors import NotFound, RateLimited


class SessionNotFound(NotFound):
    """No active session with this id for the user (or it was already revoked)."""

    code, message = "SESSION_NOT_FOUND", "Session not found or already revoked."
    detail_names = ("session_id",)


class ExportLimited(RateLimited):
    """A data export within an hour of the last one (IAMGATE_RATE_LIMIT_EXPORT)."""

    message = "A data export can be requested once per hour. Try again later."
