"""Encryption of secrets at rest (private signing keys, TOTP secrets).

Fernet (AES-128-CBC + HMAC-SHA256) from ``cryptography`` with a key derived from
IAMGATE_SECRET_KEY by HKDF, so the operator's secret can be any string.
"""
from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


class DecryptionError(Exception):
    """A stored secret cannot be decrypted with the configured IAMGATE_SECRET_KEY."""


class SecretBox:
    def __init__(self, secret_key: str, purpose: str = "iamgate-at-rest"):
        raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode()).derive(
            secret_key.encode("utf-8")
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(raw))

    def encrypt(self, plaintext: bytes | str) -> str:
        if isinstance(plaintext, str):
            plaintext = plaintext.encode("utf-8")
        return self._fernet.encrypt(plaintext).decode("ascii")

    def decrypt(self, token: str) -> bytes:
        try:
            return self._fernet.decrypt(token.encode("ascii"))
        except InvalidToken:
            raise DecryptionError("stored secret cannot be decrypted with IAMGATE_SECRET_KEY") from None
