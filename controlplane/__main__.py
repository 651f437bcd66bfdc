"""``python -m controlplane COMMAND``: operator commands of the control plane.

Each command is one row of ``COMMANDS``: its name, a one-line help, a function that
adds its arguments, and the function that runs it with the parsed arguments and the
configuration (from the environment, as the server reads it).

    python -m controlplane keys rotate
"""
from __future__ import annotations

import argparse
import sys

from shared.config import Config, ConfigError


def _keys_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["rotate"], help="rotate: sign new tokens with a new key")


def _keys(args, config: Config) -> int:
    """Rotate the RS256 signing key (docs/oidc.md, "Rotating the signing key"): a new
    key becomes active for every replica within a minute (their key cache), and the old
    public key stays in the JWKS until every token it signed has expired."""
    from controlplane.keys import SigningKeys
    from controlplane.store import Store
    from shared.crypto import SecretBox
    from shared.timeutil import utcnow

    if config.is_memory_store:
        print("keys rotate: IAMGATE_MONGODB_URI is memory://, whose keys live only inside the server process; "
              "point it at the server's MongoDB.", file=sys.stderr)
        return 2
    keys = SigningKeys(Store(config.mongodb_uri), SecretBox(config.secret_key), utcnow,
                       max_token_lifetime=max(config.access_token_ttl, config.oidc_access_token_ttl))
    old_kid = keys.ensure_active()
    new_kid, retire_at = keys.rotate()
    print(f"active signing key: {new_kid}")
    print(f"previous key {old_kid} stays in the JWKS until {retire_at.isoformat()}")
    return 0


# name -> (help, add_arguments, run)
COMMANDS = {
    "keys": ("manage the token signing keys", _keys_arguments, _keys),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane", description="iamgate control-plane commands")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(commands.add_parser(name, help=help_text))
    args = parser.parse_args(argv)
    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    return COMMANDS[args.command][2](args, config)


if __name__ == "__main__":
    sys.exit(main())
