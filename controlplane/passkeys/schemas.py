"""Request bodies of passkeys and the JSON schemas of their responses.

A browser's credential (``PublicKeyCredential.toJSON()``) is taken as a bounded JSON
object and judged by the ceremony, so a malformed one is a 400 PASSKEY_VERIFICATION_FAILED
rather than a field error.  The options examples are made by the same code that makes
real options (py_webauthn's ``options_to_json``), so they are what
``PublicKeyCredential.parseCreationOptionsFromJSON`` / ``parseRequestOptionsFromJSON``
accept unchanged.
"""
from __future__ import annotations

from controlplane.passkeys import ceremony
from controlplane.users.schemas import TOKEN_MAX, TOKEN_PAIR
from shared.validation import ID, NULLABLE_TIME, TIME, Bool, Object, Schema, String

NAME_MAX = 100
# A credential's JSON: a few hundred bytes, a few KiB with an attestation certificate chain.
CREDENTIAL_MAX_BYTES = 64 * 1024

_EXAMPLE_RP = ceremony.RelyingParty("example.com", ("https://example.com",))
_EXAMPLE_CHALLENGE = bytes(range(32))


def credential_field(what: str) -> Object:
    return Object(required=True, max_bytes=CREDENTIAL_MAX_BYTES,
                  description=f"the browser's {what} as PublicKeyCredential.toJSON() gives it")


def challenge_id_field() -> String:
    return String(required=True, max_len=TOKEN_MAX, description="from the options answer; single use, 5 minutes")


# Read and checked although empty, so a malformed body is refused like anywhere else.
# The body of a ceremony's start that takes no field (a registration's options, the
# dashboard's re-authentication's).
REGISTRATION_START = Schema({}, description="an empty JSON object")

REGISTRATION_VERIFY = Schema({
    "challenge_id": challenge_id_field(),
    "credential": credential_field("navigator.credentials.create() result"),
    "name": String(min_len=1, max_len=NAME_MAX, nullable=True, default=None,
                   description="a name for the passkey (default \"Passkey\")"),
})

AUTHENTICATION_OPTIONS = Schema({
    "challenge_token": String(max_len=TOKEN_MAX, nullable=True, default=None,
                              description="the login's MFA challenge token, to use a passkey as the second factor; "
                                          "omit it to sign in with a passkey alone"),
})

AUTHENTICATION_VERIFY = Schema({
    "challenge_id": challenge_id_field(),
    "credential": credential_field("navigator.credentials.get() result"),
    "remember_me": Bool(default=False, description="sign-in alone only; a second factor keeps the login's"),
})

RENAME = Schema({"name": String(required=True, min_len=1, max_len=NAME_MAX)})

# ---------------------------------------------------------------- responses


def _options(kind: str, example: dict) -> dict:
    return {
        "type": "object",
        "required": ["challenge_id", "options"],
        "properties": {
            "challenge_id": {"type": "string", "description": "send it back with the credential"},
            "options": {"type": "object", "description": f"PublicKeyCredential{kind}OptionsJSON: pass it to "
                                                         f"PublicKeyCredential.parse{kind}OptionsFromJSON"},
        },
        "example": {"challenge_id": "Jx1c2tBrq0v5lZQ8mO3cQ9n9m0yqk3y8pC2g7w1yA5s", "options": example},
    }


REGISTRATION_OPTIONS = _options("Creation", ceremony.registration_options(
    _EXAMPLE_RP, rp_name="Example", user_id="6f1c2b0e-8a55-4d0b-9a7e-3f0b9d2f4e11", user_name="ada@example.com",
    display_name="Ada Lovelace", challenge=_EXAMPLE_CHALLENGE, exclude=[]))

AUTHENTICATION_OPTIONS_RESULT = _options("Request", ceremony.authentication_options(
    _EXAMPLE_RP, challenge=_EXAMPLE_CHALLENGE, allow=[], user_verification="required"))

PASSKEY = {
    "type": "object",
    "required": ["id", "name", "created_at", "last_used_at", "backed_up", "backup_eligible", "transports",
                 "discoverable", "user_verified", "aaguid", "authenticator_name"],
    "properties": {
        "id": ID,
        "name": {"type": "string"},
        "created_at": TIME,
        "last_used_at": NULLABLE_TIME,
        "backed_up": {"type": "boolean", "description": "synced to a cloud account (BS flag), as last seen"},
        "backup_eligible": {"type": "boolean"},
        "transports": {"type": "array", "items": {"type": "string"}},
        "discoverable": {"type": ["boolean", "null"], "description": "credProps.rk; null when the browser "
                                                                      "did not say"},
        "user_verified": {"type": "boolean", "description": "the registration verified the user (PIN, "
                                                             "biometrics)"},
        "aaguid": {"type": "string", "description": "the authenticator model; all zeros without attestation"},
        "authenticator_name": {"type": ["string", "null"], "description": "the model's name when known"},
    },
}

PASSKEYS = {"type": "array", "items": PASSKEY}

SIGN_IN_RESULT = TOKEN_PAIR
