"""Domain errors: what went wrong, as the spec's error code plus the details a caller
needs to act on it.

Services and stores raise these and know nothing of HTTP.  Each concrete error is a
class that names one code, declared once, next to the area that raises it (for example
``controlplane/roles/errors.py``); it derives from one of the *kinds* below, and
``shared.http.ERROR_STATUS`` maps each kind to its HTTP status in one table.  The same
classes document the operations: ``controlplane.openapi.op(errors=[RoleNotFound, ...])``.

    class RoleNotFound(NotFound):
        code, message = "RESOURCE_NOT_FOUND", "Role not found."
        detail_names = ("role",)

    raise RoleNotFound(ref)             # details {"role": ref}

An error's positional arguments are the values of its ``detail_names``, and its
``message`` may name them (``"A role named {name!r} already exists."``), so most errors
are declared, not coded.  An error without ``detail_names`` takes a message of the
moment as its one positional argument: ``raise Unauthorized("Token expired.")``.
"""
from __future__ import annotations


class DomainError(Exception):
    """An error the caller should see: ``code`` from the spec's table, a human
    ``message``, and ``details`` (field errors, ids, limits)."""

    code = "BAD_REQUEST"
    message = "The request could not be processed."
    body_schema = "Error"  # the OpenAPI component of the answer's body: the spec's envelope
    detail_names: tuple[str, ...] = ()  # the ``details`` keys of the positional arguments, in order

    def __init__(self, *values, message: str | None = None, details: dict | None = None):
        if values and not self.detail_names:
            (message,) = values
            values = ()
        named = dict(zip(self.detail_names, values, strict=True))
        self.message = message or (self.message.format(**named) if named else self.message)
        self.details = {**named, **(details or {})}
        super().__init__(self.message)

    @classmethod
    def codes(cls) -> tuple[str, ...]:
        """Every code an instance of this class can carry (for the error catalogue)."""
        return (cls.code,)

    def __repr__(self):
        return f"{type(self).__name__}({self.code}: {self.message})"


# ---------------------------------------------------------------- kinds


class BadRequest(DomainError):
    """The request is malformed or a value is invalid."""

    code = "VALIDATION_INVALID_FORMAT"


class Unauthorized(DomainError):
    """Missing, malformed, expired or foreign credential, or wrong secret."""

    code, message = "UNAUTHORIZED", "Authentication is required."


class Forbidden(DomainError):
    """Authenticated, but not allowed to do this."""

    code, message = "FORBIDDEN", "You are not allowed to do this."


class NotFound(DomainError):
    code, message = "NOT_FOUND", "Not found."


class Conflict(DomainError):
    """The request conflicts with the current state."""

    code, message = "CONFLICT", "The request was changed concurrently; try again."


class Gone(DomainError):
    """A one-time token or challenge that expired or was used."""

    code = "GONE"


class PayloadTooLarge(DomainError):
    code, message = "PAYLOAD_TOO_LARGE", "The request body is too large."


class UnsupportedMediaType(DomainError):
    code, message = "UNSUPPORTED_MEDIA_TYPE", "The request body must be JSON."


class Unprocessable(DomainError):
    """Well-formed, but the server will not act on it (weak password, wrong code...)."""

    code = "VALIDATION_ERROR"


class RateLimited(DomainError):
    """A limit or lock: ``limit`` per window, lifted at ``reset_at`` (Unix time), so
    the caller may retry after ``retry_after`` seconds."""

    code, message = "RATE_LIMIT_EXCEEDED", "Too many requests. Try again later."

    def __init__(self, *, limit: int, reset_at: int, retry_after: int, message=None, details=None):
        self.limit = limit
        self.reset_at = reset_at
        self.retry_after = max(1, retry_after)
        super().__init__(message=message, details={"retry_after": self.retry_after, **(details or {})})


class ServiceUnavailable(DomainError):
    """Temporarily unable to answer; ``retry_after`` seconds, when known."""

    code, message = "SERVICE_UNAVAILABLE", "The service is temporarily unavailable."
    retry_after: int | None = None


# ---------------------------------------------------------------- generic errors


class ValidationFailed(BadRequest):
    """Field validation failures: one gives VALIDATION_INVALID_FORMAT, several
    VALIDATION_MULTIPLE_ERRORS; ``details.fields`` maps each field to why it failed."""

    MULTIPLE = "VALIDATION_MULTIPLE_ERRORS"

    def __init__(self, errors: dict[str, str], message=None):
        if len(errors) == 1:
            field, reason = next(iter(errors.items()))
            default = f"{field}: {reason}"
        else:
            default = "Several fields are invalid."
        super().__init__(message=message or default, details={"fields": dict(errors)})
        self.errors = dict(errors)
        if len(errors) > 1:
            self.code = self.MULTIPLE

    @classmethod
    def codes(cls) -> tuple[str, ...]:
        return (cls.code, cls.MULTIPLE)


class PermissionMissing(Forbidden):
    """The credential lacks the permission the route needs."""

    message, detail_names = "The permission {required_permission} is required.", ("required_permission",)


class ApplicationNotFound(NotFound):
    """``{applicationId}`` names no application (or a deleted one)."""

    message = "Application not found."


class RevisionAhead(BadRequest):
    """``min_revision`` is above the change log's head: no write has produced that
    revision, so no data can be that fresh.  Refused rather than answered by bypassing
    the cache on every check (an unbounded cache bypass), by the control plane and the
    decision service alike (docs/authorization.md)."""

    code, message = "AUTHZ_REVISION_AHEAD", "min_revision is ahead of every write made so far."

    def __init__(self, min_revision: int, head: int):
        super().__init__(details={"field": "min_revision", "min_revision": min_revision, "head": head})


class MalformedJson(BadRequest):
    """The body is not a JSON object."""


def catalogue(root: type = DomainError) -> list[type]:
    """Every error class below ``root`` (imported so far), most general first."""
    found, pending = [], [root]
    while pending:
        klass = pending.pop(0)
        found.append(klass)
        pending.extend(klass.__subclasses__())
    return found
