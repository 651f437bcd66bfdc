"""HTTP resources of signing in through a connection from an application's own UI, and
of a user's linked identities.

V1 = /api/v1/applications/{applicationId}.  The sign-in routes are public and, like the
password login and the passkey sign-in, identify the application by the path and count
against the login's per-IP budget (IAMGATE_RATE_LIMIT_LOGIN) before the body is read.
Their answers are the password login's: the token pair, or the MFA challenge.
"""
from __future__ import annotations

from controlplane.auth import PUBLIC, owner_or, permission
from controlplane.connections.errors import (
    ConnectionCallbackInvalid,
    ConnectionEmailExists,
    ConnectionInactive,
    ConnectionLinkRequired,
    ConnectionNotFound,
    ConnectionProviderError,
    ConnectionStateInvalid,
    IdentityLastSignIn,
    IdentityNotFound,
    IdentityTokensNotStored,
)
from controlplane.connections.flow import (
    LINK_REQUIRED,
    MFA_REQUIRED,
    REFUSED,
    Arrival,
    ConnectionFlow,
    check_redirect_uri,
)
from controlplane.connections.identities import IdentityService
from controlplane.connections.linking import LinkCodesLimited
from controlplane.connections.signin import schemas
from controlplane.connections.upstream_tokens import UpstreamTokens
from controlplane.lockout import AccountLocked
from controlplane.openapi import op
from controlplane.passkeys.errors import PasskeysDisabled, PasskeysUnavailable
from controlplane.passkeys.schemas import AUTHENTICATION_OPTIONS_RESULT
from controlplane.resource import Action, ThrottledPerIp
from controlplane.users.errors import (
    AccountSuspended,
    InvalidCredentials,
    LoginsLimited,
    UserLimitReached,
    UserNotFound,
)
from controlplane.users.login import LoginService
from controlplane.users.resources import device_info_of
from controlplane.users.schemas import MESSAGE
from controlplane.users.sessions import SessionService
from shared.errors import Forbidden, ValidationFailed
from shared.http import respond

_CALLBACK_ERRORS = [ValidationFailed, ConnectionStateInvalid, ConnectionCallbackInvalid, ConnectionProviderError,
                    ConnectionNotFound, ConnectionInactive, ConnectionEmailExists, ConnectionLinkRequired,
                    AccountSuspended, UserLimitReached, LoginsLimited]


class _SignIn(ThrottledPerIp):
    access = {"POST": PUBLIC}

    def __init__(self, flow: ConnectionFlow, login: LoginService, sessions: SessionService, *, trusted_proxies):
        super().__init__(login, trusted_proxies=trusted_proxies)
        self.flow = flow
        self.login = login
        self.sessions = sessions

    def signed_in(self, req, resp, result, remember_me: bool) -> None:
        """The password login's answer for a flow's outcome; a refusal is its error."""
        if result.outcome == REFUSED:
            raise result.error
        if result.outcome == LINK_REQUIRED:
            raise ConnectionLinkRequired(details={"link_id": result.link_id, "email": result.email,
                                                  "methods": list(result.methods)})
        if result.outcome == MFA_REQUIRED:
            respond(resp, result.challenge, cacheable=False)
            return
        # The provider's auth_time, when it gave one, is when the user authenticated; without
        # it the sign-in proved no time (docs/oidc.md, the JSON mode's max_age).
        pair = self.sessions.issue(req.context.application, result.user, remember_me=remember_me,
                                   device_info=device_info_of(req, self.trusted_proxies), login_data=result.login_data,
                                   auth_time=result.auth_time, auth_proven=result.auth_time is not None)
        respond(resp, pair, cacheable=False)


class Start(_SignIn):
    no_store = True
    docs = {"POST": op(
        body=schemas.START, response=schemas.STARTED,
        errors=[ValidationFailed, ConnectionNotFound, ConnectionInactive, LoginsLimited],
    )}

    def act(self, req, values, applicationId, connectionId):
        """Start signing in through a connection

        Answers the provider's authorization URL (PKCE S256, state and nonce kept 10 minutes, bound to the
        binding). redirect_uri must be one of the application's oauth_redirect_uris; the page there passes the
        query parameters it receives to the callback route."""
        app = req.context.application
        check_redirect_uri(app, values["redirect_uri"])
        url = self.flow.start(app, connectionId, redirect_uri=values["redirect_uri"], binding=values["binding"],
                              login_hint=values["login_hint"])
        return {"authorization_url": url}


class Callback(_SignIn):
    docs = {"POST": op(body=schemas.CALLBACK, response=schemas.SIGN_IN_RESULT, errors=_CALLBACK_ERRORS)}

    def on_post(self, req, resp, applicationId):
        """Finish signing in through a connection

        Takes the provider's answer (the query parameters it sent to the redirect_uri) with the same binding
        as the start, and the redirect_uri it came back to (required when the provider sends no iss and the
        application has other active connections; each such connection then needs a redirect URI of its own).
        Returns the token pair of a password login (user.login, with the connection), or the MFA
        challenge when the user has a second factor. 409 CONNECTION_LINK_REQUIRED (linking verify, or
        trusted_email without every condition) carries details.link_id, details.email and details.methods:
        prove the existing account with POST .../auth/connections/link."""
        values = self.body(req)
        # The application's UI says where the answer came back; that it is the connection's own redirect URI
        # is the UI's to ensure (docs/connections.md, "The mix-up").
        arrival = Arrival(values["redirect_uri"], distinct=True) if values["redirect_uri"] else None
        result = self.flow.finish(req.context.application, params=values["params"], binding=values["binding"],
                                  arrival=arrival, remember_me=values["remember_me"],
                                  device_info=device_info_of(req, self.trusted_proxies))
        self.signed_in(req, resp, result, values["remember_me"])


class LinkCode(_SignIn):
    docs = {"POST": op(
        body=schemas.LINK_CODE, ok=202, response=MESSAGE,
        errors=[ValidationFailed, ConnectionStateInvalid, AccountSuspended, LinkCodesLimited, LoginsLimited],
    )}

    def act(self, req, values, applicationId):
        """Mail a code to the account a pending link would join

        The code (6 digits, 10 minutes) goes to the existing account's own address. A new request replaces the
        code; 3 codes per pending link."""
        self.flow.send_link_code(req.context.application, link_id=values["link_id"], binding=values["binding"])
        return {"message": "A code has been sent to the account's email address."}


class LinkPasskey(_SignIn):
    no_store = True
    docs = {"POST": op(
        body=schemas.LINK_CODE, response=AUTHENTICATION_OPTIONS_RESULT,
        errors=[ValidationFailed, ConnectionStateInvalid, AccountSuspended, PasskeysDisabled, PasskeysUnavailable,
                LoginsLimited],
    )}

    def act(self, req, values, applicationId):
        """WebAuthn options to prove the account a pending link would join with one of its passkeys

        Offered when the 409 CONNECTION_LINK_REQUIRED lists passkey among details.methods. Pass the options to
        navigator.credentials.get(), then send the credential with the challenge_id to POST
        .../auth/connections/link. Only that account's passkeys are accepted."""
        return self.flow.link_passkey_options(req.context.application, link_id=values["link_id"],
                                              binding=values["binding"])


class LinkComplete(_SignIn):
    password_work = ("POST",)
    docs = {"POST": op(
        body=schemas.LINK_COMPLETE, response=schemas.SIGN_IN_RESULT,
        errors=[ValidationFailed, ConnectionStateInvalid, InvalidCredentials, AccountLocked, AccountSuspended,
                ConnectionCallbackInvalid, ConnectionNotFound, PasskeysDisabled, LoginsLimited],
    )}

    def on_post(self, req, resp, applicationId):
        """Prove the existing account and link the identity

        With the account's password (counted toward its login lock), the mailed code, or one of its passkeys
        (challenge_id and credential, from POST .../link/passkey). 5 answers per pending link, which lasts 10
        minutes and is single use. Then signs in as the callback does: the token pair or the MFA challenge."""
        values = self.body(req)
        passkey = None
        if values["credential"] is not None:
            if values["challenge_id"] is None:
                raise ValidationFailed({"challenge_id": "is required with credential"})
            passkey = {"challenge_id": values["challenge_id"], "credential": values["credential"]}
        if [values["password"], values["code"], passkey].count(None) != 2:
            raise ValidationFailed({"password": "give the password, the code or a passkey credential (one of them)"})
        result = self.flow.complete_link(req.context.application, link_id=values["link_id"],
                                         binding=values["binding"], password=values["password"], code=values["code"],
                                         passkey=passkey, remember_me=values["remember_me"],
                                         device_info=device_info_of(req, self.trusted_proxies))
        self.signed_in(req, resp, result, values["remember_me"])


class _IdentityResource(Action):
    """A route of a user's linked identities."""

    def __init__(self, identities: IdentityService):
        self.identities = identities


class Identities(_IdentityResource):
    access = {"GET": owner_or("users:read")}
    docs = {"GET": op(response=schemas.IDENTITIES, errors=[Forbidden, UserNotFound])}

    def act(self, req, values, applicationId, userId):
        """List the user's linked identities

        One per (connection, issuer, sub) the user signs in with; oldest first. The user's own token, or an
        API key or user token holding users:read."""
        return self.identities.list(applicationId, userId)


class IdentityItem(_IdentityResource):
    access = {"DELETE": owner_or("users:manage")}
    docs = {"DELETE": op(ok=204, errors=[Forbidden, UserNotFound, IdentityNotFound, IdentityLastSignIn])}

    def act(self, req, values, applicationId, userId, identityId):
        """Unlink an identity

        The user's own token, or an API key or user token holding users:manage. Emits connection.revoked
        (data.kind upstream). Refused (409 IDENTITY_LAST_SIGN_IN) unless another way in remains: a password, a
        passkey or another identity."""
        self.identities.unlink(req.context.application, userId, identityId)


class IdentityToken(_IdentityResource):
    no_store = True
    access = {"GET": permission("connections:tokens")}
    docs = {"GET": op(
        response=schemas.UPSTREAM_TOKEN,
        errors=[Forbidden, IdentityNotFound, IdentityTokensNotStored, ConnectionProviderError],
    )}

    def __init__(self, identities: IdentityService, tokens: UpstreamTokens):
        super().__init__(identities)
        self.tokens = tokens

    def act(self, req, values, applicationId, userId, identityId):
        """The upstream access token of an identity

        For the application's back end (API keys and user tokens holding connections:tokens), when the
        connection stores tokens; the user's own token alone is not enough. An access token with less than a
        minute left is refreshed first (connection.refreshed, or connection.failed and 502). The refresh token
        is never served."""
        return self.tokens.serve(applicationId, self.identities.get(applicationId, userId, identityId))
