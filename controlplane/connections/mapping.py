"""Claim mapping and role mapping: what an upstream identity's claims make of the local
user (docs/connections.md, "Claim and role mapping").

Pure: the claims of the ID Token (or of the userinfo / user API) go in, the profile and
the role names come out.  A mapped claim may name a nested claim with dots
(``address.country``); a claim that is absent maps to nothing, so an upstream that stops
sending a claim never blanks the local field.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared import dotted
from shared.validation import Invalid, normalize_email, one_line

_MISSING = object()
# Bounds on what an upstream may write into a user: its claims are not ours to trust.
MAX_TEXT = 255
MAX_URL = 2048


@dataclass(frozen=True, slots=True)
class Profile:
    """What the claims say about the person."""

    email: str | None
    email_verified: bool
    name: str | None
    picture: str | None
    attributes: dict = field(default_factory=dict)
    # The address as the provider sent it, up to the case of its letters: normalising it
    # changed nothing else.  Only such an address is linked by email without proof.
    email_as_sent: bool = False


def claim(claims: Mapping, path: str):
    """The value of ``path`` (dotted for nested claims) in ``claims``, or None."""
    return dotted.lookup(claims, path)


def profile_of(claims: Mapping, mapping) -> Profile:
    """The profile the connection's ``ClaimMapping`` reads from ``claims``.  Only the
    JSON boolean ``true`` verifies an email (some providers send the string "true": it
    is not taken, the email then stays unverified, which is the safe side)."""
    sent = _text(claim(claims, mapping.email), MAX_TEXT)
    email = _email(sent)
    attributes = {}
    for attribute, path in (mapping.attributes or {}).items():
        value = claim(claims, path)
        if isinstance(value, str | int | float | bool) or (isinstance(value, list) and all(
                isinstance(item, str | int | float | bool) for item in value)):
            attributes[attribute] = value
    return Profile(
        email=email,
        email_verified=claim(claims, mapping.email_verified) is True,
        name=_name(claim(claims, mapping.name)),
        picture=_url(claim(claims, mapping.picture)),
        attributes=attributes,
        email_as_sent=email is not None and _as_sent(sent, email),
    )


def _email(value: str | None) -> str | None:
    """The upstream's address in the form every stored email has
    (``shared.validation.normalize_email``, as registration stores it), or None when it
    is no single valid address: it is the provider account owner's to choose, and a
    recipient list (``x,victim@corp.com``) would send every later mail of the account
    where they chose."""
    if not value:
        return None
    try:
        return normalize_email(value)
    except Invalid:
        return None


def _as_sent(sent: str, email: str) -> bool:
    """Whether normalising ``sent`` into ``email`` only lower-cased it.  An address in
    NFC is left as it is by the NFC step; one that is not may hold a look-alike that
    normalisation folds into another address (U+212A KELVIN SIGN becomes "k"), and
    so may a domain that IDNA maps (a fullwidth letter)."""
    return unicodedata.is_normalized("NFC", sent) and sent.lower() == email


def roles_granted(claims: Mapping, rules) -> list[str]:
    """The role names the ``RoleRule``s grant: a rule matches when its claim equals its
    value, or is a list holding it (``groups``).  In rule order, without repeats."""
    granted: list[str] = []
    for rule in rules:
        value = claim(claims, rule.claim)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(item, str | int) and str(item) == rule.value for item in values) \
                and rule.role not in granted:
            granted.append(rule.role)
    return granted


def _name(value) -> str | None:
    """The person's name as registration cleans it (``DisplayName``): control
    characters, line separators and bidirectional controls made spaces (``one_line``),
    since names go into mails."""
    return _text(one_line(value), MAX_TEXT) if isinstance(value, str) else None


def _text(value, max_len: int) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:max_len]


def _url(value) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_URL or not value.startswith("https://"):
        return None
    return value
