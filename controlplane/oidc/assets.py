"""The hosted pages' one script file, ``static/passkeys.js`` (the WebAuthn ceremonies of
the login and MFA pages), served under a content-hash URL like the console's files
(``controlplane.console.assets``: read once at start, cached for a year, gzip when
accepted), at ``/oidc/assets/<stem>.<hash>.js``."""
from __future__ import annotations

from pathlib import Path

from controlplane.console.assets import load

PREFIX = "/oidc/assets/"
PASSKEY_SCRIPT_FILE = Path(__file__).parent / "static" / "passkeys.js"


class HostedAsset:
    """A loaded file and the URL the pages name it by."""

    def __init__(self, path: Path):
        self.asset = load(path)
        self.url = PREFIX + self.asset.name


PASSKEY_SCRIPT = HostedAsset(PASSKEY_SCRIPT_FILE)
