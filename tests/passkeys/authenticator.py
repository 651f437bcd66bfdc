"""A software authenticator: what a browser and a security key would answer, built by
hand from the WebAuthn Level 3 data formats (section 6.1 authenticator data, 6.5.4
"none" attestation, 6.3.3 assertion signature) with an EC P-256 key, never with the
server's helpers, so a mistake in the server cannot hide behind the same mistake here.

``create(options)`` answers creation options with the JSON of
``PublicKeyCredential.toJSON()``; ``get(options)`` answers request options.  Every
field a test may want to falsify is a keyword: ``origin``, ``rp_id``, ``challenge``,
``sign_count``, ``user_verified``, ``user_handle``, and the client data's
``cross_origin`` / ``top_origin`` (section 5.8.1: what a browser writes for a ceremony
run in a frame that is not same-origin with its ancestors; None leaves the member out).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import struct

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40
ORIGIN = "http://localhost:8000"
RP_ID = "localhost"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftAuthenticator:
    def __init__(self, *, resident: bool = True, user_verifying: bool = True, counter: int | None = 0,
                 aaguid: bytes = bytes(16), synced: bool = False):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.resident, self.user_verifying, self.aaguid, self.synced = resident, user_verifying, aaguid, synced
        self.counter = counter  # None: a synced passkey, which always reports 0
        self.user_handle: bytes | None = None

    @property
    def id(self) -> str:
        return b64(self.credential_id)

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})

    def _auth_data(self, rp_id: str, flags: int, count: int, attested: bytes = b"") -> bytes:
        return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", count) + attested

    def _flags(self, user_verified: bool | None) -> int:
        uv = self.user_verifying if user_verified is None else user_verified
        return UP | (UV if uv else 0) | ((BE | BS) if self.synced else 0)

    def _next_count(self, sign_count: int | None) -> int:
        if sign_count is not None:
            return sign_count
        if self.counter is None:
            return 0
        self.counter += 1
        return self.counter

    @staticmethod
    def _client_data(kind: str, challenge: str, origin: str, cross_origin: bool | None, top_origin: str | None
                     ) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": origin}
        if cross_origin is not None:
            data["crossOrigin"] = cross_origin
        if top_origin is not None:
            data["topOrigin"] = top_origin
        return json.dumps(data).encode()

    def create(self, options: dict, *, origin: str = ORIGIN, rp_id: str | None = None,
               challenge: str | None = None, user_verified: bool | None = None, cross_origin: bool | None = False,
               top_origin: str | None = None) -> dict:
        self.user_handle = unb64(options["user"]["id"])
        attested = self.aaguid + struct.pack(">H", len(self.credential_id)) + self.credential_id + self._cose_key()
        auth_data = self._auth_data(rp_id or options["rp"]["id"], self._flags(user_verified) | AT,
                                    self.counter or 0, attested)
        client_data = self._client_data("webauthn.create", challenge or options["challenge"], origin, cross_origin,
                                        top_origin)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": self.id, "rawId": self.id, "type": "public-key",
            "response": {"clientDataJSON": b64(client_data), "attestationObject": b64(attestation),
                         "transports": ["internal", "hybrid"]},
            "clientExtensionResults": {"credProps": {"rk": self.resident}},
            "authenticatorAttachment": "platform",
        }

    def get(self, options: dict, *, origin: str = ORIGIN, rp_id: str | None = None, challenge: str | None = None,
            user_verified: bool | None = None, sign_count: int | None = None,
            user_handle: bool | None = None, cross_origin: bool | None = False, top_origin: str | None = None) -> dict:
        auth_data = self._auth_data(rp_id or options["rpId"], self._flags(user_verified),
                                    self._next_count(sign_count))
        client_data = self._client_data("webauthn.get", challenge or options["challenge"], origin, cross_origin,
                                        top_origin)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        send_handle = self.resident if user_handle is None else user_handle
        return {
            "id": self.id, "rawId": self.id, "type": "public-key",
            "response": {"clientDataJSON": b64(client_data), "authenticatorData": b64(auth_data),
                         "signature": b64(signature),
                         "userHandle": b64(self.user_handle) if send_handle and self.user_handle else None},
            "clientExtensionResults": {},
        }
