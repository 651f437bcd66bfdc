"""Errors of multi-factor authentication (spec "Multi-factor authentication", "Errors")."""
from shared.errors import BadRequest, Conflict, Gone, NotFound, RateLimited, Unauthorized, Unprocessable


class MfaNotEnabled(BadRequest, code="MFA_NOT_ENABLED",
                    message="Multi-factor authentication is not enabled for this user."):
    """The user has no active authenticator app to turn off, regenerate codes for or reset."""


class MfaAlreadyEnabled(Conflict, code="MFA_ALREADY_ENABLED",
                        message="An authenticator app is already active for this user; disable it first."):
    """A setup is started while an authenticator app is active."""


class MfaMethodNotFound(NotFound, code="MFA_METHOD_NOT_FOUND",
                        message="No pending authenticator setup has this method_id; start the setup again.",
                        detail_names=("method_id",)):
    """No pending setup has this method_id (or it expired)."""


class MfaChallengeExpired(Gone, code="AUTH_MFA_CHALLENGE_EXPIRED",
                          message="The MFA challenge has expired or was already used; log in again."):
    """The challenge is unknown, consumed, or older than IAMGATE_MFA_CHALLENGE_TTL."""


class ConfirmationCodeInvalid(Unprocessable, code="MFA_INVALID_CODE",
                              message="The code is not correct or has expired; enter the code the app shows now."):
    """Wrong or expired TOTP code when confirming a setup."""


class MfaCodeInvalid(Unauthorized, code="AUTH_INVALID_MFA_CODE", message="The verification code is not correct."):
    """Wrong TOTP or backup code at MFA verify; ``details.attempts_remaining``."""


class MfaLocked(RateLimited, code="AUTH_MFA_LOCKED",
                message="Too many verification codes were tried for this account. Try again later."):
    """Too many wrong codes on a challenge, or for the user across challenges."""
