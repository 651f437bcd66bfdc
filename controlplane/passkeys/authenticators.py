"""Authenticator names by AAGUID, for passkey listings (``authenticator_name``).

The table is ``aaguids.json`` beside this module: a vendored subset of the community
list its header names, with the date it was taken.  Read once at import; an AAGUID it
does not know (and the all-zero one of authenticators that do not say) has no name.
"""
from __future__ import annotations

import json
from pathlib import Path

TABLE_FILE = Path(__file__).with_name("aaguids.json")
_NAMES: dict[str, str] = json.loads(TABLE_FILE.read_text(encoding="utf-8"))["names"]


def authenticator_name(aaguid: str | None) -> str | None:
    """The model's name for ``aaguid`` (any case), or None when unknown."""
    return _NAMES.get((aaguid or "").lower())
