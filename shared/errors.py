"""Domain errors: what went wrong, as the spec's error code plus the details a caller
needs to act on it.

Services and stores raise these and know nothing of HTTP.  Each concrete error is a
class that names one code, declared once, next to the area that raises it (for example
``controlplane/roles/errors.py``); it derives from one of the *kinds* below, and
``shared.http.ERROR_STATUS`` maps each kind to its HTTP status in one table.  The same
classes document the operations: ``controlplane.openapi.op(errors=[RoleNotFound, ...])``.
An error's ``code``, ``message`` and ``detail_names`` are given in its class line:

    class RoleNotFound(NotFound, code="RESOURCE_NOT_FOUND", message="Role not found.", detail_names=("role",)):
        '''No role with this id (or name) in the application.'''

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

    def __init_subclass__(cls, *, code: str | None = None, message: str | None = None,
                          detail_names: tuple[str, ...] | None = None, **kwargs):
        """The class line's ``code=``, ``message=`` and ``detail_names=``; one left out is
        inherited."""
        super().__init_subclass__(**kwargs)
        for name, value in (("code", code), ("message", message), ("detail_names", detail_names)):
            if value is not None:
                setattr(cls, name, value)

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


class BadRequest(DomainError, code="VALIDATION_INVALID_FORMAT"):
    """The request is malformed or a value is invalid."""


class Unauthorized(DomainError, code="UNAUTHORIZED", message="Authentication is required."):
    """Missing, malformed, expired or foreign credential, or wrong secret."""


class Forbidden(DomainError, code="FORBIDDEN", message="You are not allowed to do this."):
    """Authenticated, but not allowed to do this."""


class NotFound(DomainError, code="NOT_FOUND", message="Not found."):
    """What the request names does not exist."""


class Conflict(DomainError, code="CONFLICT", message="The request was changed concurrently; try again."):
    """The request conflicts with the current state."""


class Gone(DomainError, code="GONE"):
    """A one-time token or challenge that expired or was used."""


class PayloadTooLarge(DomainError, code="PAYLOAD_TOO_LARGE", message="The request body is too large."):
    """The request body is over the size limit."""


class UnsupportedMediaType(DomainError, code="UNSUPPORTED_MEDIA_TYPE", message="The request body must be JSON."):
    """A body that is not ``application/json`` (or an accepted form type)."""


class Unprocessable(DomainError, code="VALIDATION_ERROR"):
    """Well-formed, but the server will not act on it (weak password, wrong code...)."""


class RateLimited(DomainError, code="RATE_LIMIT_EXCEEDED", message="Too many requests. Try again later."):
    """A limit or lock: ``limit`` per window, lifted at ``reset_at`` (Unix time), so
    the caller may retry after ``retry_after`` seconds."""

    def __init__(self, *, limit: int, reset_at: int, retry_after: int, message=None, details=None):
        self.limit = limit
        self.reset_at = reset_at
        self.retry_after = max(1, retry_after)
        super().__init__(message=message, details={"retry_after": self.retry_after, **(details or {})})


class BadGateway(DomainError, code="BAD_GATEWAY", message="An upstream service gave no usable answer."):
    """A service iamgate calls on the request's behalf failed (an identity provider)."""


class ServiceUnavailable(DomainError, code="SERVICE_UNAVAILABLE", message="The service is temporarily unavailable."):
    """Temporarily unable to answer; ``retry_after`` seconds, when known."""

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


class PermissionMissing(Forbidden, message="The permission {required_permission} is required.",
                        detail_names=("required_permission",)):
    """The credential lacks the permission the route needs."""


class ApplicationNotFound(NotFound, message="Application not found."):
    """``{applicationId}`` names no application (or a deleted one)."""


class RevisionAhead(BadRequest, code="AUTHZ_REVISION_AHEAD",
                    message="min_revision is ahead of every write made so far."):
    """``min_revision`` is above the change log's head: no write has produced that
    revision, so no data can be that fresh.  Refused rather than answered by bypassing
    the cache on every check (an unbounded cache bypass), by the control plane and the
    decision service alike (docs/authorization.md)."""

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
