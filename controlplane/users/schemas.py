"""Request bodies of the users area and the JSON schemas of its responses.

Passwords are never trimmed.  Password inputs are bounded at 1024 characters (the
strength rules cap new passwords at 128; a longer value is a malformed request, not a
credential).  ``metadata`` is any JSON object up to 16 KiB of JSON, nested at most 16
levels, whose keys MongoDB can store (no leading ``$``, no ``.`` or NUL) -- the same rule
for registration and the self-service profile update.
"""
from __future__ import annotations

import math

from controlplane.users.errors import PasswordConfirmationMismatch
from shared.errors import ValidationFailed
from shared.validation import (
    ID,
    INT64,
    NULLABLE_TIME,
    TIME,
    Bool,
    DisplayName,
    Email,
    Invalid,
    Object,
    Schema,
    String,
    object_schema,
    page_of,
)

PASSWORD_INPUT_MAX = 1024
TOKEN_MAX = 512
METADATA_MAX_BYTES = 16 * 1024
METADATA_MAX_DEPTH = 16
USER_STATUSES = ("active", "suspended", "deleted")


class Metadata(Object):
    """A free-form JSON object bounded in size and depth, with keys MongoDB can store."""

    def __init__(self, **kw):
        super().__init__(max_bytes=METADATA_MAX_BYTES, **kw)

    def clean(self, value):
        if isinstance(value, dict):
            _check_keys(value, depth=1)  # first: it stops at the depth bound, json.dumps would not
        return super().clean(value)

    def schema(self):
        out = super().schema()
        out["description"] = (out.get("description", "") + f" Nested at most {METADATA_MAX_DEPTH} levels; keys must "
                              "not start with $ or contain . or NUL.").strip()
        return out


def _check_keys(value, depth: int) -> None:
    """Keys MongoDB can store, at most METADATA_MAX_DEPTH levels, and numbers it can
    store: an integer beyond 64 bits would fail the write (a 500 after the bcrypt work of
    a registration)."""
    if depth > METADATA_MAX_DEPTH:
        raise Invalid(f"must not be nested more than {METADATA_MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for key, item in value.items():
            if key.startswith("$") or "." in key or "\0" in key:
                raise Invalid(f"key {key!r} must not start with $ or contain . or NUL")
            _check_item(item, depth)
    else:
        for item in value:
            _check_item(item, depth)


def _check_item(item, depth: int) -> None:
    if isinstance(item, (dict, list)):
        _check_keys(item, depth + 1)
    elif isinstance(item, int) and not isinstance(item, bool) and not INT64[0] <= item <= INT64[1]:
        raise Invalid("holds an integer beyond 64 bits, which cannot be stored")
    elif isinstance(item, float) and not math.isfinite(item):
        raise Invalid("holds a number that is not finite")


def _password(description=None):
    return String(required=True, strip=False, max_len=PASSWORD_INPUT_MAX, description=description)


def _token(description):
    return String(required=True, max_len=TOKEN_MAX, description=description)


REGISTER = Schema({
    "email": Email(required=True, description="unique in the application; stored lower-cased"),
    "password": _password("8 to 128 characters, two character classes, not the email, not a common password"),
    "name": DisplayName(required=True, max_len=255, description="control characters are removed"),
    "metadata": Metadata(nullable=True, description="arbitrary JSON object"),
})

LOGIN = Schema({
    "email": Email(required=True),
    "password": _password(),
    "remember_me": Bool(default=False, description="true: the refresh token lasts 30 days instead of 7"),
})

REFRESH_TOKEN = Schema({"refresh_token": _token("the refresh token of a token pair")})

CHANGE_PASSWORD = Schema({
    "current_password": _password(),
    "new_password": _password("must meet the strength rules"),
    "new_password_confirmation": _password("must equal new_password"),
})

EMAIL_ONLY = Schema({"email": Email(required=True)})

RESET_PASSWORD = Schema({
    "token": _token("the token=... value of the reset link"),
    "email": Email(required=True, description="the account's email; must match the token"),
    "password": _password("the new password; must meet the strength rules"),
})

VERIFY_EMAIL = Schema({"token": _token("the token=... value of the verification link")})


def validate_change_password(body: dict) -> dict:
    """CHANGE_PASSWORD plus the confirmation rule.  A mismatch is reported as
    400 VALIDATION_MULTIPLE_ERRORS, as the spec lists it, even when it is the only
    problem."""
    try:
        values, errors = CHANGE_PASSWORD.validate(body), {}
    except ValidationFailed as exc:
        values, errors = None, dict(exc.errors)
    new, confirmation = body.get("new_password"), body.get("new_password_confirmation")
    if "new_password_confirmation" not in errors and isinstance(new, str) and isinstance(confirmation, str) \
            and new != confirmation:
        errors["new_password_confirmation"] = "must equal new_password"
        raise PasswordConfirmationMismatch(errors)
    if errors:
        raise ValidationFailed(errors)
    return values


# ---------------------------------------------------------------- responses


USER = object_schema({
    "id": ID,
    "email": {"type": "string", "format": "email"},
    "name": {"type": "string", "maxLength": 255},
    "email_verified": {"type": "boolean"},
    "created_at": TIME,
    "metadata": {"type": ["object", "null"]},
})

ADMIN_USER = object_schema({
    **USER["properties"],
    "avatar_url": {"type": ["string", "null"]},
    "status": {"type": "string", "enum": list(USER_STATUSES)},
    "updated_at": TIME,
    "suspended_at": NULLABLE_TIME,
    "deleted_at": NULLABLE_TIME,
    "last_login_at": NULLABLE_TIME,
}, required=())

TOKEN_PAIR = object_schema({
    "access_token": {"type": "string", "description": "RS256 JWT; claims iss, sub, aud, iat, exp, jti, sid"},
    "refresh_token": {"type": "string", "description": "opaque; rotated at every refresh"},
    "token_type": {"type": "string", "enum": ["Bearer"]},
    "expires_in": {"type": "integer", "description": "seconds (900 by default)"},
    "user": USER,
})

MFA_CHALLENGE = object_schema({
    "mfa_required": {"type": "boolean", "const": True},
    "challenge_token": {"type": "string", "description": "valid 5 minutes; POST V1/users/mfa/verify"},
    "mfa_methods": {"type": "array", "items": {"type": "string", "enum": ["totp", "webauthn"]}},
})

LOGIN_RESULT = {"oneOf": [TOKEN_PAIR, MFA_CHALLENGE]}

MESSAGE = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}

REGISTERED = {
    "type": "object",
    "required": ["data", "message"],
    "properties": {"data": USER, "message": {"type": "string"}},
}

ADMIN_USER_PAGE = page_of(ADMIN_USER)
