"""Plain-text emails of the users area, branded with the application's name.

Each message carries one link ``{public_url}/pages/{applicationId}/<page>?token=<token>``
to the hosted page that finishes the action (``pages.py``).  The link opens a page
with a button rather than acting on GET, so mail scanners that prefetch links do not
consume the single-use token.
"""
from __future__ import annotations

from urllib.parse import urlencode

from controlplane.applications.service import branding
from shared.validation import one_line


def link(public_url: str, app_id: str, page: str, token: str) -> str:
    return f"{public_url}/pages/{app_id}/{page}?{urlencode({'token': token})}"


def _lifetime(seconds: int) -> str:
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return "1 hour" if hours == 1 else f"{hours} hours"
    minutes = max(1, seconds // 60)
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def single_use_link(url: str, ttl: int) -> str:
    """The link on a line of its own, then the start of the line that says it works once
    and for how long (every emailed link, the dashboard's too)."""
    return f"{url}\n\nThe link can be used once and expires in {_lifetime(ttl)}."


def brand(app: dict) -> str:
    """The application's name as the emails show it."""
    return one_line(branding(app)["name"])


def letter(app: dict, user: dict, text: str) -> str:
    """The body of a message to an end user: a greeting, ``text`` (paragraphs, each
    ending in a blank line) and the application's name as the signature."""
    return f"Hello {one_line(user['name'])},\n\n{text}-- {brand(app)}\n"


def _link_letter(app: dict, user: dict, url: str, ttl: int, *, intro: str, closing: str, note: str = "") -> str:
    """The body of a message whose one link finishes an action: ``intro`` asks to open
    it, ``note`` follows the line that says how long it works, ``closing`` tells someone
    who did not ask what to do."""
    return letter(app, user, f"{intro}\n\n{single_use_link(url, ttl)}{note}\n{closing}\n\n")


def verification(app: dict, user: dict, url: str, ttl: int) -> tuple[str, str]:
    """(subject, body) of the email-address verification message."""
    name = brand(app)
    return f"Confirm your email address for {name}", _link_letter(
        app, user, url, ttl,
        intro=f"Please confirm the email address of your {name} account by opening this link:",
        closing=f"If you did not create an account with {name}, you can ignore this message.")


def password_reset(app: dict, user: dict, url: str, ttl: int) -> tuple[str, str]:
    """(subject, body) of the password reset message."""
    name = brand(app)
    return f"Reset your {name} password", _link_letter(
        app, user, url, ttl,
        intro=f"Someone asked to reset the password of your {name} account ({user['email']}).\n"
              f"To choose a new password, open this link:",
        note=" Resetting the password signs you out on every device.",
        closing="If you did not ask for this, ignore this message: your password stays unchanged.")
