"""Errors of passkeys (WebAuthn).  Every failed verification is a 400 with its own
stable code; no message repeats the expected origin or RP ID (docs/passkeys.md)."""
from shared.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable


class PasskeysUnavailable(ServiceUnavailable, code="PASSKEY_UNAVAILABLE",
                          message="Passkeys are not available on this server: its public URL has no host name a "
                                  "passkey can be bound to (see docs/passkeys.md)."):
    """No RP ID: IAMGATE_PUBLIC_URL is an IP address and IAMGATE_WEBAUTHN_RP_ID is unset."""


class PasskeysDisabled(Forbidden, code="PASSKEY_DISABLED",
                       message="Passkeys are turned off for this application."):
    """The application's ``passkeys`` setting is ``off`` (or, for a sign-in without a
    password, not ``passwordless``)."""


class PasswordSignInDisabled(Forbidden, code="PASSKEY_REQUIRED",
                             message="This account signs in with a passkey; password sign-in is turned off."):
    """``passkeys_allow_password`` is false and the user has a passkey that signs in alone."""


class PasskeyNotFound(NotFound, code="PASSKEY_NOT_FOUND", message="Passkey not found.",
                      detail_names=("passkey_id",)):
    """No passkey with this id among the caller's own."""


class PasskeyAlreadyRegistered(Conflict, code="PASSKEY_ALREADY_REGISTERED",
                               message="This authenticator is already registered."):
    """The credential id is already stored in this application."""


class PasskeyLimitExceeded(Conflict, code="PASSKEY_LIMIT_EXCEEDED",
                           message="This account has the most passkeys it may have ({limit}); delete one before "
                                   "adding another.", detail_names=("limit",)):
    """The user already has ``service.MAX_PASSKEYS_PER_USER`` passkeys in this application."""


class LastPasskey(Conflict, code="PASSKEY_LAST_CREDENTIAL",
                  message="This is your only way to sign in; set a password (password reset) or add another "
                          "passkey before deleting it."):
    """Deleting the user's last passkey would leave no way in (no password)."""


class ChallengeInvalid(BadRequest, code="PASSKEY_CHALLENGE_INVALID",
                       message="The passkey challenge is unknown, expired or already used; ask for new options."):
    """The challenge_id names no live challenge of this kind, caller and application."""


class OriginMismatch(BadRequest, code="PASSKEY_ORIGIN_MISMATCH",
                     message="The passkey response comes from an origin this server does not accept."):
    """clientDataJSON.origin is not one of IAMGATE_WEBAUTHN_ORIGINS, or the ceremony ran
    in a frame of another origin (crossOrigin true, or a topOrigin)."""


class RpIdMismatch(BadRequest, code="PASSKEY_RP_ID_MISMATCH",
                   message="The passkey response was made for another relying party."):
    """authenticatorData's rpIdHash is not the SHA-256 of the configured RP ID."""


class VerificationFailed(BadRequest, code="PASSKEY_VERIFICATION_FAILED",
                         message="The passkey response could not be verified."):
    """Malformed response, wrong challenge or type, bad signature, missing user presence."""


class UserVerificationRequired(BadRequest, code="PASSKEY_USER_VERIFICATION_REQUIRED",
                               message="Signing in with a passkey alone needs user verification (PIN or "
                                       "biometrics) and a passkey stored on the authenticator."):
    """A sign-in without a password got an assertion without the UV flag or user handle."""


class CredentialUnknown(BadRequest, code="PASSKEY_CREDENTIAL_UNKNOWN",
                        message="This passkey is not registered for this account."):
    """The credential id is not one of the expected user's in this application."""


class SignCountInvalid(BadRequest, code="PASSKEY_SIGN_COUNT_INVALID",
                       message="The authenticator's signature counter went backwards; the passkey may have been "
                               "cloned. Sign in another way and replace it."):
    """The assertion's sign count is not above the stored one (both non-zero cases)."""


class AuthenticatorNotAllowed(BadRequest, code="PASSKEY_AUTHENTICATOR_NOT_ALLOWED",
                              message="This application accepts only specific authenticator models."):
    """The AAGUID is not on the application's ``passkey_aaguids`` allow-list."""
