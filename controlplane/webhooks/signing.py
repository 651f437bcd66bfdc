"""Webhook secrets and the two signatures every delivery carries.

- ``X-Service-Signature`` (spec "Delivery headers"): ``sha256=`` and the lowercase hex
  HMAC-SHA256 of the raw body, keyed with the secret's UTF-8 bytes (docs/webhooks.md), the
  whole string as the API returned it. It covers the body only, so a captured delivery
  could be sent again under a fresh timestamp and delivery id.
- ``webhook-signature`` (Standard Webhooks, https://www.standardwebhooks.com, "Signature
  scheme"): ``v1,`` and the base64 HMAC-SHA256 of ``{webhook-id}.{webhook-timestamp}.{body}``,
  keyed with the bytes the secret's base64 after ``whsec_`` encodes. Id and timestamp are
  signed, so a receiver that refuses a stale timestamp and an id it has seen refuses
  every replay.

A secret is ``whsec_`` and the standard base64 of 32 random bytes: both keys come from
the one string. Secrets made before the Standard Webhooks headers (``whsec_`` and 43
URL-safe base64 characters) keep their X-Service-Signature; their Standard Webhooks key is
what the reference library (``standardwebhooks`` on PyPI) reads from them, and the one in
four it cannot read gets no Standard Webhooks headers until the secret is rotated.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def service_signature(secret: str, body: bytes) -> str:
    """X-Service-Signature of ``body``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def standard_key(secret: str) -> bytes | None:
    """The Standard Webhooks key of a secret, decoded as the reference library decodes it
    (``Webhook.__init__``: the prefix dropped, padding added, characters outside the
    base64 alphabet skipped); None when it decodes to no key."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX) + "==") or None
    except binascii.Error:
        return None


def standard_headers(key: bytes, delivery_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """``webhook-id``, ``webhook-timestamp`` (Unix seconds) and ``webhook-signature``."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return {"webhook-id": delivery_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(digest).decode("ascii")}
