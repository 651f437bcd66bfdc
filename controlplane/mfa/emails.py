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


def disabled(app: dict, user: dict, *, by_administrator: bool = False, passkeys_left: bool = False
             ) -> tuple[str, str]:
    """TOTP removed.  With ``passkeys_left`` (a passkey still answers the login's second
    step) two-step verification is not off, and a notice saying the password alone now
    signs in would be false: it names what went and what still guards the account."""
    who = " by an administrator of the application" if by_administrator else ""
    if passkeys_left:
        return _notice(app, user, "Authenticator app removed from two-step verification",
                       f"The authenticator app and its backup codes were removed{who} from your {brand(app)} "
                       f"account ({user['email']}). Signing in with your password still asks for one of your "
                       f"passkeys.")
    return _notice(app, user, "Two-step verification turned off",
                   f"Two-step verification was turned off{who} for your {brand(app)} account "
                   f"({user['email']}). Signing in now needs only your password.")


def backup_codes_regenerated(app: dict, user: dict) -> tuple[str, str]:
    return _notice(app, user, "New backup codes created",
                   f"A new set of backup codes was created for your {brand(app)} account "
                   f"({user['email']}). The codes you had before no longer work.")
