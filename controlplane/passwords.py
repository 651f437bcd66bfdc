"""Password hashing and strength rules (dashboard accounts and end users alike).

Hashing is bcrypt at IAMGATE_BCRYPT_ROUNDS, run off the gevent loop.  bcrypt only
reads 72 bytes, so longer passwords are pre-hashed (HMAC-free SHA-256, base64) rather
than silently truncated.

Passwords are Unicode.  Every password is NFKC-normalized before it is measured, hashed
or checked (NIST SP 800-63B 5.1.1.2), so the same password typed on another keyboard
(precomposed or combining accents, full-width digits) is the same password; comparisons
are on UTF-8 bytes, never on ``str`` (``hmac.compare_digest`` refuses non-ASCII ``str``).

Strength rules (docs/authentication.md, "Validation"): 8 to 128 characters, at least two character classes,
not the email (or its local part), not in the shipped common-password list.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import unicodedata
from importlib import resources

import bcrypt

from shared.concurrency import run_blocking
from shared.errors import Unprocessable

MIN_LENGTH, MAX_LENGTH = 8, 128


def _load_common() -> frozenset[str]:
    text = resources.files("shared").joinpath("data/common-passwords.txt").read_text("utf-8")
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())


COMMON_PASSWORDS = _load_common()


def normalize(password: str) -> str:
    """The canonical form of a password: NFKC (NIST SP 800-63B 5.1.1.2)."""
    return unicodedata.normalize("NFKC", password)


def _prepare(password: str) -> bytes:
    raw = normalize(password).encode("utf-8")
    if len(raw) > 72:
        raw = base64.b64encode(hashlib.sha256(raw).digest())
    return raw


class PasswordHasher:
    def __init__(self, rounds: int):
        self.rounds = rounds
        # A real hash to compare against when the account does not exist, so an
        # unknown email costs the same time as a wrong password (no enumeration).
        self._dummy = bcrypt.hashpw(b"iamgate-timing-equaliser", bcrypt.gensalt(rounds)).decode()

    def hash(self, password: str) -> str:
        return run_blocking(self._hash, password)

    def _hash(self, password: str) -> str:
        return bcrypt.hashpw(_prepare(password), bcrypt.gensalt(self.rounds)).decode("ascii")

    def verify(self, password: str, hashed: str | None) -> bool:
        """Check ``password`` against ``hashed``; with ``hashed`` None, burn the same
        time on a dummy hash and return False."""
        target = hashed or self._dummy
        ok = run_blocking(self._check, password, target)
        return ok and hashed is not None

    @staticmethod
    def _check(password: str, hashed: str) -> bool:
        try:
            return bcrypt.checkpw(_prepare(password), hashed.encode("ascii"))
        except ValueError:
            return False


def strength_failures(password: str, *, email: str | None = None) -> list[str]:
    """Names of the rules ``password`` fails (empty when it is strong enough)."""
    failures = []
    password = normalize(password)
    if len(password) < MIN_LENGTH:
        failures.append("min_length")
    if len(password) > MAX_LENGTH:
        failures.append("max_length")
    classes = sum((
        any(c.islower() for c in password),
        any(c.isupper() for c in password),
        any(c.isdigit() for c in password),
        any(not c.isalnum() for c in password),
        # Scripts without case (Han, Arabic, Devanagari...) are a class of their own,
        # or a Chinese passphrase could never mix two classes.
        any(c.isalpha() and not c.islower() and not c.isupper() for c in password),
    ))
    if classes < 2:
        failures.append("character_classes")
    lowered = password.lower()
    if email:
        email = normalize(email).lower()
        local = email.split("@")[0]
        if hmac.compare_digest(lowered.encode("utf-8"), email.encode("utf-8")) or (
                len(local) >= 4 and lowered == local):
            failures.append("not_email")
    if lowered in COMMON_PASSWORDS:
        failures.append("not_common")
    return failures


RULE_TEXT = {
    "min_length": f"must be at least {MIN_LENGTH} characters",
    "max_length": f"must be at most {MAX_LENGTH} characters",
    "character_classes": "must mix at least two of: lower case, upper case, caseless letters, digits, symbols",
    "not_email": "must not be the email address",
    "not_common": "is too common",
}


def require_strong(password: str, *, email: str | None = None, field: str = "password") -> None:
    """Raise 422 VALIDATION_PASSWORD_TOO_WEAK naming every failed rule."""
    failures = strength_failures(password, email=email)
    if failures:
        raise PasswordTooWeak(details={"field": field, "rules": failures,
                                       "reasons": [RULE_TEXT[f] for f in failures]})


class PasswordTooWeak(Unprocessable, code="VALIDATION_PASSWORD_TOO_WEAK", message="The password is too weak."):
    """The password fails the strength rules; ``details.rules`` names each failure."""


class WrongPassword(Unprocessable, code="INVALID_PASSWORD", message="The password is not correct."):
    """The current password given to confirm a change is not correct."""
