"""Proof Key for Code Exchange (RFC 7636), S256 only.

The spec makes PKCE with S256 mandatory: ``plain`` is refused (RFC 7636 section 7.2
lets a server do so), and so is an authorization request without a challenge.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re

S256 = "S256"

# RFC 7636 4.1: code-verifier = 43*128unreserved; 4.2: the S256 challenge is the
# base64url SHA-256 of it (43 characters); the spec bounds both to 43..128.
_UNRESERVED = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")


def is_valid_verifier(verifier: str) -> bool:
    """RFC 7636 4.1: 43 to 128 characters of ``[A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"``."""
    return isinstance(verifier, str) and bool(_UNRESERVED.match(verifier))


def is_valid_challenge(challenge: str) -> bool:
    """RFC 7636 4.2 and the spec: the challenge is 43 to 128 unreserved characters."""
    return isinstance(challenge, str) and bool(_UNRESERVED.match(challenge))


def s256(verifier: str) -> str:
    """RFC 7636 4.2: ``code_challenge = BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))``."""
    raw = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def verify(verifier: str, challenge: str) -> bool:
    """RFC 7636 4.6: the server recomputes the challenge from the verifier and compares."""
    if not is_valid_verifier(verifier):
        return False
    return hmac.compare_digest(s256(verifier), challenge)
