"""Request bodies of the MFA area and the JSON schemas of its responses.

Codes are cleaned of white space (authenticator apps show ``123 456``).  A confirm
code must be 6 digits; a verify code 6 digits or a backup code of 12 characters with
or without its two dashes, in any case.  A malformed code is a 400 validation error
and does not count as an attempt; a well-formed wrong one does.
"""
from __future__ import annotations

from controlplane.mfa import totp
from controlplane.users.schemas import PASSWORD_INPUT_MAX, TOKEN_MAX, TOKEN_PAIR
from shared.validation import ID, TIME, Invalid, Schema, String, Uuid, object_schema

DEFAULT_LABEL = "Authenticator App"
LABEL_MAX = 100
# 14 characters of a dashed backup code plus room for spaces typed between groups.
CODE_INPUT_MAX = 32


class OneTimeCode(String):
    """A one-time code; cleaned to the characters that matter."""

    def __init__(self, *, backup=False, required=True, **kw):
        super().__init__(required=required, max_len=CODE_INPUT_MAX, **kw)
        self.backup = backup

    def clean(self, value):
        code = totp.normalize_code(super().clean(value))
        if totp.is_totp_code(code):
            return code
        if self.backup and totp.canonical_backup_code(code) is not None:
            return code
        raise Invalid("must be a 6-digit code or a backup code (XXXX-XXXX-XXXX)" if self.backup
                      else "must be a 6-digit code")

    def schema(self):
        pattern = r"^(\d{6}|[A-Za-z0-9]{4}-?[A-Za-z0-9]{4}-?[A-Za-z0-9]{4})$" if self.backup else r"^\d{6}$"
        return {**super().schema(), "pattern": pattern}


def _password():
    return String(required=True, strip=False, max_len=PASSWORD_INPUT_MAX, description="the user's current password")


SETUP = Schema({
    "label": String(min_len=1, max_len=LABEL_MAX, default=DEFAULT_LABEL,
                    description="a name for the authenticator, shown in the MFA status"),
})

CONFIRM = Schema({
    "method_id": Uuid(required=True, description="the method_id returned by the setup"),
    "code": OneTimeCode(description="the 6-digit code the authenticator app shows now"),
})

VERIFY = Schema({
    "challenge_token": String(required=True, max_len=TOKEN_MAX, description="from the login's MFA challenge"),
    "code": OneTimeCode(backup=True, description="a 6-digit TOTP code, or an unused backup code (dashes optional, "
                                           "any case)"),
})

PASSWORD = Schema({"password": _password()})


# ---------------------------------------------------------------- responses


SETUP_RESULT = object_schema({
    "method_id": ID,
    "provisioning_uri": {"type": "string", "description": "otpauth://totp/<issuer>:<email>?secret=...&issuer=..."},
    "secret": {"type": "string", "description": "base32 TOTP secret (160 bits), for manual entry"},
})

BACKUP_CODES = object_schema({
    "message": {"type": "string"},
    "backup_codes": {"type": "array", "minItems": 10, "maxItems": 10,
                     "items": {"type": "string", "pattern": "^[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}$"},
                     "description": "shown only once; each is single use"},
})

MFA_METHOD = object_schema({
    "id": ID,
    "type": {"type": "string", "enum": ["totp"]},
    "label": {"type": "string"},
    "is_primary": {"type": "boolean"},
    "verified_at": TIME,
    "last_used_at": {**TIME, "description": "the last accepted code (the confirmation counts)"},
}, required=["id", "type", "label", "is_primary", "verified_at", "last_used_at"])

STATUS = object_schema({
    "mfa_enabled": {"type": "boolean"},
    "methods": {"type": "array", "items": MFA_METHOD, "description": "active (confirmed) methods only"},
    "backup_codes_remaining": {"type": "integer", "minimum": 0},
    "passkeys": object_schema({
        "count": {"type": "integer", "minimum": 0},
        "second_factor": {"type": "boolean", "description": "a passkey answers the sign-in's second "
                                                            "step (passkeys on, and one registered)"},
    }, "the passkeys enrolled; mfa_enabled and methods stay the TOTP method's"),
})

VERIFY_RESULT = object_schema({
    "data": TOKEN_PAIR,
    "message": {"type": "string", "description": "present when a backup code was used: how many remain"},
}, required=["data"])
