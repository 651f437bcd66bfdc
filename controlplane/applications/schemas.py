"""Validation of the Application resource (dashboard create, update and branding)."""
from __future__ import annotations

import re

from shared.validation import Bool, HexColor, Int, List, Object, Schema, String, Url

ENVIRONMENTS = ("development", "staging", "production")
_CSS_LENGTH = re.compile(r"^(?:0|\d{1,3}(?:\.\d{1,2})?(?:px|rem|em|%))$")

CREATE = Schema({
    "name": String(required=True, max_len=255),
    "environment": String(choices=ENVIRONMENTS, default="development"),
    "is_test_mode": Bool(default=False),
    "description": String(max_len=1000, nullable=True, default=None),
    "organization_id": String(nullable=True, description="UUID; required when the caller belongs to several organizations"),
})

UPDATE = Schema({
    "name": String(required=True, max_len=255),
    "environment": String(choices=ENVIRONMENTS),
    "is_test_mode": Bool(),
    "description": String(max_len=1000, nullable=True),
    "oauth_hosted_login_enabled": Bool(),
    "oauth_redirect_uris": List(Url(), max_items=50),
    "max_concurrent_sessions": Int(min=0, max=100),
    "registration_rate_limit": Int(min=0, max=100000, nullable=True,
                                   description="registrations per minute per client IP; 0 = unlimited; null = server default"),
}, partial=True)

DARK_MODE = Schema({
    "enabled": Bool(),
    "background": HexColor(nullable=True),
    "color": HexColor(nullable=True),
})

BRANDING_OPTIONS = Schema({
    "secondary_color": HexColor(nullable=True),
    "font_family": String(max_len=200, nullable=True, pattern=r"^[A-Za-z0-9 ,'\"_-]*$"),
    "favicon_url": Url(nullable=True),
    "button_border_radius": String(max_len=16, nullable=True, pattern=_CSS_LENGTH.pattern),
    "custom_css": String(max_len=5000, nullable=True, strip=False),
    "dark_mode": Object(DARK_MODE, nullable=True),
})

BRANDING = Schema({
    "brand_name": String(max_len=255, nullable=True),
    "brand_logo_url": Url(nullable=True),
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
        "max_concurrent_sessions": {"type": "integer"},
        "registration_rate_limit": {"type": ["integer", "null"]},
        "created_at": {"type": "string", "format": "date-time"},
        "updated_at": {"type": "string", "format": "date-time"},
    },
}

# ---------------------------------------------------------------- custom CSS

_CSS_RULES = (
    (re.compile(r"<\s*/?\s*style[^>]*>?", re.I), ""),                     # </style> and friends
    (re.compile(r"@import[^;]*;?", re.I), ""),                            # remote stylesheets
    (re.compile(r"expression\s*\(", re.I), "("),                          # old IE script
    (re.compile(r"(?:java|vb)script\s*:", re.I), ""),                     # script URLs
    (re.compile(r"-moz-binding\s*:[^;]*;?", re.I), ""),                   # XBL
    (re.compile(r"behavior\s*:[^;]*;?", re.I), ""),                       # HTC
    (re.compile(r"url\s*\(\s*['\"]?\s*(?:[a-z][a-z0-9+.-]*:|//|\\)[^)]*\)", re.I), "none"),  # external url()
    (re.compile(r"[<>]"), ""),                                            # no HTML at all
)


def sanitize_css(css: str) -> str:
    """Remove what could load remote content or run script from tenant CSS.

    Relative ``url()`` references stay; external, protocol-relative or scheme URLs,
    ``@import``, ``expression(``, ``javascript:``, and any ``<``/``>`` are removed.
    Applied until stable so nested tricks (``@im@importport``) cannot reassemble.
    """
    previous = None
    while previous != css:
        previous = css
        for pattern, replacement in _CSS_RULES:
            css = pattern.sub(replacement, css)
    return css
