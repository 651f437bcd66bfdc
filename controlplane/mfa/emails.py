"""Security notices of the MFA area, branded with the application's name.

A change to a user's second factor is mailed to the account's address, as GitHub,
Google or Auth0 do, so that someone who took over a session and turned MFA off (or
copied new backup codes) does not go unnoticed.  The messages carry no link and no
secret.
"""
from __future__ import annotations

from controlplane.users.emails import brand, letter


def _notice(app: dict, user: dict, subject: str, what: str) -> tuple[str, str]:
    return f"{subject} ({brand(app)})", letter(app, user, (
        f"{what}\n\n"
        f"If this was you, there is nothing to do. If it was not, change your password at once "
        f"and set up two-step verification again.\n\n"
    ))


def enabled(app: dict, user: dict) -> tuple[str, str]:
    return _notice(app, user, "Two-step verification turned on",
                   f"Two-step verification with an authenticator app was turned on for your "
                   f"{brand(app)} account ({user['email']}).")


def disabled(app: dict, user: dict, *, passkeys_left: bool = False) -> tuple[str, str]:
    """The user removed TOTP.  With ``passkeys_left`` (a passkey still answers the
    login's second step) two-step verification is not off, and a notice saying the
    password alone now signs in would be false: it names what went and what still guards
    the account."""
    if passkeys_left:
        return _notice(app, user, "Authenticator app removed from two-step verification",
                       f"The authenticator app and its backup codes were removed from your {brand(app)} "
                       f"account ({user['email']}). Signing in with your password still asks for one of your "
                       f"passkeys.")
    return _notice(app, user, "Two-step verification turned off",
                   f"Two-step verification was turned off for your {brand(app)} account "
                   f"({user['email']}). Signing in now needs only your password.")


def reset(app: dict, user: dict, *, totp: bool, passkeys: int) -> tuple[str, str]:
    """An administrator removed every second factor (``totp``: the authenticator app and
    its backup codes; ``passkeys``: how many passkeys), for a user who lost them.  What
    signs in now is said as it is: the password alone, or, for an account that has none
    (its passkeys were its way in), the password reset email, which sets one."""
    removed = (["the authenticator app", "its backup codes"] if totp else []) + (
        [f"your {passkeys} passkeys" if passkeys > 1 else "your passkey"] if passkeys else [])
    what = removed[0] if len(removed) == 1 else f"{', '.join(removed[:-1])} and {removed[-1]}"
    now = ("Signing in now needs only your password." if user.get("password_hash") else
           "Your account has no password: to sign in, ask for a password reset email, which lets you set one.")
    return f"Two-step verification reset ({brand(app)})", letter(app, user, (
        f"An administrator of the application reset two-step verification for your {brand(app)} account "
        f"({user['email']}), removing {what}. {now}\n\n"
        f"If you asked for this, set up two-step verification again once you are signed in. If you did not, "
        f"change your password at once and tell the application's support.\n\n"
    ))


def backup_codes_regenerated(app: dict, user: dict) -> tuple[str, str]:
    return _notice(app, user, "New backup codes created",
                   f"A new set of backup codes was created for your {brand(app)} account "
                   f"({user['email']}). The codes you had before no longer work.")
