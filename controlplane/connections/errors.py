"""Errors of connections to upstream identity providers and of the identities they link
(docs/connections.md, docs/errors.md)."""
from shared.errors import BadGateway, BadRequest, Conflict, NotFound


class ConnectionNotFound(NotFound, code="CONNECTION_NOT_FOUND", message="Connection not found.",
                         detail_names=("connection_id",)):
    """No connection with this id in the application."""


class ConnectionNameTaken(Conflict, code="CONNECTION_NAME_TAKEN",
                          message="A connection named {name!r} already exists in this application.",
                          detail_names=("name",)):
    """The connection name is already used in the application."""


class ConnectionInactive(Conflict, code="CONNECTION_INACTIVE", message="The connection is not active.",
                         detail_names=("connection_id",)):
    """A sign-in through a connection whose ``is_active`` is false."""


class ConnectionProviderError(BadGateway, code="CONNECTION_PROVIDER_ERROR",
                              message="The identity provider could not be used: {reason}",
                              detail_names=("reason",)):
    """A call to the upstream provider failed (refused address, timeout, TLS, an answer
    that is not what the protocol requires); ``details.reason`` says which, in words."""


class ConnectionStateInvalid(BadRequest, code="CONNECTION_STATE_INVALID",
                             message="The sign-in state is unknown, used or expired; start again."):
    """A callback's ``state`` names no pending sign-in of this browser."""


class ConnectionCallbackInvalid(BadRequest, code="CONNECTION_CALLBACK_INVALID",
                                message="The provider's answer was refused."):
    """The provider's callback or tokens failed a check (``iss``, id_token, error answer)."""


class ConnectionEmailExists(Conflict, code="CONNECTION_EMAIL_EXISTS",
                            message="An account with this email already exists; sign in to it to link the provider."):
    """Linking ``none``: the upstream email is an existing user's."""


class ConnectionLinkRequired(Conflict, code="CONNECTION_LINK_REQUIRED",
                             message="Prove the existing account before it is linked to this provider."):
    """Linking ``verify``: the person must prove the existing account first."""


class IdentityNotFound(NotFound, code="IDENTITY_NOT_FOUND", message="Identity not found.",
                       detail_names=("identity_id",)):
    """No linked identity with this id for the user."""


class IdentityLastSignIn(Conflict, code="IDENTITY_LAST_SIGN_IN",
                         message="This identity is the user's last way to sign in; add another before unlinking it.",
                         detail_names=("identity_id",)):
    """Unlinking would leave the user without a password, passkey or other identity."""


class IdentityTokensNotStored(NotFound, code="IDENTITY_TOKENS_NOT_STORED",
                             message="No upstream tokens are stored for this identity.",
                             detail_names=("identity_id",)):
    """The connection does not store tokens, or none were kept for the identity."""


class ConnectionLimitExceeded(Conflict, code="CONNECTION_LIMIT_EXCEEDED",
                              message="The application already has {limit} connections; delete one first.",
                              detail_names=("limit",)):
    """The application holds the most connections it may (``service.CONNECTIONS_MAX``)."""


class ConnectionEmailDomainTaken(Conflict, code="CONNECTION_EMAIL_DOMAIN_TAKEN",
                                 message="The email domain {domain} already belongs to the active connection "
                                         "{connection!r}.", detail_names=("domain", "connection")):
    """An email domain routes to one active connection per application."""


class ConnectionChangedConcurrently(Conflict, message="The connection was changed concurrently; try again.",
                                    detail_names=("connection_id",)):
    """Another update won between this update's read and its write."""
