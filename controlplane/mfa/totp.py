"""The one-time codes of the MFA area, as pure functions (no I/O, no clock reads).

TOTP follows RFC 6238 with the parameters every authenticator app supports: HMAC-SHA1,
30-second steps, 6 digits, a 160-bit secret (RFC 4226 section 4 recommends 160 bits)
written in unpadded base32.  ``matching_step`` accepts the current step and one step
either side (RFC 6238 section 5.2 allows "at most one time step" of network delay and
clock drift) and returns the step that matched, so the caller can refuse a replay
(section 5.2: "the verifier MUST NOT accept the second attempt of the same OTP").

Backup codes are 12 characters from an alphabet without look-alikes (no 0/O, 1/I/L),
shown as ``XXXX-XXXX-XXXX``: 31^12, about 59 bits, for a code that is single use and
only ever tried under the challenge and per-user attempt limits.
"""
from __future__ import annotations

import re
import secrets
from datetime import datetime
from urllib.parse import quote, urlencode

import pyotp

STEP_SECONDS = 30
DIGITS = 6
DRIFT_STEPS = 1
SECRET_BYTES = 20  # 160 bits

BACKUP_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
BACKUP_GROUPS, BACKUP_GROUP_LENGTH = 3, 4
BACKUP_LENGTH = BACKUP_GROUPS * BACKUP_GROUP_LENGTH

TOTP_FORM = re.compile(rf"^\d{{{DIGITS}}}$")
_BACKUP_FORM = re.compile(r"^[A-Z0-9]{4}-?[A-Z0-9]{4}-?[A-Z0-9]{4}$")


def new_secret() -> str:
    """A fresh 160-bit TOTP secret in unpadded base32 (32 characters)."""
    return pyotp.random_base32(length=SECRET_BYTES * 8 // 5)


def provisioning_uri(secret: str, *, account: str, issuer: str) -> str:
    """The ``otpauth://totp/<issuer>:<account>?secret=...&issuer=...`` URI authenticator
    apps read from a QR code (Google Authenticator "Key Uri Format").

    The label's parts are percent-encoded (a colon inside the issuer would otherwise
    split the label) and the default algorithm, digits and period are spelled out,
    which every app accepts and some require."""
    label = f"{quote(issuer, safe='')}:{quote(account, safe='@')}"
    query = urlencode({"secret": secret, "issuer": issuer, "algorithm": "SHA1", "digits": DIGITS,
                       "period": STEP_SECONDS}, quote_via=quote)
    return f"otpauth://totp/{label}?{query}"


def matching_step(secret: str, code: str, now: datetime) -> int | None:
    """The time step (``floor(unix time / 30)``) whose code equals ``code``, looking at
    the step of ``now`` and ``DRIFT_STEPS`` either side; None when none matches.
    The comparison is constant-time."""
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    try:
        return totp.verify_and_get_timecode(code, for_time=now, valid_window=DRIFT_STEPS)
    except pyotp.OTPVerificationError:
        return None


def normalize_code(raw: str) -> str:
    """What the user typed, without white space (apps show ``123 456``)."""
    return "".join(raw.split())


def is_totp_code(code: str) -> bool:
    return bool(TOTP_FORM.match(code))


def new_backup_code() -> str:
    """One backup code, ``XXXX-XXXX-XXXX``."""
    raw = "".join(secrets.choice(BACKUP_ALPHABET) for _ in range(BACKUP_LENGTH))
    return "-".join(raw[i:i + BACKUP_GROUP_LENGTH] for i in range(0, BACKUP_LENGTH, BACKUP_GROUP_LENGTH))


def canonical_backup_code(code: str) -> str | None:
    """The 12 characters of a backup code typed with or without dashes, in any case;
    None when ``code`` does not have the form of one."""
    upper = code.upper()
    if not _BACKUP_FORM.match(upper):
        return None
    return upper.replace("-", "")
