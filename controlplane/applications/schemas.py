"""Validation of the Application resource (dashboard create, update and branding)."""
from __future__ import annotations

import re

from controlplane.applications.css import sanitize_css as _sanitize_css
from shared.validation import TIME, Bool, DisplayName, HexColor, Int, List, Object, Schema, String, Url, Uuid

ENVIRONMENTS = ("development", "staging", "production")
# What a passkey does in the application (docs/passkeys.md).
PASSKEY_MODES = ("off", "second_factor", "passwordless")
# Images the hosted pages load: https only, as their CSP's img-src allows (an http logo
# on an https page is mixed content; browsers block or flag it).
IMAGE_URL = {"schemes": ("https",)}
_CSS_LENGTH = re.compile(r"^(?:0|\d{1,3}(?:\.\d{1,2})?(?:px|rem|em|%))$")

CREATE = Schema({
    "name": DisplayName(required=True, max_len=255),
    "environment": String(choices=ENVIRONMENTS, default="development"),
    "is_test_mode": Bool(default=False),
    "description": String(max_len=1000, nullable=True, default=None),
    "organization_id": String(nullable=True,
                              description="UUID; required when the caller belongs to several organizations"),
})

UPDATE = Schema({
    "name": DisplayName(required=True, max_len=255),
    "environment": String(choices=ENVIRONMENTS),
    "is_test_mode": Bool(),
    "description": String(max_len=1000, nullable=True),
    "oauth_hosted_login_enabled": Bool(),
    "oauth_hosted_registration_enabled": Bool(description="the hosted login offers \"Create account\""),
    "oauth_redirect_uris": List(Url(), max_items=50),
    "max_concurrent_sessions": Int(min=0, max=100),
    "registration_rate_limit": Int(min=0, max=100000, nullable=True,
                                   description="registrations per minute per client IP; null = server default; "
                                               "0 or a value above IAMGATE_REGISTRATION_RATE_LIMIT_MAX means "
                                               "that maximum"),
    "passkeys": String(choices=PASSKEY_MODES, description="off; second_factor: a passkey answers the login's MFA "
                                                          "challenge; passwordless: also signs in alone"),
    "passkeys_allow_password": Bool(description="passwordless only: false refuses the password of a user who "
                                                "has a passkey that signs in alone"),
    "passkey_aaguids": List(Uuid(), max_items=100,
                            description="authenticator models (AAGUIDs) a new passkey must be; empty: any"),
}, partial=True)

DARK_MODE = Schema({
    "enabled": Bool(),
    "background": HexColor(nullable=True),
    "color": HexColor(nullable=True),
})

BRANDING_OPTIONS = Schema({
    "secondary_color": HexColor(nullable=True),
    "font_family": String(max_len=200, nullable=True, pattern=r"^[A-Za-z0-9 ,'\"_-]*$"),
    "favicon_url": Url(nullable=True, **IMAGE_URL),
    "button_border_radius": String(max_len=16, nullable=True, pattern=_CSS_LENGTH.pattern),
    "custom_css": String(max_len=5000, nullable=True, strip=False),
    "dark_mode": Object(DARK_MODE, nullable=True),
})

BRANDING = Schema({
    "brand_name": DisplayName(max_len=255, nullable=True),
    "brand_logo_url": Url(nullable=True, **IMAGE_URL),
    "brand_color": HexColor(nullable=True),
    "brand_background": HexColor(nullable=True),
    "branding_options": Object(BRANDING_OPTIONS, nullable=True),
}, partial=True)

APPLICATION_RESPONSE = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "name": {"type": "string"},
        "environment": {"type": "string", "enum": list(ENVIRONMENTS)},
        "is_test_mode": {"type": "boolean"},
        "description": {"type": ["string", "null"]},
        "organization_id": {"type": ["string", "null"]},
        "role": {"type": "string"},
        "brand_name": {"type": ["string", "null"]},
        "brand_logo_url": {"type": ["string", "null"]},
        "brand_color": {"type": ["string", "null"]},
        "brand_background": {"type": ["string", "null"]},
        "branding_options": {"type": "object"},
        "branding": {"type": "object"},
        "oauth_redirect_uris": {"type": "array", "items": {"type": "string"}},
        "oauth_hosted_login_enabled": {"type": "boolean"},
        "oauth_hosted_registration_enabled": {"type": "boolean"},
        "max_concurrent_sessions": {"type": "integer"},
        "registration_rate_limit": {"type": ["integer", "null"]},
        "passkeys": {"type": "string", "enum": list(PASSKEY_MODES)},
        "passkeys_allow_password": {"type": "boolean"},
        "passkey_aaguids": {"type": "array", "items": {"type": "string", "format": "uuid"}},
        "created_at": TIME,
        "updated_at": TIME,
    },
}

# ---------------------------------------------------------------- custom CSS


def sanitize_css(css: str) -> str:
    """The allow-listed part of tenant CSS (``controlplane/applications/css.py``)."""
    return _sanitize_css(css)
