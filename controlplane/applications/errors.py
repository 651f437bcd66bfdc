"""Errors of applications (tenants)."""
from shared.errors import Forbidden


class ApplicationLimitReached(Forbidden):
    """The organization holds IAMGATE_MAX_APPLICATIONS_PER_ORGANIZATION applications."""

    code = "resource_limit_exceeded"

    def __init__(self, limit: int):
        super().__init__(f"The organization has reached its limit of {limit} applications.",
                         details={"limit": limit})
