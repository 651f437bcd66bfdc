"""Errors of multi-factor authentication (spec "Multi-factor authentication", "Errors")."""
from shared.errors import BadRequest, Conflict, Gone, NotFound, RateLimited, Unauthorized, Unprocessable


class MfaNotEnabled(BadRequest):
    code, message = "MFA_NOT_ENABLED", "Multi-factor authentication is not enabled for this user."


class MfaAlreadyEnabled(Conflict):
    code, message = "MFA_ALREADY_ENABLED", "An authenticator app is already active for this user; disable it first."


class MfaMethodNotFound(NotFound):
    """No pending setup has this method_id (or it expired)."""

    code = "MFA_METHOD_NOT_FOUND"
    message = "No pending authenticator setup has this method_id; start the setup again."
    detail_names = ("method_id",)


class MfaChallengeExpired(Gone):
    """The challenge is unknown, consumed, or older than IAMGATE_MFA_CHALLENGE_TTL."""

    code, message = "AUTH_MFA_CHALLENGE_EXPIRED", "The MFA challenge has expired or was already used; log in again."


class ConfirmationCodeInvalid(Unprocessable):
    """Wrong or expired TOTP code when confirming a setup."""

    code = "MFA_INVALID_CODE"
    message = "The code is not correct or has expired; enter the code the app shows now."


class MfaCodeInvalid(Unauthorized):
    """Wrong TOTP or backup code at MFA verify; ``details.attempts_remaining``."""

    code, message = "AUTH_INVALID_MFA_CODE", "The verification code is not correct."


class MfaLocked(RateLimited):
    """Too many wrong codes on a challenge, or for the user across challenges."""

    code = "AUTH_MFA_LOCKED"
    message = "Too many verification codes were tried for this account. Try again later."
