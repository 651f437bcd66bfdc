"""The token endpoint: RFC 6749 3.2 and 5, the authorization code grant (4.1.3-4.1.4,
OIDC Core 3.1.3), the refresh token grant (6, OIDC Core 12), with PKCE (RFC 7636 4.5-4.6),
and the client credentials grant (4.4).

Client authentication (RFC 6749 2.3.1) is ``client_secret_post`` or
``client_secret_basic``, never both at once; a public client sends its client_id alone
(3.2.1).  A wrong or unknown client is 400 ``invalid_grant``, as the spec says; a grant
type the client's ``grant_types`` lack is 400 ``unauthorized_client`` (5.2).  Every response is sent with
``Cache-Control: no-store`` (RFC 6749 5.1).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import InitVar, dataclass
from datetime import datetime

from controlplane.audit.context import actor, success
from controlplane.audit.service import AuditLog
from controlplane.oidc import pkce
from controlplane.oidc.claims import OidcTokens
from controlplane.oidc.clients import ClientService, grant_types, scopes_allowed
from controlplane.oidc.connections import ConnectionService
from controlplane.oidc.errors import (
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    UnauthorizedClient,
    UnsupportedGrantType,
)
from controlplane.oidc.store import CodeStore, GrantStore
from controlplane.users.directory import UserDirectory
from shared.ids import digest, new_id, random_token
from shared.timeutil import Clock, aware, seconds


def _required(params: dict, *names: str) -> None:
    missing = [name for name in names if not params.get(name)]
    if missing:
        raise InvalidRequest(f"Missing parameter(s): {', '.join(missing)}.")


@dataclass(eq=False, kw_only=True)
class AuthorizationCodeGrant:
    """RFC 6749 4.1.3: grant_type=authorization_code, code, redirect_uri, and code_verifier
    when the authorization request had a code_challenge (always, unless the client is
    registered with ``require_pkce: false``)."""

    GRANT_TYPE = "authorization_code"

    codes: CodeStore
    grants: GrantStore
    connections: ConnectionService
    users: UserDirectory
    # Whether a V1 session is live: ``session_live(app_id, session_id, now)`` (the users
    # area's ``SessionStore.is_live``, handed over where the services are built).
    session_live: Callable[[str, str, datetime], bool]
    clock: Clock
    audit: AuditLog
    refresh_ttl: int

    def validate_token_request(self, client: dict, params: dict) -> dict:
        """RFC 6749 4.1.3 and RFC 7636 4.6; the code document once it is used.

        The code must have been issued to this client (a condition of the write that
        spends it, so another client cannot burn it), be unused and unexpired (a code
        presented twice revokes what the first exchange issued, 4.1.2), carry this
        redirect_uri, and match the PKCE verifier; a code issued without a challenge
        takes no verifier (OAuth 2.0 Security BCP 2.1.1: a verifier then is a downgrade
        attempt).  A code exchanged as it should be is read once, by that write; only a
        refused one is read again, to say why."""
        _required(params, "code", "redirect_uri")
        code_digest, now = digest(params["code"]), self.clock()
        used = self.codes.consume(code_digest, client["client_id"], new_id(), now,
                                  with_verifier=bool(params.get("code_verifier")))
        if used is None:
            self._refused(client, params, code_digest, now)
        if params["redirect_uri"] != used["redirect_uri"]:
            self._fail(used, "redirect_uri_mismatch", "redirect_uri differs from the authorization request.")
        self._check_verifier(used, params.get("code_verifier"))
        return used

    def _refused(self, client: dict, params: dict, code_digest: str, now):
        """Why the code could not be spent: unknown or another client's, used before (a
        replay, which revokes what its first exchange issued, RFC 6749 4.1.2, with or
        without a verifier: whoever holds a leaked code seldom holds the verifier too),
        a verifier missing, expired."""
        code = self.codes.get(code_digest)
        if code is None or code["client_id"] != client["client_id"]:
            raise InvalidGrant("The code is invalid.")
        if code.get("used_at") is not None:
            self._replayed(code_digest, code)
        if code.get("code_challenge") is not None:
            _required(params, "code_verifier")
        if aware(code["expires_at"]) <= now:
            raise InvalidGrant("The code has expired.")
        raise InvalidGrant("The code was already used.")  # nothing left to explain the refusal: as the write found it

    def _check_verifier(self, code: dict, verifier: str | None) -> None:
        """RFC 7636 4.6 (S256 only)."""
        if code.get("code_challenge") is None:
            if verifier is not None:
                self._fail(code, "invalid_verifier", "code_verifier was sent, but the authorization request had no "
                                                     "code_challenge.")
            return
        if not pkce.is_valid_verifier(verifier):
            self._fail(code, "invalid_verifier", "code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~].")
        if not pkce.verify(verifier, code["code_challenge"]):
            self._fail(code, "invalid_verifier", "The code_verifier does not match the code_challenge.")

    def _replayed(self, code_digest: str, code: dict | None):
        """RFC 6749 4.1.2: the code was used before; revoke the grant of its first exchange."""
        if code is not None and code.get("used_at") is not None:
            self.codes.mark_replayed(code_digest, self.clock())
            self.audit.record("oidc.code_replayed", result=success(), target=actor("user", code["user_id"]),
                              application_id=code["app_id"],
                              data={"client_id": code["client_id"], "grant_id": code.get("grant_id")})
            self.connections.failed(code["app_id"], code["user_id"], code["client_id"], "code_reused")
            if code.get("grant_id"):
                self.connections.revoke_grant(code["grant_id"], "code_reused")
        raise InvalidGrant("The code was already used.")

    def _fail(self, code: dict, reason: str, description: str):
        self.connections.failed(code["app_id"], code["user_id"], code["client_id"], reason)
        raise InvalidGrant(description)

    def create_token_response(self, client: dict, code: dict) -> tuple[dict, dict]:
        """RFC 6749 4.1.4: a refresh-token grant is created under the user's consent; the
        tokens are minted by the endpoint.  Returns (grant, refresh token)."""
        app_id, user_id = code["app_id"], code["user_id"]
        user = self.users.get(app_id, user_id)
        if user is None or user.get("status") != "active":
            self._fail(code, "user_inactive", "The user is no longer active.")
        if not self.connections.consent_covers(app_id, user_id, client["client_id"], code["scopes"]):
            self._fail(code, "consent_withdrawn", "The user's consent was withdrawn.")
        now, refresh_token = self.clock(), random_token(32)
        grant = {
            "_id": code["grant_id"], "app_id": app_id, "client_id": client["client_id"], "user_id": user_id,
            "session_id": code.get("session_id"), "scopes": list(code["scopes"]), "auth_time": code["auth_time"],
            "amr": code.get("amr"),
            "token_digest": digest(refresh_token), "previous_digest": None, "rotated_at": None, "spent_digests": [],
            "created_at": now, "last_used_at": now, "expires_at": now + seconds(self.refresh_ttl),
            "revoked_at": None, "revoked_reason": None,
        }
        self.grants.insert(grant)
        # A replay that arrived between the consume and the insert found no grant to
        # revoke; it marked the code, so the exchange revokes its own grant.
        if (self.codes.get(code["_id"]) or {}).get("replayed_at") is not None:
            self.connections.revoke_grant(grant["_id"], "code_reused")
            raise InvalidGrant("The code was already used.")
        # The sign-in the code came from must still be on: a logout, a password reset or a
        # revoked session ends the session first and then sweeps its grants, so a grant
        # inserted before this read is swept, and one read after it finds the session over.
        if grant["session_id"] is not None and not self.session_live(app_id, grant["session_id"], now):
            self.connections.revoke_grant(grant["_id"], "session_ended")
            self._fail(code, "session_ended", "The session the code was issued in has ended.")
        self.connections.connected(app_id, user_id, client["client_id"], grant["_id"], code["scopes"])
        return {**grant, "nonce": code.get("nonce"), "user": user}, refresh_token


@dataclass(eq=False, kw_only=True)
class RefreshTokenGrant:
    """RFC 6749 6: grant_type=refresh_token, refresh_token, optional narrower scope.

    The refresh token rotates as the V1 refresh does (docs/oidc.md, "Tokens"): one atomic swap
    per use; the successor is an HMAC of the presented token, so the token rotated last
    presented again within IAMGATE_REFRESH_REUSE_GRACE seconds yields the same successor;
    any other reuse revokes the grant (OAuth 2.0 Security BCP 4.14.2)."""

    GRANT_TYPE = "refresh_token"

    grants: GrantStore
    connections: ConnectionService
    users: UserDirectory
    clock: Clock
    audit: AuditLog
    secret_key: InitVar[str]
    reuse_grace: int

    def __post_init__(self, secret_key: str):
        self._rotation_key = hashlib.sha256(b"iamgate oidc refresh-token rotation\0" + secret_key.encode()).digest()

    def _successor(self, refresh_token: str) -> str:
        mac = hmac.new(self._rotation_key, refresh_token.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def validate_token_request(self, client: dict, params: dict) -> tuple[dict, list, str]:
        """RFC 6749 6: the grant the refresh token belongs to, rotated; (grant, scopes of
        the new tokens, successor).

        Everything that can refuse the request (the scope, the user) is checked before
        the rotation: a refused request leaves the presented token live, so the client
        can retry it (a retry of a rotated token outside the grace window would be
        reuse and revoke the grant)."""
        _required(params, "refresh_token")
        presented, now = params["refresh_token"], self.clock()
        successor = self._successor(presented)
        grant = self.grants.live_by_token(client["client_id"], digest(presented), now)
        if grant is not None:
            scopes, user = self._check(client, grant, params.get("scope"))
            rotated = self.grants.rotate(grant, digest(presented), digest(successor), now)
            if rotated is not None:
                return {**rotated, "user": user}, scopes, successor
        # Not the live token (any more: a racing refresh may have rotated it just now).
        grant = self._reuse_within_grace(client, digest(presented), digest(successor), now)
        scopes, user = self._check(client, grant, params.get("scope"))
        self.grants.touch(grant["_id"], now)
        return {**grant, "user": user}, scopes, successor

    def _check(self, client: dict, grant: dict, requested: str | None) -> tuple[list, dict]:
        """(the scopes of the new tokens, the user): the scope narrowed as asked and the
        user still active; a grant whose user is not active any more is revoked."""
        scopes = self._narrowed(self._still_allowed(client, grant["scopes"]), requested)
        user = self.users.get(grant["app_id"], grant["user_id"])
        if user is None or user.get("status") != "active":
            self.connections.revoke_grant(grant["_id"], "user_inactive")
            self.connections.failed(grant["app_id"], grant["user_id"], grant["client_id"], "user_inactive")
            raise InvalidGrant("The user is no longer active.")
        return scopes, user

    @staticmethod
    def _still_allowed(client: dict, granted) -> list:
        """The granted scopes the client may still have: an administrator who narrows its
        ``allowed_scopes`` narrows the tokens its refresh tokens get from then on (the
        grant keeps what was consented, should the scope be allowed again)."""
        allowed = scopes_allowed(client)
        scopes = [scope for scope in granted if scope in allowed]
        if "openid" not in scopes:
            raise InvalidScope("The client may no longer be granted the openid scope.")
        return scopes

    @staticmethod
    def _narrowed(granted, requested: str | None) -> list:
        """RFC 6749 6: a refresh may ask for a subset of the scopes granted, never more."""
        if not requested:
            return list(granted)
        scopes = list(dict.fromkeys(requested.split()))
        if not set(scopes) <= set(granted) or "openid" not in scopes:
            raise InvalidScope("The scope must be a subset of the granted scopes and include openid.")
        return scopes

    def _reuse_within_grace(self, client: dict, presented: str, successor_digest: str, now) -> dict:
        """The grant a non-live token may still refresh (the token rotated last, within
        the grace window, whose successor is live); any other reuse revokes the grant."""
        grant = self.grants.by_token(presented)
        if grant is None or grant["client_id"] != client["client_id"]:
            raise InvalidGrant("The refresh token is invalid.")
        if grant.get("revoked_at") is not None:
            raise InvalidGrant("The refresh token was revoked.")
        if aware(grant["expires_at"]) <= now:
            raise InvalidGrant("The refresh token has expired.")
        if grant.get("previous_digest") == presented and grant.get("token_digest") == successor_digest \
                and now < aware(grant["rotated_at"]) + seconds(self.reuse_grace):
            return grant
        self.audit.record("token.reuse_detected", result=success(), target=actor("user", grant["user_id"]),
                          application_id=grant["app_id"],
                          data={"client_id": grant["client_id"], "grant_id": grant["_id"], "token": "refresh_token"})
        self.connections.failed(grant["app_id"], grant["user_id"], grant["client_id"], "refresh_token_reused")
        self.connections.revoke_grant(grant["_id"], "refresh_token_reused")
        raise InvalidGrant("The refresh token was already used; the grant has been revoked.")


@dataclass(eq=False, kw_only=True)
class ClientCredentialsGrant:
    """RFC 6749 4.4: grant_type=client_credentials and an optional scope, for a
    confidential client whose ``grant_types`` include it.  The answer (4.4.3) is an access
    token of the client's own, without refresh token or ID token: there is no user."""

    GRANT_TYPE = "client_credentials"

    clients: ClientService
    connections: ConnectionService

    def validate_token_request(self, client: dict, params: dict) -> list:
        """RFC 6749 3.3: the scopes asked for, all among the client's allowed_scopes;
        none asked, none granted (the default)."""
        scopes = list(dict.fromkeys((params.get("scope") or "").split()))
        if not set(scopes) <= set(client.get("allowed_scopes") or ()):
            self.connections.client_failed(client["app_id"], client["client_id"], "invalid_scope")
            raise InvalidScope("The scope must be among the client's allowed_scopes.")
        return scopes

    def create_token_response(self, client: dict, scopes: list) -> None:
        first = self.clients.mark_connected(client)
        self.connections.client_connected(client["app_id"], client["client_id"], scopes, first=first)


GRANTS = (AuthorizationCodeGrant.GRANT_TYPE, RefreshTokenGrant.GRANT_TYPE, ClientCredentialsGrant.GRANT_TYPE)


@dataclass(eq=False, kw_only=True)
class TokenEndpoint:
    """RFC 6749 3.2: authenticate the client, dispatch on grant_type, mint the tokens."""

    clients: ClientService
    code_grant: AuthorizationCodeGrant
    refresh_grant: RefreshTokenGrant
    client_grant: ClientCredentialsGrant
    connections: ConnectionService
    tokens: OidcTokens

    def create_token_response(self, params: dict, basic=None) -> dict:
        """The RFC 6749 5.1 response {access_token, token_type, expires_in, refresh_token,
        id_token, scope}; {access_token, token_type, expires_in, scope} for client
        credentials (4.4.3)."""
        grant_type = params.get("grant_type")
        if not grant_type:
            raise InvalidRequest("grant_type is required.")
        if grant_type not in GRANTS:
            raise UnsupportedGrantType()
        client = self.clients.authenticate_request(params, basic, failure=InvalidGrant, public=True)
        if grant_type not in grant_types(client):
            if grant_type == ClientCredentialsGrant.GRANT_TYPE:
                self.connections.client_failed(client["app_id"], client["client_id"], "unauthorized_client")
            raise UnauthorizedClient(f"The client's grant_types do not include {grant_type}.")
        if grant_type == ClientCredentialsGrant.GRANT_TYPE:
            scopes = self.client_grant.validate_token_request(client, params)
            self.client_grant.create_token_response(client, scopes)
            access_token = self.tokens.client_access_token(app_id=client["app_id"], client_id=client["client_id"],
                                                           scopes=scopes)
            return {"access_token": access_token, "token_type": "Bearer", "expires_in": self.tokens.access_ttl,
                    "scope": " ".join(scopes)}
        if grant_type == AuthorizationCodeGrant.GRANT_TYPE:
            code = self.code_grant.validate_token_request(client, params)
            grant, refresh_token = self.code_grant.create_token_response(client, code)
            scopes, nonce = grant["scopes"], grant["nonce"]
        else:
            grant, scopes, refresh_token = self.refresh_grant.validate_token_request(client, params)
            nonce = None
            self.connections.refreshed(grant)
        return self._token_response(client, grant, refresh_token, scopes, nonce)

    def _token_response(self, client, grant, refresh_token, scopes, nonce) -> dict:
        user = grant["user"]
        access_token = self.tokens.access_token(app_id=grant["app_id"], user_id=user["_id"],
                                                client_id=client["client_id"], scopes=scopes,
                                                session_id=grant.get("session_id"), auth_time=grant["auth_time"],
                                                grant_id=grant["_id"])
        id_token = self.tokens.id_token(user, client_id=client["client_id"], scopes=scopes,
                                        auth_time=grant["auth_time"], amr=grant.get("amr"), nonce=nonce,
                                        access_token=access_token,
                                        session_id=grant.get("session_id"))
        return {"access_token": access_token, "token_type": "Bearer", "expires_in": self.tokens.access_ttl,
                "refresh_token": refresh_token, "id_token": id_token, "scope": " ".join(scopes)}
