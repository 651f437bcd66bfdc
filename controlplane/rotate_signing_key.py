"""``python -m controlplane.rotate_signing_key``: make a new RS256 signing key active.

Run once, anywhere the control plane's settings are (``kubectl exec deploy/...-controlplane
-- python -m controlplane.rotate_signing_key``). The old key stays in the JWKS until every
token it signed has expired (``controlplane.keys.SigningKeys.rotate``); every replica
picks the new key up within a minute. Prints the new key id.
"""
from __future__ import annotations

import sys

from shared.config import Config, ConfigError


def main(env=None) -> int:
    try:
        config = Config.from_env(env)
    except ConfigError as exc:
        print(f"iamgate: configuration error: {exc}", file=sys.stderr)
        return 2
    if config.secret_key_generated:
        print("iamgate: IAMGATE_SECRET_KEY is not set: the new key would be unreadable to the replicas",
              file=sys.stderr)
        return 2
    from controlplane.services import build_services

    services = build_services(config)
    services.startup.run_once()
    print(services.keys.rotate())
    return 0


if __name__ == "__main__":
    sys.exit(main())
