"""Signing in through a connection: iamgate as the relying party of an upstream provider
(OpenID Connect Core 1.0 3.1, the authorization code flow; OAuth 2.0 for ``oauth2``
connections such as GitHub).

``ConnectionFlow.start`` makes the authorization request (3.1.2.1): PKCE S256 always
(RFC 7636), a ``state`` (RFC 6749 10.12) and a ``nonce``, all three stored with the
browser binding, the connection and the ``redirect_uri`` for 10 minutes
(``states.py``).  A sign-in for an authorization request that demands a fresh
authentication (the hosted login's ``prompt=login`` or ``max_age``, OIDC Core 3.1.2.1)
passes the demand on to an ``oidc`` connection's provider and stores it with the state:
otherwise the provider's own session would answer silently, and the relying party would
be told the user had just signed in.

``ConnectionFlow.finish`` takes the authorization response (3.1.2.5) and, in order:

1. takes the state back, once, for the same binding (CONNECTION_STATE_INVALID otherwise);
2. the mix-up defences (RFC 9700 4.4.2): the state names the connection, and the answer
   must show it comes from that connection's provider. RFC 9207: when the provider
   advertises ``authorization_response_iss_parameter_supported`` the ``iss`` parameter is
   required, and whenever it is present it must equal the pinned issuer. An answer
   without ``iss`` is told apart by where it arrived (``Arrival``): at a redirect URI of
   its connection's own, which must be the sign-in's; or it is the application's only
   active connection, so no other provider can have sent it;
3. exchanges the code at the pinned token endpoint (3.1.3.1) with the verifier and the
   client secret (client_secret_basic, or client_secret_post where the preset says so);
4. ``oidc``: checks the ID Token (``idtoken.py``, 3.1.3.7), and its ``auth_time``
   against the state's demand (step 13: present, after the sign-in began for
   ``prompt=login``, within ``max_age``); ``oauth2``: reads the user API (GitHub: ``sub``
   is the numeric id, the email the primary verified one of ``/user/emails``).  An
   ``oauth2`` provider says nothing of when the user signed in, so a sign-in with a
   demand is refused before its code is exchanged;
5. finds or makes the local account (``identities.py``, ``linking.py``) and asks the
   second factor, as the password login does.

Every refusal is audited as a ``user.login`` failure with the connection.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from controlplane.audit.context import actor, failure
from controlplane.audit.service import AuditLog
from controlplane.connections import mapping
from controlplane.connections.errors import (
    ConnectionCallbackInvalid,
    ConnectionInactive,
    ConnectionProviderError,
    ConnectionStateInvalid,
)
from controlplane.connections.http import ProviderError
from controlplane.connections.identities import IdentityService, UpstreamIdentity
from controlplane.connections.idtoken import IdTokenRejected, check_auth_time, verify_id_token
from controlplane.connections.jwks import JwksCache
from controlplane.connections.linking import (
    MAX_LINK_ATTEMPTS,
    MAX_LINK_CODES,
    LinkCodesLimited,
    PendingLinkStore,
    code_matches,
)
from controlplane.connections.states import STATE_TTL_SECONDS, StateStore, TakenState
from controlplane.connections.upstream_tokens import UpstreamTokens
from controlplane.lockout import PasswordGuard
from controlplane.mail import Mailer
from controlplane.ratelimit import Unit
from controlplane.users.claim import AccountClaim
from controlplane.users.emails import brand, letter
from controlplane.users.errors import AccountSuspended, InvalidCredentials
from shared.crypto import SecretBox
from shared.errors import BadRequest, DomainError, ValidationFailed
from shared.timeutil import Clock, aware

log = logging.getLogger("iamgate.connections")

SIGNED_IN, MFA_REQUIRED, LINK_REQUIRED, REFUSED = "signed_in", "mfa_required", "link_required", "refused"
# RFC 8176 has no value for "signed in at another provider"; this names it for our tokens.
AMR_FEDERATED = "fed"
# Presets whose token endpoint takes the client credentials in the form (client_secret_post).
CLIENT_SECRET_POST_PRESETS = frozenset({"github"})
_MAX_PARAM = 4096
# The login lock's scope of the link codes entered for an application's accounts.
LINK_CODE_SCOPE = "{}:link_code"


@dataclass(frozen=True, slots=True)
class Arrival:
    """Where the provider's answer came back: the redirect URI, and whether it is the
    connection's own (no other connection of the application uses it).

    Without RFC 9207's ``iss``, nothing in an answer says which provider sent it, so a
    provider run by an attacker can send the browser, with the state of a sign-in started
    through it, on to another provider, whose code would then go to the attacker's token
    endpoint (the mix-up attack, RFC 9700 4.4.1). A redirect URI of each connection's own
    tells them apart (4.4.2): the answer must arrive at the one its sign-in sent."""

    redirect_uri: str
    distinct: bool


@dataclass(frozen=True, slots=True)
class FlowResult:
    """What a callback (or a link completion) came to.

    ``signed_in``: ``user`` (its record), ``amr``, ``connection_id``: the caller starts
    the session (``SessionService.issue(..., login_data=result.login_data)``);
    ``auth_time``: when the user authenticated at the provider (the ID Token's, in POSIX
    seconds; None when it has none, and for ``oauth2`` and a completed link), also with
    ``mfa_required`` and ``link_required``;
    ``mfa_required``: ``challenge`` is the login's MFA challenge, answered as after a
    password; ``link_required``: ``link_id`` and the account's ``email`` (verify mode);
    ``refused``: ``error``, the domain error with its code and words."""

    outcome: str
    connection_id: str | None = None
    user: dict | None = None
    amr: tuple[str, ...] = ()
    challenge: dict | None = None
    link_id: str | None = None
    email: str | None = None
    methods: tuple[str, ...] = ()   # how the pending link may be proven
    return_to: str | None = None
    error: DomainError | None = None
    auth_time: int | None = None

    @property
    def user_id(self) -> str | None:
        return self.user["_id"] if self.user else None

    @property
    def login_data(self) -> dict:
        """The ``user.login`` event's data beside the user and session: how they signed in."""
        return login_data(self.connection_id)


def login_data(connection_id: str | None) -> dict:
    """How a sign-in through a connection is told apart in its ``user.login`` event."""
    return {"method": "connection", "connection_id": connection_id}


def client_auth(connection, box: SecretBox) -> tuple[dict, tuple[str, str] | None]:
    """The client's credentials at the token endpoint (RFC 6749 2.3.1): form fields to
    add, and the HTTP Basic pair (None for client_secret_post)."""
    secret = connection.client_secret(box)
    if secret is None:
        return {"client_id": connection.client_id}, None
    if connection.preset in CLIENT_SECRET_POST_PRESETS:
        return {"client_id": connection.client_id, "client_secret": secret}, None
    return {}, (connection.client_id, secret)


def check_redirect_uri(application: dict, redirect_uri: str) -> None:
    """An application's own UI names where the provider returns: one of its
    ``oauth_redirect_uris``, exactly (RFC 6749 3.1.2: no partial matching)."""
    if redirect_uri not in (application.get("oauth_redirect_uris") or ()):
        raise ValidationFailed({"redirect_uri": "must be one of the application's oauth_redirect_uris"})


@dataclass(eq=False)
class ConnectionFlow:
    connections: object          # UpstreamConnectionService: get(app_id, connection_id)
    states: StateStore
    links: PendingLinkStore
    http: object                 # ProviderHttp
    jwks: JwksCache
    identities: IdentityService
    tokens: UpstreamTokens
    second_factor: object        # PasskeyService: sign_in_challenge; proof_options and prove for a pending link
    passwords: object            # PasswordService.check
    guard: PasswordGuard         # the link codes' budget per account (``LINK_CODE_SCOPE``)
    claim: AccountClaim          # a code proves the mailbox: hands an unverified account over
    mailer: Mailer
    audit: AuditLog
    box: SecretBox
    clock: Clock

    # ------------------------------------------------------------------ start

    def start(self, application, connection_id, *, redirect_uri, binding, login_hint=None, return_to=None,
              prompt_login: bool = False, max_age: int | None = None) -> str:
        """The provider's authorization URL for a new sign-in (OIDC Core 3.1.2.1).
        404 CONNECTION_NOT_FOUND, 409 CONNECTION_INACTIVE.

        ``prompt_login`` and ``max_age`` (seconds): the demand of the authorization
        request this sign-in answers, for a new authentication or one no older than
        ``max_age`` (``max_age=0`` is ``prompt_login``: OIDC Core 3.1.2.1).  It is stored
        with the state, for ``finish`` to check against the ID Token's ``auth_time``, and
        an ``oidc`` provider is asked for it: ``prompt=login`` with ``max_age=0``, or
        ``max_age``.  Sending ``max_age`` makes ``auth_time`` REQUIRED in its ID Token
        (3.1.2.1), and a provider that does not know a parameter ignores it (RFC 6749
        3.1).  An ``oauth2`` provider has no such parameters: its answer to a sign-in
        with a demand is refused."""
        if max_age == 0:
            prompt_login, max_age = True, None
        connection = self.connections.get(application["_id"], connection_id)
        if not connection.is_active:
            raise ConnectionInactive(connection.id)
        pending = self.states.create(application_id=application["_id"], connection_id=connection.id,
                                     binding=binding, redirect_uri=redirect_uri, login_hint=login_hint,
                                     return_to=return_to, now=self.clock(), prompt_login=prompt_login,
                                     max_age=max_age)
        scopes = list(connection.scopes)
        if connection.type == "oidc" and "openid" not in scopes:
            scopes.insert(0, "openid")
        params = {"response_type": "code", "client_id": connection.client_id, "redirect_uri": redirect_uri,
                  "scope": " ".join(scopes), "state": pending.state, "code_challenge": pending.code_challenge,
                  "code_challenge_method": "S256"}
        if connection.type == "oidc":
            params["nonce"] = pending.nonce
            if prompt_login:
                params["prompt"] = "login"
            if prompt_login or max_age is not None:
                params["max_age"] = "0" if prompt_login else str(max_age)
        if login_hint:
            params["login_hint"] = login_hint
        endpoint = connection.endpoints.authorization_endpoint
        return endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)

    # ------------------------------------------------------------------ finish

    def finish(self, application, *, params: Mapping[str, str], binding, arrival: Arrival | None = None,
               remember_me: bool = False, device_info: Mapping | None = None) -> FlowResult:
        """The authorization response's outcome (see the module's steps). ``arrival``:
        where the answer came back, when the caller knows."""
        connection_id = None
        try:
            taken = self._take_state(application, params, binding)
            connection_id = taken.doc["connection_id"] if taken.doc else None
            if taken.problem is not None:
                raise ConnectionStateInvalid(details={"reason": taken.problem})
            state = taken.doc
            if arrival is not None and arrival.redirect_uri != state["redirect_uri"]:
                raise ConnectionCallbackInvalid(
                    "The answer came back to another redirect URI than the one this sign-in sent the browser "
                    "to: it may be another provider's (a mix-up, RFC 9700 4.4).",
                    details={"reason": "redirect_uri_mismatch"})
            connection = self.connections.get(application["_id"], connection_id)
            if not connection.is_active:
                raise ConnectionInactive(connection.id)
            response = self._authorization_response(
                connection, params, told_apart=lambda: (arrival is not None and arrival.distinct)
                or self._only_connection(application["_id"]))
            if connection.type != "oidc" and _demanded(state):
                raise ConnectionCallbackInvalid(
                    "This sign-in asks for a fresh authentication (prompt=login or max_age), which an OAuth 2.0 "
                    "connection cannot prove: its provider does not say when the user signed in.",
                    details={"reason": "auth_time"})
            token_response = self._exchange(connection, response["code"], state)
            upstream, auth_time = self._upstream_identity(connection, token_response, state)
            stored = self.tokens.seal(token_response) if connection.store_tokens else None
            resolution = self.identities.resolve(application, connection, upstream, binding=binding,
                                                 stored_tokens=stored)
        except DomainError as exc:
            self._refused(application, connection_id, exc)
            return FlowResult(REFUSED, connection_id=connection_id, error=exc)
        if resolution.pending is not None:
            self._refused(application, connection_id, None, user=resolution.pending.user_id, reason="link_required")
            return FlowResult(LINK_REQUIRED, connection_id=connection_id, link_id=resolution.pending.link_id,
                              email=resolution.pending.email, return_to=state.get("return_to"),
                              methods=self._link_methods(application, resolution.pending.user_id),
                              auth_time=auth_time)
        return self._signed_in(application, connection_id, resolution.user, remember_me, device_info,
                               return_to=state.get("return_to"), auth_time=auth_time)

    def _take_state(self, application, params, binding) -> TakenState:
        state = _param(params, "state")
        if not state or not binding:
            raise ConnectionStateInvalid(details={"reason": "missing"})
        return self.states.take(application["_id"], state, binding, self.clock())

    def _only_connection(self, app_id: str) -> bool:
        """Whether the application has a single active connection: then no other provider
        of its can have sent an answer to its callback."""
        return len(self.connections.list(app_id, active_only=True)) <= 1

    @staticmethod
    def _authorization_response(connection, params, *, told_apart) -> dict:
        """RFC 9207 2.4 and RFC 6749 4.1.2: the ``iss`` check comes before anything in the
        response is used, an error answer included. ``told_apart()``: whether an answer
        without ``iss`` is known to come from this connection's provider (``Arrival``)."""
        issuer = _param(params, "iss")
        if issuer is None and connection.endpoints.iss_parameter_supported:
            raise ConnectionCallbackInvalid("The provider's answer has no iss parameter, which it announces it "
                                            "sends (RFC 9207).", details={"reason": "iss_missing"})
        if issuer is None and not told_apart():
            raise ConnectionCallbackInvalid(
                "The provider's answer has no iss parameter (RFC 9207), and the application has other "
                "connections: only a redirect URI of this connection's own tells its answers apart from another "
                "provider's (RFC 9700 4.4.2). Send the redirect_uri the answer came back to, and give each such "
                "connection a redirect URI of its own.", details={"reason": "iss_missing"})
        if issuer is not None and issuer != connection.endpoints.issuer:
            raise ConnectionCallbackInvalid(
                "The answer comes from another issuer than the connection this sign-in started with.",
                details={"reason": "iss_mismatch", "expected": connection.endpoints.issuer})
        error = _param(params, "error")
        if error is not None:
            described = _param(params, "error_description")
            raise ConnectionCallbackInvalid(
                f"The provider refused the sign-in: {error[:100]}" + (f" ({described[:200]})" if described else ""),
                details={"reason": "provider_error", "error": error[:100]})
        code = _param(params, "code")
        if not code:
            raise ConnectionCallbackInvalid("The provider's answer has no code.", details={"reason": "code_missing"})
        return {"code": code}

    def _exchange(self, connection, code: str, state: dict) -> dict:
        """OIDC Core 3.1.3.1 / RFC 6749 4.1.3, with the PKCE verifier (RFC 7636 4.5)."""
        data, auth = client_auth(connection, self.box)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": state["redirect_uri"],
                "code_verifier": state["code_verifier"], **data}
        response = self._provider(lambda: self.http.post_form(connection.endpoints.token_endpoint, form, auth=auth))
        if not isinstance(response.get("access_token"), str):
            raise ConnectionProviderError("the token endpoint's answer has no access_token")
        if connection.type == "oidc" and not isinstance(response.get("id_token"), str):
            raise ConnectionProviderError("the token endpoint's answer has no id_token")
        return response

    def _upstream_identity(self, connection, token_response: dict,
                           state: dict) -> tuple[UpstreamIdentity, int | None]:
        """The identity the provider vouches for, and when the user authenticated there
        (the ID Token's ``auth_time``, checked against the state's demand; None when
        the provider does not say)."""
        auth_time = None
        if connection.type == "oidc":
            try:
                claims = verify_id_token(
                    token_response["id_token"], keys=self._provider(lambda: self.jwks.keys(connection)),
                    refresh_keys=lambda: self._provider(lambda: self.jwks.refresh(connection)),
                    issuer=connection.endpoints.issuer, client_id=connection.client_id, nonce=state["nonce"],
                    now=self.clock(), max_age=STATE_TTL_SECONDS)
            except IdTokenRejected as exc:
                raise ConnectionCallbackInvalid(f"The ID Token was refused: {exc.reason}.",
                                                details={"reason": "id_token"}) from None
            # The ID Token's own, before UserInfo's claims join it: only a signed one counts.
            auth_time = self._auth_time(claims, state)
            claims = self._with_userinfo(connection, claims, token_response["access_token"])
        else:
            claims = self._user_api(connection, token_response["access_token"])
        return UpstreamIdentity(issuer=connection.endpoints.issuer, sub=claims["sub"], claims=claims,
                                profile=mapping.profile_of(claims, connection.claim_mapping)), auth_time

    def _auth_time(self, claims: dict, state: dict) -> int | None:
        """The ID Token's ``auth_time`` once it meets the state's demand (``check_auth_time``,
        with the ID Token checks' leeway): a ``prompt=login`` sign-in must have
        authenticated after it started, a ``max_age`` one within ``max_age``.  400
        CONNECTION_CALLBACK_INVALID (reason ``auth_time``) otherwise: the provider's
        session answered without signing the user in again, or it does not say when."""
        started = aware(state["created_at"]) if state.get("prompt_login") else None
        try:
            return check_auth_time(claims, now=self.clock(), not_before=started, max_age=state.get("max_age"))
        except IdTokenRejected as exc:
            raise ConnectionCallbackInvalid(
                f"The provider did not confirm the fresh sign-in this one asks for: {exc.reason}.",
                details={"reason": "auth_time"}) from None

    def _with_userinfo(self, connection, claims: dict, access_token: str) -> dict:
        """The UserInfo claims (OIDC Core 5.3) when the ID Token lacks the email, as some
        providers keep the ID Token small; its ``sub`` MUST be the ID Token's (5.3.2)."""
        if mapping.claim(claims, connection.claim_mapping.email) or not connection.endpoints.userinfo_endpoint:
            return claims
        info = self._provider(lambda: self.http.get_object(connection.endpoints.userinfo_endpoint,
                                                            headers=_bearer(access_token)))
        if info.get("sub") != claims["sub"]:
            raise ConnectionCallbackInvalid("The provider's UserInfo answer is about another subject.",
                                            details={"reason": "userinfo_sub"})
        return {**info, **claims}

    def _user_api(self, connection, access_token: str) -> dict:
        """An OAuth 2.0 provider's user API (GitHub's ``/user`` and ``/user/emails``): the
        numeric id is the subject; only an email the provider marks primary and verified
        counts as verified, any other is taken unverified."""
        endpoint = connection.endpoints.userinfo_endpoint
        if not endpoint:
            raise ConnectionProviderError("the connection has no user API endpoint")
        user = self._provider(lambda: self.http.get_object(endpoint, headers=_bearer(access_token)))
        subject = user.get("id", user.get("sub"))
        if isinstance(subject, bool) or not isinstance(subject, int | str) or str(subject) == "":
            raise ConnectionProviderError("the user API's answer has no id")
        claims = {**user, "sub": str(subject), "email_verified": False}
        try:
            emails = self.http.get_json(endpoint.rstrip("/") + "/emails", headers=_bearer(access_token))
        except ProviderError as exc:
            log.info("user API emails unavailable: %s", exc.reason, extra={"connection_id": connection.id})
            emails = None
        entries = emails if isinstance(emails, list) else []
        primary = next((e for e in entries if isinstance(e, dict) and e.get("primary") is True
                        and e.get("verified") is True and isinstance(e.get("email"), str)), None)
        if primary is not None:
            claims.update(email=primary["email"], email_verified=True)
        return claims

    def _provider(self, call):
        try:
            return call()
        except ProviderError as exc:
            raise ConnectionProviderError(exc.reason) from None

    # ------------------------------------------------------------------ outcome

    def _signed_in(self, application, connection_id, user, remember_me, device_info, *, return_to,
                   auth_time: int | None = None) -> FlowResult:
        challenge = self.second_factor.sign_in_challenge(application, user, remember_me=remember_me,
                                                         device_info=dict(device_info or {}),
                                                         login_data=login_data(connection_id))
        if challenge is not None:
            self._refused(application, connection_id, None, user=user["_id"], reason="mfa_required")
            return FlowResult(MFA_REQUIRED, connection_id=connection_id, user=user, amr=(AMR_FEDERATED,),
                              challenge=challenge, return_to=return_to, auth_time=auth_time)
        return FlowResult(SIGNED_IN, connection_id=connection_id, user=user, amr=(AMR_FEDERATED,),
                          return_to=return_to, auth_time=auth_time)

    def _refused(self, application, connection_id, error: DomainError | None, *, user: str | None = None,
                 reason: str | None = None) -> None:
        if reason is None:
            reason = error.details.get("reason") if isinstance(error.details.get("reason"), str) else None
            reason = f"{error.code.lower()}:{reason}" if reason else error.code.lower()
        who = actor("user", user)
        self.audit.record("user.login", result=failure(reason), actor=who, target=who,
                          data={"method": "connection", "connection_id": connection_id},
                          application_id=application["_id"])

    # ------------------------------------------------------------------ verify-mode links

    def _link_methods(self, application, user_id: str) -> tuple[str, ...]:
        passkey = ("passkey",) if self.second_factor.can_prove(application, user_id) else ()
        return ("password", "email_code", *passkey)

    def _live_link(self, application, link_id: str, binding: str, now) -> tuple[dict, dict]:
        """The pending link and its account; 400 CONNECTION_STATE_INVALID when either is
        gone, 403 AUTH_ACCOUNT_SUSPENDED for a suspended account (nothing is sent or linked)."""
        link = self.links.live(application["_id"], link_id, binding, now)
        if link is None:
            raise _link_invalid()
        user = self.identities.users.get(application["_id"], link["user_id"])
        if user is None or user.get("status") == "deleted":
            raise _link_invalid()
        if user.get("status") == "suspended":
            raise AccountSuspended()
        return link, user

    def link_passkey_options(self, application, *, link_id: str, binding: str) -> dict:
        """{challenge_id, options}: WebAuthn request options for the passkeys of the
        account the pending link would join (only that account's are accepted)."""
        _, user = self._live_link(application, link_id, binding, self.clock())
        return self.second_factor.proof_options(application, user["_id"])

    def link_passkey_offer(self, application, *, link_id: str, binding: str, unit: Unit) -> dict | None:
        """The hosted link page's "Use a passkey": ``link_passkey_options`` when the
        account has a passkey the application accepts on this server; None otherwise,
        when the link is no longer live (the page's next post says so), or when
        ``unit``, which the stored challenge takes (of the client IP's login page
        budget: ``LoginService.page_unit``), is refused."""
        try:
            _, user = self._live_link(application, link_id, binding, self.clock())
        except (ConnectionStateInvalid, AccountSuspended):
            return None
        if not self.second_factor.can_prove(application, user["_id"]):
            return None
        if not unit.allows():
            return None
        return self.second_factor.proof_options(application, user["_id"])

    def send_link_code(self, application, *, link_id: str, binding: str) -> None:
        """Mail a 6-digit code to the existing account the pending link would join (its
        own address, not the upstream's), at most ``MAX_LINK_CODES`` times per link (429).
        400 CONNECTION_STATE_INVALID for an unknown, used or expired link or another
        browser's."""
        now = self.clock()
        link, user = self._live_link(application, link_id, binding, now)
        code = self.links.set_code(application["_id"], link_id, now)
        if code is None:
            ends = aware(link["expires_at"])
            raise LinkCodesLimited(limit=MAX_LINK_CODES, reset_at=int(ends.timestamp()),
                                   retry_after=int((ends - now).total_seconds()))
        subject = f"Your code to link a sign-in provider ({brand(application)})"
        handed_over = "" if user.get("email_verified") else (
            "This account's email address was never confirmed, so someone else may have set it up. Entering the "
            "code confirms it and makes the account yours alone: its password, the other sign-in providers "
            "linked to it, its passkeys and its two-step verification are removed, and every device signed in "
            "to it is signed out.\n\n")
        self.mailer.send(user["email"], subject, letter(application, user, (
            f"Someone is linking a sign-in provider to your {brand(application)} account. If it is you, enter "
            f"this code: {code}\n\nIt is valid 10 minutes. If it is not you, ignore this email: nothing is "
            f"linked without the code.\n\n{handed_over}")))

    def complete_link(self, application, *, link_id: str, binding: str, password: str | None = None,
                      code: str | None = None, passkey: Mapping | None = None, remember_me: bool = False,
                      device_info: Mapping | None = None) -> FlowResult:
        """Link the identity once the person proved the existing account with its
        password (counted against the account's login lock), the mailed code, or one of
        its passkeys (``passkey``: ``challenge_id`` of ``link_passkey_options`` and the
        ``credential``), then sign in as ``finish`` would.  Each answer counts; after
        ``MAX_LINK_ATTEMPTS`` the link is spent.  401 AUTH_INVALID_CREDENTIALS for a
        wrong answer.  The code proves the mailbox only: an account whose email is not
        verified is first handed to the mailbox's owner (``users.claim``)."""
        app_id, now = application["_id"], self.clock()
        link, user = self._live_link(application, link_id, binding, now)
        if self.links.count_attempt(app_id, link_id, now) is None:
            raise _link_invalid()
        if password is not None:
            proven = self.passwords.check(app_id, user, password)
        elif passkey is not None:
            proven = self._passkey_proves(application, user, passkey)
        else:
            proven = self._code_proves(app_id, user, link, code, now)
        if not proven:
            self._refused(application, link["connection_id"], None, user=user["_id"], reason="link_not_proven")
            left = MAX_LINK_ATTEMPTS - link["attempts"] - 1
            wrong = "The passkey is not one of this account's, or it did not verify." if passkey is not None \
                else "The password or code is not correct."
            raise InvalidCredentials(wrong, details={"attempts_left": max(0, left)})
        if self.links.take(app_id, link_id) is None:
            raise _link_invalid()  # a parallel completion won
        if password is None and passkey is None:
            # The code proved the mailbox, not the account: an unverified one goes to the
            # mailbox's owner, without the ways in someone else may have set up.
            user = self.claim.hand_over(app_id, user, via="link_code")
        connection = self.connections.get(app_id, link["connection_id"])
        fields = link["identity"]
        self.identities.link(application, connection.id, user["_id"], fields, holder=user)
        if connection.auto_update:
            claims = fields.get("claims") or {}
            user = self.identities.apply_mapping(application, connection, user, UpstreamIdentity(
                issuer=fields["issuer"], sub=fields["sub"], claims=claims,
                profile=mapping.profile_of(claims, connection.claim_mapping)))
        return self._signed_in(application, connection.id, user, remember_me, device_info, return_to=None)

    def _code_proves(self, app_id: str, user: dict, link: dict, code: str | None, now) -> bool:
        """Whether ``code`` is the link's, counted against the account's budget of link
        codes: each pending link has its own code and its own ``MAX_LINK_ATTEMPTS``, and
        anyone whose upstream account merely claims the address can open links, so
        without a budget per account the guesses at it would have no end. Under the login
        lock's rules, in a scope of their own (a wrong code does not lock the password):
        429 AUTH_ACCOUNT_LOCKED past ``lockout_threshold`` wrong codes."""
        key = self.guard.take(LINK_CODE_SCOPE.format(app_id), user["email"])
        if code is not None and code_matches(link, code, now):
            self.guard.succeeded(key)
            return True
        self.guard.failed(key)
        return False

    def _passkey_proves(self, application, user: dict, passkey: Mapping) -> bool:
        """A passkey assertion is one more answer: one that does not verify (another
        account's passkey included) is a wrong answer, like a wrong password."""
        try:
            self.second_factor.prove(application, user["_id"], challenge_id=passkey["challenge_id"],
                                     credential=passkey["credential"])
        except BadRequest:
            return False
        return True


def _link_invalid() -> ConnectionStateInvalid:
    return ConnectionStateInvalid("The pending link is unknown, used, expired or another browser's; sign in again.",
                                  details={"reason": "link"})


def _demanded(state: Mapping) -> bool:
    """Whether the sign-in of this state demanded a fresh authentication (``start``)."""
    return bool(state.get("prompt_login")) or state.get("max_age") is not None


def _param(params: Mapping, name: str) -> str | None:
    value = params.get(name)
    if isinstance(value, list):
        value = value[0] if len(value) == 1 else None  # a repeated parameter is not an answer
    if not isinstance(value, str) or len(value) > _MAX_PARAM:
        return None
    return value


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}
