"""Plain-text emails of the users area, branded with the application's name.

Each message carries one link ``{public_url}/pages/{applicationId}/<page>?token=<token>``
to the hosted page that finishes the action (``pages.py``).  The link opens a page
with a button rather than acting on GET, so mail scanners that prefetch links do not
consume the single-use token.
"""
from __future__ import annotations

from urllib.parse import urlencode

from shared.validation import one_line

from controlplane.applications.service import branding


def link(public_url: str, app_id: str, page: str, token: str) -> str:
    return f"{public_url}/pages/{app_id}/{page}?{urlencode({'token': token})}"


def _lifetime(seconds: int) -> str:
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return "1 hour" if hours == 1 else f"{hours} hours"
    minutes = max(1, seconds // 60)
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def verification(app: dict, user: dict, url: str, ttl: int) -> tuple[str, str]:
    """(subject, body) of the email-address verification message."""
    brand = one_line(branding(app)["name"])
    body = (
        f"Hello {one_line(user['name'])},\n\n"
        f"Please confirm the email address of your {brand} account by opening this link:\n\n"
        f"{url}\n\n"
        f"The link can be used once and expires in {_lifetime(ttl)}.\n"
        f"If you did not create an account with {brand}, you can ignore this message.\n\n"
        f"-- {brand}\n"
    )
    return f"Confirm your email address for {brand}", body


def password_reset(app: dict, user: dict, url: str, ttl: int) -> tuple[str, str]:
    """(subject, body) of the password reset message."""
    brand = one_line(branding(app)["name"])
    body = (
        f"Hello {one_line(user['name'])},\n\n"
        f"Someone asked to reset the password of your {brand} account ({user['email']}).\n"
        f"To choose a new password, open this link:\n\n"
        f"{url}\n\n"
        f"The link can be used once and expires in {_lifetime(ttl)}. Resetting the password "
        f"signs you out on every device.\n"
        f"If you did not ask for this, ignore this message: your password stays unchanged.\n\n"
        f"-- {brand}\n"
    )
    return f"Reset your {brand} password", body
