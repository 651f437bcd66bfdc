"""Errors about end users that several areas raise (roles, MFA, self-service...), and
the errors of emailed tokens, which the dashboard's accounts share."""
from shared.errors import BadRequest, Conflict, Forbidden, Gone, NotFound, RateLimited, Unauthorized


class UserNotFound(NotFound):
    """The user is not in this application, or was deleted."""

    code, message = "USER_NOT_FOUND", "User not found in this application."
    detail_names = ("user_id",)


class EmailAlreadyRegistered(Conflict):
    """Registration with an email the application already has."""

    code, message = "AUTH_EMAIL_ALREADY_REGISTERED", "This email is already registered in this application."
    detail_names = ("email",)


class UserLimitReached(Forbidden):
    """The application holds IAMGATE_MAX_USERS_PER_APPLICATION users (its tier)."""

    code, message = "tier_limit_exceeded", "The application has reached its limit of {limit} users."
    detail_names = ("limit",)


class InvalidCredentials(Unauthorized):
    """Wrong email or password."""

    code, message = "AUTH_INVALID_CREDENTIALS", "The email or password is not correct."


class AccountSuspended(Forbidden):
    """A suspended account signs in."""

    code, message = "AUTH_ACCOUNT_SUSPENDED", "This account is suspended."


class ResetRequestsLimited(RateLimited):
    """More password reset requests for the email than IAMGATE_RATE_LIMIT_FORGOT allows
    (counted whether or not an account has it)."""

    code = "AUTH_PASSWORD_RESET_RATE_LIMITED"
    message = "Too many password reset requests for this email. Try again later."


class InvalidResetToken(BadRequest):
    """The reset token (an end user's or a dashboard account's) is unknown, used, or
    belongs to another email."""

    code, message = "AUTH_INVALID_RESET_TOKEN", "The reset token is invalid or has already been used."


class ResetTokenExpired(Gone):
    code, message = "AUTH_RESET_TOKEN_EXPIRED", "The reset token has expired; ask for a new one."


class InvalidVerificationToken(BadRequest):
    """The verification token (an end user's or a dashboard account's) is unknown or
    used."""

    code, message = "AUTH_INVALID_VERIFICATION_TOKEN", "The verification token is invalid or has already been used."


class VerificationTokenExpired(Gone):
    code, message = "AUTH_VERIFICATION_TOKEN_EXPIRED", "The verification token has expired; ask for a new email."


class VerificationRequestsLimited(RateLimited):
    """More verification resends for the email than IAMGATE_RATE_LIMIT_RESEND allows."""

    code = "AUTH_VERIFICATION_RATE_LIMITED"
    message = "Too many verification emails requested for this address. Try again later."


class PasswordConfirmationMismatch(BadRequest):
    """change-password's new_password_confirmation differs from new_password (the spec
    names VALIDATION_MULTIPLE_ERRORS for it, even alone)."""

    code, message = "VALIDATION_MULTIPLE_ERRORS", "new_password_confirmation does not match new_password."
    detail_names = ("fields",)


class RegistrationsLimited(RateLimited):
    """More registrations from the client IP than the application allows."""

    message = "Too many registrations from this address. Try again later."


class LoginsLimited(RateLimited):
    """More logins from the client IP than IAMGATE_RATE_LIMIT_LOGIN allows."""

    message = "Too many login attempts from this address. Try again later."


class RefreshTokenRejected(Unauthorized):
    """The refresh token is unknown, expired, revoked or reused; ``details.reason``."""
