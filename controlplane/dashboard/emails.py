"""Plain-text emails to dashboard accounts: address verification and password reset.

Each carries one link ``{public_url}/dashboard/<page>?token=<token>``; the dashboard's
front end opens it and posts the token to ``POST /api/dashboard/email/verify`` or
``POST /api/dashboard/password/reset`` (a GET never acts, so mail scanners that prefetch
links do not consume the single-use token).
"""
from __future__ import annotations

from urllib.parse import urlencode

from controlplane.users.emails import single_use_link
from shared.validation import one_line


def link(public_url: str, page: str, token: str) -> str:
    return f"{public_url}/dashboard/{page}?{urlencode({'token': token})}"


def verification(account: dict, url: str, ttl: int) -> tuple[str, str]:
    body = (
        f"Hello {one_line(account['name'])},\n\n"
        "Please confirm the email address of your iamgate dashboard account by opening this link:\n\n"
        f"{single_use_link(url, ttl)} Until the address is confirmed, "
        "the account cannot build anything, and no organization can add it as a member.\n"
        "If you did not create this account, do not open the link: whoever chose its password would "
        "keep it. To take the address over, ask for a password reset on the dashboard's sign-in page.\n"
    )
    return "Confirm your email address for the iamgate dashboard", body


def password_reset(account: dict, url: str, ttl: int, *, claim: bool = False) -> tuple[str, str]:
    """The reset message; ``claim`` for a registration that found the address held by
    an account that never confirmed it (docs/security.md, "Unverified dashboard accounts")."""
    if claim:
        intro = ("Someone tried to create an iamgate dashboard account with this address, which an "
                 "unconfirmed account already holds. If the address is yours, open this link and choose "
                 "a password: the account becomes yours, and whoever else signed in to it is signed out.\n\n")
    else:
        intro = f"Someone asked to reset the password of your iamgate dashboard account ({account['email']}).\n\n"
    body = (
        f"Hello,\n\n{intro}"
        f"{single_use_link(url, ttl)} Setting a password signs the "
        "account out on every device and confirms this address.\n"
        "If you did not ask for this, ignore this message.\n"
    )
    return "Reset your iamgate dashboard password", body
