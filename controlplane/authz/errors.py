"""Errors of the control plane's authorization checks (V1/authz/*)."""
from shared.errors import BadRequest


class RevisionAhead(BadRequest):
    """``min_revision`` is above the change log's head: no write has produced that
    revision, so no data can be that fresh.  Refused rather than answered by bypassing
    the cache on every check (an unbounded cache bypass; docs/authorization.md)."""

    code, message = "AUTHZ_REVISION_AHEAD", "min_revision is ahead of every write made so far."

    def __init__(self, min_revision: int, head: int):
        super().__init__(details={"field": "min_revision", "min_revision": min_revision, "head": head})
