"""Validation and response shapes of the dashboard endpoints.

Application bodies reuse ``controlplane.applications.schemas`` so the dashboard and
the application service enforce one set of rules; only ``organization_id`` is
tightened here to a UUID.
"""
from __future__ import annotations

from controlplane.apikeys import schemas as apikeys
from controlplane.applications import schemas as applications
from controlplane.dashboard.access import ORG_ROLES
from controlplane.mfa import schemas as mfa
from controlplane.passkeys import schemas as passkey_schemas
from shared.validation import ID, TIME, Bool, DisplayName, Email, Schema, String, Uuid

# Bounds the work one login costs (bcrypt pre-hashes longer input anyway); a real
# password is at most passwords.MAX_LENGTH characters.
MAX_LOGIN_PASSWORD = 1024

REGISTER = Schema({
    "email": Email(required=True),
    # Strength (length, classes, common list) is judged by passwords.require_strong -> 422.
    "password": String(required=True, strip=False, description="8 to 128 characters, see docs/dashboard.md"),
    "name": DisplayName(required=True, max_len=255),
})

LOGIN = Schema({
    # Only presence is checked: a malformed email simply does not match an account,
    # so the answer stays 401 and says nothing about which part was wrong.
    "email": String(required=True, max_len=254),
    "password": String(required=True, strip=False, max_len=MAX_LOGIN_PASSWORD),
})

ACCOUNT_UPDATE = Schema({
    "name": DisplayName(required=True, max_len=255),
})

PASSWORD_CHANGE = Schema({
    "current_password": String(required=True, strip=False, max_len=MAX_LOGIN_PASSWORD),
    "new_password": String(required=True, strip=False, description="must pass the password rules"),
})

# Single-use tokens from the mailed links (the same bound as the end users' tokens).
TOKEN_MAX = 512

VERIFY_EMAIL = Schema({
    "token": String(required=True, max_len=TOKEN_MAX, description="the token=... value of the verification link"),
})

# What the email-link and password endpoints answer.
MESSAGE = {"type": "object", "properties": {"message": {"type": "string"}}}

FORGOT_PASSWORD = Schema({
    "email": String(required=True, max_len=254, description="the account's email; the answer never says "
                                                            "whether it has an account"),
})

RESET_PASSWORD = Schema({
    "token": String(required=True, max_len=TOKEN_MAX, description="the token=... value of the reset link"),
    "password": String(required=True, strip=False, max_len=MAX_LOGIN_PASSWORD,
                        description="the new password; must pass the password rules"),
})

ORGANIZATION = Schema({
    "name": DisplayName(required=True, max_len=255),
})

ORGANIZATION_UPDATE = Schema({
    "name": DisplayName(required=True, max_len=255),
    "require_mfa": Bool(description="every member must have a second factor to reach the organization and its "
                                    "applications; an owner turns it on only with one of their own"),
}, partial=True)

# Two-step verification: the end users' bodies and answers, the account's password.
MFA_SETUP, MFA_STATUS = mfa.SETUP, mfa.STATUS
MFA_SETUP_RESULT, MFA_BACKUP_CODES = mfa.SETUP_RESULT, mfa.BACKUP_CODES
PASSWORD = String(required=True, strip=False, max_len=MAX_LOGIN_PASSWORD, description="the account's password")
MFA_PASSWORD = Schema({"password": PASSWORD})
# The password proving the session's holder again before sensitive actions (dashboard.sudo).
REAUTHENTICATE = Schema({"password": PASSWORD})
# Adding a second factor is confirmed by the password, as removing one is: whoever holds
# only a session cookie must not plant a factor of their own (docs/dashboard.md).
MFA_CONFIRM = Schema({**mfa.CONFIRM.fields, "password": PASSWORD})
PASSKEY_REGISTRATION = Schema({**passkey_schemas.REGISTRATION_VERIFY.fields, "password": PASSWORD})
MFA_DISABLE = Schema({
    "password": String(strip=False, max_len=MAX_LOGIN_PASSWORD, description="the account's password, or:"),
    "code": mfa.OneTimeCode(backup=True, required=False,
                            description="a current 6-digit code or an unused backup code"),
}, description="Exactly one of password and code.")
LOGIN_PASSKEY_OPTIONS = Schema({
    "challenge_token": String(max_len=TOKEN_MAX, nullable=True, default=None,
                              description="the sign-in's MFA challenge token, to use a passkey as the second step; "
                                          "omit it to sign in with a passkey alone"),
})
LOGIN_PASSKEY = Schema({
    "challenge_id": passkey_schemas.challenge_id_field(),
    "credential": passkey_schemas.credential_field("navigator.credentials.get() result"),
})
LOGIN_MFA = Schema({
    "challenge_token": String(required=True, max_len=TOKEN_MAX, description="from the sign-in's answer"),
    "code": mfa.OneTimeCode(backup=True, description="a 6-digit code, or an unused backup code (dashes optional, "
                                                     "any case)"),
})

MEMBER_ADD = Schema({
    "email": Email(required=True, description="an existing dashboard account"),
    "role": String(required=True, choices=ORG_ROLES),
})

MEMBER_UPDATE = Schema({
    "role": String(required=True, choices=ORG_ROLES),
})

APPLICATION_CREATE = Schema({
    **applications.CREATE.fields,
    "organization_id": Uuid(nullable=True,
                            description="required when the caller belongs to several organizations"),
})
APPLICATION_UPDATE = applications.UPDATE
BRANDING = applications.BRANDING
API_KEY_CREATE = apikeys.CREATE

APPLICATION_RESPONSE = applications.APPLICATION_RESPONSE
API_KEY_RESPONSE = apikeys.API_KEY_RESPONSE

ACCOUNT_RESPONSE = {
    "type": "object",
    "properties": {
        "id": ID,
        "email": {"type": "string", "format": "email"},
        "name": {"type": "string"},
        "created_at": TIME,
    },
}

ACCOUNT_STATUS_RESPONSE = {
    "type": "object",
    "properties": {
        **ACCOUNT_RESPONSE["properties"],
        "email_verified": {"type": "boolean",
                           "description": "false until the mailed link is used; members must be verified"},
    },
}

ORGANIZATION_RESPONSE = {
    "type": "object",
    "properties": {
        "id": ID,
        "name": {"type": "string"},
        "role": {"type": "string", "enum": list(ORG_ROLES)},
        "require_mfa": {"type": "boolean", "description": "members need a second factor to reach it"},
        "created_at": TIME,
    },
}

ME_RESPONSE = {
    "type": "object",
    "properties": {
        **ACCOUNT_STATUS_RESPONSE["properties"],
        "mfa_enabled": {"type": "boolean", "description": "the account has a second factor (GET /me/mfa)"},
        "organizations": {"type": "array", "items": ORGANIZATION_RESPONSE},
    },
}

MFA_CHALLENGE = {
    "type": "object",
    "required": ["mfa_required", "challenge_token", "mfa_methods"],
    "properties": {
        "mfa_required": {"type": "boolean", "const": True},
        "challenge_token": {"type": "string", "description": "valid IAMGATE_MFA_CHALLENGE_TTL seconds; "
                                                             "POST /api/dashboard/login/mfa"},
        "mfa_methods": {"type": "array", "items": {"type": "string", "enum": ["totp", "webauthn"]},
                        "description": "webauthn: POST /api/dashboard/login/passkey/options with the token"},
    },
}

LOGIN_RESULT = {"oneOf": [ACCOUNT_RESPONSE, MFA_CHALLENGE]}

MEMBER_RESPONSE = {
    "type": "object",
    "properties": {
        "organization_id": ID,
        "account_id": ID,
        "email": {"type": "string", "format": "email"},
        "name": {"type": "string"},
        "role": {"type": "string", "enum": list(ORG_ROLES)},
        "created_at": TIME,
    },
}

