"""The error hierarchy: the spec's codes as data, rendered by one handler.

Services raise these; ``shared.http`` turns them into the error envelope
``{"error": {code, message, details, request_id, timestamp}}``.
"""
from __future__ import annotations


class ApiError(Exception):
    """An error the client should see.  ``status`` and ``code`` follow the spec's table."""

    status = 400
    code = "BAD_REQUEST"
    message = "The request could not be processed."

    def __init__(self, message=None, *, code=None, status=None, details=None, headers=None):
        self.message = message or self.message
        self.code = code or self.code
        self.status = status or self.status
        self.details = details or {}
        self.headers = headers or {}
        super().__init__(self.message)

    def __repr__(self):
        return f"{type(self).__name__}({self.status} {self.code}: {self.message})"


class BadRequest(ApiError):
    status, code = 400, "VALIDATION_INVALID_FORMAT"


class ValidationFailed(ApiError):
    """Field validation failures: one gives VALIDATION_INVALID_FORMAT, several
    VALIDATION_MULTIPLE_ERRORS; ``details`` maps each field to why it failed."""

    status = 400

    def __init__(self, errors: dict[str, str], message=None):
        if len(errors) == 1:
            field, reason = next(iter(errors.items()))
            code, default = "VALIDATION_INVALID_FORMAT", f"{field}: {reason}"
        else:
            code, default = "VALIDATION_MULTIPLE_ERRORS", "Several fields are invalid."
        super().__init__(message or default, code=code, details={"fields": dict(errors)})
        self.errors = dict(errors)


class Unauthorized(ApiError):
    status, code, message = 401, "UNAUTHORIZED", "Authentication is required."


class Forbidden(ApiError):
    status, code, message = 403, "FORBIDDEN", "You are not allowed to do this."


class PermissionMissing(Forbidden):
    def __init__(self, permission: str):
        super().__init__(
            f"The permission {permission} is required.", details={"required_permission": permission}
        )


class NotFound(ApiError):
    status, code, message = 404, "NOT_FOUND", "Not found."


class Conflict(ApiError):
    status, code, message = 409, "CONFLICT", "The request conflicts with the current state."


class Gone(ApiError):
    status, code = 410, "GONE"


class Unprocessable(ApiError):
    status, code = 422, "VALIDATION_ERROR"


class RateLimited(ApiError):
    """429 with the spec's X-RateLimit-* and Retry-After headers."""

    status, code, message = 429, "RATE_LIMIT_EXCEEDED", "Too many requests. Try again later."

    def __init__(self, *, limit: int, reset_at: int, retry_after: int, message=None, code=None, details=None):
        headers = {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(reset_at),
            "Retry-After": str(max(1, retry_after)),
        }
        details = {"retry_after": max(1, retry_after), **(details or {})}
        super().__init__(message, code=code, details=details, headers=headers)


class ServiceUnavailable(ApiError):
    status, code, message = 503, "SERVICE_UNAVAILABLE", "The service is temporarily unavailable."
