"""Errors of the OIDC provider.

At the OAuth endpoints (``/oidc/*``) errors are RFC 6749 section 5.2 bodies
``{"error", "error_description"}`` sent with ``Cache-Control: no-store``, not the error
envelope (docs/oidc.md, "Errors"); ``OAuthError`` is their base, and
``controlplane.oidc.wire.oauth_error_handler`` renders them.  An authorization error
raised once the client and its redirect URI are known carries ``redirect_uri`` (and
``state``): the hosted browser flow then answers it on the redirect (RFC 6749 section
4.1.2.1).  Client management under V1 keeps the envelope (``ClientNotFound``,
``ClientIsPublic``).
"""
from __future__ import annotations

from shared.errors import BadRequest, Conflict, DomainError, NotFound, ServiceUnavailable, Unauthorized


class OAuthError(DomainError, code="invalid_request", message="The request is invalid."):
    """An OAuth error response: ``code`` is the RFC's ``error`` value, ``message`` its
    ``error_description``.  ``redirect_uri`` is set only when it is safe to send the
    user agent back to the client with the error."""

    body_schema = "OAuthError"  # RFC 6749 section 5.2: {error, error_description}

    def __init__(self, description: str | None = None, *, redirect_uri: str | None = None,
                 state: str | None = None, response_mode: str = "query"):
        super().__init__(description)
        self.redirect_uri = redirect_uri
        self.state = state
        self.response_mode = response_mode

    @property
    def error(self) -> str:
        return self.code

    def authorization_response(self) -> dict:
        """The parameters of this error on the client's redirect URI (RFC 6749 4.1.2.1)."""
        return {"error": self.error, "error_description": self.message, "state": self.state}

    def not_redirected(self) -> OAuthError:
        """The same error answered directly (the JSON mode of authorize never redirects)."""
        self.redirect_uri = None
        return self


class InvalidRequest(OAuthError, BadRequest, code="invalid_request",
                     message="The request is missing a parameter or is malformed."):
    """RFC 6749 5.2: a parameter is missing, invalid, repeated or malformed."""


class InvalidClient(OAuthError, BadRequest, code="invalid_client", message="The client is unknown or inactive."):
    """Spec: client not found or inactive (authorize)."""


class UnauthenticatedClient(OAuthError, Unauthorized, code="invalid_client", message="Client authentication failed."):
    """RFC 7009 2.2.1 / RFC 7662 2.3 / RFC 6749 5.2: client authentication failed at the
    revocation or introspection endpoint."""


class InvalidGrant(OAuthError, BadRequest, code="invalid_grant",
                   message="The grant is invalid, expired or was issued to another client."):
    """Spec: the code is invalid, expired, used or fails PKCE, the refresh token is not
    usable, or the client credentials are wrong (400 invalid_grant, as the spec says)."""


class InvalidScope(OAuthError, BadRequest, code="invalid_scope", message="The requested scope is invalid."):
    """Spec: openid missing, or a scope that is not supported or not allowed for the client."""


class UnsupportedGrantType(OAuthError, BadRequest, code="unsupported_grant_type",
                           message="Only authorization_code, refresh_token and client_credentials are supported."):
    """RFC 6749 5.2: a ``grant_type`` the server does not support."""


class UnauthorizedClient(OAuthError, BadRequest, code="unauthorized_client",
                         message="The client is not allowed to use this grant type."):
    """RFC 6749 5.2: the client may not use this grant type (its ``grant_types``, or a
    public client asking for client_credentials)."""


class UnsupportedResponseType(OAuthError, BadRequest, code="unsupported_response_type",
                              message="Only response_type=code is supported."):
    """RFC 6749 4.1.2.1: a ``response_type`` other than ``code``."""


class RequestNotSupported(OAuthError, BadRequest, code="request_not_supported",
                          message="Request objects (the request parameter) are not supported."):
    """OIDC Core 3.1.2.6: the ``request`` parameter (a request object) is not supported."""


class RequestUriNotSupported(OAuthError, BadRequest, code="request_uri_not_supported",
                             message="The request_uri parameter is not supported."):
    """OIDC Core 3.1.2.6: the ``request_uri`` parameter is not supported."""


class InvalidToken(OAuthError, Unauthorized, code="invalid_token", message="The access token is invalid or expired."):
    """RFC 6750 3.1: the bearer access token is missing, expired, revoked or foreign.
    Answered 401 with ``WWW-Authenticate: Bearer``; ``missing`` leaves the error code
    out of that header, as section 3.1 asks when no credential was sent."""

    def __init__(self, description: str | None = None, *, missing: bool = False):
        super().__init__(description)
        self.missing = missing


class AccessDenied(OAuthError, BadRequest, code="access_denied", message="The user denied the request."):
    """RFC 6749 4.1.2.1: the user denied the request on the consent page (always
    answered on the redirect URI)."""


class LoginRequired(OAuthError, BadRequest, code="login_required", message="The user is not signed in."):
    """OIDC Core 3.1.2.6: ``prompt=none`` and no browser session (on the redirect URI)."""


class ConsentRequired(OAuthError, BadRequest, code="consent_required",
                      message="The user has not consented to this client."):
    """OIDC Core 3.1.2.6: ``prompt=none`` and the user has not consented to the client
    for these scopes (on the redirect URI)."""


class TemporarilyUnavailable(OAuthError, ServiceUnavailable, code="temporarily_unavailable",
                             message="The server is temporarily unable to handle the request."):
    """RFC 6749 4.1.2.1's ``temporarily_unavailable``, answered at every OAuth endpoint
    (503 with ``Retry-After``) when the store does not answer: without it the client,
    and so the redirect URI, cannot be checked, so it is never sent on a redirect."""

    def __init__(self, retry_after: int):
        super().__init__()
        self.retry_after = retry_after


class SignInsLimited(OAuthError, ServiceUnavailable, code="temporarily_unavailable",
                     message="Too many sign-ins were started from this network; try again in a minute."):
    """RFC 6749 4.1.2.1's ``temporarily_unavailable`` on the redirect URI (the client
    checked): the client IP's budget of stored authorization requests
    (IAMGATE_RATE_LIMIT_AUTHORIZE, ``HostedLogin.begin``) is spent."""


class AuthorizationRequestExpired(
        BadRequest, code="OIDC_AUTHORIZATION_REQUEST_EXPIRED",
        message="This sign-in request has expired or was already used. Go back to the application and try again."):
    """A hosted-login page was posted with an authorization-request handle that is
    unknown, expired, already used, from another browser, or at another step."""


class ClientNotFound(NotFound, code="OIDC_CLIENT_NOT_FOUND", message="OIDC client not found.",
                     detail_names=("client_id",)):
    """V1 client management: no OIDC client with this id in the application."""


class ClientIsPublic(Conflict, code="OIDC_CLIENT_PUBLIC",
                     message="A public client (token_endpoint_auth_method none) has no secret to rotate.",
                     detail_names=("client_id",)):
    """V1 client management: a secret rotation of a public client (RFC 6749 2.1), which
    authenticates with its client_id alone."""
