"""Errors about end users that several areas raise (roles, MFA, self-service...), and
the errors of emailed tokens, which the dashboard's accounts share."""
from shared.errors import BadRequest, Conflict, Forbidden, Gone, NotFound, RateLimited, Unauthorized


class UserNotFound(NotFound, code="USER_NOT_FOUND", message="User not found in this application.",
                   detail_names=("user_id",)):
    """The user is not in this application, or was deleted."""


class EmailAlreadyRegistered(Conflict, code="AUTH_EMAIL_ALREADY_REGISTERED",
                             message="This email is already registered in this application.", detail_names=("email",)):
    """Registration with an email the application already has."""


class UserLimitReached(Forbidden, code="tier_limit_exceeded",
                       message="The application has reached its limit of {limit} users.", detail_names=("limit",)):
    """The application holds IAMGATE_MAX_USERS_PER_APPLICATION users (its tier)."""


class InvalidCredentials(Unauthorized, code="AUTH_INVALID_CREDENTIALS",
                         message="The email or password is not correct."):
    """Wrong email or password."""


class AccountSuspended(Forbidden, code="AUTH_ACCOUNT_SUSPENDED", message="This account is suspended."):
    """A suspended account signs in."""


class ResetRequestsLimited(RateLimited, code="AUTH_PASSWORD_RESET_RATE_LIMITED",
                           message="Too many password reset requests for this email. Try again later."):
    """More password reset requests for the email than IAMGATE_RATE_LIMIT_FORGOT allows
    (counted whether or not an account has it)."""


class InvalidResetToken(BadRequest, code="AUTH_INVALID_RESET_TOKEN",
                        message="The reset token is invalid or has already been used."):
    """The reset token (an end user's or a dashboard account's) is unknown, used, or
    belongs to another email."""


class ResetTokenExpired(Gone, code="AUTH_RESET_TOKEN_EXPIRED",
                        message="The reset token has expired; ask for a new one."):
    """The reset token is known but has outlived its lifetime."""


class InvalidVerificationToken(BadRequest, code="AUTH_INVALID_VERIFICATION_TOKEN",
                               message="The verification token is invalid or has already been used."):
    """The verification token (an end user's or a dashboard account's) is unknown or
    used."""


class VerificationTokenExpired(Gone, code="AUTH_VERIFICATION_TOKEN_EXPIRED",
                               message="The verification token has expired; ask for a new email."):
    """The verification token is known but has outlived its lifetime."""


class VerificationRequestsLimited(RateLimited, code="AUTH_VERIFICATION_RATE_LIMITED",
                                  message="Too many verification emails requested for this address. Try again later."):
    """More verification resends for the email than IAMGATE_RATE_LIMIT_RESEND allows."""


class PasswordConfirmationMismatch(BadRequest, code="VALIDATION_MULTIPLE_ERRORS",
                                   message="new_password_confirmation does not match new_password.",
                                   detail_names=("fields",)):
    """change-password's new_password_confirmation differs from new_password (the spec
    names VALIDATION_MULTIPLE_ERRORS for it, even alone)."""


class RegistrationsLimited(RateLimited, message="Too many registrations from this address. Try again later."):
    """More registrations from the client IP than the application allows."""


class LoginsLimited(RateLimited, message="Too many login attempts from this address. Try again later."):
    """More logins from the client IP than IAMGATE_RATE_LIMIT_LOGIN allows."""


class RefreshTokenRejected(Unauthorized):
    """The refresh token is unknown, expired, revoked or reused; ``details.reason``."""


class SessionEnded(Unauthorized, message="The session of this access token has ended; sign in again."):
    """An access token outlives its session (it stays valid until it expires), but what
    outlives the token (a passkey) is added only while the session is live."""
