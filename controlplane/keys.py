"""RS256 signing keys: generated on first start, kept in MongoDB, served as a JWKS.

The private part is encrypted with IAMGATE_SECRET_KEY.  Exactly one key is active
(pointer document ``signing_keys_state/_id=active``, set with an atomic upsert, so
replicas starting together agree on one key).  ``rotate`` makes a new key active and
keeps the old one in the JWKS until every token it signed has expired.
"""
from __future__ import annotations

import base64
import logging
import threading
import time

from cachetools import TTLCache
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from pymongo import ReturnDocument

from shared.crypto import SecretBox
from shared.ids import new_id
from shared.timeutil import aware, seconds

log = logging.getLogger("iamgate.keys")

_CACHE_SECONDS = 60.0
_UNKNOWN_KID_SECONDS = 5.0  # how long a kid found in no document is taken as unknown
_UNKNOWN_KIDS = 1024


def _b64uint(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def public_jwk(public_key, kid: str) -> dict:
    numbers = public_key.public_numbers()
    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": _b64uint(numbers.n), "e": _b64uint(numbers.e)}


class SigningKeys:
    def __init__(self, store, box: SecretBox, clock, *, max_token_lifetime: int):
        self._keys = store["signing_keys"]
        self._state = store["signing_keys_state"]
        self._box = box
        self._clock = clock
        self._max_token_lifetime = max_token_lifetime
        self._lock = threading.Lock()
        self._loaded_at = 0.0
        # Kids recently looked up and found in no live document (garbage, another
        # environment's, a retired key's): not looked up again for a few seconds each.
        self._unknown: TTLCache = TTLCache(_UNKNOWN_KIDS, _UNKNOWN_KID_SECONDS, timer=time.monotonic)
        self._active_kid = None
        self._private = {}   # kid -> private key (active key only, decrypted once)
        self._public = {}    # kid -> public key object
        self._jwks = []

    # -- lifecycle

    def ensure_active(self) -> str:
        """Make sure an active key exists (first start generates one); return its kid."""
        state = self._state.find_one({"_id": "active"})
        if state is None:
            kid, private = self._create_key()
            state = self._state.find_one_and_update(
                {"_id": "active"}, {"$setOnInsert": {"kid": kid}}, upsert=True, return_document=ReturnDocument.AFTER
            )
            if state["kid"] != kid:  # another replica won the race: drop ours
                self._keys.delete_one({"_id": kid})
            else:
                log.info("generated signing key", extra={"kid": kid})
                self._keep(kid, private)
        self._reload()
        return self._active_kid

    def rotate(self):
        """Activate a new key; (new kid, when the old key leaves the JWKS).

        The old key stays published until every token it signed has expired: the
        longest token lifetime, counted from the moment the last replica stops signing
        with it (replicas cache the active key for ``_CACHE_SECONDS``)."""
        new_kid, private = self._create_key()
        old = self._state.find_one_and_update({"_id": "active"}, {"$set": {"kid": new_kid}}, upsert=True)
        self._keep(new_kid, private)
        retire_at = self._clock() + seconds(self._max_token_lifetime + _CACHE_SECONDS)
        if old and old.get("kid"):
            self._keys.update_one({"_id": old["kid"]}, {"$set": {"retire_at": retire_at}})
        self._reload()
        return new_kid, retire_at

    def _create_key(self):
        """Generate and store a key; (kid, private key)."""
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        kid = new_id()
        self._keys.insert_one({
            "_id": kid,
            "private_key": self._box.encrypt(pem),
            "public_jwk": public_jwk(private.public_key(), kid),
            "created_at": self._clock(),
            "retire_at": None,
        })
        return kid, private

    def _keep(self, kid: str, private) -> None:
        """Sign with the key this process just made active: parsing its PEM back (RSA key
        validation included) would cost as much again as generating it."""
        with self._lock:
            self._private = {kid: private}

    # -- reads (cached in process; the keys themselves live in MongoDB)

    def _reload(self) -> None:
        now = self._clock()
        state = self._state.find_one({"_id": "active"})
        docs = [d for d in self._keys.find({}) if d.get("retire_at") is None or aware(d["retire_at"]) > now]
        public = {}
        for doc in docs:
            public[doc["_id"]] = RSAAlgorithm.from_jwk(doc["public_jwk"])
        active_kid = state["kid"] if state else None
        with self._lock:
            if active_kid and active_kid not in self._private:
                doc = next((d for d in docs if d["_id"] == active_kid), None)
                if doc is not None:
                    self._private = {
                        active_kid: serialization.load_pem_private_key(self._box.decrypt(doc["private_key"]), None)
                    }
            self._active_kid = active_kid
            self._public = public
            self._jwks = [d["public_jwk"] for d in sorted(docs, key=lambda d: d["created_at"])]
            self._loaded_at = time.monotonic()

    def _fresh(self) -> None:
        if time.monotonic() - self._loaded_at > _CACHE_SECONDS:
            self._reload()

    def signing_key(self):
        """(kid, private key) of the active key."""
        self._fresh()
        return self._active_kid, self._private[self._active_kid]

    def verification_key(self, kid: str):
        """The public key for ``kid`` or None (unknown or retired).  A kid this process
        does not hold is looked up by its id (one primary-key read): found live, it is a
        rotation made on another replica, and the keys are reloaded; found in no live
        document, it is taken as unknown for a few seconds (``_unknown``), so garbage
        kids cannot hammer the store, and one of them never delays another (before, one
        unknown kid held every reload back for five seconds, a freshly rotated key's
        tokens included)."""
        self._fresh()
        key = self._public.get(kid)
        if key is not None or not isinstance(kid, str) or len(kid) > 128:
            return key
        with self._lock:
            if kid in self._unknown:
                return None
        doc = self._keys.find_one({"_id": kid}, {"retire_at": 1})
        if doc is None or (doc.get("retire_at") is not None and aware(doc["retire_at"]) <= self._clock()):
            with self._lock:
                self._unknown[kid] = True
            return None
        self._reload()
        return self._public.get(kid)

    def jwks(self) -> dict:
        self._fresh()
        return {"keys": list(self._jwks)}
