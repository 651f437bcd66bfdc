"""Request bodies and answers of signing in through a connection from an application's
own UI, and of a user's linked identities."""
from __future__ import annotations

from controlplane.passkeys.schemas import CREDENTIAL_MAX_BYTES
from controlplane.users.schemas import LOGIN_RESULT, PASSWORD_INPUT_MAX, TOKEN_MAX
from shared.validation import NULLABLE_TIME, TIME, Bool, Object, Schema, String, Url

BINDING_MIN, BINDING_MAX = 16, 512
PARAMS_MAX_BYTES = 16 * 1024


def _binding() -> String:
    return String(required=True, min_len=BINDING_MIN, max_len=BINDING_MAX, strip=False,
                  description="an unguessable value the application's UI keeps for this browser (in its own "
                              "session), the same at start and callback: the state is bound to it")


START = Schema({
    "redirect_uri": Url(required=True, description="where the provider sends the browser back: exactly one of the "
                                                   "application's oauth_redirect_uris"),
    "binding": _binding(),
    "login_hint": String(max_len=255, nullable=True, default=None,
                         description="passed to the provider (an email the person typed)"),
})

STARTED = {
    "type": "object",
    "required": ["authorization_url"],
    "properties": {"authorization_url": {"type": "string", "description": "send the browser there"}},
}

CALLBACK = Schema({
    "params": Object(required=True, max_bytes=PARAMS_MAX_BYTES,
                     description="the query parameters the provider sent to the redirect_uri, as they came "
                                 "(state, code, iss; or error, error_description)"),
    "binding": _binding(),
    "redirect_uri": Url(nullable=True, default=None,
                        description="the redirect_uri the answer came back to; it must be the one of the start. "
                                    "Required when the provider does not send iss (RFC 9207) and the application "
                                    "has other active connections: give each such connection a redirect URI of "
                                    "its own (the mix-up defence, RFC 9700 4.4.2)"),
    "remember_me": Bool(default=False, description="true: the refresh token lasts 30 days instead of 7"),
})

LINK_CODE = Schema({
    "link_id": String(required=True, max_len=TOKEN_MAX, description="from the 409 CONNECTION_LINK_REQUIRED answer"),
    "binding": _binding(),
})

LINK_COMPLETE = Schema({
    "link_id": String(required=True, max_len=TOKEN_MAX, description="from the 409 CONNECTION_LINK_REQUIRED answer"),
    "binding": _binding(),
    "password": String(strip=False, max_len=PASSWORD_INPUT_MAX, nullable=True, default=None,
                       description="the existing account's password; or give code"),
    "code": String(max_len=16, nullable=True, default=None, description="the code mailed to the existing account"),
    "challenge_id": String(max_len=TOKEN_MAX, nullable=True, default=None,
                           description="with credential: from POST .../link/passkey"),
    "credential": Object(max_bytes=CREDENTIAL_MAX_BYTES, nullable=True, default=None,
                         description="a passkey of the existing account: the navigator.credentials.get() result "
                                     "as PublicKeyCredential.toJSON() gives it"),
    "remember_me": Bool(default=False),
})

SIGN_IN_RESULT = LOGIN_RESULT


IDENTITY = {
    "type": "object",
    "required": ["id", "connection_id", "issuer", "sub", "email", "email_verified", "tokens_stored", "created_at",
                 "last_sign_in_at"],
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "connection_id": {"type": "string", "format": "uuid"},
        "issuer": {"type": "string"},
        "sub": {"type": "string",
                "description": "the provider's subject: with the issuer and connection, the identity"},
        "email": {"type": ["string", "null"], "description": "as the provider last sent it (never used to match)"},
        "email_verified": {"type": "boolean", "description": "as the provider last said"},
        "tokens_stored": {"type": "boolean"},
        "created_at": TIME,
        "last_sign_in_at": NULLABLE_TIME,
    },
}

IDENTITIES = {"type": "array", "items": IDENTITY}

UPSTREAM_TOKEN = {
    "type": "object",
    "required": ["access_token", "token_type", "expires_at", "scope", "id_token"],
    "properties": {
        "access_token": {"type": "string", "description": "the provider's access token, refreshed when it had "
                                                          "less than a minute left"},
        "token_type": {"type": "string"},
        "expires_at": NULLABLE_TIME,
        "scope": {"type": ["string", "null"]},
        "id_token": {"type": ["string", "null"]},
    },
}
