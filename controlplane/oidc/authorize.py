"""The authorization endpoint: RFC 6749 4.1.1-4.1.2 with OIDC Core 3.1.2 and PKCE
(RFC 7636), as the spec's ``GET /oidc/authorize`` describes.

Both modes use this service: the JSON mode (a user JWT of the application; the spec's
200 JSON answer) and the hosted browser mode (login page, consent page, 302).  The
steps, in the order RFC 6749 4.1.2.1 requires:

1. ``validate`` the client and the redirect URI first.  Until both are known good an
   error is answered to the user agent directly (400), never redirected: a forged
   ``redirect_uri`` must not turn the provider into an open redirector.  Every later
   error carries ``redirect_uri`` and ``state`` so the browser mode can send it back.
2. ``needs_consent`` / ``grant_consent``: the user's consent to the client, per scope.
3. ``issue_code``: a single-use code bound to the client, the redirect URI, the PKCE
   challenge, the nonce, the user, the login session and its time; it lives 60 s.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controlplane.oidc import pkce
from controlplane.oidc.clients import ClientService, grant_types, is_public, scopes_allowed
from controlplane.oidc.connections import ConnectionService
from controlplane.oidc.errors import (
    InvalidClient,
    InvalidRequest,
    InvalidScope,
    OAuthError,
    RequestNotSupported,
    RequestUriNotSupported,
    UnauthorizedClient,
    UnsupportedResponseType,
)
from controlplane.oidc.schemas import SUPPORTED_SCOPES, redirect_uri_problem, redirect_uri_registered
from controlplane.oidc.store import CodeStore
from shared.ids import digest, random_token
from shared.timeutil import Clock, seconds

AUTHORIZATION_CODE = "authorization_code"

CODE_TTL = 60
MAX_NONCE = 512
MAX_STATE = 2048
PROMPTS = frozenset({"none", "login", "consent", "select_account"})
# OAuth 2.0 Multiple Response Type Encoding Practices 2.1 (query, the default of
# response_type=code) and OAuth 2.0 Form Post Response Mode 2.  fragment is refused: a
# code in a fragment reaches scripts of the page, and no client of the code flow needs it.
RESPONSE_MODES = ("query", "form_post")
MAX_LOGIN_HINT = 255


@dataclass(frozen=True)
class AuthorizeRequest:
    """A validated authorization request."""

    app_id: str
    client: dict = field(repr=False)
    redirect_uri: str
    scopes: tuple
    state: str | None
    nonce: str | None
    code_challenge: str | None
    prompt: frozenset = frozenset()
    response_mode: str = "query"
    max_age: int | None = None
    login_hint: str | None = None

    @property
    def client_id(self) -> str:
        return self.client["client_id"]

    def error(self, error_class: type[OAuthError], description: str | None = None) -> OAuthError:
        """An error to answer on the client's redirect URI (RFC 6749 4.1.2.1)."""
        return error_class(description, redirect_uri=self.redirect_uri, state=self.state,
                           response_mode=self.response_mode)

    def authentication_too_old(self, auth_time: int, now: int) -> bool:
        """OIDC Core 3.1.2.1 ``max_age``: the last authentication was more than
        ``max_age`` seconds ago."""
        return self.max_age is not None and now - auth_time > self.max_age

    @property
    def reauthentication_requested(self) -> bool:
        """OIDC Core 3.1.2.1: ``prompt=login`` (the OP prompts the End-User for
        reauthentication) or ``max_age=0`` (here: always a new sign-in), whenever the
        last authentication was."""
        return "login" in self.prompt or self.max_age == 0

    def needs_login(self, auth_time: int, now: int) -> bool:
        """OIDC Core 3.1.2.1: a reauthentication requested, or an authentication older
        than ``max_age``, asks the hosted login to sign the user in again."""
        return self.reauthentication_requested or self.authentication_too_old(auth_time, now)


def _single(params: dict, name: str) -> str | None:
    """RFC 6749 3.1: parameters sent without a value are treated as omitted; a parameter
    must not be included more than once."""
    value = params.get(name)
    if isinstance(value, (list, tuple)):
        raise InvalidRequest(f"The parameter {name} must not be repeated.")
    return value or None


@dataclass(eq=False)
class AuthorizeService:
    clients: ClientService
    codes: CodeStore
    connections: ConnectionService
    clock: Clock

    def client(self, client_id) -> dict | None:
        """The active client of this client_id (None when unknown, inactive or not a string)."""
        return self.clients.active(client_id) if isinstance(client_id, str) and client_id else None

    def validate(self, params: dict) -> AuthorizeRequest:
        """Check an authorization request (RFC 6749 4.1.1, OIDC Core 3.1.2.2).

        Answered directly: invalid_request (client_id or redirect_uri missing or repeated,
        redirect_uri not registered for the client, or registered but not a usable
        redirect URI), invalid_client (unknown or inactive).
        On the redirect URI: unsupported_response_type, unauthorized_client (the client's
        grant_types lack authorization_code), invalid_scope (openid missing, an
        unsupported scope or one the client may not ask for), invalid_request (PKCE
        missing, plain, or malformed; a bad nonce, state or prompt)."""
        client_id = _single(params, "client_id")
        if client_id is None:
            raise InvalidRequest("client_id is required.")
        client = self.clients.active(client_id)
        if client is None:
            raise InvalidClient()
        redirect_uri = _single(params, "redirect_uri")
        if redirect_uri is None:
            raise InvalidRequest("redirect_uri is required.")
        # RFC 6749 3.1.2.3 / OIDC Core 3.1.2.1: simple string comparison with a registered URI.
        if not redirect_uri_registered(redirect_uri, client.get("redirect_uris") or (), native=is_public(client)):
            raise InvalidRequest("redirect_uri is not registered for this client.")
        # One registered before the registration rules refused such URIs: never a target.
        problem = redirect_uri_problem(redirect_uri)
        if problem is not None:
            raise InvalidRequest(f"The registered redirect_uri is not usable ({problem}); update the client.")

        # Form Post Response Mode 2: every error from here on is answered in the mode the
        # request asked for.  A repeated or unknown response_mode asked for none of them, so
        # its error (and any other) goes the default way, in the query.
        mode = params.get("response_mode")
        response_mode = mode if mode in RESPONSE_MODES else "query"
        try:
            state = _single(params, "state")
        except InvalidRequest as exc:
            raise InvalidRequest(exc.message, redirect_uri=redirect_uri, response_mode=response_mode) from None
        request = AuthorizeRequest(app_id=client["app_id"], client=client, redirect_uri=redirect_uri, scopes=(),
                                   state=state, nonce=None, code_challenge=None, response_mode=response_mode)
        try:
            return self._validate_parameters(request, params)
        except OAuthError as exc:
            if exc.redirect_uri is None:
                exc.redirect_uri, exc.state, exc.response_mode = (request.redirect_uri, request.state,
                                                                  request.response_mode)
            raise

    def _validate_parameters(self, request: AuthorizeRequest, params: dict) -> AuthorizeRequest:
        if request.state is not None and len(request.state) > MAX_STATE:
            raise request.error(InvalidRequest, f"state must be at most {MAX_STATE} characters.")
        if _single(params, "response_mode") not in (None, *RESPONSE_MODES):
            raise request.error(InvalidRequest, "response_mode must be query or form_post.")
        # OIDC Core 6: request objects are optional; an OP without them answers these errors
        # (RFC 6749 3.1: sent without a value, they are omitted).
        if params.get("request"):
            raise request.error(RequestNotSupported)
        if params.get("request_uri"):
            raise request.error(RequestUriNotSupported)
        response_type = _single(params, "response_type")
        if response_type is None:
            raise request.error(InvalidRequest, "response_type is required.")
        if response_type != "code":
            raise request.error(UnsupportedResponseType)
        if AUTHORIZATION_CODE not in grant_types(request.client):  # RFC 6749 4.1.2.1, e.g. a machine client
            raise request.error(UnauthorizedClient, "The client's grant_types do not include authorization_code.")
        scopes = self._scopes(request, _single(params, "scope"))
        challenge = self._code_challenge(request, params)
        nonce = _single(params, "nonce")
        if nonce is not None and len(nonce) > MAX_NONCE:
            raise request.error(InvalidRequest, f"nonce must be at most {MAX_NONCE} characters.")
        prompt = frozenset((_single(params, "prompt") or "").split())
        if prompt - PROMPTS or ("none" in prompt and len(prompt) > 1):
            raise request.error(InvalidRequest, "prompt must be none, or any of login, consent, select_account.")
        max_age = _single(params, "max_age")
        if max_age is not None and not (max_age.isascii() and max_age.isdigit() and len(max_age) <= 10):
            raise request.error(InvalidRequest, "max_age must be a number of seconds.")
        # Display hints (display, ui_locales, claims_locales, acr_values) and unknown
        # parameters are ignored (OIDC Core 3.1.2.1 lets an OP ignore them); login_hint
        # only pre-fills the hosted login's email.
        login_hint = _single(params, "login_hint")
        return AuthorizeRequest(app_id=request.app_id, client=request.client, redirect_uri=request.redirect_uri,
                                scopes=scopes, state=request.state, nonce=nonce, code_challenge=challenge,
                                prompt=prompt, response_mode=request.response_mode,
                                max_age=None if max_age is None else int(max_age),
                                login_hint=login_hint if login_hint and len(login_hint) <= MAX_LOGIN_HINT else None)

    @staticmethod
    def _code_challenge(request: AuthorizeRequest, params: dict) -> str | None:
        """RFC 7636 4.4.1 with S256 only.  PKCE is required unless the client is a
        confidential client registered with ``require_pkce: false``; such a client may
        still send it, and then it is checked as for every other client."""
        method = _single(params, "code_challenge_method")
        challenge = _single(params, "code_challenge")
        if challenge is None and method is None and request.client.get("require_pkce") is False \
                and not is_public(request.client):
            return None
        if challenge is None or method is None:
            raise request.error(InvalidRequest, "PKCE is required: code_challenge and code_challenge_method=S256.")
        if method != pkce.S256:
            raise request.error(InvalidRequest, "code_challenge_method must be S256.")
        if not pkce.is_valid_challenge(challenge):
            raise request.error(InvalidRequest, "code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~].")
        return challenge

    @staticmethod
    def _scopes(request: AuthorizeRequest, raw: str | None) -> tuple:
        """Spec: scope is required, space-separated, must include openid; supported
        openid profile email (and offline_access, advertised by discovery); each one
        allowed for the client."""
        scopes = tuple(dict.fromkeys((raw or "").split()))
        if "openid" not in scopes:
            raise request.error(InvalidScope, "The scope must include openid.")
        unsupported = [s for s in scopes if s not in SUPPORTED_SCOPES]
        if unsupported:
            raise request.error(InvalidScope, f"Unsupported scope: {' '.join(unsupported)}.")
        allowed = scopes_allowed(request.client)
        refused = [s for s in scopes if s not in allowed]
        if refused:
            raise request.error(InvalidScope, f"The client may not ask for: {' '.join(refused)}.")
        return scopes

    # ------------------------------------------------------------------ consent

    def needs_consent(self, request: AuthorizeRequest, user_id: str) -> bool:
        """True unless the user's consent to the client is in force and covers the scopes
        (``prompt=consent`` asks again)."""
        if "consent" in request.prompt:
            return True
        return not self.connections.consent_covers(request.app_id, user_id, request.client_id, request.scopes)

    def grant_consent(self, request: AuthorizeRequest, user_id: str) -> None:
        """Record the user's consent to the client for the request's scopes (consent.granted)."""
        self.connections.grant_consent(request.app_id, user_id, request.client_id, request.scopes)

    # ------------------------------------------------------------------ the code

    def issue_code(self, app_id: str, user_id: str, request: AuthorizeRequest, *, auth_time: int,
                   session_id: str | None, amr: list[str] | None = None) -> str:
        """RFC 6749 4.1.2: a code the client exchanges once, within 60 s, stored as its
        digest with everything the token request must match."""
        if app_id != request.app_id:
            raise InvalidRequest("The user does not belong to the client's application.")
        code, now = random_token(32), self.clock()
        self.codes.insert({
            "_id": digest(code), "app_id": app_id, "client_id": request.client_id, "user_id": user_id,
            "session_id": session_id, "redirect_uri": request.redirect_uri, "scopes": list(request.scopes),
            "nonce": request.nonce, "code_challenge": request.code_challenge, "auth_time": int(auth_time),
            "amr": amr, "created_at": now, "expires_at": now + seconds(CODE_TTL), "used_at": None, "grant_id": None,
            "replayed_at": None,
        })
        return code
