"""An account's token stamp (docs/authentication.md, "Tokens and sessions").

A password reset, or a hand-over of an unverified account to its email's owner, sets the
user's ``tokens_not_before``.  The V1 access tokens issued under it carry it as ``tnb``
(whole milliseconds, what MongoDB keeps of a datetime), and a token without the account's
current stamp is refused: by the control plane and by decision services alike, so the
rule and its answer live here.  Dashboard accounts and their sessions carry one too
(docs/dashboard.md, "Sessions and cookies"), moved by every change that ends the
account's other sessions.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from shared.errors import Unauthorized
from shared.timeutil import aware, millis


class TokenOutdated(Unauthorized, message="The account's password was reset, or the account handed over to its "
                                          "email's owner, after this token was issued."):
    """An access token issued before the account's current stamp."""


def stamp_of(doc: Mapping) -> int | None:
    """The stamp a user (or session) document holds, in milliseconds; None when it has
    none.  One stored datetime may read back naive or aware: the number is the same."""
    stamp = doc.get("tokens_not_before")
    return None if stamp is None else millis(stamp)


def check(tnb, stamp: int | None) -> None:
    """401 TokenOutdated unless the token's ``tnb`` is the account's ``stamp`` (any token
    passes while the account has none)."""
    if stamp is not None and tnb != stamp:
        raise TokenOutdated()


def next_stamp(previous: datetime | None, now: datetime) -> datetime:
    """A new ``tokens_not_before`` after ``previous``: ``now``, or a millisecond past it
    (the store keeps milliseconds), so a new stamp always differs from the old one."""
    return now if previous is None else max(now, aware(previous) + timedelta(milliseconds=1))


def stamped_since(read: Mapping, current: Mapping | None) -> bool:
    """Whether the account was stamped anew (a password reset, a hand-over) after ``read``
    was read (``current`` is the account now): what a sign-in or a change proved against
    ``read`` no longer holds."""
    return stamp_of(read) != stamp_of(current or {})
