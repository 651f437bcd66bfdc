"""Security notices of passkeys, branded with the application's name.

A passkey is a way into the account of its own, which a password reset or change leaves
in place (docs/authentication.md): someone who signed in with a stolen password and added
one would keep a way in.  So every passkey added to an account or removed from it is
mailed to the account's address, as GitHub and Google do and as the MFA area does for
TOTP (``mfa.emails``).  The messages carry no link and no secret.
"""
from __future__ import annotations

from datetime import UTC, datetime

from controlplane.passkeys.authenticators import authenticator_name
from controlplane.users.emails import brand, letter
from shared.timeutil import aware
from shared.validation import one_line


def _passkey(passkey: dict) -> str:
    """The passkey as the user's list shows it: its name, quoted and on one line (whoever
    added it chose it), and the authenticator's model when the table knows it."""
    model = authenticator_name(passkey["aaguid"])
    return f"\"{one_line(passkey['name'])}\"" + (f" ({model})" if model else "")


def _when(at: datetime) -> str:
    return aware(at).astimezone(UTC).strftime("%Y-%m-%d at %H:%M UTC")


def added(app: dict, user: dict, passkey: dict) -> tuple[str, str]:
    name = brand(app)
    return f"A passkey was added to your {name} account", letter(app, user, (
        f"A passkey named {_passkey(passkey)} was added to your {name} account ({user['email']}) on "
        f"{_when(passkey['created_at'])}. It signs in to the account, and changing or resetting the password "
        f"does not remove it.\n\n"
        f"If this was you, there is nothing to do. If it was not, someone else knows your password: sign in, "
        f"remove this passkey in your account's settings, and reset your password.\n\n"
    ))


def removed(app: dict, user: dict, passkey: dict, at: datetime) -> tuple[str, str]:
    name = brand(app)
    return f"A passkey was removed from your {name} account", letter(app, user, (
        f"The passkey named {_passkey(passkey)} was removed from your {name} account ({user['email']}) on "
        f"{_when(at)}. It no longer signs in.\n\n"
        f"If this was you, there is nothing to do. If it was not, someone else is signed in to your account: "
        f"reset your password, then check the passkeys in your account's settings.\n\n"
    ))
