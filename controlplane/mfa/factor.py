"""The authenticator app (TOTP) as a second factor, for any kind of account.

End users of an application and dashboard accounts keep their TOTP methods and backup
codes in the same collections (``store.py``); ``scope`` is what those documents store
as ``app_id``: the application's id for its end users, ``"dashboard"`` for dashboard
accounts (application ids are UUIDs, so the two never meet, and deleting an
application never touches a dashboard account's factor).  ``subject_id`` is the user or
the account.

``TotpFactor`` holds the rules both share: a pending setup confirmed by a code, the
secret encrypted at rest (``SecretBox``), backup codes stored as keyed digests, a TOTP
code accepted at most once (the method's last accepted time step only moves forward,
RFC 6238 section 5.2) and a backup code once, and the sign-in's challenge (a random
token stored as its SHA-256 digest, single use, expiring, its attempts counted with an
atomic ``$inc`` before a code is checked).  Events, mail, audit records and attempt
limits are the callers'.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import math

from controlplane.mfa import totp
from controlplane.mfa.errors import (
    ConfirmationCodeInvalid,
    MfaAlreadyEnabled,
    MfaCodeInvalid,
    MfaLocked,
    MfaMethodNotFound,
    MfaNotEnabled,
)
from controlplane.mfa.store import BackupCodeStore, ChallengeStore, MethodStore
from shared.crypto import SecretBox
from shared.ids import digest, new_id, random_token
from shared.timeutil import aware, isoformat, seconds

log = logging.getLogger("iamgate.mfa")

TOTP = "totp"
BACKUP_CODE = "backup_code"
BACKUP_CODES_PER_SET = 10
# An unconfirmed setup (and its secret) is forgotten after this long.
SETUP_TTL = 3600

# What ``TotpFactor.check`` found.
ACCEPTED, WRONG, REPLAYED = "accepted", "wrong", "replayed"


def code_kind(code: str) -> str:
    """``totp`` for a 6-digit code, else ``backup_code`` (the schemas admit only these)."""
    return TOTP if totp.is_totp_code(code) else BACKUP_CODE


def code_refused(verdict: str, attempts_left: int) -> MfaCodeInvalid:
    """401 AUTH_INVALID_MFA_CODE for a sign-in's challenge answered with a code ``check``
    refused, with the attempts the challenge has left."""
    message = "This code was already used; wait for the next one." if verdict == REPLAYED else None
    return MfaCodeInvalid(message, details={"attempts_remaining": max(0, attempts_left)})


def challenge_locked(max_attempts: int, until, now) -> MfaLocked:
    """429 AUTH_MFA_LOCKED for a challenge that was answered wrong ``max_attempts``
    times; it stays locked until it expires (``until``)."""
    log.warning("MFA challenge locked after too many wrong codes")
    return MfaLocked(limit=max_attempts, reset_at=math.ceil(until.timestamp()),
                     retry_after=math.ceil((until - now).total_seconds()),
                     message="Too many wrong codes for this sign-in; log in again.")


def serialize_method(method: dict) -> dict:
    """The spec's MFA method resource."""
    return {
        "id": method["_id"],
        "type": method["type"],
        "label": method["label"],
        "is_primary": bool(method.get("is_primary")),
        "verified_at": isoformat(method.get("verified_at")),
        "last_used_at": isoformat(method.get("last_used_at")),
    }


class TotpFactor:
    def __init__(self, methods: MethodStore, backup_codes: BackupCodeStore, challenges: ChallengeStore,
                 box: SecretBox, *, secret_key: str):
        self.methods = methods
        self.backup_codes = backup_codes
        self.challenges = challenges
        self._box = box
        # Backup codes carry ~59 bits; a keyed digest means a copy of the database alone
        # is not enough to brute-force them offline.
        self._backup_key = hashlib.sha256(b"iamgate mfa backup codes\0" + secret_key.encode("utf-8")).digest()

    def active(self, scope: str, subject_id: str) -> dict | None:
        return self.methods.active(scope, subject_id)

    def status(self, scope: str, subject_id: str) -> dict:
        """{mfa_enabled, methods (active ones), backup_codes_remaining}; a pending setup
        counts for nothing."""
        methods = self.methods.all_active(scope, subject_id)
        primary = next((m for m in methods if m["type"] == TOTP), None)
        remaining = self.backup_codes.remaining(scope, subject_id, primary.get("backup_set_id")) if primary else 0
        return {"mfa_enabled": bool(methods), "methods": [serialize_method(m) for m in methods],
                "backup_codes_remaining": remaining}

    def start(self, scope: str, subject_id: str, now, *, label: str, account: str, issuer: str) -> dict:
        """A pending method with a fresh secret: {method_id, provisioning_uri, secret}.
        409 MFA_ALREADY_ENABLED while an active one exists; replaces an earlier pending one."""
        if self.methods.active(scope, subject_id) is not None:
            raise MfaAlreadyEnabled()
        secret = totp.new_secret()
        method = {
            "_id": new_id(), "app_id": scope, "user_id": subject_id, "type": TOTP, "label": label,
            "secret": self._box.encrypt(secret), "status": "pending", "is_primary": True,
            "created_at": now, "verified_at": None, "last_used_at": None, "last_used_step": None,
            "expires_at": now + seconds(SETUP_TTL), "backup_set_id": None,
        }
        # Insert, then drop the older setups: of two racing setups the later one stays
        # (deleting first could leave both).
        self.methods.insert(method)
        self.methods.delete_pending(scope, subject_id, keep=method["_id"], created_by=now)
        return {"method_id": method["_id"], "provisioning_uri": totp.provisioning_uri(secret, account=account,
                                                                                     issuer=issuer),
                "secret": secret}

    def activate(self, scope: str, subject_id: str, method_id: str, code: str, now) -> list[str]:
        """Activate a pending method with a code from the app; its 10 backup codes.

        404 MFA_METHOD_NOT_FOUND (unknown, another subject's, or an expired setup),
        409 MFA_ALREADY_ENABLED, 422 MFA_INVALID_CODE."""
        method = self.methods.get(scope, subject_id, method_id)
        if method is not None and method["status"] == "active":
            raise MfaAlreadyEnabled()
        if method is None or aware(method["expires_at"]) <= now:
            raise MfaMethodNotFound(method_id)
        if self.methods.active(scope, subject_id) is not None:
            raise MfaAlreadyEnabled()
        step = totp.matching_step(self._secret(method), code, now)
        if step is None:
            raise ConfirmationCodeInvalid()
        # The codes first, then the one write that makes them current: a crash or a lost
        # race in between leaves only codes no method points at.
        set_id, codes = self._new_backup_set(scope, subject_id, now)
        if self.methods.activate(scope, subject_id, method_id, now=now, step=step, backup_set_id=set_id) is None:
            self.backup_codes.delete_set(scope, subject_id, set_id)
            if self.methods.active(scope, subject_id) is not None:
                raise MfaAlreadyEnabled()
            raise MfaMethodNotFound(method_id)
        return codes

    def regenerate(self, scope: str, subject_id: str, method: dict, now) -> list[str]:
        """A new set of backup codes for the active ``method``; every earlier code stops
        working.  400 MFA_NOT_ENABLED when the method was removed meanwhile."""
        set_id, codes = self._new_backup_set(scope, subject_id, now)
        before = self.methods.swap_backup_set(scope, method["_id"], set_id)
        if before is None:
            self.backup_codes.delete_set(scope, subject_id, set_id)
            raise MfaNotEnabled()
        if before.get("backup_set_id"):
            self.backup_codes.delete_set(scope, subject_id, before["backup_set_id"])
        return codes

    def check(self, scope: str, subject_id: str, method: dict, code: str, now) -> str:
        """Whether ``code`` (a TOTP or backup code) is accepted for the active
        ``method``: ``ACCEPTED`` (and used up), ``WRONG`` or ``REPLAYED`` (a TOTP code of
        a time step already accepted)."""
        if code_kind(code) == TOTP:
            step = totp.matching_step(self._secret(method), code, now)
            if step is None:
                return WRONG
            return ACCEPTED if self.methods.record_use(scope, method["_id"], step, now) else REPLAYED
        canonical = totp.canonical_backup_code(code)
        set_id = method.get("backup_set_id")
        if canonical is None or set_id is None or not self.backup_codes.consume(
                scope, subject_id, set_id, self._backup_digest(scope, subject_id, canonical), now):
            return WRONG
        return ACCEPTED

    def remaining_backup_codes(self, scope: str, subject_id: str, method: dict) -> int:
        return self.backup_codes.remaining(scope, subject_id, method.get("backup_set_id"))

    def remove(self, scope: str, subject_id: str, method: dict) -> None:
        """Remove the active method, every backup code and open challenge; 400
        MFA_NOT_ENABLED when a parallel removal won.  The method first: once it is gone
        MFA is off, and leftovers are ignored until the deletes reclaim them."""
        if not self.methods.delete_active(scope, method["_id"]):
            raise MfaNotEnabled()
        self.methods.delete_pending(scope, subject_id)
        self.backup_codes.delete_for_user(scope, subject_id)
        self.challenges.delete_for_user(scope, subject_id)

    def forget(self, scope: str, subject_id: str) -> None:
        """Every method, backup code and challenge of the subject (account deletion)."""
        self.methods.delete_for_user(scope, subject_id)
        self.backup_codes.delete_for_user(scope, subject_id)
        self.challenges.delete_for_user(scope, subject_id)

    # ------------------------------------------------------------------ sign-in challenges

    def open_challenge(self, scope: str, subject_id: str, now, ttl: int, **extra) -> str:
        """A sign-in's challenge for the subject, valid ``ttl`` seconds; its token.
        ``extra``: what the caller needs back when it is answered."""
        token = random_token()
        self.challenges.insert({"_id": digest(token), "app_id": scope, "user_id": subject_id, **extra, "attempts": 0,
                                "created_at": now, "expires_at": now + seconds(ttl), "consumed_at": None})
        return token

    def count_attempt(self, scope: str, challenge_token: str, now, *, digested: bool = False) -> dict | None:
        """Count one answer on the live challenge (before its code is checked); the
        challenge after it, or None when it is unknown, used or expired.  ``digested``:
        ``challenge_token`` is already the stored digest (a challenge another area holds)."""
        return self.challenges.count_attempt(scope, challenge_token if digested else digest(challenge_token), now)

    def live_challenge(self, scope: str, challenge_token: str, now) -> dict | None:
        """The live, unused challenge of this token, without counting an answer."""
        return self.challenges.live(scope, digest(challenge_token), now)

    def consume_challenge(self, scope: str, challenge: dict, now) -> bool:
        """Use the challenge up; False when a parallel answer won or it just expired."""
        return self.challenges.consume(scope, challenge["_id"], now) is not None

    def _secret(self, method: dict) -> str:
        return self._box.decrypt(method["secret"]).decode("ascii")

    def _backup_digest(self, scope: str, subject_id: str, canonical: str) -> str:
        message = f"{scope}:{subject_id}:{canonical}".encode()
        return hmac.new(self._backup_key, message, hashlib.sha256).hexdigest()

    def _new_backup_set(self, scope: str, subject_id: str, now) -> tuple[str, list[str]]:
        """Store a new set of backup codes (digests only); (set id, the codes)."""
        set_id, codes = new_id(), []
        while len(codes) < BACKUP_CODES_PER_SET:
            code = totp.new_backup_code()
            if code not in codes:
                codes.append(code)
        self.backup_codes.insert_set([
            {"_id": new_id(), "app_id": scope, "user_id": subject_id, "set_id": set_id,
             "code_digest": self._backup_digest(scope, subject_id, totp.canonical_backup_code(code)),
             "used_at": None, "created_at": now}
            for code in codes
        ])
        return set_id, codes
